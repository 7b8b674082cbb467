# FA3M016: sm_margin does not reserve multiprocessors on MUSA.
from flash_attn_interface import flash_attn_with_kvcache


def overlapped_decode(q, k_cache, v_cache, seqlens):
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, sm_margin=8)
    # Not reported: the default.
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, sm_margin=0)
