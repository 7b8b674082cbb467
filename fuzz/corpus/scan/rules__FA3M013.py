# FA3M013: a negative softcap is applied on MUSA and ignored upstream.
from flash_attn_interface import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, seqlens):
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, softcap=-1.0)
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, softcap=-2)
    # Not reported.
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, softcap=30.0)
