"""Record the ``flash_attn_with_kvcache`` calls a process makes, as fa3conform call specs.

    import fa3conform_record
    fa3conform_record.install("calls.jsonl")   # before the model code imports the entry points
    ...                                         # run the workload
    # then: fa3conform certify calls.jsonl

``install`` wraps every known entry point that is importable (sgl-kernel, upstream FA3's
``flash_attn_interface``, SGLang's MUSA wrapper, mate). For each distinct call signature (argument
names and order, shapes, dtypes, strides, scalar values; integer tensor values do not make a call
distinct) it appends one JSON line in the call-spec format, then calls the original. Integer tensors
(index tensors: ``cache_seqlens``, ``page_table``, ...) are recorded with their values when they have
at most ``int_values_cap`` elements; float data is never read. Accelerator devices are left open (the
spec's "native device of the stack being checked"), so a call recorded on CUDA is certified as the
same call on MUSA; CPU tensors are recorded as ``"device": "cpu"``. Only the outermost call is
recorded when one wrapped entry point calls another. Depends on nothing but the standard library.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import threading

ENTRY_POINTS = (
    ("sgl_kernel.flash_attn", "flash_attn_with_kvcache"),
    ("flash_attn_interface", "flash_attn_with_kvcache"),
    ("sglang.srt.hardware_backend.musa.attention.flashattention_backend", "flash_attn_with_kvcache"),
    ("mate", "flash_attn_with_kvcache"),
)

INT_DTYPES = {"int8", "uint8", "int16", "int32", "int64", "bool"}


def _is_tensor(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and callable(getattr(value, "stride", None))


def _flatten(values):
    if isinstance(values, (list, tuple)):
        return [x for v in values for x in _flatten(v)]
    return [values]


class Recorder:
    """Turns calls into spec lines and appends the new ones to a file (thread-safe)."""

    def __init__(self, path, int_values_cap: int = 4096, max_calls: int = 10_000):
        self.path = path
        self.int_values_cap = int_values_cap
        self.max_calls = max_calls
        self.seen = set()
        self.lock = threading.Lock()
        self.local = threading.local()

    def tensor(self, t):
        dtype = str(t.dtype).removeprefix("torch.")
        spec = {"shape": [int(d) for d in t.shape], "dtype": dtype,
                "stride": [int(s) for s in t.stride()]}
        if str(getattr(t, "device", "")).split(":")[0] == "cpu":
            spec["device"] = "cpu"
        numel = math.prod(spec["shape"])
        if dtype in INT_DTYPES and numel <= self.int_values_cap:
            flat = t.reshape(-1) if hasattr(t, "reshape") else t
            spec["values"] = [int(v) for v in _flatten(flat.tolist())]
        return {"tensor": spec}

    def value(self, v):
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": str(v)}
        if isinstance(v, tuple):
            return [self.value(x) for x in v]
        if isinstance(v, list):
            return {"list": [self.value(x) for x in v]}
        if _is_tensor(v):
            return self.tensor(v)
        return {"object": type(v).__name__}

    def record(self, entry: str, args, kwargs):
        spec = {"positional": [self.value(a) for a in args],
                "args": {k: self.value(v) for k, v in kwargs.items()}}
        key = json.dumps(_without_values(spec), sort_keys=True)
        with self.lock:
            if key in self.seen or len(self.seen) >= self.max_calls:
                return
            self.seen.add(key)
            line = {"id": f"{entry}#{len(self.seen)}", "seed": 0, **spec}
            if not line["positional"]:
                del line["positional"]
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")

    def wrap(self, entry: str, original):
        @functools.wraps(original)
        def recorded(*args, **kwargs):
            if getattr(self.local, "depth", 0) == 0:
                try:
                    self.record(entry, args, kwargs)
                except Exception as exc:  # recording must never break the workload
                    print(f"fa3conform_record: could not record a call of {entry}: {exc!r}")
            self.local.depth = getattr(self.local, "depth", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                self.local.depth -= 1

        recorded.__fa3conform_original__ = original
        return recorded


def _without_values(value):
    """The spec with integer tensor values removed: what makes two calls the same signature."""
    if isinstance(value, dict):
        return {k: _without_values(v) for k, v in value.items() if k != "values"}
    if isinstance(value, list):
        return [_without_values(v) for v in value]
    return value


def install(path, entry_points=ENTRY_POINTS, int_values_cap: int = 4096, max_calls: int = 10_000):
    """Wraps every importable entry point; returns the ``module:function`` names wrapped."""
    recorder = Recorder(path, int_values_cap, max_calls)
    wrapped = []
    for module_name, function in entry_points:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not installed here, or fails to import without a device
            continue
        original = getattr(module, function, None)
        if original is None or hasattr(original, "__fa3conform_original__"):
            continue
        setattr(module, function, recorder.wrap(module_name, original))
        wrapped.append(f"{module_name}:{function}")
    return wrapped
