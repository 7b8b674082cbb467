"""The pytest plugin against a small fake CUDA test suite (``fake_suite/``: tests calling a NumPy
stand-in of SGLang's flash_attn_with_kvcache), each run in a fresh pytest process.

The plugin and binary come from the installed wheel, or, in a checkout, from ``PYTHONPATH``
(``python/``, loaded with ``-p``) and ``FA3CONFORM_BINARY``. ``FA3CONFORM_EXPECT_WHEEL=1`` (CI's
wheel step) makes the first test require the wheel's ``pytest11`` entry point.
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

FAKE_SUITE = Path(__file__).resolve().parent / "fake_suite"
CALL_IDS = "test_attention.py::test_"

# The facts the findings state: sglang 082898472f python/sglang/srt/hardware_backend/musa/
# attention/flashattention_backend.py raises this for ver != 3 (docs/spec, musa.W-1); mate enables
# softcapping for any softcap != 0.0 (H-MUSA-SOFTCAP-NEGATIVE, the registry's message).
VER2 = "rejected: ValueError: Only ver=3 is supported for MUSA FA3."
SOFTCAP = ("changed: H-MUSA-SOFTCAP-NEGATIVE: softcap=-1.0 enables softcapping on MUSA "
           "(softcap != 0.0); upstream ignores softcap <= 0")


def plugin_installed() -> bool:
    return any(e.name == "fa3conform" and e.value == "fa3conform.pytest_plugin"
               for e in importlib.metadata.entry_points(group="pytest11"))


@pytest.fixture
def run(pytester):
    """Runs pytest on a copy of the fake suite with ``args``; the plugin loaded as installed."""
    for path in FAKE_SUITE.rglob("*.py"):
        target = pytester.path / path.relative_to(FAKE_SUITE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    load = [] if plugin_installed() else ["-p", "fa3conform.pytest_plugin"]

    def run(*args):
        return pytester.runpytest_subprocess(*load, "-p", "no:cacheprovider", *args)

    return run


def properties(junit: Path) -> dict:
    """Test name -> its (name, value) properties, from a JUnit XML report."""
    tree = ET.parse(junit)
    return {case.get("name"): [(p.get("name"), p.get("value"))
                               for p in case.iter("property")]
            for case in tree.iter("testcase")}


def test_the_wheel_registers_the_plugin_when_installed():
    if os.environ.get("FA3CONFORM_EXPECT_WHEEL") == "1":
        assert plugin_installed(), "the installed wheel has no pytest11 entry point fa3conform"
    else:
        # In a checkout the tests load the plugin with -p; its module must import on its own.
        import fa3conform.pytest_plugin  # noqa: F401


def test_findings_are_reported_per_test(run, pytester):
    result = run("--fa3conform", "musa", "--junitxml", "report.xml")
    result.assert_outcomes(passed=6)
    summary = result.stdout.str().split("fa3conform: flash_attn_with_kvcache on musa")[1]
    lines = [line.rstrip() for line in summary.splitlines()]
    assert lines[1:6] == [
        "test_attention.py::test_decode_with_ver2",
        f"  {VER2} [call {CALL_IDS}decode_with_ver2#1]",
        "test_attention.py::test_negative_softcap_means_none",
        f"  {SOFTCAP} [call {CALL_IDS}negative_softcap_means_none#1]",
        # 5 distinct calls: test_decode's call is made again by the softcap test, and the two
        # softmax_scale cases differ (0.5, and None given explicitly).
        "5 distinct calls in 5 tests: 1 changed, 1 rejected; 2 tests affected",
    ], summary
    found = properties(pytester.path / "report.xml")
    assert found["test_decode_with_ver2"] == [
        ("fa3conform.musa.rejected", f"{CALL_IDS}decode_with_ver2#1: {VER2.split(': ', 1)[1]}")]
    assert found["test_negative_softcap_means_none"] == [
        ("fa3conform.musa.changed",
         f"{CALL_IDS}negative_softcap_means_none#1: {SOFTCAP.split(': ', 1)[1]}")]
    for clean in ["test_decode", "test_softmax_scale[0.5]", "test_softmax_scale[None]",
                  "test_no_attention"]:
        assert found[clean] == [], clean


def test_other_stacks_have_other_findings(run):
    # sgl-kernel is the CUDA stack the suite was written for: ver=2 selects FA2 there, and a
    # negative softcap is no softcap; nothing is rejected or changed.
    result = run("--fa3conform", "sgl-kernel")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["5 distinct calls in 5 tests: none rejected or changed; "
                                 "0 tests affected"])


def test_strict_mode_fails_exactly_the_tests_with_findings(run):
    result = run("--fa3conform", "musa", "--fa3conform-strict")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines([
        "FAILED test_attention.py::test_decode_with_ver2*",
        "FAILED test_attention.py::test_negative_softcap_means_none*",
    ])
    result.stdout.fnmatch_lines([
        "*fa3conform --fa3conform-strict: musa would not run this test's "
        "flash_attn_with_kvcache calls as written:",
        f"  {VER2} [call {CALL_IDS}decode_with_ver2#1]",
    ])


def test_recorded_calls_certify_the_same_way(run, pytester):
    result = run("--fa3conform", "musa", "--fa3conform-record", "calls")
    result.assert_outcomes(passed=6)
    recorded = pytester.path / "calls" / "calls-pytest-main.jsonl"
    specs = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert [s["id"] for s in specs] == [
        f"{CALL_IDS}decode#1", f"{CALL_IDS}decode_with_ver2#1",
        f"{CALL_IDS}negative_softcap_means_none#1", f"{CALL_IDS}softmax_scale[0.5]#1",
        f"{CALL_IDS}softmax_scale[None]#1"]
    assert specs[0]["args"]["cache_seqlens"]["tensor"]["values"] == [100, 300]
    from fa3conform.binary import find_binary
    certified = subprocess.run([find_binary(), "certify", str(recorded.parent), "--profile",
                                "musa", "--format", "json"], capture_output=True, text=True)
    assert certified.returncode == 1, certified.stderr
    verdicts = {c["id"]: c["certified"] for c in json.loads(certified.stdout)["calls"]}
    assert [id for id, ok in verdicts.items() if not ok] == [
        f"{CALL_IDS}decode_with_ver2#1", f"{CALL_IDS}negative_softcap_means_none#1"]


def test_nothing_happens_without_the_option(run, pytester):
    result = run("--junitxml", "report.xml")
    result.assert_outcomes(passed=6)
    # The header names the installed plugin ("plugins: fa3conform-0.1.0"); nothing else may.
    assert "fa3conform:" not in result.stdout.str()
    assert "flash_attn_with_kvcache" not in result.stdout.str()
    assert all(p == [] for p in properties(pytester.path / "report.xml").values())


def test_a_missing_binary_is_a_usage_error(run, monkeypatch):
    monkeypatch.setenv("FA3CONFORM_BINARY", str(Path(sys.executable).parent / "no-such-binary"))
    result = run("--fa3conform", "musa")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fa3conform: FA3CONFORM_BINARY=*no-such-binary is not an "
                                 "executable file"])
