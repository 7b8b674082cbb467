# SGLang's MUSA backend module (the file a porter finds under hardware_backend/musa), written anew:
# its own flash_attn_with_kvcache checks `ver`, injects scheduler metadata and forwards to mate's
# FA3 wrapper. Its calls rely on that injection by design: nothing to report about it here.
from flash_attn_interface import flash_attn_with_kvcache as mate_flash_attn_with_kvcache

_CURRENT_BACKEND = None


def flash_attn_with_kvcache(
    q, k_cache, v_cache, k=None, v=None, qv=None, cache_seqlens=None, page_table=None,
    cu_seqlens_q=None, max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
    scheduler_metadata=None, num_splits=0, return_softmax_lse=False, sinks=None, ver=3,
):
    if ver != 3:
        raise ValueError("Only ver=3 is supported for MUSA FA3.")
    if scheduler_metadata is None and _CURRENT_BACKEND is not None:
        scheduler_metadata = _CURRENT_BACKEND.metadata_for(q)
    return mate_flash_attn_with_kvcache(  # call: mate-fa3-wrapper
        q=q, k_cache=k_cache, v_cache=v_cache, k=k, v=v, qv=qv, cache_seqlens=cache_seqlens,
        page_table=page_table, cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q,
        softmax_scale=softmax_scale, causal=causal, window_size=window_size,
        scheduler_metadata=scheduler_metadata, num_splits=num_splits,
        return_softmax_lse=return_softmax_lse, sinks=sinks,
    )


class MusaFlashAttentionBackend:
    def forward_decode(self, q, k_cache, v_cache, md, layer):
        return flash_attn_with_kvcache(  # call: sglang-musa
            q=q, k_cache=k_cache, v_cache=v_cache, page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32, max_seqlen_q=1, softmax_scale=layer.scaling,
            causal=True,
        )

    def forward_extend(self, q, k_cache, v_cache, md, layer):
        o, lse, *rest = flash_attn_with_kvcache(  # call: sglang-musa
            q=q, k_cache=k_cache, v_cache=v_cache, page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32, cu_seqlens_q=md.cu_seqlens_q,
            max_seqlen_q=md.max_seq_len_q, softmax_scale=layer.scaling, causal=True,
            return_softmax_lse=True,
        )
        return o, lse
