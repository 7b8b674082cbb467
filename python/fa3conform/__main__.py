"""``python -m fa3conform ARGS...`` runs the bundled ``fa3conform`` executable with ARGS."""

import os
import subprocess
import sys

from .binary import find_binary


def main() -> int:
    try:
        binary = find_binary()
    except FileNotFoundError as exc:
        print(f"fa3conform: {exc}", file=sys.stderr)
        return 2
    argv = [binary, *sys.argv[1:]]
    if os.name == "posix":
        os.execv(binary, argv)  # the binary's exit code and signals become this process's
    return subprocess.call(argv)


if __name__ == "__main__":
    sys.exit(main())
