#!/usr/bin/env python3
"""Single-argument mutations of accepted base calls (the input sets `mutate` and `mate-mutate`).

For each base call (accepted by both the shadow and certify on the catalogue) and each parameter of
the entry's wrapper (34 of SGLang's, 35 of mate's FA3 wrapper), the parameter is replaced by each
value of a fixed menu of Python values (absent, None, bools, ints, floats, non-finite floats, str,
tuples, lists, objects, small tensors of various dtypes/devices/strides); every tensor argument of
the base is also mutated in dtype, device, rank, one dimension's size and its last stride; a few
positional forms are added.
"""
from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from entries import ENTRIES, as_mate_call, parameters
from shadow_paths import ROOT

ABSENT = object()


def t(shape, dtype, **kw):
    d = {"shape": shape, "dtype": dtype}
    d.update(kw)
    return {"tensor": d}


MENU = [
    ("absent", ABSENT), ("none", None), ("true", True), ("false", False),
    ("i0", 0), ("i1", 1), ("i-1", -1), ("i3", 3), ("i129", 129), ("i2p31", 2 ** 31),
    ("f0", 0.0), ("f1", 1.0), ("f2.5", 2.5), ("f-1", -1.0), ("inf", {"float": "inf"}), ("nan", {"float": "nan"}),
    ("str", "x"), ("tup2", [-1, -1]), ("tup3", [1, 2, 3]), ("tupnone", [None, None]), ("tupf", [4.0, 0.0]),
    ("tup0", []), ("list2", {"list": [-1, -1]}), ("dict", {"object": "dict"}), ("callable", {"object": "callable"}),
    ("obj", {"object": "Foo"}),
    ("t0d_i32", t([], "int32", values=[1])), ("t1_f32", t([1], "float32", values=[0.5])),
    ("t2_i32", t([2], "int32", values=[0, 1])), ("t1_i64", t([1], "int64", values=[1])),
    ("t2_cpu", t([2], "int32", device="cpu", values=[0, 1])), ("t2_cuda", t([2], "int32", device="cuda", values=[0, 1])),
    ("t4_bf16", t([4], "bfloat16")), ("t2_strided", t([2], "int32", stride=[2], values=[0, 1])),
    ("np_i64", {"numpy": {"dtype": "int64", "value": 3}}), ("np_i32_0", {"numpy": {"dtype": "int32", "value": 0}}),
    ("np_f32", {"numpy": {"dtype": "float32", "value": 0.5}}), ("np_f64", {"numpy": {"dtype": "float64", "value": 1.0}}),
    ("np_true", {"numpy": {"dtype": "bool", "value": True}}),
    ("dict_pair", {"dict": [[0, -1], [1, -1]]}), ("dict_str", {"dict": [["a", 1]]}),
    ("t0d_f32", t([], "float32", values=[2.0])),
    # pairs holding a NumPy scalar: a window bound's comparisons give NumPy bools (the compile key's
    # json.dumps refuses them)
    ("tup_np", [{"numpy": {"dtype": "int64", "value": 4}}, -1]),
    ("tup_np_right", [-1, {"numpy": {"dtype": "int32", "value": 0}}]),
]
OTHER_DTYPES = ["bfloat16", "float16", "float32", "int32", "int64", "uint8", "bool", "float8_e4m3fn"]


# mate's bases: valid musa calls re-expressed, and the catalogue's valid calls of mate's own
# parameters (s_aux; a context-parallel rank, plain and MLA)
MATE_BASES_FROM_MUSA = ("musa-ok-decode-paged-varlen", "musa-ok-fixed-length", "musa-ok-append-kv-packed",
                        "musa-ok-append-rotary", "musa-ok-sinks", "musa-ok-mla-decode", "musa-ok-metadata-passed")
MATE_OWN_BASES = ("mate-ok-s-aux", "mate-ok-cp", "mate-ok-cp-mla-ignored")


def catalogue(name: str) -> dict:
    return {c["id"]: c for c in json.loads((ROOT / "tests/catalog" / name).read_text())}


def base_calls(entry: str = "sglang"):
    if entry == "mate":
        musa, mate = catalogue("musa-valid.json"), catalogue("mate-wrapper.json")
        bases = [as_mate_call(musa[n]) for n in MATE_BASES_FROM_MUSA]
        for n in MATE_OWN_BASES:
            base = copy.deepcopy(mate[n])
            base.pop("expect", None)
            bases.append(base)
        return bases
    by_id = catalogue("musa-valid.json")
    names = ["musa-ok-decode-paged-varlen", "musa-ok-fixed-length", "musa-ok-append-kv-packed",
             "musa-ok-append-rotary", "musa-ok-metadata-passed", "musa-ok-sinks", "musa-ok-mla-decode",
             "musa-ok-leftpad", "musa-ok-batch-idx", "musa-ok-append-kv"]
    bases = []
    for n in names:
        c = copy.deepcopy(by_id[n])
        c.pop("expect", None)
        c["context"] = {"sglang_backend": None}
        bases.append(c)
    # injection states (no cached prefixes): non-MLA recompute at layer 0, MLA workspace
    inj = copy.deepcopy(by_id["musa-ok-decode-paged-varlen"])
    inj.pop("expect", None)
    inj["id"] = "inj-nonmla"
    inj["context"] = {"sglang_backend": {"prefix": "forward_decode", "layer": {
        "layer_id": 0, "tp_q_head_num": 8, "tp_k_head_num": 2, "qk_head_dim": 128, "v_head_dim": 128},
        "num_hidden_layers": 4, "max_seqlen_k": 256}}
    bases.append(inj)
    mla = copy.deepcopy(by_id["musa-ok-mla-decode"])
    mla.pop("expect", None)
    mla["args"].pop("scheduler_metadata", None)
    mla["id"] = "inj-mla"
    q = mla["args"]["q"]["tensor"]["shape"]
    mla["args"]["cu_seqlens_q"] = t([q[0] + 1], "int32", values=list(range(q[0] + 1)))
    mla["args"]["max_seqlen_q"] = q[1]
    mla["args"]["q"] = t([q[0] * q[1], q[2], q[3]], mla["args"]["q"]["tensor"]["dtype"])
    qv = mla["args"]["qv"]["tensor"]["shape"]
    mla["args"]["qv"] = t([qv[0] * qv[1], qv[2], qv[3]], mla["args"]["qv"]["tensor"]["dtype"])
    mla["context"] = {"sglang_backend": {"prefix": "forward_decode", "layer": {
        "layer_id": 0, "tp_q_head_num": qv[2], "tp_k_head_num": 1, "qk_head_dim": 576, "v_head_dim": 512},
        "num_hidden_layers": 4, "max_seqlen_k": 256, "use_mla": True}}
    bases.append(mla)
    return bases


