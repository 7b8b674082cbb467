# FA3M019: the result is unpacked into a number of values MUSA does not return.
from flash_attn import flash_attn_with_kvcache as fa2
from flash_attn_interface import flash_attn_with_kvcache as fa3


def decode(q, k_cache, v_cache, seqlens, q_nope):
    # Written for FlashAttention-2's (out, lse); mate's fmha path returns four values.
    out, lse = fa2(q, k_cache, v_cache, cache_seqlens=seqlens, return_softmax_lse=True)
    # Written for FA3's four values; `qv` routes to mate's MLA branch, which returns two.
    result = fa3(q, k_cache, v_cache, qv=q_nope, cache_seqlens=seqlens, return_softmax_lse=True)
    out, lse, out_accum, lse_accum = result
    # Not reported: a starred target fits every stack, and without the lse there is no tuple.
    out, lse, *rest = fa3(q, k_cache, v_cache, cache_seqlens=seqlens, return_softmax_lse=True)
    first, second = fa3(q, k_cache, v_cache, cache_seqlens=seqlens)
    return out, lse, first, second
