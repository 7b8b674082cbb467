"""The FA3 wrapper under the stand-in dispatcher: it allocates what the kernel would return and
computes nothing (the recorded server holds its KV pool on the ``meta`` device)."""

import torch


def flash_attn_with_kvcache(q, k_cache, v_cache, return_softmax_lse=False, cu_seqlens_q=None,
                            **kwargs):
    out = torch.empty(*q.shape[:-1], v_cache.shape[-1], dtype=torch.bfloat16, device=q.device)
    if not return_softmax_lse:
        return out
    rows = (q.shape[-2], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[-2], q.shape[1])
    lse = torch.empty(*rows, dtype=torch.float32, device=q.device)
    return out, lse, None, None
