# A port that already targets MUSA through mate 0.1.3, whose FA3 wrapper was a package named
# `flash_attn` (the name FlashAttention-2 uses): its FA3 keywords decide which one it is.
try:
    from flash_attn import flash_attn_with_kvcache, get_scheduler_metadata

    MATE_AVAILABLE = True
except ImportError:
    MATE_AVAILABLE = False


def decode(q, k_cache, v_cache, seqlens, block_table, cu_seqlens_q, scale):
    metadata = get_scheduler_metadata(
        batch_size=seqlens.shape[0], max_seqlen_q=1, max_seqlen_k=4096, num_heads_q=32,
        num_heads_kv=8, headdim=128, cache_seqlens=seqlens,
    )
    return flash_attn_with_kvcache(  # call: mate-fa3-wrapper
        q, k_cache, v_cache, cache_seqlens=seqlens, page_table=block_table,
        cu_seqlens_q=cu_seqlens_q, max_seqlen_q=1, softmax_scale=scale, causal=True,
        scheduler_metadata=metadata,
    )
