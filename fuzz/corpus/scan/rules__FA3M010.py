# FA3M010: no scheduler_metadata, so the SGLang MUSA wrapper injects cached metadata.
from sglang.srt.hardware_backend.musa.attention.flashattention_backend import (
    flash_attn_with_kvcache,
)


def extend(q, k_cache, v_cache, seqlens, cu, max_q):
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, cu_seqlens_q=cu, max_seqlen_q=max_q)
    flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=seqlens, cu_seqlens_q=cu, max_seqlen_q=max_q,
        scheduler_metadata=None,
    )
