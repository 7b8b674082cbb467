"""The two Python entry points the shadow oracle can call, and the fa3conform profile that models each.

  sglang  SGLang's MUSA wrapper `flash_attn_with_kvcache` (injects scheduler metadata, gates `ver`),
          which calls mate's FA3 wrapper; judged against `certify --profile musa`
  mate    mate's FA3-compatible wrapper `flash_attn_interface.flash_attn_with_kvcache` called
          directly (no SGLang code runs); judged against `certify --profile mate`

An input set belongs to the entry its name says: `mate-*` sets to `mate`, every other set to `sglang`.
Each entry's parameter order is read from the pinned upstream source, so a positional call spec is
bound to the names the real function gives those slots.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from shadow_paths import MATE, SGLANG


@dataclass(frozen=True)
class Entry:
    name: str
    profile: str
    source: Path  # the file defining the entry's `flash_attn_with_kvcache`
    set_prefix: str


ENTRIES = {
    "sglang": Entry("sglang", "musa",
                    SGLANG / "hardware_backend" / "musa" / "attention" / "flashattention_backend.py", ""),
    "mate": Entry("mate", "mate",
                  MATE / "wrappers" / "flash-attention" / "flash_attn_3" / "interface.py", "mate-"),
}


def entry_of_set(set_name: str) -> Entry:
    return ENTRIES["mate"] if set_name.startswith(ENTRIES["mate"].set_prefix) else ENTRIES["sglang"]


@cache
def parameters(entry: Entry) -> tuple[str, ...]:
    """The parameter names of the entry's `flash_attn_with_kvcache`, in order."""
    tree = ast.parse(entry.source.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "flash_attn_with_kvcache":
            a = node.args
            if a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
                raise RuntimeError(f"{entry.source}: flash_attn_with_kvcache is not all positional-or-keyword")
            return tuple(p.arg for p in a.args)
    raise RuntimeError(f"{entry.source}: no top-level flash_attn_with_kvcache")


def as_mate_call(call: dict) -> dict:
    """A call spec written for SGLang's wrapper, re-expressed for mate's: both name and order their
    parameters alike up to `sinks`; the ones only SGLang's has (`ver`, which it gates; `score_mod`,
    `aux_tensors`, which it drops) are removed wherever the spec gives them, positional slots past the
    shared ones with them. SGLang's backend state (`context`) and the per-profile expectations
    (`expect`) do not describe the new call and are dropped."""
    sglang, mate = parameters(ENTRIES["sglang"]), parameters(ENTRIES["mate"])
    shared = next(i for i, (a, b) in enumerate(zip(sglang, mate)) if a != b)
    sglang_only = set(sglang) - set(mate)
    out = {k: v for k, v in call.items() if k not in ("context", "expect")}
    if out.get("positional"):
        out["positional"] = out["positional"][:shared]
    out["args"] = {k: v for k, v in (call.get("args") or {}).items() if k not in sglang_only}
    return out
