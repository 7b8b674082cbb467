# The ways engines reach the entry point indirectly: a local wrapper named like it, a callable kept
# on `self`, functools.partial, and an assignment alias.
import functools

import flash_attn_interface as fa3
from flash_attn_interface import flash_attn_with_kvcache as _flash_attn_with_kvcache


def flash_attn_with_kvcache(*args, **kwargs):
    # sgl-kernel accepted attention sinks; the standalone FA3 interface does not.
    kwargs.pop("sinks", None)
    return _flash_attn_with_kvcache(*args, **kwargs)  # call: fa3


attend = fa3.flash_attn_with_kvcache


class Attention:
    def __init__(self, scale):
        self.kernel = flash_attn_with_kvcache
        self.decode_kernel = functools.partial(_flash_attn_with_kvcache, softmax_scale=scale)

    def decode(self, q, k_cache, v_cache, seqlens, sinks):
        # `sinks` is popped by the wrapper; `ver` reaches the FA3 interface.
        out = self.kernel(q, k_cache, v_cache, cache_seqlens=seqlens, sinks=sinks)  # call: fa3
        out = self.kernel(q, k_cache, v_cache, cache_seqlens=seqlens, ver=3)  # call: fa3; expect: FA3M003
        return out

    def decode_with_partial(self, q, k_cache, v_cache, seqlens):
        out, lse, *rest = self.decode_kernel(  # call: fa3
            q, k_cache, v_cache, cache_seqlens=seqlens, return_softmax_lse=True
        )
        return out, lse

    def decode_alias(self, q, k_cache, v_cache, seqlens):
        # A negative softcap was a no-op upstream; mate applies it.
        return attend(q, k_cache, v_cache, cache_seqlens=seqlens, softcap=-1.0)  # call: fa3; expect: FA3M013


def not_a_call_site(q, k_cache, v_cache):
    # References handed to helpers are not calls.
    benchmark = functools.partial(_flash_attn_with_kvcache, q, k_cache, v_cache)
    return benchmark
