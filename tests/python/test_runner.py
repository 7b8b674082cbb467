"""The runner's rebuilding of call values and of SGLang's MUSA wrapper state."""

import math
import os
import sys
import types
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "drivers"))
import fa3conform_run as run  # noqa: E402


class RebuildTest(unittest.TestCase):
    def test_values_come_back_as_the_caller_wrote_them(self):
        made = []
        value = run.rebuild([1, {"list": [True, None]}, {"float": "-inf"}, {"tensor": {"shape": [1]}}],
                            lambda spec: made.append(spec) or "T")
        self.assertEqual(value[:2], (1, [True, None]))
        self.assertEqual(value[2], -math.inf)
        self.assertEqual((value[3], made), ("T", [{"shape": [1]}]))
        self.assertTrue(callable(run.rebuild({"object": "callable"}, None)))
        self.assertEqual(run.rebuild({"object": "dict"}, None), {})
        self.assertEqual(type(run.rebuild({"object": "SimpleConfig"}, None)).__name__, "SimpleConfig")
        self.assertEqual([run.canonical_name(i) for i in (0, 3, 33, 34)], ["q", "k", "ver", "arg34"])


class SglangContextTest(unittest.TestCase):
    def wrapper_module(self):
        module = types.ModuleType("wrapper")
        module._CURRENT_BACKEND = object()
        module._MATE_NO_MLA_SCHEDULER_METADATA_DICT = {"forward_decode": "stale"}
        return module

    def test_null_context_means_no_backend(self):
        module = self.wrapper_module()
        self.assertIsNone(run.prepare_sglang_context(module, {"sglang_backend": None}))
        self.assertIsNone(module._CURRENT_BACKEND)

    def test_backend_state_is_reproduced(self):
        module = self.wrapper_module()
        layer = {"layer_id": 3, "tp_q_head_num": 8, "tp_k_head_num": 2, "qk_head_dim": 128,
                 "v_head_dim": 128}
        context = {"sglang_backend": {"prefix": "forward_extend", "layer": layer, "pp_rank": 1,
                                      "pp_world_size": 2, "max_seqlen_k": 4096,
                                      "force_update_metadata": "1", "pp_layer_partition": "2,2"}}
        self.assertIsNone(run.prepare_sglang_context(module, context))
        backend = module._CURRENT_BACKEND
        self.assertEqual((backend._current_prefix, backend._current_layer.layer_id), ("forward_extend", 3))
        self.assertEqual(backend._current_max_seqlen_k, 4096)
        self.assertEqual(module.get_pp_group().world_size, 2)
        self.assertEqual(module._MATE_NO_MLA_SCHEDULER_METADATA_DICT, {})
        self.assertEqual(os.environ.pop("SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA"), "1")
        self.assertEqual(os.environ.pop("SGLANG_PP_LAYER_PARTITION"), "2,2")

    def test_cached_metadata_cannot_be_reproduced(self):
        reason = run.prepare_sglang_context(
            self.wrapper_module(), {"sglang_backend": {"cached_prefixes": ["forward_decode"]}})
        self.assertIn("cached_prefixes", reason)

    def test_targets_without_the_wrapper_state_ignore_it(self):
        self.assertIsNone(run.prepare_sglang_context(types.ModuleType("m"), {"sglang_backend": {}}))


if __name__ == "__main__":
    unittest.main()
