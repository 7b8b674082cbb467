#!/usr/bin/env python3
"""Shadow differential oracle: runs call specs through the REAL SGLang MUSA wrapper or mate.

    venv/bin/python harness.py SPECS.jsonl [more files] --out results.jsonl [--entry sglang|mate]

Every call spec (fa3conform's format: one object, an array, or JSON lines) is rebuilt exactly as the
spec writes it and passed to the entry point (entries.py):
  sglang (default)  the real `sglang.srt.hardware_backend.musa.attention.flashattention_backend.
                    flash_attn_with_kvcache` (sglang@082898472f), which calls the next one;
  mate              the real mate v0.2.2 FA3 wrapper `flash_attn_interface.flash_attn_with_kvcache`
                    (flash_attn_3.interface), called directly: no SGLang module is loaded.
Below both runs the real mate Python (mate.mha_interface -> _fmha_fwd / _fmha_get_metadata /
_fmha_fwd_combine).  Stubs sit only at the compiled boundary (jit_stub.py), at the device
(musa_device.py) and, for the sglang entry, at import-time scaffolding (sglang_stubs.py); each file
says what it replaces and why it cannot change a verdict.

One result line per call:
  {"index", "id", "outcome": "accepted"|"rejected"|"skipped", "exception", "message",
   "site": "path:line" of the raising upstream frame (or of the last launch), "source": that line,
   "launches": [...], "mla_cxx_unchecked": bool, "stub_note": ...}
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
import types
import zlib
from pathlib import Path

from shadow_paths import CACHE, MATE, SGLANG, TOOL  # noqa: E402

sys.path[:0] = [str(TOOL), str(MATE), str(MATE / "wrappers" / "flash-attention")]

# ---- environment the real code reads at import / call time ------------------------------------
# mate/jit/env.py resolves the MUSA arch at import (torch_musa device query). MP31 is the arch
# mate's MLA kernels require; the value only names the JIT cache directory.
os.environ["MATE_MUSA_ARCH_LIST"] = "3.1"
os.environ["MATE_WORKSPACE_BASE"] = str(CACHE)
for _v in ("MATE_DRY_RUN", "MATE_DISABLE_JIT", "MATE_LOGLEVEL", "MATE_JIT_VERBOSE",
           "SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA", "SGLANG_PP_LAYER_PARTITION"):
    os.environ.pop(_v, None)

import torch  # noqa: E402

import musa_device  # noqa: E402  (must run before mate / sglang touch devices)
import jit_stub  # noqa: E402
import entries  # noqa: E402

import flash_attn_interface  # noqa: E402  real mate wrapper (flash_attn_3)
jit_stub.install()

UPSTREAM_ROOTS = {str(MATE): "mate", str(SGLANG): "sglang"}

DTYPES = {
    "float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64, "double": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "short": torch.int16,
    "int32": torch.int32, "int": torch.int32, "int64": torch.int64, "long": torch.int64,
    "bool": torch.bool,
}


# ---- non-tensor values (fa3conform_run.py's rules) ------------------------------------------
def stand_in_function(*args, **kwargs):
    return args[0] if args else None


def stand_in_object(type_name: str):
    builtin = {"function": stand_in_function, "dict": {}, "set": set(), "bytearray": bytearray(),
               "object": object()}
    if type_name in builtin:
        return builtin[type_name]
    return type(type_name, (), {})()


def special_float(value) -> float:
    if isinstance(value, str):
        return float({"Infinity": "inf", "+inf": "inf", "-Infinity": "-inf", "NaN": "nan"}.get(value, value))
    if isinstance(value, dict):
        return special_float(value["float"])
    return float(value)


def numpy_scalar(dtype: str, value):
    """`{"numpy": {"dtype", "value"}}`: the NumPy scalar of that type (`np.bool_` for "bool")."""
    np = __import__("numpy")
    scalar_type = np.bool_ if dtype == "bool" else np.dtype(dtype).type
    return scalar_type(special_float(value) if np.dtype(scalar_type).kind == "f" else value)


def rebuild(value, make_tensor):
    if isinstance(value, list):
        return tuple(rebuild(v, make_tensor) for v in value)
    if isinstance(value, dict):
        (tag, inner), = value.items()
        if tag == "tensor":
            return make_tensor(inner)
        if tag == "list":
            return [rebuild(v, make_tensor) for v in inner]
        if tag == "float":
            return special_float(inner)
        if tag == "object":
            return stand_in_object("function" if inner == "callable" else inner)
        if tag == "dict":
            return {rebuild(k, make_tensor): rebuild(v, make_tensor) for k, v in inner}
        if tag == "numpy":
            return numpy_scalar(inner["dtype"], inner["value"])
        raise ValueError(f"unknown wrapper {tag!r}")
    return value


# ---- tensor data -----------------------------------------------------------------------------
def _tspec(v):
    return v["tensor"] if isinstance(v, dict) and len(v) == 1 and "tensor" in v else None


def _rng(seed, name):
    return __import__("numpy").random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, zlib.crc32(name.encode())])


def dims_of(bound: dict):
    """fa3conform's Dims::of (src/call/dims.rs) on the canonically bound spec values, or None."""
    cu = _tspec(bound.get("cu_seqlens_q"))
    q, kc, vc = (_tspec(bound.get(n)) for n in ("q", "k_cache", "v_cache"))
    if q is None or kc is None or vc is None:
        return None
    if len(q["shape"]) != (3 if cu is not None else 4) or len(kc["shape"]) != 4 or len(vc["shape"]) != 4:
        return None
    if cu is not None:
        if not cu["shape"]:
            return None
        b = cu["shape"][0] - 1
        mq = bound.get("max_seqlen_q")
        if b < 0 or isinstance(mq, bool) or not isinstance(mq, int) or mq < 0:
            return None
        seqlen_q, total_q = mq, q["shape"][0]
    else:
        b, seqlen_q, total_q = q["shape"][0], q["shape"][1], q["shape"][0] * q["shape"][1]
    pt = _tspec(bound.get("page_table"))
    if pt is not None:
        if len(pt["shape"]) < 2:
            return None
        num_pages, per = kc["shape"][0], pt["shape"][1]
        seqlen_k = per * kc["shape"][1]
    else:
        num_pages, per, seqlen_k = 0, 0, kc["shape"][1]
    k = _tspec(bound.get("k"))
    varlen_new = k is not None and _tspec(bound.get("cu_seqlens_k_new")) is not None
    if k is not None and varlen_new:
        seqlen_new, total_new = 0, (k["shape"][0] if k["shape"] else 0)
    elif k is not None and len(k["shape"]) == 4:
        seqlen_new, total_new = k["shape"][1], b * k["shape"][1]
    elif k is not None:
        return None
    else:
        seqlen_new, total_new = 0, 0
    return dict(b=b, seqlen_q=seqlen_q, total_q=total_q, num_pages=num_pages, seqlen_k=seqlen_k,
                cache_batch=kc["shape"][0], seqlen_new=seqlen_new, total_new=total_new)


