"""The runner: rebuilding call values, SGLang's wrapper state, exact target resolution, and a run
that outlives crashing and hanging cases (NumPy backend, hand-made bundles)."""

import json
import math
import os
import subprocess
import importlib.util
import sys
import tempfile
import textwrap
import types
import unittest
from pathlib import Path

import numpy as np

if importlib.util.find_spec("fa3conform") is None:  # a checkout; an installed wheel's copy wins
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from fa3conform import replay  # noqa: E402
from fa3conform.arrays import NumpyCodec, NumpyBackend  # noqa: E402
from fa3conform.targets import TargetError, resolve  # noqa: E402

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python"


class RebuildTest(unittest.TestCase):
    def test_values_come_back_as_the_caller_wrote_them(self):
        made = []
        value = replay.rebuild([1, {"list": [True, None]}, {"float": "-inf"}, {"tensor": {"shape": [1]}}],
                               lambda spec: made.append(spec) or "T")
        self.assertEqual(value[:2], (1, [True, None]))
        self.assertEqual(value[2], -math.inf)
        self.assertEqual((value[3], made), ("T", [{"shape": [1]}]))
        self.assertTrue(callable(replay.rebuild({"object": "callable"}, None)))
        self.assertEqual(replay.rebuild({"object": "dict"}, None), {})
        self.assertEqual(type(replay.rebuild({"object": "SimpleConfig"}, None)).__name__, "SimpleConfig")

    def test_numpy_scalars_come_back_with_their_type(self):
        value = replay.rebuild({"numpy": {"dtype": "int64", "value": 3}}, None)
        self.assertIs(type(value), np.int64)
        self.assertEqual(value, 3)
        value = replay.rebuild({"numpy": {"dtype": "float32", "value": {"float": "inf"}}}, None)
        self.assertIs(type(value), np.float32)
        self.assertEqual(value, np.inf)
        self.assertIs(type(replay.rebuild({"numpy": {"dtype": "bool", "value": True}}, None)), np.bool_)

    def test_positional_tensors_are_named_by_position_unless_that_name_is_a_keyword(self):
        self.assertEqual([replay.positional_name(i, {}) for i in (0, 3, 33, 34)], ["q", "k", "ver", "arg34"])
        self.assertEqual(replay.positional_name(0, {"q": None}), "arg0")


