"""Array backends of the runner: how a bundle's tensors are loaded, placed and saved.

``TorchBackend`` builds torch tensors on the runner's device; ``NumpyBackend`` needs only NumPy and
serves CPU test targets (``TypedArray``: NumPy arrays that keep their torch dtype name).

A stored tensor whose shape is the call's shape holds the logical values (row-major) and is copied
into a tensor with the call's strides. One whose shape differs holds the *storage* of a layout that
maps several elements to one memory location (``expand``'s stride 0, overlapping strides): a 1-D
tensor of the layout's extent, which the call's tensor is a strided view of.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def contiguous_strides(shape):
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return list(reversed(strides))


def layout(spec: dict):
    """(shape, strides) of a call.json tensor."""
    shape = list(spec["shape"])
    return shape, list(spec.get("stride") or contiguous_strides(shape))


def extent(shape, stride) -> int:
    """Elements of storage a strided layout spans."""
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0




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
        shape, stride = layout(spec)
        if list(stored.shape) != shape:  # the storage of an aliasing layout
            return self.torch.as_strided(stored.to(device), shape, stride)
        tensor = self.torch.empty_strided(shape, stride, dtype=stored.dtype, device=device)
        tensor.copy_(stored)
        return tensor

    def device_name(self) -> str:
        if self.device == "cpu":
            return "cpu"
        return getattr(self.torch, self.device).get_device_name()

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
        shape, stride = layout(spec)
        if list(values.shape) != shape:  # the storage of an aliasing layout
            buffer = values.reshape(-1).copy()
        else:
            buffer = np.zeros(extent(shape, stride), dtype=values.dtype)
        view = np.lib.stride_tricks.as_strided(
            buffer, shape=shape, strides=[s * values.itemsize for s in stride])
        if list(values.shape) == shape:
            view[...] = values
        array = view.view(self.TypedArray)
        array.torch_dtype = torch_dtype
        return array

    def device_name(self) -> str:
        return "cpu (NumPy backend)"

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
BACKENDS = {"torch": TorchBackend, "numpy": NumpyBackend}
