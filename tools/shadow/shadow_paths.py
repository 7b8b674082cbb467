"""Where the shadow oracle's files are: the tool here, its work folder and the pinned upstream.

The tool lives in the repository (tools/shadow/); everything it fetches, builds or writes lives in
the ignored work folder, `target/shadow/` of the repository unless SHADOW_WORK names another.
"""
from __future__ import annotations

import os
from pathlib import Path

TOOL = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("FA3CONFORM_ROOT") or TOOL.parents[1])
WORK = Path(os.environ.get("SHADOW_WORK") or ROOT / "target" / "shadow")
UPSTREAM = WORK / "upstream"          # written by fetch_upstream.py
MATE = UPSTREAM / "mate"              # MooreThreads/mate @ v0.2.2, the whole tree
SGLANG = UPSTREAM / "sglang" / "python" / "sglang" / "srt"  # the four pinned SGLang modules
BUILD = WORK / "build"                # the tvm-ffi signature stub
CACHE = WORK / "cache"                # mate's JIT workspace (nothing is compiled there)
