"""The functions a ``flash_attn_with_kvcache`` call enters through, and their wrapping.

``wrap_entry_points(on_call)`` wraps every known entry point: those whose module is already
imported at once, the others the moment their module is imported (an import hook), so that code
running ``from sglang.jit_kernel.flash_attention import flash_attn_with_kvcache`` afterwards binds
the wrapper. ``on_call(entry, args, kwargs)`` runs before the original, for the outermost call only:
an entry point that calls another (SGLang's dispatcher calling FA3's wrapper) is one call, seen
where the caller made it, so arguments the inner layer never receives (``ver``) are kept.
The recorder (``fa3conform.record``) and the pytest plugin build on this.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import sys
import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EntryPoint:
    module: str
    function: str
    what: str

    @property
    def name(self) -> str:
        return f"{self.module}:{self.function}"


# Every function here has FA3's ``flash_attn_with_kvcache`` signature (SGLang's adds ``sinks``,
# ``score_mod``, ``aux_tensors``, ``ver``). mate's own ``mate.mha_interface`` has another signature
# and FA2's ``flash_attn`` package another semantics: neither is an entry point.
ENTRY_POINTS = (
    EntryPoint("sglang.jit_kernel.flash_attention", "flash_attn_with_kvcache",
               "SGLang's FA3/FA4 dispatcher (ver=3/4)"),
    EntryPoint("sglang.srt.hardware_backend.musa.attention.flashattention_backend",
               "flash_attn_with_kvcache", "SGLang's MUSA wrapper"),
    EntryPoint("sglang.jit_kernel.flash_attention_v3", "flash_attn_with_kvcache",
               "SGLang's FA3 wrapper"),
    EntryPoint("sgl_kernel.flash_attn", "flash_attn_with_kvcache", "sgl-kernel"),
    EntryPoint("flash_attn_interface", "flash_attn_with_kvcache",
               "FA3's interface (upstream, or mate's FA3-compatible wrapper on MUSA)"),
    EntryPoint("flash_attn_3.interface", "flash_attn_with_kvcache",
               "mate's FA3-compatible wrapper package"),
    EntryPoint("flash_attn_3.flash_attn_interface", "flash_attn_with_kvcache",
               "FA3's re-export"),
)

ORIGINAL = "__fa3conform_original__"


@dataclass
class Wrapping:
    """What ``wrap_entry_points`` did: the entry points wrapped so far and why others were not."""

    wrapped: list[str] = field(default_factory=list)
    not_wrapped: dict[str, str] = field(default_factory=dict)
    hook: _WrapOnImport | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_wrap: object = None

    def uninstall(self) -> None:
        """Stops wrapping modules imported from now on (wrapped functions stay wrapped)."""
        if self.hook is not None and self.hook in sys.meta_path:
            sys.meta_path.remove(self.hook)
        self.hook = None


def wrap_function(entry: str, original, on_call, depth: threading.local):
    """``original`` with ``on_call(entry, args, kwargs)`` run first when no wrapped entry point is
    already on this thread's stack. ``on_call`` must not raise into the caller: exceptions from it
    are reported on stderr and the call goes on."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        outermost = getattr(depth, "value", 0) == 0
        if outermost:
            try:
                on_call(entry, args, kwargs)
            except Exception as exc:  # observing must never break the workload
                print(f"fa3conform: could not observe a call of {entry}: {exc!r}",
                      file=sys.stderr)
        depth.value = getattr(depth, "value", 0) + 1
        try:
            return original(*args, **kwargs)
        finally:
            depth.value -= 1

    setattr(wrapper, ORIGINAL, original)
    return wrapper


def _wrap_module(module, points, on_call, depth, wrapping: Wrapping) -> None:
    for point in points:
        original = getattr(module, point.function, None)
        if original is None:
            wrapping.not_wrapped[point.name] = f"{point.module} has no {point.function}"
            continue
        if hasattr(original, ORIGINAL):  # wrapped already (a re-export of a wrapped function)
            continue
        setattr(module, point.function, wrap_function(point.name, original, on_call, depth))
        with wrapping.lock:
            wrapping.wrapped.append(point.name)
            wrapping.not_wrapped.pop(point.name, None)
        if callable(wrapping.on_wrap):
            wrapping.on_wrap(point.name)


class _WrappingLoader(importlib.abc.Loader):
    """Runs the real loader, then wraps the module's entry points before anyone imports from it."""

    def __init__(self, inner, after):
        self.inner = inner
        self.after = after

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.after(module)

    def __getattr__(self, name):  # get_code, is_package, resource readers, ...
        return getattr(self.inner, name)


class _WrapOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, pending: dict, wrap):
        self.pending = pending  # module name -> entry points
        self.wrap = wrap

    def find_spec(self, fullname, path, target=None):
        points = self.pending.get(fullname)
        if points is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _WrappingLoader(spec.loader, lambda module: self.wrap(module, points))
        return spec


def wrap_entry_points(on_call, entry_points=ENTRY_POINTS, *, import_now=False, on_wrap=None):
    """Wraps every entry point of ``entry_points``; returns the :class:`Wrapping`.

    Modules already imported are wrapped at once; with ``import_now`` the others are imported
    (and wrapped when that succeeds), otherwise an import hook wraps them when the process imports
    them. ``on_wrap(name)`` is told about each function wrapped.
    """
    depth = threading.local()
    wrapping = Wrapping(on_wrap=on_wrap)
    by_module: dict[str, list[EntryPoint]] = {}
    for point in entry_points:
        by_module.setdefault(point.module, []).append(point)

    def wrap(module, points):
        _wrap_module(module, points, on_call, depth, wrapping)

    pending = {}
    for module_name, points in by_module.items():
        module = sys.modules.get(module_name)
        if module is None and import_now:
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:  # not installed here, or fails to import without a device
                for point in points:
                    wrapping.not_wrapped[point.name] = f"import {module_name}: {exc!r}"
                continue
        if module is None:
            pending[module_name] = points
            for point in points:
                wrapping.not_wrapped[point.name] = f"{module_name} not imported"
        else:
            wrap(module, points)
    if pending:
        wrapping.hook = _WrapOnImport(pending, wrap)
        sys.meta_path.insert(0, wrapping.hook)
    return wrapping
