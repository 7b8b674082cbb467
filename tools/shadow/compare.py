#!/usr/bin/env python3
"""Compares the shadow oracle's results with `fa3conform certify --profile PROFILE --format json`.

    python compare.py --set NAME PROFILE SPECS.jsonl SHADOW.jsonl CERTIFY.json [--set ...] --sites SITES.json --out DIR

PROFILE is the profile that models the set's entry point (entries.py: musa for SGLang's wrapper,
mate for mate's FA3 wrapper); its verdicts are read from CERTIFY.json. Figures are reported per
profile: each set, and a total of the profile's sets.

SITES.json is `fa3conform explain --list --format json`: every error site with its message template
and how the rendered message stands for str(exc) (`message_match`).

Per call:
  outcome  : accepted/rejected agree (shadow "accepted" = returned from the wrapper; calls that end
             in mate's MLA C++ dispatch are counted apart: their C++ checks were not executed)
  class    : both rejected with the same exception class
  message  : str(exc) equal byte for byte, or as the registry declares the site's message
             (`message_match`): "prefix", the shadow's message starts with it (e.g. a build log
             follows); "pattern", each `{*}` in it stands for any text (a signature or type name as
             the installed library prints it) and the rest is byte for byte
Disagreements are grouped by (tool verdict + site, shadow verdict + raising upstream line).
"""
from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

ANY_TEXT = "{*}"

