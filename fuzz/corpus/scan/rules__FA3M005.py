# FA3M005: score_mod / aux_tensors are accepted and dropped by the SGLang MUSA wrapper.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def prefill(q, k_cache, v_cache, cu, md, my_mod, bias):
    flash_attn_with_kvcache(
        q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md,
        score_mod=my_mod, aux_tensors=[bias],
    )
    # Not reported: an explicit None is the default.
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, score_mod=None)
