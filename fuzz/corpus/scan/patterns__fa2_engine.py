# A small engine on FlashAttention-2 (the shape nano-vllm's attention layer has, written anew).
import torch
from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache


class Attention(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, q, k_cache, v_cache, context):
        if context.is_prefill:
            return flash_attn_varlen_func(q, k_cache, v_cache, causal=True)
        return flash_attn_with_kvcache(  # call: fa2
            q.unsqueeze(1), k_cache, v_cache,
            cache_seqlens=context.context_lens,
            block_table=context.block_tables,  # expect: FA3M003
            softmax_scale=self.scale, causal=True,
        )

    def with_lse(self, q, k_cache, v_cache, seqlens, table):
        # FlashAttention-2 returns (out, lse); mate's fmha path four values.
        out, lse = flash_attn_with_kvcache(  # call: fa2; expect: FA3M019
            q, k_cache, v_cache, cache_seqlens=seqlens, return_softmax_lse=True,
        )
        return out, lse

    def positional(self, q, k_cache, v_cache, cos, sin, seqlens):
        # Positions 6 and 7 are rotary_cos/sin in FlashAttention-2, qv/rotary_cos in FA3: on MUSA
        # `cos` is a `qv`, which sends the call down mate's MLA branch.
        return flash_attn_with_kvcache(  # call: fa2; expect: FA3M008
            q, k_cache, v_cache, None, None,
            cos,  # expect: FA3M004 FA3M007
            sin,  # expect: FA3M004
            seqlens,  # expect: FA3M004
        )
