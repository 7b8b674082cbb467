#!/usr/bin/env python3
"""Builds the input sets (JSONL call specs) the shadow oracle and certify both run.

  catalog   tests/catalog/*.json (every entry, `expect` kept: certify ignores it)
  extra     any JSONL named by SHADOW_EXTRA (optional)
  export    call.json of the bundles `fa3conform export --suite validation --profile fa3` writes for
            EXPORT_CASES cases (default 300)
  corpus    fuzz/corpus/call_spec/* (JSON specs, as they are) + fuzz/corpus/{validate,differential,metadata}/*
            and fuzz/regressions/*/* decoded with target/<profile>/fuzz-decode
  random    N pseudo-random byte inputs (seeded) decoded with `fuzz-decode validate` / `differential`:
            half blind, half byte-mutations of the validate/differential seed corpora
  mutate    single-argument mutations of valid catalogue calls (mutate.py)
The same sets for mate's FA3 wrapper called directly (entries.py), named `mate-<set>`:
  mate-catalog  tests/catalog/mate-wrapper.json as written, every other entry re-expressed
  mate-extra    the SHADOW_EXTRA calls as written
  mate-export, mate-corpus, mate-random   the calls of the set re-expressed (entries.as_mate_call),
                one per distinct call
  mate-mutate   single-argument mutations of valid mate calls over mate's 35 parameters (mutate.py)
Only calls certify parses are kept (certify exits 2 on a file with one malformed call).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import mutate
from entries import as_mate_call, entry_of_set
from shadow_paths import ROOT as MAIN

PROFILE = os.environ.get("SHADOW_PROFILE", "release")  # run.sh's choice of target/<profile>
# run.sh names the copies it runs; alone, the build in the (possibly shared) target directory
BIN_DIR = Path(os.environ.get("SHADOW_BIN_DIR")
               or Path(os.environ.get("CARGO_TARGET_DIR") or MAIN / "target") / PROFILE)
BIN = BIN_DIR / "fa3conform"
EXPORT_CASES = os.environ.get("EXPORT_CASES", "300")
DECODE = BIN_DIR / "fuzz-decode"
EXTRA = os.environ.get("SHADOW_EXTRA")


def read_specs(path: Path):
    text = path.read_text()
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def certify_rc(lines, profile):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        name = f.name
    rc = subprocess.run([str(BIN), "certify", "--profile", profile, "--format", "json", name],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    Path(name).unlink()
    return rc


def keep_parsable(lines, profile):
    if certify_rc(lines, profile) != 2:
        return lines, 0
    if len(lines) == 1:
        return [], 1
    mid = len(lines) // 2
    a, da = keep_parsable(lines[:mid], profile)
    b, db = keep_parsable(lines[mid:], profile)
    return a + b, da + db


def mate_forms(calls):
    """The calls re-expressed for mate's wrapper, the first of each distinct call (ids apart): the
    re-expression makes calls that differed only in `ver` or `context` equal."""
    out, seen = [], set()
    for call in calls:
        mate = as_mate_call(call)
        key = json.dumps({k: v for k, v in mate.items() if k != "id"}, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(mate)
    return out


def write_set(out: Path, name: str, calls, log):
    lines, seen = [], set()
    for c in calls:
        s = json.dumps(c, separators=(",", ":"))
        if s in seen:
            continue
        seen.add(s)
        lines.append(s)
    kept, dropped = keep_parsable(lines, entry_of_set(name).profile) if lines else ([], 0)
    (out / f"{name}.jsonl").write_text("\n".join(kept) + ("\n" if kept else ""))
    log[name] = {"candidates": len(calls), "unique": len(lines), "kept": len(kept), "dropped_unparsable": dropped}


def decode(target: str, path: Path):
    r = subprocess.run([str(DECODE), target, str(path)], capture_output=True, text=True)
    text = r.stdout.lstrip()
    try:
        obj, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--random", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = {}

    # catalogue
    calls, mate_calls = [], []
    for f in sorted((MAIN / "tests/catalog").glob("*.json")):
        specs = read_specs(f)
        calls += specs
        mate_calls += specs if f.name == "mate-wrapper.json" else mate_forms(specs)
    write_set(out, "catalog", calls, log)
    write_set(out, "mate-catalog", mate_calls, log)

    # extra calls (optional)
    calls = read_specs(Path(EXTRA)) if EXTRA else []
    write_set(out, "extra", calls, log)
    write_set(out, "mate-extra", calls, log)

    # export (validation suite): the call of every bundle export writes for the fa3 profile (it
    # bundles every case and computes each one's reference output: EXPORT_CASES bounds the time)
    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "fa3"
        r = subprocess.run([str(BIN), "export", "--suite", "validation", "--cases", EXPORT_CASES, "--seed", "7",
                            "--out", str(d), "--profile", "fa3"], capture_output=True, text=True)
        log["export_fa3_stderr"] = (r.stderr.strip().splitlines() or [""])[-1]
        log["export_fa3_bundles"] = len(list(d.iterdir())) if d.exists() else 0
        for b in sorted(d.iterdir()) if d.exists() else []:
            if (b / "call.json").is_file():
                calls.append(json.loads((b / "call.json").read_text()))
    write_set(out, "export", calls, log)
    write_set(out, "mate-export", mate_forms(calls), log)

    # seed corpora
    calls = []
    for f in sorted((MAIN / "fuzz/corpus/call_spec").iterdir()):
        try:
            for c in read_specs(f):
                if isinstance(c, dict):
                    calls.append(c)
        except Exception:
            pass
    for target in ("validate", "differential", "metadata"):
        for sub in ("corpus", "regressions"):
            d = MAIN / "fuzz" / sub / target
            if d.is_dir():
                for f in sorted(d.iterdir()):
                    c = decode(target, f)
                    if c is not None:
                        c["id"] = c.get("id") or f"{sub}-{target}-{f.name}"
                        calls.append(c)
    write_set(out, "corpus", calls, log)
    write_set(out, "mate-corpus", mate_forms(calls), log)

    # random: decoded pseudo-random bytes
    rng = random.Random(args.seed)
    seeds = {t: [p.read_bytes() for p in sorted((MAIN / "fuzz/corpus" / t).iterdir())]
             for t in ("validate", "differential")}
    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "input"
        for i in range(args.random):
            target = "validate" if i % 4 != 3 else "differential"
            if i % 2 == 0:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randint(16, 1024)))
                how = "blind"
            else:
                base = bytearray(rng.choice(seeds[target]))
                for _ in range(rng.randint(1, 8)):
                    if base and rng.random() < 0.7:
                        base[rng.randrange(len(base))] = rng.getrandbits(8)
                    else:
                        base.insert(rng.randrange(len(base) + 1), rng.getrandbits(8))
                data = bytes(base)
                how = "mut"
            p.write_bytes(data)
            c = decode(target, p)
            if c is not None:
                c["id"] = f"rnd-{target}-{how}-{i}"
                calls.append(c)
    write_set(out, "random", calls, log)
    write_set(out, "mate-random", mate_forms(calls), log)

    # mutate: single-argument mutations of valid calls (mutate.py)
    write_set(out, "mutate", mutate.all_calls("sglang"), log)
    write_set(out, "mate-mutate", mutate.all_calls("mate"), log)
    (out / "inputs.log.json").write_text(json.dumps(log, indent=1))
    print(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
