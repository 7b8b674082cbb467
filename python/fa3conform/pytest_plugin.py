"""pytest plugin: which of a test suite's ``flash_attn_with_kvcache`` calls another stack rejects
or changes. Off unless asked::

    pytest --fa3conform musa                    # a section in the terminal summary
    pytest --fa3conform musa --junitxml r.xml   # and the findings as each test's properties
    pytest --fa3conform musa --fa3conform-strict           # a test with findings fails
    pytest --fa3conform musa --fa3conform-record calls/    # keep the calls for `fa3conform export`

For the whole session every ``flash_attn_with_kvcache`` entry point is wrapped
(``fa3conform.entry_points``); each test's distinct calls are recorded as call specs
(``fa3conform.record``) and, as the test's call phase ends, the calls no earlier test made are
certified by the bundled ``fa3conform`` executable (one ``certify --format json`` for them). A
*finding* is a call the chosen profile rejects (its exact exception and message) or accepts with
an error hazard (the stack silently computes something else). Findings become JUnit properties
``fa3conform.<profile>.rejected`` / ``.changed`` of the test, and with ``--fa3conform-strict`` the
test's failure. Calls are certified while their test's report is being made, not at the session's
end, because that report (its properties and outcome) is written as the test finishes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from .binary import find_binary
from .entry_points import ENTRY_POINTS, wrap_entry_points
from .record import Recorder, values_unreadable_now

# The profiles `fa3conform certify --profile` knows.
PROFILES = ("musa", "sgl-kernel", "fa3", "fa3-stable")
PLUGIN_NAME = "fa3conform-session"


def pytest_addoption(parser):
    group = parser.getgroup("fa3conform", "flash_attn_with_kvcache compatibility (fa3conform)")
    group.addoption(
        "--fa3conform", metavar="PROFILE", choices=PROFILES, default=None,
        help="certify every flash_attn_with_kvcache call the tests make for this stack "
             f"({', '.join(PROFILES)}) and report, per test, the calls it rejects or changes")
    group.addoption(
        "--fa3conform-strict", action="store_true", default=False,
        help="a test whose calls the stack rejects or changes fails")
    group.addoption(
        "--fa3conform-record", metavar="DIR", default=None,
        help="write the distinct calls to DIR/calls-pytest-<worker>.jsonl "
             "(for fa3conform certify/export --spec DIR)")
    group.addoption(
        "--fa3conform-device-as", metavar="DEVICE", choices=("musa", "cuda"), default=None,
        help="certify calls made with CPU tensors as the calls they stand for on this device")


def pytest_configure(config):
    profile = config.getoption("fa3conform")
    if profile is None:
        return
    try:
        binary = find_binary()
    except FileNotFoundError as exc:
        raise pytest.UsageError(f"--fa3conform: {exc}") from None
    config.pluginmanager.register(Compatibility(config, profile, binary), PLUGIN_NAME)


@dataclass(frozen=True)
class Finding:
    call: str
    kind: str  # "rejected" or "changed"
    text: str  # "ValueError: Only ver=3 is supported for MUSA FA3." or "H-...: message"

    def __str__(self):
        return f"{self.kind}: {self.text} [call {self.call}]"


def findings_of(certified: dict, profile: str) -> list[Finding]:
    """The findings in one call of certify's JSON document, for ``profile``."""
    verdict = certified["profiles"][profile]
    found = []
    if verdict["outcome"] == "rejected":
        found.append(Finding(certified["id"], "rejected",
                             f"{verdict['exception']}: {verdict['message']}"))
    found += [Finding(certified["id"], "changed", f"{h['code']}: {h['message']}")
              for h in certified["hazards"]
              if h["profile"] == profile and h["severity"] == "error"]
    return found


