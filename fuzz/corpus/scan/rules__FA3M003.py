# FA3M003: the call does not bind to the signature it reaches on MUSA (CPython's TypeError).
from sgl_kernel.flash_attn import flash_attn_with_kvcache as sgl_fa
from mate import flash_attn_with_kvcache as mate_fa
from flash_attn_3.interface import flash_attn_with_kvcache as wrapper_fa


def calls(q, k_cache, v_cache, cu, md, buf, sinks, mod, a):
    # sgl-kernel 0.4.1.post1 added `out`; the SGLang MUSA wrapper has no such parameter.
    sgl_fa(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, out=buf)
    # mate's own entry point calls the sink `learnable_sink`.
    mate_fa(q, k_cache, v_cache, sinks=sinks)
    # mate's FA3 wrapper has no score_mod.
    wrapper_fa(q, k_cache, v_cache, score_mod=mod)
    sgl_fa(q, k_cache, v_cache, q=q)
    sgl_fa(q, k_cache)
    sgl_fa(
        q, k_cache, v_cache, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a,
        a, a, a, a, a, a, a, a, a,
    )
