#!/usr/bin/env python3
"""Run fa3conform case bundles through a real ``flash_attn_with_kvcache``.

    python drivers/fa3conform_run.py --target sglang-musa --bundles DIR [--device musa]

For every bundle folder (one holding ``call.json``) the call is rebuilt exactly as the spec wrote it:
positional arguments positionally, keywords in their order, ``None`` where the spec has ``null`` and
nothing where it has no key. Tensors come from ``inputs.safetensors`` with the shape, strides and
device of ``call.json``; other values from ``call.json`` (tuples, ``{"list": ...}``,
``{"float": "inf"}``, ``{"object": "function"}`` -> a stand-in of that type). Then the runner writes
``result.safetensors`` (``out``, ``softmax_lse`` when returned, ``k_cache``/``v_cache`` after the call
when ``k`` was passed) or ``result.json`` (``{"exception": class name, "message": str(exc)}``).
``fa3conform verify DIR --profile PROFILE`` judges the results.

Depends only on the target stack, torch and safetensors; ``--backend numpy`` needs only NumPy (tensors
become ``TypedArray``s, see below) so the loop runs in CI without torch or a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import traceback
import types
from pathlib import Path

TARGETS = {
    "sglang-musa": "sglang.srt.hardware_backend.musa.attention.flashattention_backend:flash_attn_with_kvcache",
    "mate": "flash_attn_interface:flash_attn_with_kvcache",
    "sgl-kernel": "sgl_kernel.flash_attn:flash_attn_with_kvcache",
    "fa3": "flash_attn_interface:flash_attn_with_kvcache",
}

# The canonical (SGLang MUSA wrapper) parameter order: a positional tensor argument is stored in
# inputs.safetensors under the name of its position (``arg<i>`` past the end).
CANONICAL_PARAMS = (
    "q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin", "cache_seqlens",
    "cache_batch_idx", "cache_leftpad", "page_table", "cu_seqlens_q", "cu_seqlens_k_new",
    "max_seqlen_q", "rotary_seqlens", "q_descale", "k_descale", "v_descale", "softmax_scale",
    "causal", "window_size", "attention_chunk", "softcap", "rotary_interleaved",
    "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin", "return_softmax_lse", "sinks",
    "score_mod", "aux_tensors", "ver",
)

RESULT_TENSORS = "result.safetensors"
RESULT_JSON = "result.json"


def canonical_name(index: int) -> str:
    return CANONICAL_PARAMS[index] if index < len(CANONICAL_PARAMS) else f"arg{index}"


# ---------------------------------------------------------------------------------------------
# Non-tensor values


def stand_in_function(*args, **kwargs):
    """Stands for any callable a spec passes (``{"object": "function"}``)."""
    return args[0] if args else None


def stand_in_object(type_name: str):
    """An object whose ``type(x).__name__`` is ``type_name``."""
    builtin = {"function": stand_in_function, "dict": {}, "set": set(), "bytearray": bytearray(),
               "object": object()}
    if type_name in builtin:
        return builtin[type_name]
    return type(type_name, (), {})()


def special_float(value) -> float:
    if isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, dict):
        return special_float(value["float"])
    return float(value)


def rebuild(value, make_tensor):
    """A spec value as the Python object the caller passed. ``make_tensor(spec)`` builds tensors."""
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
        raise ValueError(f"unknown wrapper {tag!r} in call.json")
    return value  # None, bool, int, float, str


def contiguous_strides(shape):
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return list(reversed(strides))


# ---------------------------------------------------------------------------------------------
# Array backends


class TorchBackend:
    name = "torch"

    def __init__(self, device: str):
        import torch  # noqa: F401  (the target stack needs it anyway)
        if device == "musa":
            import torch_musa  # noqa: F401  registers the "musa" device with torch
        import safetensors.torch
        self.torch = torch
        self.st = safetensors.torch
        self.device = device

    def load(self, path: Path):
        return self.st.load_file(str(path), device="cpu")

    def place(self, stored, spec: dict):
        device = "cpu" if spec.get("device") == "cpu" else self.device
        shape = list(spec["shape"])
        stride = spec.get("stride") or contiguous_strides(shape)
        tensor = self.torch.empty_strided(shape, stride, dtype=stored.dtype, device=device)
        tensor.copy_(stored.reshape(shape))
        return tensor

    def is_tensor(self, value) -> bool:
        return isinstance(value, self.torch.Tensor)

    def save(self, path: Path, tensors: dict):
        # Copies: save_file refuses tensors that share storage (a cache and a view of it).
        host = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
        self.st.save_file(host, str(path))


class NumpyBackend:
    """Tensors as ``TypedArray``: NumPy arrays that keep their torch dtype name in ``torch_dtype``.

    bf16, f16 and fp8 values are held as exact float32 values; integer and bool tensors keep their
    NumPy dtype. ``stride(dim)`` answers in elements, as torch does. A target returns arrays tagged
    the same way (``out = values.astype(np.float32).view(type(q)); out.torch_dtype = "bfloat16"``);
    untagged float arrays are written as float32.
    """

    name = "numpy"

    def __init__(self, device: str):
        import numpy as np
        self.np = np
        self.codec = NumpyCodec(np)
        self.TypedArray = typed_array_class(np)

    def load(self, path: Path):
        return self.codec.read(path)

    def place(self, stored, spec: dict):
        np = self.np
        values, torch_dtype = stored
        shape = tuple(spec["shape"])
        stride = spec.get("stride") or contiguous_strides(shape)
        extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
        buffer = np.zeros(extent, dtype=values.dtype)
        view = np.lib.stride_tricks.as_strided(
            buffer, shape=shape, strides=[s * values.itemsize for s in stride])
        view[...] = values.reshape(shape)
        array = view.view(self.TypedArray)
        array.torch_dtype = torch_dtype
        return array

    def is_tensor(self, value) -> bool:
        return isinstance(value, self.np.ndarray)

    def save(self, path: Path, tensors: dict):
        self.codec.write(path, {k: (self.np.ascontiguousarray(v), self._dtype_of(v))
                                for k, v in tensors.items()})

    def _dtype_of(self, array) -> str:
        tagged = getattr(array, "torch_dtype", None)
        if tagged is not None:
            return tagged
        if array.dtype.kind == "f":
            return "float32" if array.dtype.itemsize <= 4 else "float64"
        return NumpyCodec.TORCH_BY_NUMPY[array.dtype.str[1:]]


def typed_array_class(np):
    class TypedArray(np.ndarray):
        torch_dtype = None

        def __array_finalize__(self, obj):
            self.torch_dtype = getattr(obj, "torch_dtype", None)

        def stride(self, dim=None):
            strides = tuple(s // self.itemsize for s in self.strides)
            return strides if dim is None else strides[dim]

    return TypedArray


class NumpyCodec:
    """safetensors files with NumPy alone, including the dtypes NumPy lacks (BF16, F8_*)."""

    SAFETENSORS_BY_TORCH = {
        "float16": "F16", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
        "float32": "F32", "float64": "F64", "int8": "I8", "uint8": "U8", "int16": "I16",
        "int32": "I32", "int64": "I64", "bool": "BOOL",
    }
    TORCH_BY_SAFETENSORS = {v: k for k, v in SAFETENSORS_BY_TORCH.items()}
    NUMPY_BY_TORCH = {
        "float32": "<f4", "float64": "<f8", "int8": "i1", "uint8": "u1", "int16": "<i2",
        "int32": "<i4", "int64": "<i8", "bool": "?",
    }
    TORCH_BY_NUMPY = {"i1": "int8", "u1": "uint8", "i2": "int16", "i4": "int32", "i8": "int64",
                      "b1": "bool"}

    def __init__(self, np):
        self.np = np
        self.fp8_tables = {"float8_e4m3fn": self._fp8_table(4, 3, 7, ieee=False),
                           "float8_e5m2": self._fp8_table(5, 2, 15, ieee=True)}

    def _fp8_table(self, exp_bits, man_bits, bias, ieee):
        values = []
        for code in range(256):
            sign = -1.0 if code & 0x80 else 1.0
            e = (code >> man_bits) & ((1 << exp_bits) - 1)
            m = code & ((1 << man_bits) - 1)
            if ieee and e == (1 << exp_bits) - 1:
                values.append(sign * math.inf if m == 0 else math.nan)
            elif not ieee and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
                values.append(math.nan)
            elif e == 0:
                values.append(sign * m / (1 << man_bits) * 2.0 ** (1 - bias))
            else:
                values.append(sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
        return self.np.array(values, dtype=self.np.float32)

    def decode(self, torch_dtype: str, raw: bytes, shape):
        np = self.np
        if torch_dtype == "bfloat16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        elif torch_dtype == "float16":
            values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif torch_dtype in self.fp8_tables:
            values = self.fp8_tables[torch_dtype][np.frombuffer(raw, dtype=np.uint8)]
        else:
            values = np.frombuffer(raw, dtype=self.NUMPY_BY_TORCH[torch_dtype]).copy()
        return values.reshape(shape)

    def encode(self, torch_dtype: str, array) -> bytes:
        np = self.np
        if torch_dtype == "bfloat16":
            bits = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
            rounded = np.where(np.isnan(np.asarray(array, dtype=np.float32)), 0x7FC0, rounded)
            return rounded.astype("<u2").tobytes()
        if torch_dtype == "float16":
            return np.asarray(array, dtype="<f2").tobytes()
        if torch_dtype in self.fp8_tables:
            return self._encode_fp8(self.fp8_tables[torch_dtype], np.asarray(array, np.float32))
        return np.asarray(array, dtype=self.NUMPY_BY_TORCH[torch_dtype]).tobytes()

    def _encode_fp8(self, table, values) -> bytes:
        """Round to nearest, ties to even, keeping the sign; past the largest finite value the
        next step up (the NaN code of e4m3fn, infinity of e5m2) is where rounding overflows to."""
        np = self.np
        positive = table[:128]
        finite = int(np.flatnonzero(~np.isfinite(positive))[0]) if not np.isfinite(positive).all() else 128
        magnitudes = positive[:finite]
        overflow_code = finite  # 0x7F (NaN) for e4m3fn, 0x7C (inf) for e5m2
        step = magnitudes[-1] - magnitudes[-2]
        flat = values.reshape(-1)
        mag = np.abs(flat)
        hi = np.clip(np.searchsorted(magnitudes, mag), 1, finite - 1)
        lo = hi - 1
        below, above = mag - magnitudes[lo], magnitudes[hi] - mag
        code = np.where((above < below) | ((above == below) & (hi % 2 == 0)), hi, lo)
        code = np.where(mag > magnitudes[-1], finite - 1, code)
        code = np.where(mag >= magnitudes[-1] + step / 2, overflow_code, code)
        code = np.where(np.isnan(flat), 0x7F, code | (np.signbit(flat) * 0x80))
        return code.astype(np.uint8).tobytes()

    def read(self, path: Path):
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            torch_dtype = self.TORCH_BY_SAFETENSORS[info["dtype"]]
            start, end = info["data_offsets"]
            out[name] = (self.decode(torch_dtype, data[start:end], info["shape"]), torch_dtype)
        return out

    def write(self, path: Path, tensors: dict):
        header, chunks, offset = {}, [], 0
        for name in sorted(tensors):
            array, torch_dtype = tensors[name]
            chunk = self.encode(torch_dtype, array)
            header[name] = {"dtype": self.SAFETENSORS_BY_TORCH[torch_dtype],
                            "shape": list(array.shape), "data_offsets": [offset, offset + len(chunk)]}
            chunks.append(chunk)
            offset += len(chunk)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(chunks))


# ---------------------------------------------------------------------------------------------
# SGLang MUSA wrapper state


def prepare_sglang_context(module, context, device="musa"):
    """Sets the wrapper's ``_CURRENT_BACKEND`` as the spec's ``context`` describes it.

    Returns a reason when the state cannot be reproduced (the case is then skipped).
    """
    if module is None or not hasattr(module, "_CURRENT_BACKEND"):
        return None
    state = (context or {}).get("sglang_backend")
    if state is None:
        module._CURRENT_BACKEND = None
        return None
    if state.get("cached_prefixes"):
        return "context.sglang_backend.cached_prefixes needs cached metadata tensors the bundle does not carry"
    layer = state.get("layer")
    module._CURRENT_BACKEND = types.SimpleNamespace(
        _current_prefix=state.get("prefix", "forward_decode"),
        _current_layer=None if layer is None else types.SimpleNamespace(**layer),
        _current_max_seqlen_k=state.get("max_seqlen_k"),
        _current_can_run_tbo=state.get("can_run_tbo", False),
        num_hidden_layers=state.get("num_hidden_layers", 1),
        first_k_dense_replace=state.get("first_k_dense_replace"),
        full_attention_interval=state.get("full_attention_interval"),
        use_mla=state.get("use_mla", False),
        device=device,
    )
    pp = types.SimpleNamespace(rank_in_group=state.get("pp_rank", 0),
                               world_size=state.get("pp_world_size", 1))
    module.get_pp_group = lambda: pp
    metadata = getattr(module, "_MATE_NO_MLA_SCHEDULER_METADATA_DICT", None)
    if metadata is not None:
        metadata.clear()
    for key, variable in (("force_update_metadata", "SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA"),
                          ("pp_layer_partition", "SGLANG_PP_LAYER_PARTITION")):
        if state.get(key) is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = state[key]
    return None


# ---------------------------------------------------------------------------------------------
# Running


def resolve_target(target: str):
    """(module, function) for a target name, ``module.path:function`` or ``path/to/file.py:function``."""
    spec = TARGETS.get(target, target)
    if ":" not in spec:
        raise SystemExit(f"target {target!r}: expected one of {', '.join(TARGETS)} or module:function")
    module_name, function = spec.rsplit(":", 1)
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name)
        sys.path.insert(0, str(path.resolve().parent))  # as if the file were run as a script
        loader = importlib.util.spec_from_file_location(path.stem, path)
        if loader is None:
            raise SystemExit(f"target {target!r}: cannot load {path}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[path.stem] = module
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return module, getattr(module, function)


def bundle_dirs(root: Path):
    if (root / "call.json").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if (p / "call.json").is_file())


def run_case(case: Path, backend, module, function) -> str:
    for stale in (RESULT_TENSORS, RESULT_JSON):
        (case / stale).unlink(missing_ok=True)
    call = json.loads((case / "call.json").read_text())
    inputs = backend.load(case / "inputs.safetensors")

    def tensor_for(name):
        def make(spec):
            if name not in inputs:
                raise KeyError(f"{case}: inputs.safetensors has no tensor {name!r}")
            return backend.place(inputs[name], spec)
        return make

    positional = [rebuild(v, tensor_for(canonical_name(i))) for i, v in enumerate(call.get("positional", []))]
    keywords = {k: rebuild(v, tensor_for(k)) for k, v in call.get("args", {}).items()}
    skip = prepare_sglang_context(module, call.get("context"), getattr(backend, "device", "cpu"))
    if skip is not None:
        (case / RESULT_JSON).write_text(json.dumps({"skipped": skip}, indent=2))
        return f"skipped: {skip}"
    try:
        returned = function(*positional, **keywords)
    except Exception as exc:  # every exception is an outcome to compare, not a runner failure
        result = {"exception": type(exc).__name__, "message": str(exc),
                  "traceback": traceback.format_exc(limit=-3)}
        (case / RESULT_JSON).write_text(json.dumps(result, indent=2))
        return f"raised {type(exc).__name__}"
    if isinstance(returned, (tuple, list)):
        outputs = {"out": returned[0]}
        if len(returned) > 1:
            outputs["softmax_lse"] = returned[1]
    else:
        outputs = {"out": returned}
    new_k = keywords["k"] if "k" in keywords else (positional[3] if len(positional) > 3 else None)
    if new_k is not None:
        outputs["k_cache"] = keywords["k_cache"] if "k_cache" in keywords else positional[1]
        outputs["v_cache"] = keywords["v_cache"] if "v_cache" in keywords else positional[2]
    odd = {k: type(v).__name__ for k, v in outputs.items() if not backend.is_tensor(v)}
    if odd:
        (case / RESULT_JSON).write_text(json.dumps({"exception": None, "returned": odd}, indent=2))
        return f"returned non-tensors {odd}"
    backend.save(case / RESULT_TENSORS, outputs)
    return "returned"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True,
                        help=f"{', '.join(TARGETS)}, module.path:function or file.py:function")
    parser.add_argument("--bundles", required=True, type=Path,
                        help="a bundle folder or a folder of bundle folders")
    parser.add_argument("--device", default="musa", choices=["musa", "cuda", "cpu"],
                        help="where tensors go when call.json does not say cpu (default musa)")
    parser.add_argument("--backend", default="torch", choices=["torch", "numpy"],
                        help="array library tensors are built with (numpy: CPU-only test targets)")
    args = parser.parse_args(argv)
    cases = bundle_dirs(args.bundles) if args.bundles.is_dir() else []
    if not cases:
        print(f"error: no bundles under {args.bundles}", file=sys.stderr)
        return 2
    backend = (TorchBackend if args.backend == "torch" else NumpyBackend)(args.device)
    module, function = resolve_target(args.target)
    for i, case in enumerate(cases, 1):
        status = run_case(case, backend, module, function)
        print(f"[{i}/{len(cases)}] {case.name}: {status}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
