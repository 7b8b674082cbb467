"""A NumPy stand-in for SGLang's flash_attn_with_kvcache dispatcher, so that a test suite written
against it runs without a GPU: same module path and signature, decode attention over a paged KV
cache computed with NumPy. Tensors are ``Tensor``: a NumPy array with the torch-like face the
recorder reads (``shape``, ``dtype``, ``stride()``, ``device``, ``reshape``, ``tolist``); a dtype
NumPy lacks (bfloat16) is carried by name over float32 data."""

import numpy as np


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class Tensor:
    def __init__(self, array, dtype=None, device="cuda:0"):
        self.array = np.asarray(array)
        self.dtype = Dtype(dtype or str(self.array.dtype))
        self.device = device

    @property
    def shape(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def reshape(self, *shape):
        return Tensor(self.array.reshape(*shape), self.dtype.name, self.device)

    def tolist(self):
        return self.array.tolist()


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, sinks=None,
                            score_mod=None, aux_tensors=None, ver=3):
    """Decode attention (one query token per sequence) over a paged cache; softcap > 0 caps the
    scores as FA3 does."""
    qa, ka, va = q.array, k_cache.array, v_cache.array
    batch, _, heads, dim = qa.shape
    page_size, kv_heads = ka.shape[1], ka.shape[2]
    scale = softmax_scale if softmax_scale is not None else dim ** -0.5
    out = np.zeros_like(qa, dtype=np.float32)
    for b in range(batch):
        length = int(cache_seqlens.array[b])
        pages = page_table.array[b][: -(-length // page_size)]
        keys = ka[pages].reshape(-1, kv_heads, dim)[:length]
        values = va[pages].reshape(-1, kv_heads, dim)[:length]
        for h in range(heads):
            kv = h // (heads // kv_heads)
            scores = keys[:, kv] @ qa[b, 0, h] * scale
            if softcap > 0:
                scores = softcap * np.tanh(scores / softcap)
            weights = np.exp(scores - scores.max())
            out[b, 0, h] = weights @ values[:, kv] / weights.sum()
    return Tensor(out, q.dtype.name)
