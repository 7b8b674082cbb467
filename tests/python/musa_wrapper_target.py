"""The error path of the bridge loop: a stand-in with the SGLang MUSA wrapper's signature that
raises the wrapper's and mate's first checks by its own logic, then computes with the NumPy target.

Modelled checks, in the stack's order (spec: musa-fa3.md §3, §5.3): the ``ver`` gate (W-1) and the
contiguous-last-dimension asserts on ``k_cache``/``v_cache`` (K-1, K-2). Argument binding errors
(unknown keyword, too many positionals, missing arguments) come from CPython itself, because the
function has the wrapper's exact name and signature.
"""

from numpy_target import flash_attn_with_kvcache as numpy_attention


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, sinks=None,
                            score_mod=None, aux_tensors=None, ver=3):
    if ver != 3:
        raise ValueError("Only ver=3 is supported for MUSA FA3.")
    assert k_cache.stride(-1) == 1, "k_cache must have contiguous last dimension"
    assert v_cache.stride(-1) == 1, "v_cache must have contiguous last dimension"
    arguments = dict(locals())
    for dropped in ("ver", "score_mod", "aux_tensors"):  # the wrapper never forwards these
        del arguments[dropped]
    return numpy_attention(**arguments)
