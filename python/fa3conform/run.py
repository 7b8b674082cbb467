"""Run fa3conform case bundles through a real ``flash_attn_with_kvcache``.

    python -m fa3conform.run --target sglang-musa --bundles DIR [--device musa] [--resume]

Each bundle folder (one holding ``call.json``) is run by a worker process that imports the target
once and runs cases one at a time (``fa3conform.replay``). When the worker dies (a segfault, a
device fault, ``os._exit``) or a case takes longer than ``--timeout``, that case gets a
``result.json`` saying so (signal or exit code, the tail of the worker's stderr), a new worker
starts, and the run goes on. ``--resume`` skips cases that already have a ``result.json``.
``fa3conform verify DIR --profile PROFILE`` judges the results.

Depends on the target stack, torch and safetensors; ``--backend numpy`` needs only NumPy (CPU test
targets).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import platform
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .arrays import BACKENDS
from .replay import RESULT_JSON, RESULT_SCHEMA_VERSION, clear_results, run_case, write_json_atomically
from .targets import TARGETS, TargetError, resolve

STDERR_TAIL_CHARS = 4000
DEFAULT_TIMEOUT_S = 900  # a first call may JIT-compile its kernels for minutes


def bundle_dirs(root: Path):
    if (root / "call.json").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if (p / "call.json").is_file())


def export_skip_reason(case: Path) -> str | None:
    """The reason ``fa3conform export`` gave for writing this case without inputs, if it did."""
    try:
        expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return expected.get("skipped")


# ---------------------------------------------------------------------------------------------
# The worker: imports the target once, then runs the cases it is sent.


def runner_info(backend, resolved, device: str) -> dict:
    info = {**resolved.info, "backend": backend.name, "device": device,
            "device_name": backend.device_name(), "python": platform.python_version()}
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch"] = torch.__version__
    return info


def worker(args) -> int:
    reply = os.fdopen(args.reply_fd, "w", buffering=1)
    os.dup2(2, 1)  # the target's prints go to stderr; stdout was never the protocol channel
    faulthandler.enable()  # a crash leaves the Python stack in the case's stderr tail

    def send(message):
        reply.write(json.dumps(message) + "\n")

    try:
        backend = BACKENDS[args.backend](args.device)
        resolved = resolve(args.target)
        runner = runner_info(backend, resolved, args.device)
    except TargetError as exc:
        send({"fatal": str(exc)})
        return 2
    except Exception as exc:
        send({"fatal": f"{args.backend} backend on {args.device}: {type(exc).__name__}: {exc}"})
        return 2
    send({"ready": runner})
    for line in sys.stdin:
        case = Path(line.rstrip("\n"))
        try:
            status = run_case(case, backend, resolved, runner)
        except Exception as exc:  # a bundle the runner cannot read: recorded, the run goes on
            write_json_atomically(case / RESULT_JSON, {
                "schema_version": RESULT_SCHEMA_VERSION, "runner": runner, "outcome": "skipped",
                "reason": f"the runner could not rebuild the call: {type(exc).__name__}: {exc}"})
            status = "skipped (unreadable bundle)"
        send({"status": status})
    return 0


# ---------------------------------------------------------------------------------------------
# The parent: hands cases to a worker, outlives it.


class StderrTail:
    """Copies a worker's stderr to ours and keeps what it wrote since a mark."""

    def __init__(self, stream):
        self.lock = threading.Lock()
        self.text = ""
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream):
        for raw in iter(lambda: stream.readline(), b""):
            line = raw.decode("utf-8", "replace")
            sys.stderr.write(line)
            with self.lock:
                self.text = (self.text + line)[-64 * STDERR_TAIL_CHARS:]

    def mark(self):
        with self.lock:
            self.text = ""

    def tail(self) -> str:
        self.thread.join(timeout=2)  # the rest of a dead worker's output
        with self.lock:
            return self.text[-STDERR_TAIL_CHARS:]


