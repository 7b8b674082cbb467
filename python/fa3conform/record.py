"""Record the ``flash_attn_with_kvcache`` calls of a program, as fa3conform call specs.

A whole server, every process it starts, without editing it::

    python -m fa3conform.record --out calls/ -- python -m sglang.launch_server --model ... --tp 2
    fa3conform certify calls/            # reads every calls-*.jsonl, drops duplicates

The launcher puts a start-up hook (``sitecustomize``) first on ``PYTHONPATH``, so every Python
process the command starts (spawn-started workers included) wraps the entry points
(``fa3conform.entry_points``) as it imports them and appends to its own file
``calls-<label>.jsonl``, ``<label>`` being ``tp<rank>-pp<rank>-pid<pid>`` when the process knows its
tensor/pipeline-parallel ranks (SGLang's parallel state, else ``torch.distributed``'s rank as
``rank<r>``), ``pid<pid>`` otherwise. A process that never imports an entry point writes nothing.

One process::

    from fa3conform import record
    record.install("calls.jsonl")   # before the model code imports the entry points

For each distinct call signature (argument names and order, shapes, dtypes, strides, Python and
NumPy scalar values; integer tensor values do not make calls distinct) one JSON line is appended,
then the original runs. Integer tensors up to ``int_values_cap`` elements and 0-d tensors are
recorded with their values, read once per signature (one device sync) and never while a CUDA or
MUSA graph is being captured or torch.compile traces: the line then says so in
``recorded.values_skipped``, and the next call of that signature outside capture is recorded again
with its values. Float data is never read. Accelerator devices are left open (a call recorded on
CUDA is certified as the same call on MUSA); CPU tensors are recorded as such.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

from .entry_points import ENTRY_POINTS, EntryPoint, wrap_entry_points

INT_DTYPES = {"int8", "uint8", "int16", "int32", "int64", "bool"}

# How the launcher hands its options to the start-up hook of every child process.
ENV_DIR = "FA3CONFORM_RECORD_DIR"
ENV_OPTIONS = "FA3CONFORM_RECORD_OPTIONS"
STARTUP_DIR = Path(__file__).resolve().parent / "_startup"


def _is_tensor(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and callable(getattr(value, "stride", None))


def _numpy_scalar(value) -> bool:
    """A NumPy scalar (``np.int64(3)``, ``np.float32``, ``np.bool_``), without importing NumPy."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ != "ndarray" and getattr(value, "ndim", None) == 0


def _float(x: float):
    return x if math.isfinite(x) else {"float": str(x)}


def _flatten(values):
    if isinstance(values, (list, tuple)):
        return [x for v in values for x in _flatten(v)]
    return [values]


