# Local dataflow: dtype variables, None assignments, module constants and statically dead branches.
import torch
from sgl_kernel.flash_attn import flash_attn_with_kvcache

USE_FP8_KV = False
KV_DTYPE = torch.float8_e4m3fn


def decode_fp8(q, k_cache, v_cache, md, k_scale, v_scale):
    kv_dtype = KV_DTYPE
    q = q.to(kv_dtype)
    return flash_attn_with_kvcache(  # call: sgl-kernel
        q,  # expect: FA3M020
        k_cache.view(kv_dtype),  # expect: FA3M020
        v_cache.view(kv_dtype),  # expect: FA3M020
        cache_seqlens=md.cache_seqlens, cu_seqlens_q=md.cu_seqlens_q, max_seqlen_q=1,
        scheduler_metadata=md.scheduler_metadata,
        k_descale=k_scale, v_descale=v_scale,  # expect: FA3M006 FA3M006
    )


def decode_bf16(q, k_cache, v_cache, md, layer):
    k_descale = v_descale = None
    # if layer.kv_dtype == "fp8":
    #     k_descale, v_descale = layer.k_scale, layer.v_scale
    if USE_FP8_KV:
        k_descale = layer.k_scale
    return flash_attn_with_kvcache(  # call: sgl-kernel
        q, k_cache, v_cache, cache_seqlens=md.cache_seqlens, cu_seqlens_q=md.cu_seqlens_q,
        max_seqlen_q=1, scheduler_metadata=md.scheduler_metadata,
        k_descale=k_descale, v_descale=v_descale,
    )


def debug_path(q, k_cache, v_cache):
    if False:
        # Never runs: counted as a call site, not checked.
        flash_attn_with_kvcache(q, k_cache, v_cache, ver=4)  # call: sgl-kernel
    return q
