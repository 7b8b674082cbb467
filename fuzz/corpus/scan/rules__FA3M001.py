# FA3M001: a literal `ver` other than 3 reaches the SGLang MUSA wrapper's gate.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, cu, md):
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=4)
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver="3")
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=None)
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=True)
    # Not reported: the gate compares with `!=`, and 3.0 == 3.
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=3)
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=3.0)
