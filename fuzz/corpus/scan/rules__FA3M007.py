# FA3M007: `qv` works on MUSA only in the MLA decode shape.
from flash_attn_interface import flash_attn_with_kvcache


def mla_decode(q_rope, k_rope_cache, ckv_cache, q_nope, seqlens, page_table):
    return flash_attn_with_kvcache(
        q_rope, k_rope_cache, ckv_cache, qv=q_nope, cache_seqlens=seqlens, page_table=page_table
    )
