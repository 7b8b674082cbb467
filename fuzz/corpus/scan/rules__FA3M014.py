# FA3M014: more than 128 splits with scheduler metadata.
from flash_attn_interface import flash_attn_with_kvcache as fa3
from sgl_kernel.flash_attn import flash_attn_with_kvcache as sgl_fa


def decode(q, k_cache, v_cache, seqlens, cu, md):
    fa3(q, k_cache, v_cache, cache_seqlens=seqlens, scheduler_metadata=md, num_splits=256)
    sgl_fa(q, k_cache, v_cache, cache_seqlens=seqlens, cu_seqlens_q=cu, scheduler_metadata=md, num_splits=200)
    # Not reported: at the limit.
    fa3(q, k_cache, v_cache, cache_seqlens=seqlens, scheduler_metadata=md, num_splits=128)
