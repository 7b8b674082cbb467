"""The recorder with fake tensors (no torch): signatures, values, entry points, capture, labels."""

import json
import os
import subprocess
import sys
import tempfile
import types
import unittest
import warnings
from pathlib import Path

import numpy as np

import record_fakes
from record_fakes import FAKE_ENTRY, FakeTensor
from fa3conform import record
from fa3conform.entry_points import EntryPoint, wrap_entry_points

REPO = Path(__file__).resolve().parents[2]


def read_lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def small_call(module, **extra):
    return module.flash_attn_with_kvcache(FakeTensor((1, 1, 1, 8), "bfloat16"),
                                          FakeTensor((1, 4, 1, 8), "bfloat16"),
                                          FakeTensor((1, 4, 1, 8), "bfloat16"), **extra)


class RecorderTest(unittest.TestCase):
    def test_records_each_signature_once_and_calls_the_original(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            module, results = record_fakes.record(path)
            lines = read_lines(path)
        self.assertEqual(results, ["out", "out", "out"])
        self.assertEqual(len(module.calls), 3)
        self.assertEqual(len(lines), 2, "the second decode differs only in int values")
        decode, varlen = lines
        self.assertEqual(decode["id"], f"pid{os.getpid()}-1")
        self.assertEqual(varlen["id"], f"pid{os.getpid()}-2")
        self.assertEqual(decode["recorded"], {"entry": "fake_fa3:flash_attn_with_kvcache"})
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

    def test_values_are_read_once_per_signature(self):
        module = record_fakes.fake_module()
        seqlens = [FakeTensor((2,), "int32", values=[3, n]) for n in range(5)]
        with tempfile.TemporaryDirectory() as tmp:
            record.install(Path(tmp) / "calls.jsonl", entry_points=[FAKE_ENTRY])
            for t in seqlens:
                small_call(module, cache_seqlens=t)
        self.assertEqual([t.reads for t in seqlens], [1, 0, 0, 0, 0])

    def test_numpy_scalars_and_0d_tensors_keep_value_and_type(self):
        module = record_fakes.fake_module()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            record.install(path, entry_points=[FAKE_ENTRY])
            small_call(module, max_seqlen_q=np.int64(3), softcap=np.float32(0.5),
                       causal=np.bool_(True), softmax_scale=np.float64("inf"),
                       sm_margin=FakeTensor((), "int64", values=7),
                       q_descale=FakeTensor((), "float32", values=0.25))
            args = read_lines(path)[0]["args"]
        self.assertEqual(args["max_seqlen_q"], {"numpy": {"dtype": "int64", "value": 3}})
        self.assertEqual(args["softcap"], {"numpy": {"dtype": "float32", "value": 0.5}})
        self.assertEqual(args["causal"], {"numpy": {"dtype": "bool", "value": True}})
        self.assertEqual(args["softmax_scale"], {"numpy": {"dtype": "float64", "value": {"float": "inf"}}})
        self.assertEqual(args["sm_margin"]["tensor"], {"shape": [], "dtype": "int64", "stride": [],
                                                       "values": [7]})
        self.assertEqual(args["q_descale"]["tensor"]["values"], [0.25])

    def test_no_values_are_read_during_graph_capture(self):
        module = record_fakes.fake_module()
        capturing = [True]
        fake_cuda = types.SimpleNamespace(is_initialized=lambda: True,
                                          is_current_stream_capturing=lambda: capturing[0])
        sys.modules["torch"] = types.SimpleNamespace(cuda=fake_cuda)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "calls.jsonl"
                record.install(path, entry_points=[FAKE_ENTRY])
                captured = FakeTensor((2,), "int32")  # reading it would raise
                small_call(module, cache_seqlens=captured)
                small_call(module, cache_seqlens=captured)  # same signature, still capturing
                capturing[0] = False
                small_call(module, cache_seqlens=FakeTensor((2,), "int32", values=[4, 5]))
                small_call(module, cache_seqlens=FakeTensor((2,), "int32", values=[6, 7]))
                lines = read_lines(path)
        finally:
            del sys.modules["torch"]
        self.assertEqual(len(lines), 2, "one line in capture, one with values after it")
        self.assertEqual(lines[0]["recorded"]["values_skipped"],
                         "CUDA graph capture: tensor values were not read")
        self.assertNotIn("values", lines[0]["args"]["cache_seqlens"]["tensor"])
        self.assertEqual(lines[1]["args"]["cache_seqlens"]["tensor"]["values"], [4, 5])
        self.assertNotIn("values_skipped", lines[1]["recorded"])

    def test_nested_entry_points_record_only_the_outer_call(self):
        inner = record_fakes.fake_module()

        def outer(*args, **kwargs):
            return inner.flash_attn_with_kvcache(*args, **kwargs)

        inner.outer = outer
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            record.install(path, entry_points=[FAKE_ENTRY, EntryPoint("fake_fa3", "outer", "outer")])
            small_call(types.SimpleNamespace(flash_attn_with_kvcache=inner.outer), ver=3)
            lines = read_lines(path)
        self.assertEqual(len(lines), 1)
        self.assertEqual(lines[0]["recorded"]["entry"], "fake_fa3:outer")
        self.assertEqual(lines[0]["args"], {"ver": 3}, "the outer call's arguments, ver included")
        self.assertEqual(len(inner.calls), 1)

    def test_install_that_wraps_nothing_warns(self):
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            wrapped = record.install(Path(tmp) / "calls.jsonl",
                                     entry_points=[EntryPoint("no_such_stack", "f", "none")])
        self.assertEqual(wrapped, [])
        self.assertEqual(len(caught), 1)
        self.assertIn("wrapped no entry point", str(caught[0].message))
        self.assertIn("no_such_stack:f: import no_such_stack", str(caught[0].message))

    def test_entry_points_imported_later_are_wrapped_on_import(self):
        seen = []
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "late_stack.py").write_text(
                "def flash_attn_with_kvcache(q, k_cache, v_cache, **kw):\n    return 'late'\n")
            sys.path.insert(0, tmp)
            wrapping = wrap_entry_points(lambda entry, args, kwargs: seen.append((entry, args)),
                                         [EntryPoint("late_stack", "flash_attn_with_kvcache", "late")])
            try:
                self.assertEqual(wrapping.wrapped, [])
                from late_stack import flash_attn_with_kvcache  # bound after the import hook ran
                self.assertEqual(flash_attn_with_kvcache(1, 2, 3), "late")
            finally:
                wrapping.uninstall()
                sys.path.remove(tmp)
                sys.modules.pop("late_stack", None)
        self.assertEqual(seen, [("late_stack:flash_attn_with_kvcache", (1, 2, 3))])
        self.assertEqual(wrapping.wrapped, ["late_stack:flash_attn_with_kvcache"])

    def test_process_labels_name_parallel_ranks(self):
        pid = os.getpid()
        self.assertEqual(record.process_label(), f"pid{pid}")
        group = types.SimpleNamespace(rank_in_group=1)
        state = types.SimpleNamespace(get_tensor_model_parallel_rank=lambda: 3, get_pp_group=lambda: group)
        sys.modules["sglang.srt.distributed.parallel_state"] = state
        try:
            self.assertEqual(record.process_label(), f"tp3-pp1-pid{pid}")
        finally:
            del sys.modules["sglang.srt.distributed.parallel_state"]


