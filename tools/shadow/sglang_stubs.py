"""Import-time scaffolding for SGLang's MUSA wrapper module.

The wrapper module (python/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py,
sglang@082898472f) imports nine sglang names at module level.  Only three of them are used by the
code a `flash_attn_with_kvcache` call executes:

  get_pp_indices  -> REAL: python/sglang/srt/distributed/utils.py (loaded from file)
  envs            -> REAL: python/sglang/srt/environ.py (loaded from file)
  get_buffer      -> REAL: python/sglang/srt/runtime_context.py (loaded from file; imported lazily
                     inside _compute_scheduler_metadata for MLA backends)
  get_pp_group    -> STUB: returns the PP group (rank_in_group, world_size) the spec's context names;
                     the real one returns the GroupCoordinator of an initialised torch.distributed PP
                     group, which does not exist in this process.

The other six (FlashAttentionBackend, FlashAttentionMultiStepBackend, merge_state_v2_wrapper,
AttentionType, cp_allgather_and_save_kv_cache, musa_cp_attn_forward_extend, KVWriteLoc,
get_server_args' users) are only referenced by the backend *classes* (forward_extend /
forward_decode), never by `flash_attn_with_kvcache` / `_compute_scheduler_metadata`; they are
placeholders that raise if anything calls them.  They cannot change a verdict of a direct wrapper call.

Version note: the three real support modules are read from the stored sglang history at commit
1f15308dca98 (2026-07-09, bytedance-iaas/sglang mirror), the stored commit whose wrapper file is
closest to the pinned 082898472f (it differs from the pinned wrapper only in three
`cu_seqlens_k_new=` arguments inside the backend class).  sgl-project/sglang@082898472f itself is not
in any local mirror.
"""
from __future__ import annotations

import enum
import importlib.util
import sys
import types
from pathlib import Path

from shadow_paths import SGLANG

WRAPPER_FILE = SGLANG / "hardware_backend" / "musa" / "attention" / "flashattention_backend.py"
WRAPPER_MODULE = "sglang.srt.hardware_backend.musa.attention.flashattention_backend"

PP_STATE = types.SimpleNamespace(rank_in_group=0, world_size=1)


def _package(name: str) -> types.ModuleType:
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        mod.__path__ = []  # a package
        mod.__shadow_stub__ = True
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(_package(parent), child, mod)
    return mod


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__shadow_stub__ = True
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    setattr(_package(parent), child, mod)
    return mod


def _load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_package(parent), child, mod)
    spec.loader.exec_module(mod)
    return mod


def _unreachable(what):
    def f(*args, **kwargs):
        raise NotImplementedError(f"shadow stub {what} called: not part of flash_attn_with_kvcache")
    f.__name__ = what
    return f


class _Placeholder:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"shadow stub {type(self).__name__} instantiated")


def install():
    """Installs the scaffolding and imports the real wrapper module. Returns it."""
    for pkg in ("sglang", "sglang.srt", "sglang.srt.hardware_backend",
                "sglang.srt.hardware_backend.musa", "sglang.srt.hardware_backend.musa.attention",
                "sglang.srt.hardware_backend.musa.layers", "sglang.srt.hardware_backend.musa.layers.utils",
                "sglang.srt.layers", "sglang.srt.layers.attention", "sglang.srt.layers.utils",
                "sglang.srt.mem_cache", "sglang.srt.debug_utils", "sglang.srt.distributed"):
        _package(pkg)
    # environ.py's last line imports this module for its side effect on CUDA core dumps.
    _module("sglang.srt.debug_utils.cuda_coredump")
    # REAL support modules
    dist_utils = _load_file("sglang.srt.distributed.utils", SGLANG / "distributed" / "utils.py")
    dist = sys.modules["sglang.srt.distributed"]
    dist.get_pp_indices = dist_utils.get_pp_indices
    dist.get_pp_group = lambda: PP_STATE  # STUB (see module docstring)
    _load_file("sglang.srt.environ", SGLANG / "environ.py")
    _load_file("sglang.srt.runtime_context", SGLANG / "runtime_context.py")
    # Placeholders referenced only by the backend classes
    _module("sglang.srt.hardware_backend.musa.layers.utils.cp_utils",
            musa_cp_attn_forward_extend=_unreachable("musa_cp_attn_forward_extend"))
    _module("sglang.srt.layers.attention.flashattention_backend",
            FlashAttentionBackend=type("FlashAttentionBackend", (_Placeholder,), {}),
            FlashAttentionMultiStepBackend=type("FlashAttentionMultiStepBackend", (_Placeholder,), {}),
            merge_state_v2_wrapper=_unreachable("merge_state_v2_wrapper"))

    class AttentionType(enum.Enum):  # placeholder: only compared against in forward_extend/decode
        DECODER = "decoder"
        ENCODER_ONLY = "encoder_only"

    _module("sglang.srt.layers.radix_attention", AttentionType=AttentionType,
            RadixAttention=type("RadixAttention", (_Placeholder,), {}))
    _module("sglang.srt.layers.utils.cp_utils",
            cp_allgather_and_save_kv_cache=_unreachable("cp_allgather_and_save_kv_cache"))
    _module("sglang.srt.mem_cache.memory_pool", KVWriteLoc=type("KVWriteLoc", (_Placeholder,), {}))
    # the REAL wrapper module, pinned text
    return _load_file(WRAPPER_MODULE, WRAPPER_FILE)