def _cu_seqlens(rng, parts, total, max_len):
    """fa3conform's generator shape: fair shares then the rest spread; the last offset is
    min(total, parts*max_len), deterministic (the only value the Python path reads, F-26)."""
    lens = [0] * parts
    left = min(total, parts * max_len)
    for i in range(parts):
        lens[i] = min(left // max(parts, 1), max_len)
    left -= sum(lens)
    while left > 0:
        i = int(rng.integers(0, parts))
        if lens[i] < max_len:
            lens[i] += 1
            left -= 1
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return out


INDEX_ORDER = ("cu_seqlens_q", "cu_seqlens_k_new", "cache_seqlens", "cache_leftpad", "page_table",
               "cache_batch_idx", "rotary_seqlens")


def index_values(name, numel, seed, dims, done):
    if dims is None:
        return [0] * numel
    rng = _rng(seed, name)
    b = dims["b"]
    if name == "cu_seqlens_q" and numel == b + 1:
        return _cu_seqlens(rng, b, dims["total_q"], dims["seqlen_q"])
    if name == "cu_seqlens_k_new" and numel == b + 1:
        return _cu_seqlens(rng, b, dims["total_new"], dims["seqlen_k"])
    if name == "cache_seqlens":
        cu = done.get("cu_seqlens_k_new")
        new = [max(cu[i + 1] - cu[i], 0) for i in range(len(cu) - 1)] if cu else [dims["seqlen_new"]] * b
        return [int(rng.integers(0, max(dims["seqlen_k"] - (new[i] if i < len(new) else 0), 0) + 1))
                for i in range(numel)]
    if name == "cache_leftpad":
        s = done.get("cache_seqlens") or []
        return [int(rng.integers(0, max(s[i] if i < len(s) else 0, 0) + 1)) for i in range(numel)]
    if name == "page_table":
        if dims["num_pages"] == 0:
            return [0] * numel
        pages = list(rng.permutation(dims["num_pages"]))
        return [int(pages[i % len(pages)]) for i in range(numel)]
    if name == "cache_batch_idx":
        pt = done.get("__page_table_rows")
        rows = list(rng.permutation(pt if pt is not None else dims["cache_batch"]))
        return [int(rows[i]) if i < len(rows) else 0 for i in range(numel)]
    if name == "rotary_seqlens":
        s = done.get("cache_seqlens")
        return list(s) if s is not None and len(s) == numel else [0] * numel
    return [0] * numel


def build_tensor(spec: dict, name: str, seed, dims, done: dict, default_device="musa"):
    dtype = DTYPES[spec["dtype"].replace("torch.", "")]
    shape = list(spec["shape"])
    numel = math.prod(shape)
    stride = spec.get("stride")
    if stride is None:
        stride, acc = [], 1
        for s in reversed(shape):
            stride.append(acc)
            acc *= max(s, 1)
        stride.reverse()
    stride = list(stride)
    device = spec.get("device") or default_device
    integer = not dtype.is_floating_point
    cap = musa_device.INT_CAP if integer else musa_device.FLOAT_CAP
    if numel > cap:  # data never readable on the Python path for tensors this large
        inner = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return musa_device.on_device(inner, device), None
    values = spec.get("values")
    if values is not None:
        if integer:
            vals = [int(v) for v in values]
        else:
            vals = [special_float(v) for v in values]
    elif integer:
        vals = index_values(name, numel, seed, dims, done)
    elif numel <= 64:
        vals = list(_rng(seed, name).standard_normal(numel))
    else:
        vals = None  # float data is never read on the Python path for multi-element tensors
    extent = (1 + sum((s - 1) * st for s, st in zip(shape, stride))) if numel else 0
    if vals is None:
        base = torch.zeros(extent, dtype=dtype)
    else:
        host = torch.tensor(vals, dtype=torch.int64 if integer else torch.float64)
        base = torch.zeros(extent, dtype=host.dtype)
        if numel:
            index = torch.zeros(shape, dtype=torch.int64)
            for d, (s, st) in enumerate(zip(shape, stride)):
                view = [1] * len(shape)
                view[d] = s
                index = index + (torch.arange(s, dtype=torch.int64) * st).reshape(view)
            base[index.reshape(-1)] = host
        base = base.to(dtype)
    inner = base.as_strided(shape, stride, 0)
    return musa_device.on_device(inner, device), (vals if integer else None)


def build_call(call: dict, params: tuple):
    """(positional, keywords) exactly as the spec writes them; `params`: the entry's parameter order,
    which names the positional slots."""
    seed = call.get("seed", 0)
    positional_spec = call.get("positional", []) or []
    args_spec = call.get("args", {}) or {}
    bound = {}
    for i, v in enumerate(positional_spec):
        bound[params[i] if i < len(params) else f"arg{i}"] = v
    for k, v in args_spec.items():
        bound.setdefault(k, v)
    dims = dims_of(bound)
    done = {}
    pt = _tspec(bound.get("page_table"))
    if pt is not None and pt["shape"]:
        done["__page_table_rows"] = pt["shape"][0]
    built = {}
    order = sorted(bound, key=lambda n: INDEX_ORDER.index(n) if n in INDEX_ORDER else len(INDEX_ORDER))
    cache = {}
    for name in order:
        value = bound[name]

        def make(spec, name=name):
            t, ints = build_tensor(spec, name, seed, dims, done)
            if ints is not None and _tspec(value) is spec:
                done[name] = ints
            return t

        cache[name] = make
        built[name] = rebuild(value, make)

    positional = []
    for i, _ in enumerate(positional_spec):
        positional.append(built[params[i] if i < len(params) else f"arg{i}"])
    keywords = {}
    for k, v in args_spec.items():
        if k in bound and k in params[:len(positional_spec)]:
            keywords[k] = rebuild(v, cache[k])  # same name given twice: a second object, as Python would
        else:
            keywords[k] = built[k]
    return positional, keywords


# ---- SGLang wrapper state --------------------------------------------------------------------
class CachedMetadataReused(Exception):
    pass


class _CachedSentinel:
    """Stands for a metadata tensor an earlier (unknown) call left in the wrapper's dict."""

    def __getattr__(self, item):
        raise CachedMetadataReused(item)

    def __getitem__(self, item):
        raise CachedMetadataReused("[]")


def _upstream_caches():
    """Every `functools.lru_cache`/`cache` of mate's and SGLang's loaded modules."""
    caches = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(("mate", "sglang", "flash_attn_interface", "flash_attn_3")):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and hasattr(value, "cache_info"):
                caches.append(value)
    return caches


def clear_upstream_caches() -> None:
    """Each call runs as in a fresh process: an lru_cache keeps what an earlier call computed and
    answers a later, equal-hashing key with it (`_get_fwd_kernel_config(..., np.int64(1))` would
    return the `enable_packgqa` of an earlier call with `True`)."""
    for cached in _upstream_caches():
        cached.cache_clear()


class SglangEntry:
    """SGLang's wrapper, with the module state its metadata injection reads set from the spec's
    `context.sglang_backend`."""

    def __init__(self):
        import sglang_stubs
        self.stubs = sglang_stubs
        self.wrapper = sglang_stubs.install()
        import sglang.srt.runtime_context as runtime_context  # (real)
        self.runtime_context = runtime_context
        self.function = self.wrapper.flash_attn_with_kvcache

    def prepare(self, context) -> None:
        wrapper = self.wrapper
        wrapper._MATE_NO_MLA_SCHEDULER_METADATA_DICT.clear()
        self.runtime_context.reset_context()
        for var in ("SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA", "SGLANG_PP_LAYER_PARTITION"):
            os.environ.pop(var, None)
        state = (context or {}).get("sglang_backend")
        if state is None:
            wrapper._CURRENT_BACKEND = None
            return
        layer = state.get("layer")
        # The attributes MusaFlashAttentionBackend.__init__/_set_current_state set and the wrapper
        # reads; defaults as fa3conform's SglangBackend::default().
        wrapper._CURRENT_BACKEND = types.SimpleNamespace(
            _current_prefix=state.get("prefix", "forward_decode"),
            _current_layer=None if layer is None else types.SimpleNamespace(**layer),
            _current_max_seqlen_k=state.get("max_seqlen_k"),
            _current_can_run_tbo=state.get("can_run_tbo", False),
            num_hidden_layers=state.get("num_hidden_layers", 1),
            first_k_dense_replace=state.get("first_k_dense_replace"),
            full_attention_interval=state.get("full_attention_interval"),
            use_mla=state.get("use_mla", False),
            device=musa_device.MUSA,
        )
        self.stubs.PP_STATE.rank_in_group = state.get("pp_rank", 0)
        self.stubs.PP_STATE.world_size = state.get("pp_world_size", 1)
        for key, var in (("force_update_metadata", "SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA"),
                         ("pp_layer_partition", "SGLANG_PP_LAYER_PARTITION")):
            if state.get(key) is not None:
                os.environ[var] = state[key]
        for prefix in state.get("cached_prefixes") or []:
            wrapper._MATE_NO_MLA_SCHEDULER_METADATA_DICT[prefix] = _CachedSentinel()


class MateEntry:
    """mate's FA3 wrapper called directly. A spec's `context` describes SGLang's backend state, which
    no code on this route reads (the `mate` profile ignores it too)."""

    function = staticmethod(flash_attn_interface.flash_attn_with_kvcache)

    def prepare(self, context) -> None:
        pass


RUNNERS = {"sglang": SglangEntry, "mate": MateEntry}


# ---- running ---------------------------------------------------------------------------------
def _upstream_frame(tb):
    """The innermost frame in upstream code (mate or sglang), as 'path:line', and its source line."""
    best = None
    for frame in traceback.extract_tb(tb):
        for root, tag in UPSTREAM_ROOTS.items():
            if frame.filename.startswith(root):
                best = (f"{tag}/{os.path.relpath(frame.filename, root)}:{frame.lineno}", (frame.line or "").strip())
    return best or ("", "")


def run_one(index: int, call: dict, runner, params: tuple) -> dict:
    jit_stub.LAUNCHES.clear()
    rec = {"index": index, "id": call.get("id", "")}
    try:
        positional, keywords = build_call(call, params)
    except Exception as exc:  # the spec cannot be materialised (reported, not a verdict)
        rec.update(outcome="skipped", reason=f"build: {type(exc).__name__}: {exc}")
        return rec
    clear_upstream_caches()
    runner.prepare(call.get("context"))
    try:
        runner.function(*positional, **keywords)
    except CachedMetadataReused:
        rec.update(outcome="skipped",
                   reason="reuses metadata an earlier call cached (context.cached_prefixes): contents unknown")
        return rec
    except Exception as exc:
        site, line = _upstream_frame(exc.__traceback__)
        rec.update(outcome="rejected", exception=type(exc).__name__, message=str(exc), site=site, source=line)
        if "cannot be called on meta tensors" in str(exc):
            rec["stub_note"] = "value of a large tensor held as meta (musa_device.FLOAT_CAP): stub-caused"
    else:
        rec.update(outcome="accepted")
    launches = [dict(l) for l in jit_stub.LAUNCHES if l["kind"] != "jit_build"]
    rec["launches"] = launches
    rec["mla_cxx_unchecked"] = any(l["kind"] == "mla" and "args" in l for l in launches)
    if rec["outcome"] == "accepted" and not rec["mla_cxx_unchecked"]:
        rec["reached_fwd_launch"] = any(l["kind"] == "fwd" and "args" in l for l in launches)
    return rec


def read_specs(path: Path):
    text = path.read_text()
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--entry", choices=sorted(entries.ENTRIES), default="sglang",
                    help="the function each call is passed to (entries.py)")
    args = ap.parse_args(argv)
    runner = RUNNERS[args.entry]()
    params = entries.parameters(entries.ENTRIES[args.entry])
    t0 = time.time()
    n = 0
    with args.out.open("w") as out:
        for path in args.specs:
            for i, call in enumerate(read_specs(path)):
                rec = run_one(i, call, runner, params)
                rec["file"] = str(path)
                out.write(json.dumps(rec, default=str) + "\n")
                n += 1
    if not args.quiet:
        print(f"shadow: {n} calls in {time.time() - t0:.1f}s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
