"""Hand-computed checks of the NumPy target and of the runner's NumPy safetensors codec."""

import math
import importlib.util
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

if importlib.util.find_spec("fa3conform") is None:  # a checkout; an installed wheel's copy wins
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from fa3conform import arrays  # noqa: E402
import musa_wrapper_target  # noqa: E402
from numpy_target import flash_attn_with_kvcache  # noqa: E402

TypedArray = arrays.typed_array_class(np)


def tensor(values, dtype="bfloat16"):
    array = np.array(values, dtype=np.float32 if dtype in ("bfloat16", "float16") else np.int32)
    array = array.view(TypedArray)
    array.torch_dtype = dtype
    return array


class AttentionTest(unittest.TestCase):
    def test_one_query_two_keys(self):
        # q = 1, keys 0 and 1, scale 1: weights 1 : e, so out = (1 + 3e) / (1 + e), lse = log(1 + e).
        q = tensor([[[[1.0]]]])
        k_cache = tensor([[[[0.0]], [[1.0]]]])
        v_cache = tensor([[[[1.0]], [[3.0]]]])
        out, lse, *_ = flash_attn_with_kvcache(q, k_cache, v_cache, softmax_scale=1.0,
                                               return_softmax_lse=True)
        e = math.e
        self.assertEqual(out.torch_dtype, "bfloat16")
        self.assertAlmostEqual(float(out[0, 0, 0, 0]), (1 + 3 * e) / (1 + e), places=2)
        self.assertAlmostEqual(float(lse[0, 0, 0]), math.log(1 + e), places=6)

    def test_causal_rows_are_bottom_right_aligned_and_empty_rows_are_zero(self):
        # Two queries, one key: row 0 sees nothing (out 0, lse -inf), row 1 sees the key.
        q = tensor([[[[1.0]], [[1.0]]]])
        cache = tensor([[[[2.0]]]])
        out, lse, *_ = flash_attn_with_kvcache(q, cache, cache, causal=True,
                                               return_softmax_lse=True)
        self.assertEqual(out[0, :, 0, 0].tolist(), [0.0, 2.0])
        self.assertEqual(lse[0, 0, 0], -np.inf)
        self.assertAlmostEqual(float(lse[0, 0, 1]), 2.0, places=6)

    def test_paged_append_writes_through_the_page_table(self):
        # Pages of 1 token; sequence order is page 1 then page 0. One old key, one appended.
        q = tensor([[[[0.0]]]])
        k_cache, v_cache = tensor([[[[0.0]]], [[[0.0]]]]), tensor([[[[0.0]]], [[[4.0]]]])
        out = flash_attn_with_kvcache(
            q, k_cache, v_cache, k=tensor([[[[5.0]]]]), v=tensor([[[[8.0]]]]),
            cache_seqlens=tensor([1], "int32"), page_table=tensor([[1, 0]], "int32"))
        self.assertEqual((k_cache[0, 0, 0, 0], v_cache[0, 0, 0, 0]), (5.0, 8.0))
        # q = 0: equal weights over the old value 4 and the new value 8.
        self.assertEqual(out[0, 0, 0, 0], 6.0)

    def test_gqa_varlen_and_window(self):
        # Two query heads share one KV head; sequence 0 has 1 query, sequence 1 has 2.
        keys = [[[1.0]], [[0.0]], [[0.0]]]
        cache = tensor([keys, keys])
        values = tensor([[[[1.0]], [[2.0]], [[3.0]]]] * 2)
        q = tensor([[[0.0], [0.0]]] * 3)
        out = flash_attn_with_kvcache(q, cache, values, cu_seqlens_q=tensor([0, 1, 3], "int32"),
                                      max_seqlen_q=2, window_size=(0, 0))
        # A window of (0, 0) leaves each row exactly its aligned key: rows see keys 2, 1, 2.
        self.assertEqual(out[:, :, 0].tolist(), [[3.0, 3.0], [2.0, 2.0], [3.0, 3.0]])

    def test_a_sink_joins_the_denominator(self):
        # q = 0: one key of weight e^0 and a sink of e^0, so out = v / 2 and lse = log 2.
        q, k_cache, v_cache = tensor([[[[0.0]]]]), tensor([[[[1.0]]]]), tensor([[[[2.0]]]])
        out, lse, *_ = flash_attn_with_kvcache(q, k_cache, v_cache, sinks=tensor([0.0]),
                                               return_softmax_lse=True)
        self.assertEqual(out[0, 0, 0, 0], 1.0)
        self.assertAlmostEqual(float(lse[0, 0, 0]), math.log(2), places=6)

    def test_appended_keys_are_rotated_before_they_are_stored(self):
        # cos 0, sin 1 turns (x0, x1) into (-x1, x0): the new key (1, 2) is stored as (-2, 1).
        q = tensor([[[[0.0, 0.0]]]])
        k_cache, v_cache = tensor([[[[0.0, 0.0]]]]), tensor([[[[0.0, 0.0]]]])
        flash_attn_with_kvcache(q, k_cache, v_cache, k=tensor([[[[1.0, 2.0]]]]),
                                v=tensor([[[[3.0, 4.0]]]]), rotary_cos=tensor([[0.0]]),
                                rotary_sin=tensor([[1.0]]), cache_seqlens=tensor([0], "int32"))
        self.assertEqual(k_cache[0, 0, 0].tolist(), [-2.0, 1.0])
        self.assertEqual(v_cache[0, 0, 0].tolist(), [3.0, 4.0])

    def test_wrapper_stand_in_raises_the_wrapper_errors(self):
        q, cache = tensor([[[[1.0]]]]), tensor([[[[2.0]]]])
        with self.assertRaises(ValueError) as raised:
            musa_wrapper_target.flash_attn_with_kvcache(q, cache, cache, ver=2)
        self.assertEqual(str(raised.exception), "Only ver=3 is supported for MUSA FA3.")
        with self.assertRaises(TypeError) as raised:
            musa_wrapper_target.flash_attn_with_kvcache(q, cache, cache, fa_version=3)
        self.assertEqual(str(raised.exception),
                         "flash_attn_with_kvcache() got an unexpected keyword argument 'fa_version'")


class CodecTest(unittest.TestCase):
    def test_written_files_open_with_safetensors(self):
        codec = arrays.NumpyCodec(np)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t.safetensors"
            codec.write(path, {"seqlens": (np.array([3, 4], np.int32), "int32"),
                               "lse": (np.array([[0.5, -np.inf]], np.float32), "float32"),
                               "out": (np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8]), "bfloat16")})
            from safetensors import safe_open  # BF16 has no NumPy dtype: read the others
            with safe_open(str(path), framework="numpy") as f:
                self.assertEqual(sorted(f.keys()), ["lse", "out", "seqlens"])
                self.assertEqual(f.get_tensor("seqlens").tolist(), [3, 4])
                self.assertEqual(f.get_tensor("lse").tolist(), [[0.5, -math.inf]])
            back = codec.read(path)
        # Round to nearest even: 1 + 2^-8 ties down to 1, 1 + 3 * 2^-8 ties up to 1 + 2^-6.
        self.assertEqual(back["out"][0].tolist(), [1.0, 1.015625])
        self.assertEqual(back["out"][1], "bfloat16")


if __name__ == "__main__":
    unittest.main()
