# FA3M006: fp8 descale arguments (mate runs float16/bfloat16 only).
from flash_attn_interface import flash_attn_with_kvcache


def fp8_decode(q, k_cache, v_cache, seqlens, qs, ks, vs):
    return flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=seqlens, q_descale=qs, k_descale=ks, v_descale=vs
    )