def values_unreadable_now() -> str | None:
    """Why tensor values must not be read at this moment (a sync would break graph capture, a
    trace has no values), or None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for name in ("cuda", "musa"):
        backend = getattr(torch, name, None)
        capturing = getattr(backend, "is_current_stream_capturing", None)
        initialised = getattr(backend, "is_initialized", None)
        try:
            if capturing is not None and initialised is not None and initialised() and capturing():
                return f"{name.upper()} graph capture"
        except Exception:  # a backend without a device here
            continue
    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None)
    if compiling is not None and compiling():
        return "torch.compile tracing"
    return None


def process_label() -> str:
    """``tp<r>-pp<r>-pid<pid>``, ``rank<r>-pid<pid>`` or ``pid<pid>``: what this process knows of
    its place in a parallel job, read when it records its first call (after start-up)."""
    pid = os.getpid()
    state = sys.modules.get("sglang.srt.distributed.parallel_state")
    if state is not None:
        try:
            tp = state.get_tensor_model_parallel_rank()
            pp = state.get_pp_group().rank_in_group
            return f"tp{tp}-pp{pp}-pid{pid}"
        except Exception:  # the groups are not initialised in this process
            pass
    distributed = getattr(sys.modules.get("torch"), "distributed", None)
    try:
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            return f"rank{distributed.get_rank()}-pid{pid}"
    except Exception:
        pass
    return f"pid{pid}"


class Recorder:
    """Turns calls into spec lines and appends new signatures to a file (thread-safe).

    ``out`` is a file, or a folder in which each process writes ``calls-<label>.jsonl``.
    """

    def __init__(self, out, int_values_cap: int = 4096, max_calls: int = 10_000, per_process=False):
        self.out = Path(out)
        self.per_process = per_process
        self.int_values_cap = int_values_cap
        self.max_calls = max_calls
        self.lock = threading.Lock()
        self._reset()
        if hasattr(os, "register_at_fork"):  # a forked child records into its own file
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        self.pid = os.getpid()
        self.path = None if self.per_process else self.out
        self.label = None
        self.complete = set()  # signatures recorded with their values
        self.partial = set()  # signatures recorded while values could not be read
        self.written = 0

    # -- values ---------------------------------------------------------------------------------

    def tensor(self, t, read_values: bool):
        dtype = str(t.dtype).removeprefix("torch.")
        spec = {"shape": [int(d) for d in t.shape], "dtype": dtype,
                "stride": [int(s) for s in t.stride()]}
        if str(getattr(t, "device", "")).split(":")[0] == "cpu":
            spec["device"] = "cpu"
        if read_values and self._wants_values(spec):
            values = _flatten(t.reshape(-1).tolist())
            spec["values"] = [int(v) for v in values] if dtype in INT_DTYPES else [_float(float(v)) for v in values]
        return {"tensor": spec}

    def _wants_values(self, spec) -> bool:
        """0-d tensors (numbers passed as tensors) always; integer tensors up to the cap."""
        return not spec["shape"] or (spec["dtype"] in INT_DTYPES and math.prod(spec["shape"]) <= self.int_values_cap)

    def value(self, v, read_values: bool):
        if _numpy_scalar(v):  # before float: np.float64 is a float subclass
            item = v.item()
            return {"numpy": {"dtype": str(v.dtype), "value": _float(item) if isinstance(item, float) else item}}
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return _float(v)
        if isinstance(v, tuple):
            return [self.value(x, read_values) for x in v]
        if isinstance(v, list):
            return {"list": [self.value(x, read_values) for x in v]}
        if _is_tensor(v):
            return self.tensor(v, read_values)
        return {"object": type(v).__name__}

    def spec(self, args, kwargs, read_values: bool) -> dict:
        spec = {"positional": [self.value(a, read_values) for a in args],
                "args": {k: self.value(v, read_values) for k, v in kwargs.items()}}
        if not spec["positional"]:
            del spec["positional"]
        return spec

    # -- recording ------------------------------------------------------------------------------

    def record(self, entry: str, args, kwargs):
        if os.getpid() != self.pid:
            self._reset()
        key = json.dumps(self.spec(args, kwargs, read_values=False), sort_keys=True)
        if key in self.complete:
            return
        skipped = values_unreadable_now()
        if skipped is not None and key in self.partial:
            return
        line = self.spec(args, kwargs, read_values=skipped is None)
        with self.lock:
            if key in self.complete:
                return
            if key not in self.partial and len(self.complete) + len(self.partial) >= self.max_calls:
                return
            if skipped is None:
                self.partial.discard(key)
                self.complete.add(key)
            else:
                self.partial.add(key)
            self.written += 1
            if self.label is None:
                self.label = process_label()
            if self.path is None:
                self.path = self.out / f"calls-{self.label}.jsonl"
            recorded = {"entry": entry}
            if skipped is not None:
                recorded["values_skipped"] = f"{skipped}: tensor values were not read"
            spec = {"id": f"{self.label}-{self.written}", "seed": 0, **line, "recorded": recorded}
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(spec, separators=(",", ":")) + "\n")


def install(path, entry_points=ENTRY_POINTS, int_values_cap: int = 4096, max_calls: int = 10_000):
    """Wraps every importable entry point (importing it); returns the ``module:function`` names
    wrapped, and warns when there is none: nothing would be recorded."""
    recorder = Recorder(path, int_values_cap, max_calls)
    wrapping = wrap_entry_points(recorder.record, entry_points, import_now=True)
    if not wrapping.wrapped:
        reasons = "; ".join(f"{name}: {why}" for name, why in wrapping.not_wrapped.items())
        warnings.warn(f"fa3conform.record.install wrapped no entry point, so nothing will be "
                      f"recorded ({reasons})", RuntimeWarning, stacklevel=2)
    return wrapping.wrapped


def install_from_environment():
    """The start-up hook's part: record into the launcher's folder, wrapping lazily (a process
    that never imports an entry point pays nothing but the hook)."""
    out = os.environ.get(ENV_DIR)
    if not out:
        return None
    options = json.loads(os.environ.get(ENV_OPTIONS) or "{}")
    recorder = Recorder(out, options.get("int_values_cap", 4096), options.get("max_calls", 10_000),
                        per_process=True)
    marker = Path(out) / "wrapped"

    def note(name):
        marker.mkdir(parents=True, exist_ok=True)
        with open(marker / f"pid{os.getpid()}", "a", encoding="utf-8") as f:
            f.write(name + "\n")

    extra = tuple(EntryPoint(*name.rsplit(":", 1), "named by --entry-point")
                  for name in options.get("entry_points", []))
    return wrap_entry_points(recorder.record, ENTRY_POINTS + extra, on_wrap=note)


def _summary(out: Path) -> tuple[str, bool]:
    files = sorted(out.glob("calls-*.jsonl"))
    calls = sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
    wrapped_in = sorted((out / "wrapped").glob("pid*")) if (out / "wrapped").is_dir() else []
    names = sorted({n for f in wrapped_in for n in f.read_text(encoding="utf-8").split()})
    if not wrapped_in:
        return (f"fa3conform.record: warning: no process imported a known entry point "
                f"({', '.join(p.name for p in ENTRY_POINTS)}); nothing was recorded"), False
    return (f"fa3conform.record: {calls} distinct calls in {len(files)} files under {out} "
            f"({len(wrapped_in)} processes wrapped {', '.join(names)})"), True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fa3conform.record",
        description="Run COMMAND, recording the flash_attn_with_kvcache calls of every Python "
                    "process it starts into DIR (one calls-<label>.jsonl per process).")
    parser.add_argument("--out", required=True, type=Path, help="folder for the call files")
    parser.add_argument("--int-values-cap", type=int, default=4096,
                        help="integer tensors up to this many elements are recorded with values")
    parser.add_argument("--max-calls", type=int, default=10_000,
                        help="distinct calls recorded per process at most")
    parser.add_argument("--entry-point", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="also record this function (FA3's signature), e.g. a wrapper of "
                             "your own; repeatable")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (put it after --)")
    for name in args.entry_point:
        if ":" not in name:
            parser.error(f"--entry-point {name}: expected MODULE:FUNCTION")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(STARTUP_DIR), package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    env[ENV_DIR] = str(out)
    env[ENV_OPTIONS] = json.dumps({"int_values_cap": args.int_values_cap, "max_calls": args.max_calls,
                                   "entry_points": args.entry_point})
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"fa3conform.record: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127
    for forwarded in (signal.SIGINT, signal.SIGTERM):  # the command decides how to stop
        signal.signal(forwarded, lambda signum, _frame: child.send_signal(signum))
    status = child.wait()
    message, recorded = _summary(out)
    print(message, file=sys.stderr)
    if status < 0:
        return 128 - status
    return status if status or recorded else 1


if __name__ == "__main__":
    sys.exit(main())
