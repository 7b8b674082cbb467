"""Records calls made with fake tensors through a fake entry point; used by test_record.py and by
the Rust test that parses the recorded lines (tests/bridge_python.rs).

    python3 tests/python/record_fakes.py OUT.jsonl
"""

import math
import importlib.util
import sys
import types
from pathlib import Path

if importlib.util.find_spec("fa3conform") is None:  # a checkout; an installed wheel's copy wins
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from fa3conform import record as fa3conform_record  # noqa: E402
from fa3conform.entry_points import EntryPoint  # noqa: E402

FAKE_ENTRY = EntryPoint("fake_fa3", "flash_attn_with_kvcache", "a fake stack")


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class FakeTensor:
    """What the recorder may touch: shape, dtype, stride(), device, and tolist() for int tensors."""

    def __init__(self, shape, dtype, device="cuda:0", stride=None, values=None):
        self.shape = tuple(shape)
        self.dtype = FakeDtype(dtype)
        self.device = device
        self._stride = stride or tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
        self._values = values
        self.reads = 0

    def stride(self):
        return self._stride

    def tolist(self):
        if self._values is None:
            raise AssertionError("the recorder read the data of a tensor it must not read")
        self.reads += 1
        return self._values

    def reshape(self, *shape):
        flat = FakeTensor((math.prod(self.shape),), str(self.dtype).removeprefix("torch."),
                          self.device, values=None if self._values is None else _flat(self._values))
        flat.tolist = self.tolist  # reads count on the tensor the caller passed
        return flat


def _flat(values):
    return [x for v in values for x in _flat(v)] if isinstance(values, list) else [values]


def fake_module():
    module = types.ModuleType("fake_fa3")
    module.calls = []

    def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, **kwargs):
        module.calls.append((q, k_cache, v_cache, k, kwargs))
        return "out"

    module.flash_attn_with_kvcache = flash_attn_with_kvcache
    sys.modules["fake_fa3"] = module
    return module


def decode_call(module, seqlens):
    q = FakeTensor((2, 1, 8, 128), "bfloat16")
    # A cache whose last dimension is contiguous but whose rows are padded (stride 2048 per token).
    k_cache = FakeTensor((16, 64, 2, 128), "bfloat16", stride=(131072, 2048, 128, 1))
    v_cache = FakeTensor((16, 64, 2, 128), "bfloat16")
    return module.flash_attn_with_kvcache(
        q, k_cache, v_cache,
        cache_seqlens=FakeTensor((2,), "int32", values=seqlens),
        page_table=FakeTensor((2, 8), "int32", values=[[i + 8 * b for i in range(8)] for b in range(2)]),
        cache_leftpad=FakeTensor((2,), "int32", device="cpu", values=[0, 0]),
        softmax_scale=float("inf"), causal=True, window_size=(-1, 0), pack_gqa=[True],
        score_mod=lambda s: s, return_softmax_lse=True, ver=3,
    )


def record(path):
    module = fake_module()
    wrapped = fa3conform_record.install(path, entry_points=[FAKE_ENTRY])
    assert wrapped == ["fake_fa3:flash_attn_with_kvcache"], wrapped
    results = [decode_call(module, [5, 9]), decode_call(module, [6, 10])]  # same signature
    results.append(module.flash_attn_with_kvcache(
        FakeTensor((3, 8, 128), "float16"), FakeTensor((4, 16, 8, 128), "float16"),
        FakeTensor((4, 16, 8, 128), "float16"), None,
        cu_seqlens_q=FakeTensor((2,), "int32", values=[0, 3]), max_seqlen_q=3,
        cache_seqlens=FakeTensor((70000,), "int32")))  # over the value cap: metadata only
    return module, results


if __name__ == "__main__":
    record(sys.argv[1])
