"""Hand-computed checks of the torch stand-in (the device of the torch tests)."""

import math
import unittest

import torch

from torch_target import flash_attn_with_kvcache


def t(values, dtype=torch.bfloat16):
    return torch.tensor(values, dtype=dtype)


class TorchTargetTest(unittest.TestCase):
    def test_one_query_two_keys(self):
        # q = 1, keys 0 and 1, scale 1: weights 1 : e, so out = (1 + 3e) / (1 + e), lse = log(1 + e).
        out, lse, *rest = flash_attn_with_kvcache(t([[[[1.0]]]]), t([[[[0.0]], [[1.0]]]]),
                                                  t([[[[1.0]], [[3.0]]]]), softmax_scale=1.0,
                                                  return_softmax_lse=True)
        e = math.e
        self.assertEqual((out.dtype, lse.dtype, len(rest)), (torch.bfloat16, torch.float32, 2))
        self.assertEqual(out[0, 0, 0, 0], torch.tensor((1 + 3 * e) / (1 + e)).to(torch.bfloat16))
        self.assertAlmostEqual(float(lse[0, 0, 0]), math.log(1 + e), places=6)

    def test_causal_rows_are_bottom_right_aligned_and_empty_rows_are_zero(self):
        cache = t([[[[2.0]]]])
        out, lse, *_ = flash_attn_with_kvcache(t([[[[1.0]], [[1.0]]]]), cache, cache, causal=True,
                                               return_softmax_lse=True)
        self.assertEqual(out[0, :, 0, 0].tolist(), [0.0, 2.0])
        self.assertEqual(lse[0, 0, 0], -math.inf)
        self.assertAlmostEqual(float(lse[0, 0, 1]), 2.0, places=6)

    def test_paged_append_writes_through_the_page_table(self):
        k_cache, v_cache = t([[[[0.0]]], [[[0.0]]]]), t([[[[0.0]]], [[[4.0]]]])
        out = flash_attn_with_kvcache(t([[[[0.0]]]]), k_cache, v_cache, k=t([[[[5.0]]]]),
                                      v=t([[[[8.0]]]]), cache_seqlens=t([1], torch.int32),
                                      page_table=t([[1, 0]], torch.int32))
        self.assertEqual((float(k_cache[0, 0, 0, 0]), float(v_cache[0, 0, 0, 0])), (5.0, 8.0))
        self.assertEqual(float(out[0, 0, 0, 0]), 6.0)

    def test_gqa_varlen_and_window(self):
        keys = [[[1.0]], [[0.0]], [[0.0]]]
        out = flash_attn_with_kvcache(t([[[0.0], [0.0]]] * 3), t([keys, keys]),
                                      t([[[[1.0]], [[2.0]], [[3.0]]]] * 2),
                                      cu_seqlens_q=t([0, 1, 3], torch.int32), max_seqlen_q=2,
                                      window_size=(0, 0))
        self.assertEqual(out[:, :, 0].tolist(), [[3.0, 3.0], [2.0, 2.0], [3.0, 3.0]])

    def test_a_sink_joins_the_denominator(self):
        out, lse, *_ = flash_attn_with_kvcache(t([[[[0.0]]]]), t([[[[1.0]]]]), t([[[[2.0]]]]),
                                               sinks=t([0.0]), return_softmax_lse=True)
        self.assertEqual(float(out[0, 0, 0, 0]), 1.0)
        self.assertAlmostEqual(float(lse[0, 0, 0]), math.log(2), places=6)

    def test_appended_keys_are_rotated_before_they_are_stored(self):
        k_cache, v_cache = t([[[[0.0, 0.0]]]]), t([[[[0.0, 0.0]]]])
        flash_attn_with_kvcache(t([[[[0.0, 0.0]]]]), k_cache, v_cache, k=t([[[[1.0, 2.0]]]]),
                                v=t([[[[3.0, 4.0]]]]), rotary_cos=t([[0.0]]), rotary_sin=t([[1.0]]),
                                cache_seqlens=t([0], torch.int32))
        self.assertEqual(k_cache[0, 0, 0].tolist(), [-2.0, 1.0])

    def test_the_wrapper_checks_raise_their_messages(self):
        q, cache = t([[[[1.0]]]]), t([[[[2.0]]]])
        with self.assertRaisesRegex(ValueError, r"^Only ver=3 is supported for MUSA FA3\.$"):
            flash_attn_with_kvcache(q, cache, cache, ver=2)
        strided = t([[[[2.0, 0.0]]]])[..., ::2]
        with self.assertRaisesRegex(AssertionError, "^k_cache must have contiguous last dimension$"):
            flash_attn_with_kvcache(q, strided, cache)
        fp8 = torch.zeros(1, 1, 1, 1, dtype=torch.float8_e4m3fn)
        with self.assertRaisesRegex(AssertionError, "^inputs must be float16 or bfloat16$"):
            flash_attn_with_kvcache(fp8, fp8, fp8, k_descale=torch.ones(1, 1).expand(1, 1))


if __name__ == "__main__":
    unittest.main()
