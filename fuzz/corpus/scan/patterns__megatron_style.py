# Optional FlashAttention-3 with a FlashAttention-2 fallback, imported under other names (the
# pattern of Megatron-LM's inference attention, written anew).
try:
    from flash_attn_3.flash_attn_interface import flash_attn_with_kvcache as flash_attn3_with_kvcache

    HAVE_FA3 = True
except ImportError:
    flash_attn3_with_kvcache = None
    HAVE_FA3 = False

try:
    from flash_attn import flash_attn_with_kvcache
except ImportError:
    flash_attn_with_kvcache = None


def decode(q, k, v, seqlens, block_table, scale):
    if HAVE_FA3:
        return flash_attn3_with_kvcache(  # call: fa3
            q=q, k_cache=k, v_cache=v, cache_seqlens=seqlens, page_table=block_table,
            softmax_scale=scale, causal=True,
        )
    return flash_attn_with_kvcache(  # call: fa2
        q=q, k_cache=k, v_cache=v, cache_seqlens=seqlens,
        block_table=block_table,  # expect: FA3M003
        softmax_scale=scale, causal=True,
    )
