# FA3M011: fixed-length call (no cu_seqlens_q) without metadata: injection dereferences None.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, seqlens):
    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, causal=True)
