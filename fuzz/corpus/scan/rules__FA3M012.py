# FA3M012: an int cache_seqlens reaches mate's get_scheduler_metadata when injection recomputes.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, cu):
    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, cu_seqlens_q=cu, max_seqlen_q=1)