class LauncherTest(unittest.TestCase):
    def test_every_python_child_records_into_its_own_file(self):
        """Children started with the spawn method (as SGLang starts its schedulers) record too."""
        script = (
            "import multiprocessing as mp, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "def work(n):\n"
            "    import record_fakes\n"
            "    from record_fakes import FakeTensor\n"
            "    sys.modules.pop('fake_stack', None)\n"
            "    import fake_stack\n"
            "    fake_stack.flash_attn_with_kvcache(FakeTensor((n, 1, 1, 8), 'bfloat16'),\n"
            "        FakeTensor((n, 4, 1, 8), 'bfloat16'), FakeTensor((n, 4, 1, 8), 'bfloat16'))\n"
            "if __name__ == '__main__':\n"
            "    ctx = mp.get_context('spawn')\n"
            "    workers = [ctx.Process(target=work, args=(n,)) for n in (1, 2)]\n"
            "    [w.start() for w in workers]; [w.join() for w in workers]\n"
            "    sys.exit(max(w.exitcode for w in workers))\n")
        with tempfile.TemporaryDirectory() as tmp:
            stack = Path(tmp) / "stack"
            stack.mkdir()
            (stack / "fake_stack.py").write_text(
                "def flash_attn_with_kvcache(q, k_cache, v_cache, **kw):\n    return None\n")
            (stack / "server.py").write_text(script)
            env = dict(os.environ, PYTHONPATH=str(stack))
            done = subprocess.run(
                [sys.executable, "-m", "fa3conform.record", "--out", str(Path(tmp) / "calls"),
                 "--entry-point", "fake_stack:flash_attn_with_kvcache", "--",
                 sys.executable, str(stack / "server.py"), str(Path(__file__).resolve().parent)],
                env=env, cwd=REPO / "python",
                capture_output=True, text=True)
            files = sorted((Path(tmp) / "calls").glob("calls-*.jsonl"))
            lines = [read_lines(f) for f in files]
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(files), 2, done.stderr)
        self.assertEqual(sorted(len(f) for f in lines), [1, 1])
        self.assertEqual(sorted(f[0]["args"] == {} and f[0]["positional"][0]["tensor"]["shape"][0]
                                for f in lines), [1, 2])
        self.assertIn("2 distinct calls in 2 files", done.stderr)


if __name__ == "__main__":
    unittest.main()
