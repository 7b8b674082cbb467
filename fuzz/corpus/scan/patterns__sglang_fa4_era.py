# The same backend as SGLang wrote it while sgl-kernel 0.3.21 ran FA4 for ver=4: `ver` is put into
# a keyword dict only when FA4 is configured, and FA4-only arguments ride along.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


class FlashAttentionBackend:
    def __init__(self, fa_impl_ver):
        self.fa_impl_ver = fa_impl_ver

    def forward_extend(self, q, k_cache, v_cache, md, layer, score_mod=None):
        kwargs = {}
        if self.fa_impl_ver != 3:
            kwargs["ver"] = self.fa_impl_ver
        if score_mod is not None:
            kwargs["score_mod"] = score_mod
        return flash_attn_with_kvcache(  # call: sgl-kernel
            q=q,
            k_cache=k_cache,
            v_cache=v_cache,
            page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32,
            cu_seqlens_q=md.cu_seqlens_q,
            max_seqlen_q=md.max_seq_len_q,
            causal=True,
            scheduler_metadata=md.scheduler_metadata,
            **kwargs,  # expect: FA3M002 FA3M005
        )

    def prefill_fa4(self, q, k_cache, v_cache, md):
        extra = dict(causal=True)
        extra["ver"] = 4
        return flash_attn_with_kvcache(  # call: sgl-kernel
            q, k_cache, v_cache, page_table=md.page_table, cache_seqlens=md.cache_seqlens_int32,
            cu_seqlens_q=md.cu_seqlens_q, max_seqlen_q=md.max_seq_len_q,
            scheduler_metadata=md.scheduler_metadata, **extra,  # expect: FA3M001
        )