class Compatibility:
    """The session's calls, per test, and their certification."""

    def __init__(self, config, profile: str, binary: str):
        self.profile = profile
        self.binary = binary
        self.strict = config.getoption("fa3conform_strict")
        self.device_as = config.getoption("fa3conform_device_as")
        record = config.getoption("fa3conform_record")
        self.record_dir = Path(record) if record else None
        self.recorder = Recorder(os.devnull)  # its call-to-spec conversion only; it writes nothing
        self.lock = threading.Lock()
        self.calls: dict[str, dict] = {}  # call id -> spec, in the order first made
        self.ids: dict[str, str] = {}  # the spec's JSON -> call id
        self.findings: dict[str, list[Finding]] = {}  # call id -> findings, once certified
        self.by_test: dict[str, list[str]] = {}  # test node id -> its distinct call ids
        self.first_made: dict[str, int] = {}  # test node id -> calls it made first
        self.test: str | None = None  # the test running now
        self.wrapping = wrap_entry_points(self.observe, ENTRY_POINTS)

    # -- recording ------------------------------------------------------------------------------

    def observe(self, entry: str, args, kwargs):
        """A call of a wrapped entry point: the running test made it (calls outside a test's
        setup and call phases are not any test's)."""
        test = self.test
        if test is None:
            return
        spec = self.recorder.spec(args, kwargs, read_values=values_unreadable_now() is None)
        key = json.dumps(spec, sort_keys=True)
        with self.lock:
            made = self.by_test.setdefault(test, [])
            call_id = self.ids.get(key)
            if call_id is None:
                self.first_made[test] = self.first_made.get(test, 0) + 1
                call_id = f"{test}#{self.first_made[test]}"
                self.ids[key] = call_id
                self.calls[call_id] = {"id": call_id, "seed": 0, **spec,
                                       "recorded": {"entry": entry}}
            if call_id not in made:
                made.append(call_id)

    # -- certification --------------------------------------------------------------------------

    def certify_new_calls(self) -> None:
        """Certifies every call not certified yet, with one run of the binary."""
        with self.lock:
            pending = [spec for call_id, spec in self.calls.items() if call_id not in self.findings]
        if not pending:
            return
        with tempfile.TemporaryDirectory(prefix="fa3conform-") as folder:
            calls = Path(folder) / "calls.jsonl"
            calls.write_text("".join(json.dumps(s) + "\n" for s in pending), encoding="utf-8")
            command = [self.binary, "certify", str(calls), "--profile", self.profile,
                       "--format", "json"]
            if self.device_as:
                command += ["--device-as", self.device_as]
            done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode not in (0, 1):  # 0 certified, 1 findings; anything else is an error
            reason = done.stderr.strip() or f"exit code {done.returncode}"
            for spec in pending:
                self.findings[spec["id"]] = [Finding(spec["id"], "not certified", reason)]
            return
        for certified in json.loads(done.stdout)["calls"]:
            self.findings[certified["id"]] = findings_of(certified, self.profile)

    def findings_for(self, test: str) -> list[Finding]:
        return [f for call_id in self.by_test.get(test, []) for f in self.findings.get(call_id, [])]

    # -- hooks ----------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.test = item.nodeid

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):
        self.test = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        findings = []
        if call.when == "call":
            self.test = None
            self.certify_new_calls()
            findings = self.findings_for(item.nodeid)
            for finding in findings:  # before the report is made: it copies them
                item.user_properties.append(
                    (f"fa3conform.{self.profile}.{finding.kind}", f"{finding.call}: {finding.text}"))
        outcome = yield
        report = outcome.get_result()
        if findings and self.strict and report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(
                [f"fa3conform --fa3conform-strict: {self.profile} would not run this test's "
                 f"flash_attn_with_kvcache calls as written:"] + [f"  {f}" for f in findings])

    def pytest_sessionfinish(self, session):
        self.wrapping.uninstall()
        if self.record_dir is not None and self.calls:
            self.record_dir.mkdir(parents=True, exist_ok=True)
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            path = self.record_dir / f"calls-pytest-{worker}.jsonl"
            path.write_text("".join(json.dumps(s) + "\n" for s in self.calls.values()),
                            encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter.write_line
        terminalreporter.section(f"fa3conform: flash_attn_with_kvcache on {self.profile}")
        if not self.wrapping.wrapped:
            write("no test imported a flash_attn_with_kvcache entry point: nothing was checked")
            return
        affected = 0
        for test in self.by_test:
            findings = self.findings_for(test)
            if findings:
                affected += 1
                write(test)
                for finding in findings:
                    write(f"  {finding}")
        counts = {}
        for call_id in self.calls:
            for kind in {f.kind for f in self.findings.get(call_id, [])}:
                counts[kind] = counts.get(kind, 0) + 1
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none rejected or changed"
        write(f"{len(self.calls)} distinct calls in {len(self.by_test)} tests: {found}; "
              f"{affected} tests affected")
        if self.record_dir is not None and self.calls:
            write(f"calls recorded in {self.record_dir} (fa3conform export --spec {self.record_dir})")
