# An SGLang-style CUDA attention backend (the layout of python/sglang/srt/layers/attention/
# flashattention_backend.py, written anew): the module-level name is SGLang's dispatcher; __init__
# probes sgl-kernel with a local import that must not leak into the other methods.
from sglang.jit_kernel.flash_attention import flash_attn_with_kvcache


class FlashAttentionBackend:
    def __init__(self, fa_impl_ver=3):
        from sgl_kernel.flash_attn import flash_attn_with_kvcache as probe

        self.fa_impl_ver = fa_impl_ver
        self.kv_cache_dtype_str = "auto"
        self.probe = probe

    def forward_extend(self, q, k_cache, v_cache, md, layer, sinks=None):
        k_descale, v_descale = None, None
        if self.kv_cache_dtype_str != "auto":
            k_descale = layer.k_scale
            v_descale = layer.v_scale
        kwargs = {}
        if sinks is not None:
            kwargs["sinks"] = sinks
        o, lse, *rest = flash_attn_with_kvcache(  # call: sglang-dispatcher
            q=q,
            k_cache=k_cache,
            v_cache=v_cache,
            page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32,
            cu_seqlens_q=md.cu_seqlens_q,
            cu_seqlens_k_new=md.cu_seqlens_k,
            max_seqlen_q=md.max_seq_len_q,
            softmax_scale=layer.scaling,
            causal=True,
            softcap=layer.logit_cap,
            k_descale=k_descale,  # expect: FA3M006
            v_descale=v_descale,  # expect: FA3M006
            return_softmax_lse=True,
            num_splits=0,
            ver=self.fa_impl_ver,  # expect: FA3M002
            **kwargs,
        )
        return o, lse

    def forward_decode(self, q, k_cache, v_cache, md, layer, out_buffer):
        # The one call that passes metadata, and the output buffer of sgl-kernel 0.4.1.post1+.
        return flash_attn_with_kvcache(  # call: sglang-dispatcher
            q=q,
            k_cache=k_cache,
            v_cache=v_cache,
            page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32,
            cu_seqlens_q=md.cu_seqlens_q,
            max_seqlen_q=1,
            softmax_scale=layer.scaling,
            causal=True,
            scheduler_metadata=md.scheduler_metadata,
            out=out_buffer,  # expect: FA3M003
            ver=self.fa_impl_ver,  # expect: FA3M002
        )

    def forward_mla_decode(self, q_rope, k_rope_cache, c_kv_cache, q_nope, md, layer):
        result = flash_attn_with_kvcache(  # call: sglang-dispatcher
            q=q_rope,
            k_cache=k_rope_cache,
            v_cache=c_kv_cache,
            qv=q_nope,  # expect: FA3M007
            page_table=md.page_table,
            cache_seqlens=md.cache_seqlens_int32,
            cu_seqlens_q=md.cu_seqlens_q,
            max_seqlen_q=1,
            softmax_scale=layer.scaling,
            causal=True,
            window_size=(-1, -1),
            softcap=0.0,
            return_softmax_lse=True,
            ver=3,
        )
        # The MLA branch returns (out, lse): four names do not fit.
        o, lse, o_accum, lse_accum = result  # expect: FA3M019
        return o