def read_specs(path: Path):
    text = path.read_text()
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def versioned(document: dict, path) -> dict:
    """A fa3conform JSON document of the schema version this script reads."""
    if document.get("schema_version") != 1:
        raise SystemExit(f"{path}: expected a fa3conform document with schema_version 1")
    return document


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether `text` is `pattern` with each `{*}` standing for any run of text (as fa3conform's
    `MessageMatch::Pattern`)."""
    pieces = (re.escape(p) for p in pattern.split(ANY_TEXT))
    return re.fullmatch("(?s:.*?)".join(pieces), text) is not None


def verdict(tool: dict, profile: str, shadow: dict, prefix_sites: set, pattern_sites: set) -> dict:
    t = tool["profiles"][profile]
    v = {"tool_outcome": t["outcome"], "tool_exception": t.get("exception"), "tool_message": t.get("message"),
         "tool_site": t.get("site"), "shadow_outcome": shadow["outcome"],
         "shadow_exception": shadow.get("exception"), "shadow_message": shadow.get("message"),
         "shadow_site": shadow.get("site", ""), "shadow_source": shadow.get("source", "")}
    if shadow["outcome"] == "skipped":
        v["status"] = "skipped"
        return v
    mla = shadow.get("mla_cxx_unchecked")
    if mla:
        v["status"] = "mla_boundary"
        v["outcome_agree"] = t["outcome"] == "accepted" or (t.get("site") or "").startswith("musa.MLA")
        return v
    v["status"] = "compared"
    v["outcome_agree"] = t["outcome"] == shadow["outcome"]
    both_rej = t["outcome"] == "rejected" and shadow["outcome"] == "rejected"
    v["class_agree"] = both_rej and t.get("exception") == shadow.get("exception")
    v["message_exact"] = v["class_agree"] and t.get("message") == shadow.get("message")
    tm, sm = t.get("message") or "", shadow.get("message") or ""
    v["message_prefix"] = (v["class_agree"] and not v["message_exact"]
                           and t.get("site") in prefix_sites
                           and sm.startswith(tm) and not sm[len(tm):len(tm) + 1].isdigit())
    v["message_pattern"] = (v["class_agree"] and not v["message_exact"]
                            and t.get("site") in pattern_sites and pattern_matches(tm, sm))
    return v


def mutation_of(call_id: str):
    """'param-tag' of a mutate-set id (mut-<base id>-<param>-<tag>), else None."""
    if not call_id.startswith("mut-"):
        return None
    import mutate
    global _BASES
    try:
        _BASES
    except NameError:
        ids = {b["id"] for entry in mutate.ENTRIES for b in mutate.base_calls(entry)}
        _BASES = sorted(ids, key=len, reverse=True)
    rest = call_id[4:]
    for b in _BASES:
        if rest.startswith(b + "-"):
            return rest[len(b) + 1:]
    return rest


def group_key(v: dict) -> str:
    tool = "accepted" if v["tool_outcome"] == "accepted" else f"{v['tool_exception']} [{v['tool_site']}]"
    if v["shadow_outcome"] == "accepted":
        shadow = "accepted"
    else:
        shadow = f"{v['shadow_exception']} @ {v['shadow_site']}"
    return f"{v['profile']}: tool: {tool}  |  shadow: {shadow}"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", nargs=5, action="append", metavar=("NAME", "PROFILE", "SPECS", "SHADOW", "CERTIFY"),
                    required=True)
    ap.add_argument("--sites", type=Path, required=True, help="fa3conform explain --list --format json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    sites = versioned(json.loads(args.sites.read_text()), args.sites)["sites"]
    prefix_sites = {s["id"] for s in sites if s["message_match"] == "prefix"}
    pattern_sites = {s["id"] for s in sites if s["message_match"] == "pattern"}
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, profile, specs_p, shadow_p, certify_p in args.set:
        specs = read_specs(Path(specs_p))
        shadow = [json.loads(l) for l in Path(shadow_p).read_text().splitlines() if l.strip()]
        tool = versioned(json.loads(Path(certify_p).read_text()), certify_p)["calls"]
        if not (len(specs) == len(shadow) == len(tool)):
            raise SystemExit(f"{name}: {len(specs)} specs, {len(shadow)} shadow results, {len(tool)} certify results")
        for i, (spec, s, t) in enumerate(zip(specs, shadow, tool)):
            if t["id"] != spec.get("id", "") or s["id"] != spec.get("id", ""):
                raise SystemExit(f"{name}[{i}]: ids differ: spec {spec.get('id')!r} certify {t['id']!r} shadow {s['id']!r}")
            v = verdict(t, profile, s, prefix_sites, pattern_sites)
            v.update(set=name, profile=profile, index=i, id=spec.get("id", ""))
            v["_spec"] = spec
            v["_shadow"] = s
            rows.append(v)

    summary = {"profiles": {}}

    def tally(rs):
        c = collections.Counter()
        c["calls"] = len(rs)
        for v in rs:
            c[v["status"]] += 1
            if v["status"] == "compared":
                c["outcome_agree"] += v["outcome_agree"]
                c["both_accepted"] += v["tool_outcome"] == v["shadow_outcome"] == "accepted"
                c["both_rejected"] += v["tool_outcome"] == v["shadow_outcome"] == "rejected"
                c["class_agree"] += v["class_agree"]
                c["message_exact"] += v["message_exact"]
                c["message_prefix"] += v["message_prefix"]
                c["message_pattern"] += v["message_pattern"]
            if v["status"] == "mla_boundary":
                c["mla_boundary_tool_accepted"] += v["tool_outcome"] == "accepted"
                c["mla_boundary_tool_rejected_at_mla_cxx_site"] += v["tool_outcome"] == "rejected" and (v["tool_site"] or "").startswith("musa.MLA")
                c["mla_boundary_tool_rejected_elsewhere"] += v["tool_outcome"] == "rejected" and not (v["tool_site"] or "").startswith("musa.MLA")
        return dict(c)

    for profile in dict.fromkeys(v["profile"] for v in rows):
        of_profile = [v for v in rows if v["profile"] == profile]
        by_set = collections.defaultdict(list)
        for v in of_profile:
            by_set[v["set"]].append(v)
        summary["profiles"][profile] = {"sets": {name: tally(rs) for name, rs in by_set.items()},
                                        "total": tally(of_profile)}

    groups = collections.OrderedDict()
    for v in rows:
        if v["status"] == "skipped":
            continue
        if v["status"] == "compared" and (v["message_exact"] or v["message_prefix"] or v["message_pattern"]
                                          or (v["outcome_agree"] and v["tool_outcome"] == "accepted")):
            continue
        if v["status"] == "mla_boundary" and v["outcome_agree"]:
            continue
        kind = ("outcome" if not v["outcome_agree"] else
                "class" if not v.get("class_agree") else "message")
        key = f"[{kind}] " + group_key(v)
        groups.setdefault(key, []).append(v)

    ex_dir = args.out / "examples"
    ex_dir.mkdir(exist_ok=True)
    report = []
    for n, (key, vs) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1])), 1):
        v = vs[0]
        ex = dict(v["_spec"])
        (ex_dir / f"d{n:02d}.json").write_text(json.dumps(ex) + "\n")
        report.append({
            "n": n, "key": key, "count": len(vs),
            "sets": dict(collections.Counter(x["set"] for x in vs)),
            "example": {"set": v["set"], "profile": v["profile"], "index": v["index"], "id": v["id"],
                        "file": f"examples/d{n:02d}.json"},
            "tool": {"outcome": v["tool_outcome"], "exception": v["tool_exception"], "message": v["tool_message"], "site": v["tool_site"]},
            "shadow": {"outcome": v["shadow_outcome"], "exception": v["shadow_exception"], "message": v["shadow_message"],
                       "upstream_line": v["shadow_site"], "source": v["shadow_source"],
                       "launches": [l.get("kind") for l in v["_shadow"].get("launches", [])]},
            "ids": [f"{x['set']}[{x['index']}] {x['id']}" for x in vs[:12]],
            "shadow_messages": dict(collections.Counter((x["shadow_message"] or "")[:110] for x in vs).most_common(8)),
            "tool_messages": dict(collections.Counter((x["tool_message"] or "")[:110] for x in vs).most_common(8)),
            "mutations": dict(collections.Counter(mutation_of(x["id"]) or f"{x['set']}:{x['id']}" for x in vs).most_common(40)),
        })
    skipped = [{"set": v["set"], "index": v["index"], "id": v["id"], "reason": v["_shadow"].get("reason")}
               for v in rows if v["status"] == "skipped"]
    stub_notes = [{"set": v["set"], "index": v["index"], "id": v["id"], "note": v["_shadow"]["stub_note"]}
                  for v in rows if v["_shadow"].get("stub_note")]
    heur = sum(1 for v in rows for l in v["_shadow"].get("launches", []) if l.get("num_splits_heuristic_not_evaluated"))
    summary["fwd_launches_with_unevaluated_split_heuristic"] = heur
    conv = [l for v in rows for l in v["_shadow"].get("launches", []) if l.get("ffi_conversion")]
    summary["ffi_conversion_failures"] = len(conv)
    summary["ffi_conversion_failures_with_several_bad_args (order-dependent)"] = sum(len(l.get("ffi_failing_args", [])) > 1 for l in conv)
    summary["emulated_static_assert_appendkv"] = sum("emulated compile error" in (v.get("shadow_message") or "") for v in rows)
    summary["emulated_static_assert_appendkv_tool_J-1"] = sum("emulated compile error" in (v.get("shadow_message") or "") and v["tool_site"] == "musa.J-1" for v in rows)
    summary["F-26_shadow"] = sum((v.get("shadow_message") or "") == "cu_seqlens_k_new[-1] must equal total_k_new" for v in rows)
    summary["F-26_tool"] = sum(v["tool_site"] == "musa.F-26" for v in rows)
    out = {"summary": summary, "disagreements": report, "skipped": skipped, "stub_notes": stub_notes}
    (args.out / "comparison.json").write_text(json.dumps(out, indent=1, default=str))
    with (args.out / "rows.jsonl").open("w") as f:
        for v in rows:
            f.write(json.dumps({k: v[k] for k in v if not k.startswith("_")}, default=str) + "\n")
    print(json.dumps(summary, indent=1))
    for r in report:
        print(f"\n#{r['n']} x{r['count']} {r['key']}\n   sets={r['sets']} e.g. {r['example']}")
        print(f"   tool:   {r['tool']['exception']}: {str(r['tool']['message'])[:200]!r}")
        print(f"   shadow: {r['shadow']['exception']}: {str(r['shadow']['message'])[:200]!r}")
        print(f"           at {r['shadow']['upstream_line']}: {r['shadow']['source'][:150]}")


if __name__ == "__main__":
    main()