def with_arg(call, name, value, tag):
    c = copy.deepcopy(call)
    c["id"] = f"mut-{call['id']}-{name}-{tag}"
    if value is ABSENT:
        c["args"].pop(name, None)
    else:
        c["args"][name] = copy.deepcopy(value)
    return c


def tensor_mutations(call, name, spec):
    out = []
    ts = spec["tensor"]
    for dt in OTHER_DTYPES:
        if dt != ts["dtype"]:
            m = copy.deepcopy(spec)
            m["tensor"]["dtype"] = dt
            if "values" in m["tensor"] and not dt.startswith(("int", "uint", "bool")) and ts["dtype"].startswith("int"):
                pass
            if dt == "bool" and "values" in m["tensor"]:
                m["tensor"]["values"] = [bool(v) for v in m["tensor"]["values"]]
            out.append((f"dtype-{dt}", m))
    for dev in ("cpu", "cuda"):
        m = copy.deepcopy(spec)
        m["tensor"]["device"] = dev
        out.append((f"dev-{dev}", m))
    shape = ts["shape"]
    if shape:
        m = copy.deepcopy(spec)
        m["tensor"]["shape"] = shape[1:]
        m["tensor"].pop("values", None)
        m["tensor"].pop("stride", None)
        out.append(("rank-minus", m))
        m = copy.deepcopy(spec)
        m["tensor"]["shape"] = [1] + shape
        m["tensor"].pop("stride", None)
        out.append(("rank-plus", m))
        for d in range(len(shape)):
            m = copy.deepcopy(spec)
            m["tensor"]["shape"] = shape[:d] + [shape[d] + 1] + shape[d + 1:]
            m["tensor"].pop("values", None)
            m["tensor"].pop("stride", None)
            out.append((f"dim{d}+1", m))
        # last dimension not unit-stride; every other stride dense over the doubled last dim
        m = copy.deepcopy(spec)
        stride, acc = [], 1
        for i, s in enumerate(reversed(shape)):
            if i == 0:
                stride.append(2)
                acc = 2 * max(s, 1)
            else:
                stride.append(acc)
                acc *= max(s, 1)
        m["tensor"]["stride"] = list(reversed(stride))
        out.append(("stride-last2", m))
        if len(shape) >= 2:  # first dim strided (row padding), last dim contiguous
            m = copy.deepcopy(spec)
            stride, acc = [], 1
            for s in reversed(shape):
                stride.append(acc)
                acc *= max(s, 1)
            stride = list(reversed(stride))
            stride[0] = stride[0] * 2
            m["tensor"]["stride"] = stride
            out.append(("stride-first2", m))
    return [with_arg(call, name, m, tag) for tag, m in out]


def positional_forms(call, params):
    out = []
    args = call["args"]
    for n in (3, 9, 12, 14, 26):
        c = copy.deepcopy(call)
        c["id"] = f"mut-{call['id']}-positional{n}"
        pos = []
        for p in params[:n]:
            pos.append(copy.deepcopy(args.get(p)) if p in args else None)
        c["positional"] = pos
        c["args"] = {k: v for k, v in args.items() if k not in params[:n]}
        out.append(c)
    c = copy.deepcopy(call)
    c["id"] = f"mut-{call['id']}-positional-and-keyword"
    c["positional"] = [copy.deepcopy(args["q"]), copy.deepcopy(args["k_cache"]), copy.deepcopy(args["v_cache"])]
    out.append(c)
    c = copy.deepcopy(call)
    c["id"] = f"mut-{call['id']}-positional-too-many"
    c["positional"] = [None] * (len(params) + 1)
    c["args"] = {}
    out.append(c)
    return out


def all_calls(entry: str = "sglang"):
    params = parameters(ENTRIES[entry])
    calls = []
    for base in base_calls(entry):
        calls.append(base)
        for name in params:
            for tag, value in MENU:
                if value is ABSENT and name not in base["args"]:
                    continue
                calls.append(with_arg(base, name, value, tag))
            if isinstance(base["args"].get(name), dict) and "tensor" in base["args"][name]:
                calls.extend(tensor_mutations(base, name, base["args"][name]))
        calls.extend(positional_forms(base, params))
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--entry", choices=sorted(ENTRIES), default="sglang")
    args = ap.parse_args()
    calls = all_calls(args.entry)
    args.out.write_text("".join(json.dumps(c, separators=(",", ":")) + "\n" for c in calls))
    print(f"{len(calls)} calls -> {args.out}")


if __name__ == "__main__":
    main()
