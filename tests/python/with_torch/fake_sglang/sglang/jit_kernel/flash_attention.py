"""SGLang's ``flash_attn_with_kvcache`` dispatcher, as a stand-in: same signature, ``ver=3`` goes to
the FA3 wrapper (``flash_attention_v3``), which receives every argument but ``score_mod``,
``aux_tensors`` and ``ver`` (sglang python/sglang/jit_kernel/flash_attention.py)."""

from .flash_attention_v3 import flash_attn_with_kvcache as fa3_flash_attn_with_kvcache


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=None, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, sinks=None,
                            score_mod=None, aux_tensors=None, ver=3):
    if ver != 3:
        raise RuntimeError(f"the stand-in dispatcher has only ver=3, not {ver}")
    arguments = dict(locals())
    for dropped in ("score_mod", "aux_tensors", "ver"):
        del arguments[dropped]
    return fa3_flash_attn_with_kvcache(**arguments)
