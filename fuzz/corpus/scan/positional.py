# Positional arguments are bound by the signature each call reaches on MUSA.
from sgl_kernel.flash_attn import flash_attn_with_kvcache as sgl_fa
from mate import flash_attn_with_kvcache as mate_fa


def sgl_all_positional(q, k_cache, v_cache, seqlens, cu, max_q, scale, md):
    # 34 positionals: the last one is `ver`.
    return sgl_fa(
        q, k_cache, v_cache, None, None, None, None, None, seqlens, None, None, None, cu, None,
        max_q, None, None, None, None, scale, True, (-1, -1), 0, 0.0, True, md, 0, None, 0,
        False, None, None, None, 4,
    )


def mate_fa3_order(q, k_cache, v_cache, seqlens, page_table, scale):
    # Written in FA3's order: from position 23 on, every slot means something else to mate.
    return mate_fa(
        q, k_cache, v_cache, None, None, None, None, None, seqlens, None, None, page_table,
        None, None, None, None, None, None, None, scale, True, (-1, -1), 0, 0.0, True, None,
        0, None, 0, False,
    )


def unpacked(q, k_cache, v_cache, rest):
    return sgl_fa(q, k_cache, v_cache, *rest)
