# FA3M017: new k/v without cache_seqlens is not checked by mate.
from flash_attn_interface import flash_attn_with_kvcache


def append(q, k_cache, v_cache, k_new, v_new, cu, max_q, seqlens):
    flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new)
    flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cu_seqlens_q=cu, max_seqlen_q=max_q)
    # Not reported.
    flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=seqlens)
