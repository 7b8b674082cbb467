# FA3M008: arguments the MLA branch drops once `qv` routes the call there.
from flash_attn_interface import flash_attn_with_kvcache


def mla_decode(q_rope, k_rope_cache, ckv_cache, q_nope, seqlens, page_table, k_new, v_new, md):
    return flash_attn_with_kvcache(
        q_rope, k_rope_cache, ckv_cache,
        k=k_new,
        v=v_new,
        qv=q_nope,
        cache_seqlens=seqlens,
        page_table=page_table,
        window_size=(128, 0),
        softcap=0.0,  # the default: not reported
        scheduler_metadata=md,
        num_splits=4,
    )