class Worker:
    def __init__(self, args):
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-m", "fa3conform.run", "--worker", "--reply-fd", str(write_fd),
                   "--target", args.target, "--device", args.device, "--backend", args.backend]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                        pass_fds=(write_fd,), env=env, start_new_session=True)
        os.close(write_fd)
        self.replies = read_fd
        self.pending = b""
        self.timed_out = False
        self.stderr = StderrTail(self.process.stderr)

    def receive(self, timeout: float):
        """The next message, or None when the worker died or the time ran out (then
        ``self.timed_out`` says which)."""
        deadline = time.monotonic() + timeout
        self.timed_out = False
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.replies], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.timed_out = True
                return None
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:  # the worker is gone: its end of the pipe closed
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def send(self, case: Path):
        self.stderr.mark()
        self.process.stdin.write(f"{case}\n".encode())
        self.process.stdin.flush()

    def stop(self, kill: bool):
        if kill and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the worker and anything it started
        try:
            self.process.stdin.close()
        except OSError:
            pass
        self.process.wait()
        os.close(self.replies)

    def failure(self, timeout_s: float | None) -> dict:
        """result.json's record of a case the worker did not finish."""
        code = self.process.returncode
        record = {"outcome": "timed_out" if timeout_s is not None else "crashed",
                  "exit_code": code, "stderr_tail": self.stderr.tail()}
        if timeout_s is not None:
            record["timeout_s"] = timeout_s
        elif code is not None and code < 0:
            record["signal"] = -code
            record["signal_name"] = signal.Signals(-code).name
        return record


def run(args) -> int:
    cases = bundle_dirs(args.bundles) if args.bundles.is_dir() else []
    if not cases:
        print(f"error: no bundles under {args.bundles}", file=sys.stderr)
        return 2
    worker_process, runner = None, {}
    counts = {}
    for i, case in enumerate(cases, 1):
        prefix = f"[{i}/{len(cases)}] {case.name}"
        if args.resume and (case / RESULT_JSON).is_file():
            status = "kept: it has a result (--resume)"
        elif (reason := export_skip_reason(case)) is not None:
            clear_results(case)
            status = f"skipped: not run, export skipped it ({reason})"
        else:
            if worker_process is None:
                worker_process = Worker(args)
                hello = worker_process.receive(args.timeout)
                if hello is None or "fatal" in hello:
                    why = hello["fatal"] if hello else (
                        f"the worker did not start: {worker_process.failure(None)}")
                    worker_process.stop(kill=True)
                    print(f"error: {why}", file=sys.stderr)
                    return 2
                runner = hello["ready"]
                version = f", {runner['distribution']} {runner['version']}" if "version" in runner else ""
                print(f"running {runner['module']} ({runner.get('file')}{version}) on "
                      f"{runner['device_name']}", file=sys.stderr, flush=True)
            clear_results(case)
            started = time.monotonic()
            worker_process.send(case)
            reply = worker_process.receive(args.timeout)
            if reply is not None:
                status = reply["status"]
            else:
                timed_out = worker_process.timed_out
                worker_process.stop(kill=True)
                record = worker_process.failure(args.timeout if timed_out else None)
                record.update(schema_version=RESULT_SCHEMA_VERSION, runner=runner,
                              elapsed_s=time.monotonic() - started)
                write_json_atomically(case / RESULT_JSON, record)
                status = (f"timed-out after {args.timeout} s" if timed_out else
                          f"crashed ({record.get('signal_name') or 'exit ' + str(record['exit_code'])})")
                worker_process = None
        category = status.split(" ")[0].rstrip(":")
        counts[category] = counts.get(category, 0) + 1
        print(f"{prefix}: {status}", file=sys.stderr, flush=True)
    if worker_process is not None:
        worker_process.stop(kill=False)
    print("done: " + ", ".join(f"{n} {word}" for word, n in sorted(counts.items())),
          file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fa3conform.run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True,
                        help=f"{', '.join(TARGETS)}, module.path:function or file.py:function")
    parser.add_argument("--bundles", type=Path, help="a bundle folder or a folder of bundle folders")
    parser.add_argument("--device", default="musa", choices=["musa", "cuda", "cpu"],
                        help="where tensors go when call.json does not say cpu (default musa)")
    parser.add_argument("--backend", default="torch", choices=sorted(BACKENDS),
                        help="array library tensors are built with (numpy: CPU-only test targets)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds one case may take (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--resume", action="store_true",
                        help="skip cases that already have a result.json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reply-fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.bundles is None:
        parser.error("--bundles is required")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
