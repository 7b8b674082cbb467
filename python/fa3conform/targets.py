"""The stacks the runner can call, resolved exactly: the named module, from the named distribution.

``flash_attn_interface`` is both upstream FA3's module and mate's FA3-compatible wrapper's, so a
target names the distribution its module must come from; a missing or different one is a one-line
error that says what to install, never a traceback and never the other stack.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Target:
    module: str
    function: str
    distribution: str
    install: str  # what to do, as an instruction


TARGETS = {
    "sglang-musa": Target(
        "sglang.srt.hardware_backend.musa.attention.flashattention_backend",
        "flash_attn_with_kvcache", "sglang",
        "install SGLang with its MUSA backend, mate and torch_musa"),
    "mate": Target(
        "flash_attn_interface", "flash_attn_with_kvcache", "mate-flash-attention",
        "install mate's FA3-compatible wrapper (pip install mate-flash-attention, from mate's "
        "wrappers/flash-attention) with mate and torch_musa"),
    "fa3": Target(
        "flash_attn_interface", "flash_attn_with_kvcache", "flash_attn_3",
        "install FlashAttention-3 (cd flash-attention/hopper && pip install .)"),
    "sgl-kernel": Target(
        "sgl_kernel.flash_attn", "flash_attn_with_kvcache", "sgl-kernel",
        "pip install sgl-kernel"),
}


class TargetError(Exception):
    """The target cannot be called here; the message is one line that says why and what to do."""


def normalise(distribution: str) -> str:
    """A distribution name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


@dataclass
class Resolved:
    function: object
    module: object
    info: dict  # what result.json records: target, module, file, distribution, version


def _load_file(path: Path, function: str, name: str) -> Resolved:
    if not path.is_file():
        raise TargetError(f"target {name!r}: no file {path}")
    sys.path.insert(0, str(path.resolve().parent))  # as if the file were run as a script
    loader = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(loader)
    sys.modules[path.stem] = module
    loader.loader.exec_module(module)
    return _function(module, function, name, {"target": name, "module": path.stem,
                                                "file": str(path.resolve())})


def _function(module, function: str, name: str, info: dict) -> Resolved:
    found = getattr(module, function, None)
    if not callable(found):
        raise TargetError(f"target {name!r}: {info['module']} has no function {function}")
    return Resolved(found, module, info)


def _provider_check(name: str, target: Target) -> None:
    """Raises unless the module the import system would load for ``target`` belongs to
    ``target.distribution`` (checked before importing anything)."""
    top_level = target.module.split(".")[0]
    spec = importlib.util.find_spec(top_level)
    if spec is None:
        raise TargetError(f"target {name!r} needs {target.distribution} (no module {top_level} "
                          f"here): {target.install}")
    origin = Path(spec.origin).resolve() if spec.origin else None
    providers = importlib.metadata.packages_distributions().get(top_level, [])
    try:
        dist = importlib.metadata.distribution(target.distribution)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        files = dist.files or []
        if origin is not None and origin in {Path(dist.locate_file(f)).resolve() for f in files}:
            return
        # An editable install lists no module files; then the name mapping is all there is.
        editable = not any(str(f).split("/")[0].split(".")[0] == top_level for f in files)
        if editable and normalise(target.distribution) in {normalise(p) for p in providers}:
            return
    others = [p for p in providers if normalise(p) != normalise(target.distribution)]
    source = ", ".join(others) or "no installed distribution"
    raise TargetError(f"target {name!r} needs {top_level} from {target.distribution}, but here "
                      f"it is {origin} from {source}: {target.install}")


def resolve(name: str) -> Resolved:
    """The function a ``--target`` names: a known stack, ``module.path:function`` or
    ``path/to/file.py:function``."""
    target = TARGETS.get(name)
    if target is None:
        if ":" not in name:
            raise TargetError(f"target {name!r}: expected one of {', '.join(TARGETS)}, "
                              "module.path:function or path/to/file.py:function")
        module_name, function = name.rsplit(":", 1)
        if module_name.endswith(".py") or os.sep in module_name:
            return _load_file(Path(module_name), function, name)
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise TargetError(f"target {name!r}: cannot import {module_name}: {exc}") from None
        return _function(module, function, name, {"target": name, "module": module_name,
                                                  "file": getattr(module, "__file__", None)})
    _provider_check(name, target)
    try:
        module = importlib.import_module(target.module)
    except Exception as exc:
        raise TargetError(f"target {name!r}: importing {target.module} failed: "
                          f"{type(exc).__name__}: {exc}") from None
    info = {"target": name, "module": target.module, "file": getattr(module, "__file__", None),
            "distribution": target.distribution,
            "version": importlib.metadata.version(target.distribution)}
    return _function(module, target.function, name, info)
