# FA3M020: fp8 inputs, reached through a dtype variable; mate runs float16/bfloat16 only.
import torch
from sgl_kernel.flash_attn import flash_attn_with_kvcache

FP8 = torch.float8_e4m3fn


def decode(q, k_cache, v_cache, cu, md, fp8_kv):
    dtype = FP8 if fp8_kv else torch.bfloat16
    k_fp8 = k_cache.view(dtype)
    flash_attn_with_kvcache(
        q.to(torch.float8_e4m3fn), k_fp8, v_cache.view(dtype), cu_seqlens_q=cu,
        scheduler_metadata=md,
    )
    # Not reported: bfloat16.
    flash_attn_with_kvcache(
        q.to(torch.bfloat16), k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md
    )
