# FA3M015: num_splits without scheduler_metadata is ignored by mate.
from flash_attn_interface import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, seqlens, n):
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, num_splits=8)
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, num_splits=n)
    # Not reported: one split is what mate runs anyway.
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, num_splits=1)
