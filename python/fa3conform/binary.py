"""Where the ``fa3conform`` executable is.

The wheel installs it as a script of the environment the package is installed into (maturin's
binary bindings), so it is found next to the package's interpreter whatever ``PATH`` says:
the scheme's scripts folder (a virtual environment's ``bin``, ``pip install --user``'s, a
``pip install --target`` folder's ``bin``), then ``PATH``. ``FA3CONFORM_BINARY`` overrides all of
them (a checkout's ``target/debug/fa3conform``).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ENV_BINARY = "FA3CONFORM_BINARY"
NAME = "fa3conform" + (".exe" if os.name == "nt" else "")


def _scripts_folders() -> list[Path]:
    folders = [sysconfig.get_path("scripts")]
    preferred = getattr(sysconfig, "get_preferred_scheme", None)  # Python 3.10+
    user_scheme = preferred("user") if preferred else f"{os.name}_user"
    folders.append(sysconfig.get_path("scripts", scheme=user_scheme))
    # pip install --target DIR puts the package in DIR and the script in DIR/bin.
    folders.append(str(Path(__file__).resolve().parent.parent / "bin"))
    folders.append(str(Path(sys.executable).parent))
    return [Path(f) for f in folders if f]


def find_binary() -> str:
    """The path of the ``fa3conform`` executable; ``FileNotFoundError`` says where it looked."""
    named = os.environ.get(ENV_BINARY)
    if named:
        if not os.access(named, os.X_OK):
            raise FileNotFoundError(f"{ENV_BINARY}={named} is not an executable file")
        return named
    looked = _scripts_folders()
    for folder in looked:
        candidate = folder / NAME
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which(NAME)
    if on_path:
        return on_path
    raise FileNotFoundError(
        f"no {NAME} executable in {', '.join(map(str, looked))} or on PATH: install the "
        f"fa3conform wheel (pip install fa3conform, or pip install . in a checkout), or name "
        f"the binary in {ENV_BINARY}")