class StorageLayoutTest(unittest.TestCase):
    def test_expanded_tensors_are_views_of_their_storage(self):
        backend = NumpyBackend("cpu")
        storage = (np.array([0.5, 2.0], np.float32), "float32")
        descale = backend.place(storage, {"shape": [3, 2], "stride": [0, 1], "dtype": "float32"})
        self.assertEqual(descale.tolist(), [[0.5, 2.0]] * 3)
        self.assertEqual(descale.stride(), (0, 1))
        logical = (np.arange(6, dtype=np.float32).reshape(2, 3), "float32")
        padded = backend.place(logical, {"shape": [2, 3], "stride": [4, 1], "dtype": "float32"})
        self.assertEqual(padded.tolist(), [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(padded.stride(), (4, 1))


class SglangContextTest(unittest.TestCase):
    def wrapper_module(self):
        module = types.ModuleType("wrapper")
        module._CURRENT_BACKEND = object()
        module._MATE_NO_MLA_SCHEDULER_METADATA_DICT = {"forward_decode": "stale"}
        return module

    def test_null_context_means_no_backend(self):
        module = self.wrapper_module()
        self.assertIsNone(replay.prepare_sglang_context(module, {"sglang_backend": None}))
        self.assertIsNone(module._CURRENT_BACKEND)

    def test_backend_state_is_reproduced(self):
        module = self.wrapper_module()
        layer = {"layer_id": 3, "tp_q_head_num": 8, "tp_k_head_num": 2, "qk_head_dim": 128,
                 "v_head_dim": 128}
        context = {"sglang_backend": {"prefix": "forward_extend", "layer": layer, "pp_rank": 1,
                                      "pp_world_size": 2, "max_seqlen_k": 4096,
                                      "force_update_metadata": "1", "pp_layer_partition": "2,2"}}
        self.assertIsNone(replay.prepare_sglang_context(module, context))
        backend = module._CURRENT_BACKEND
        self.assertEqual((backend._current_prefix, backend._current_layer.layer_id), ("forward_extend", 3))
        self.assertEqual(backend._current_max_seqlen_k, 4096)
        self.assertEqual(module.get_pp_group().world_size, 2)
        self.assertEqual(module._MATE_NO_MLA_SCHEDULER_METADATA_DICT, {})
        self.assertEqual(os.environ.pop("SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA"), "1")
        self.assertEqual(os.environ.pop("SGLANG_PP_LAYER_PARTITION"), "2,2")

    def test_cached_metadata_cannot_be_reproduced(self):
        reason = replay.prepare_sglang_context(
            self.wrapper_module(), {"sglang_backend": {"cached_prefixes": ["forward_decode"]}})
        self.assertIn("cached_prefixes", reason)
        reason = replay.prepare_sglang_context(
            self.wrapper_module(),
            {"sglang_backend": {"cached_metadata": {"forward_decode": {"values": [1, 1, 0, 1]}}}})
        self.assertIn("cached_metadata", reason)

    def test_an_omitted_max_seqlen_k_is_sglangs_initial_zero(self):
        module = self.wrapper_module()
        self.assertIsNone(replay.prepare_sglang_context(module, {"sglang_backend": {}}))
        self.assertEqual(module._CURRENT_BACKEND._current_max_seqlen_k, 0)

    def test_targets_without_the_wrapper_state_ignore_it(self):
        self.assertIsNone(replay.prepare_sglang_context(types.ModuleType("m"), {"sglang_backend": {}}))


def fake_distribution(site: Path, name: str, version: str, modules: dict):
    """A site folder holding ``modules`` (file name -> source) installed by distribution ``name``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for file, source in modules.items():
        (site / file).write_text(source)
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in modules) + f"{info.name}/METADATA,,\n")


class TargetResolutionTest(unittest.TestCase):
    INTERFACE = "def flash_attn_with_kvcache(*args, **kwargs):\n    return 'called'\n"

    def resolve_in(self, site: Path, name: str):
        sys.path.insert(0, str(site))
        try:
            return resolve(name)
        finally:
            sys.path.remove(str(site))
            sys.modules.pop("flash_attn_interface", None)

    def test_mate_must_be_mates_wrapper(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp)
            fake_distribution(site, "flash_attn_3", "3.0.0", {"flash_attn_interface.py": self.INTERFACE})
            with self.assertRaises(TargetError) as raised:
                self.resolve_in(site, "mate")
            message = str(raised.exception)
            self.assertIn("target 'mate' needs flash_attn_interface from mate-flash-attention", message)
            self.assertIn("from flash_attn_3", message)
            self.assertNotIn("\n", message)
            resolved = self.resolve_in(site, "fa3")
            self.assertEqual(resolved.function(), "called")
            self.assertEqual((resolved.info["distribution"], resolved.info["version"]), ("flash_attn_3", "3.0.0"))

    def test_mates_wrapper_is_found_with_its_version(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp)
            fake_distribution(site, "mate-flash-attention", "0.1.3", {"flash_attn_interface.py": self.INTERFACE})
            resolved = self.resolve_in(site, "mate")
        self.assertEqual(resolved.info["version"], "0.1.3")
        self.assertTrue(resolved.info["file"].endswith("flash_attn_interface.py"))

    def test_a_missing_stack_says_what_to_install(self):
        with self.assertRaises(TargetError) as raised:
            resolve("sgl-kernel")
        self.assertEqual(str(raised.exception),
                         "target 'sgl-kernel' needs sgl-kernel (no module sgl_kernel here): "
                         "pip install sgl-kernel")


TARGET = textwrap.dedent("""
    import ctypes, os, time
    def flash_attn_with_kvcache(q, k_cache, v_cache, **kwargs):
        if q.shape[0] == 3:
            ctypes.string_at(0)          # a segfault, as a device fault ends a process
        if q.shape[0] == 4:
            time.sleep(60)               # a hang
        if q.shape[0] == 5:
            raise ValueError("five is rejected")
        return q * 2
""")


def write_bundle(root: Path, name: str, batch: int):
    case = root / name
    case.mkdir()
    shape = [batch, 1, 1, 8]
    call = {"id": name, "args": {name_: {"tensor": {"shape": shape, "dtype": "float32"}}
                                 for name_ in ("q", "k_cache", "v_cache")}}
    (case / "call.json").write_text(json.dumps(call))
    values = np.ones(shape, np.float32)
    NumpyCodec(np).write(case / "inputs.safetensors",
                         {n: (values, "float32") for n in ("q", "k_cache", "v_cache")})
    (case / "expected.json").write_text("{}")


class IsolationTest(unittest.TestCase):
    def run_runner(self, root: Path, *extra):
        (root / "target.py").write_text(TARGET)
        return subprocess.run(
            [sys.executable, "-m", "fa3conform.run", "--backend", "numpy", "--device", "cpu",
             "--target", f"{root / 'target.py'}:flash_attn_with_kvcache", "--bundles", str(root / "bundles"),
             "--timeout", "5", *extra],
            cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=120)

    def results(self, root: Path):
        return {p.parent.name: json.loads(p.read_text()) for p in (root / "bundles").glob("*/result.json")}

    def test_a_crash_or_a_hang_is_recorded_against_its_case_and_the_run_goes_on(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "bundles").mkdir()
            for name, batch in (("a-ok", 1), ("b-segfault", 3), ("c-ok", 2), ("d-hang", 4),
                                ("e-raises", 5), ("f-ok", 6)):
                write_bundle(root / "bundles", name, batch)
            done = self.run_runner(root)
            results = self.results(root)
            crash = results["b-segfault"]
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual({n: r["outcome"] for n, r in results.items()},
                             {"a-ok": "returned", "b-segfault": "crashed", "c-ok": "returned",
                              "d-hang": "timed_out", "e-raises": "raised", "f-ok": "returned"})
            self.assertEqual((crash["signal"], crash["signal_name"]), (11, "SIGSEGV"))
            self.assertIn("Fatal Python error: Segmentation fault", crash["stderr_tail"])
            self.assertEqual(results["d-hang"]["timeout_s"], 5)
            self.assertEqual(results["e-raises"]["message"], "five is rejected")
            ok = results["f-ok"]
            self.assertEqual(ok["returned"], {"tuple": False, "types": ["TypedArray"]})
            self.assertEqual(ok["runner"]["device_name"], "cpu (NumPy backend)")
            self.assertTrue(ok["runner"]["file"].endswith("target.py"))
            self.assertIn("[2/6] b-segfault: crashed (SIGSEGV)", done.stderr)
            self.assertIn("done: 1 crashed, 1 raised, 3 returned, 1 timed-out", done.stderr)

            # --resume runs only the cases without a result.
            (root / "bundles/c-ok/result.json").unlink()
            before = (root / "bundles/a-ok/result.json").stat().st_mtime_ns
            again = self.run_runner(root, "--resume")
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn("done: 5 kept, 1 returned", again.stderr)
            self.assertEqual((root / "bundles/a-ok/result.json").stat().st_mtime_ns, before)
            self.assertEqual(self.results(root)["c-ok"]["outcome"], "returned")

    def test_a_case_export_skipped_is_not_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "bundles").mkdir()
            write_bundle(root / "bundles", "a-ok", 1)
            skipped = root / "bundles/b-big"
            skipped.mkdir()
            (skipped / "call.json").write_text((root / "bundles/a-ok/call.json").read_text())
            (skipped / "expected.json").write_text(json.dumps({"skipped": "over the cap"}))
            done = self.run_runner(root)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("[2/2] b-big: skipped: not run, export skipped it (over the cap)",
                          done.stderr)
            self.assertEqual(list(self.results(root)), ["a-ok"])

    def test_a_target_that_cannot_be_loaded_stops_the_run_with_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "bundles").mkdir()
            write_bundle(root / "bundles", "a", 1)
            done = subprocess.run(
                [sys.executable, "-m", "fa3conform.run", "--backend", "numpy", "--device", "cpu",
                 "--target", "sgl-kernel", "--bundles", str(root / "bundles")],
                cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr, "error: target 'sgl-kernel' needs sgl-kernel (no module "
                                      "sgl_kernel here): pip install sgl-kernel\n")


if __name__ == "__main__":
    unittest.main()
