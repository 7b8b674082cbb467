# FA3M004: mate's own entry point puts `learnable_sink` at position 23, shifting FA3's order.
from mate import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, seqlens, page_table, scale):
    flash_attn_with_kvcache(
        q, k_cache, v_cache, None, None, None, None, None, seqlens, None, None, page_table,
        None, None, None, None, None, None, None, scale, True, (-1, -1), 0, 30.0,
    )
    # Not reported: everything after `window_size` by keyword.
    flash_attn_with_kvcache(
        q, k_cache, v_cache, None, None, None, None, None, seqlens, None, None, page_table,
        None, None, None, None, None, None, None, scale, True, (-1, -1), attention_chunk=0,
        softcap=30.0,
    )
