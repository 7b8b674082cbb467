import json
import tempfile
import unittest
from pathlib import Path

import record_fakes


class RecorderTest(unittest.TestCase):
    def test_records_each_signature_once_and_calls_the_original(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            module, results = record_fakes.record(path)
            lines = [json.loads(line) for line in path.read_text().splitlines()]
        self.assertEqual(results, ["out", "out", "out"])
        self.assertEqual(len(module.calls), 3)
        self.assertEqual(len(lines), 2, "the second decode differs only in int values")
        decode, varlen = lines
        self.assertEqual(decode["id"], "fake_fa3#1")
        self.assertEqual(decode["positional"][1]["tensor"],
                         {"shape": [16, 64, 2, 128], "dtype": "bfloat16", "stride": [131072, 2048, 128, 1]})
        args = decode["args"]
        self.assertEqual(args["cache_seqlens"]["tensor"]["values"], [5, 9])
        self.assertEqual(args["page_table"]["tensor"]["values"], list(range(16)))
        self.assertEqual(args["cache_leftpad"]["tensor"]["device"], "cpu")
        self.assertEqual(args["softmax_scale"], {"float": "inf"})
        self.assertEqual(args["window_size"], [-1, 0])
        self.assertEqual(args["pack_gqa"], {"list": [True]})
        self.assertEqual(args["score_mod"], {"object": "function"})
        self.assertEqual(list(args), ["cache_seqlens", "page_table", "cache_leftpad", "softmax_scale",
                                      "causal", "window_size", "pack_gqa", "score_mod",
                                      "return_softmax_lse", "ver"])
        self.assertIsNone(varlen["positional"][3])
        self.assertNotIn("values", varlen["args"]["cache_seqlens"]["tensor"])

    def test_nested_entry_points_record_only_the_outer_call(self):
        import fa3conform_record
        inner = record_fakes.fake_module()
        outer_calls = []

        def outer(*args, **kwargs):
            outer_calls.append(1)
            return inner.flash_attn_with_kvcache(*args, **kwargs)

        inner.outer = outer
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            fa3conform_record.install(path, entry_points=[("fake_fa3", "flash_attn_with_kvcache"),
                                                          ("fake_fa3", "outer")])
            inner.outer(record_fakes.FakeTensor((1, 1, 1, 8), "bfloat16"),
                        record_fakes.FakeTensor((1, 4, 1, 8), "bfloat16"),
                        record_fakes.FakeTensor((1, 4, 1, 8), "bfloat16"))
            lines = path.read_text().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertTrue(json.loads(lines[0])["id"].startswith("fake_fa3#"))
        self.assertEqual(len(inner.calls), 1)


if __name__ == "__main__":
    unittest.main()
