# vLLM's FA2-era decode path (the shape of vllm/attention/backends/flash_attn.py, written anew):
# FlashAttention-2 keywords and vLLM's keyword-only extras, each a TypeError on MUSA.
from vllm.vllm_flash_attn import flash_attn_with_kvcache


class FlashAttentionImpl:
    def __init__(self, scale, alibi_slopes, sliding_window, logits_soft_cap, fa_version):
        self.scale = scale
        self.alibi_slopes = alibi_slopes
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap
        self.vllm_flash_attn_version = fa_version

    def decode(self, query, key_cache, value_cache, md, output):
        flash_attn_with_kvcache(  # call: vllm-flash-attn
            q=query.unsqueeze(1),
            k_cache=key_cache,
            v_cache=value_cache,
            block_table=md.block_tables,  # expect: FA3M003
            cache_seqlens=md.seq_lens_tensor,
            softmax_scale=self.scale,
            causal=True,
            window_size=self.sliding_window,
            alibi_slopes=self.alibi_slopes,  # expect: FA3M003
            softcap=self.logits_soft_cap,
            out=output.unsqueeze(1),  # expect: FA3M003
            fa_version=self.vllm_flash_attn_version,  # expect: FA3M003
        )
        return output
