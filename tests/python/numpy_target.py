"""A CPU ``flash_attn_with_kvcache`` in plain NumPy: the device stand-in of the bridge loop test.

Written from the stacks' documented semantics (window resolution, bottom-right aligned masks,
per-batch lengths, append-KV, paged caches), independently of fa3conform's Rust reference, so that
export -> python -m fa3conform.run -> verify is a real cross-implementation check. It follows the MUSA
(mate) output conventions: ``out`` in ``q``'s dtype, ``softmax_lse`` float32 ``(b, h, seqlen_q)``
or ``(h, total_q)`` with ``cu_seqlens_q``, rows without any key give ``out = 0``, ``lse = -inf``.

Supported: contiguous and paged KV caches, strided inputs, MQA/GQA, causal, sliding windows and
``attention_chunk``, varlen ``q`` (``cu_seqlens_q``/``max_seqlen_q``), ``cache_seqlens`` (tensor or
int), ``cache_leftpad``, ``cache_batch_idx``, ``softmax_scale``, ``softcap``, appending ``k``/``v``
(fixed-length or ``cu_seqlens_k_new``), rotary embedding of appended keys and of queries
(interleaved or not, ``rotary_seqlens``), learnable ``sinks``, ``return_softmax_lse``; fp16 and
bf16. Scheduling arguments (``scheduler_metadata``, ``num_splits``, ``pack_gqa``, ``sm_margin``) do
not change the result and are ignored. Anything else (``qv``, fp8 descales) raises
``NotImplementedError``.

Tensors arrive as the runner's NumPy ``TypedArray``s: exact float32 values with the torch dtype
name in ``torch_dtype``.
"""

import numpy as np


def _ints(x):
    return np.asarray(x).astype(np.int64)


def _resolve_window(seqlen_q, seqlen_k, causal, window_left, window_right, chunk):
    """(is_causal, is_local, left, right) as mate's ``_resolve_mask`` resolves them."""
    if window_left >= seqlen_k - 1:
        window_left = -1
    if window_right >= seqlen_q - 1:
        window_right = -1
    if causal:
        window_right = 0
    is_causal = window_left < 0 and window_right == 0 and chunk == 0
    is_local = (window_left >= 0 or window_right >= 0 or chunk >= 1) and not is_causal
    left = seqlen_k - 1 if window_left < 0 else window_left
    right = seqlen_q - 1 if window_right < 0 else window_right
    if chunk > 0:
        left, right = min(left, chunk - 1), min(right, chunk - 1)
    return is_causal, is_local, left, right


def _allowed(rows, keys, offset, is_causal, is_local, left, right, chunk):
    """Boolean (rows, keys) mask: which keys each query row attends to (bottom-right aligned)."""
    i = np.arange(rows)[:, None] + offset
    j = np.arange(keys)[None, :]
    if is_causal:
        return j <= i
    if is_local:
        mask = (j >= i - left) & (j <= i + right)
        if chunk > 0:
            start = (i // chunk) * chunk  # floor division, also for negative positions
            mask &= (j >= start) & (j < start + chunk)
        return mask
    return np.ones((rows, keys), dtype=bool)


def _slot(position, row, page_table, page_size):
    """(cache row, index inside it) of logical key ``position`` of KV row ``row``."""
    if page_table is None:
        return row, position
    return int(page_table[row, position // page_size]), position % page_size


def _round(values, torch_dtype):
    """``values`` stored as ``torch_dtype`` (round to nearest even), back as float64."""
    if torch_dtype == "float16":
        return np.asarray(values).astype(np.float16).astype(np.float64)
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def _rotate(x, cos, sin, rows, interleaved):
    """Rotary embedding of ``x`` (n, heads, d): row ``i`` rotated by ``cos/sin[rows[i]]``."""
    half = cos.shape[1]
    first = np.arange(0, 2 * half, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    c, s = cos[rows][:, None, :], sin[rows][:, None, :]
    x0, x1 = x[..., first], x[..., second]
    rotated = np.array(x, np.float64)
    rotated[..., first] = x0 * c - x1 * s
    rotated[..., second] = x0 * s + x1 * c
    return rotated


def _tagged(values, like, torch_dtype):
    array = np.asarray(values, dtype=np.float32).view(type(like))
    array.torch_dtype = torch_dtype
    return array


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, sinks=None,
                            score_mod=None, aux_tensors=None, ver=3):
    unsupported = {"qv": qv, "q_descale": q_descale, "k_descale": k_descale,
                   "v_descale": v_descale}
    used = [name for name, value in unsupported.items() if value is not None]
    if used or q.torch_dtype not in ("float16", "bfloat16"):
        raise NotImplementedError(f"numpy target does not model {used or q.torch_dtype}")
    varlen = cu_seqlens_q is not None
    cu_q = _ints(cu_seqlens_q) if varlen else None
    batch = len(cu_q) - 1 if varlen else q.shape[0]
    seqlen_q = max_seqlen_q if varlen else q.shape[1]
    heads, head_dim = q.shape[-2:]
    heads_k, head_dim_v = k_cache.shape[2], v_cache.shape[3]
    group = heads // heads_k
    page_size = k_cache.shape[1]
    pages = None if page_table is None else _ints(page_table)
    seqlen_k = pages.shape[1] * page_size if pages is not None else k_cache.shape[1]
    scale = head_dim ** -0.5 if softmax_scale is None else softmax_scale
    if isinstance(cache_seqlens, int):  # mate expands an int to k_cache.shape[0] entries
        cache_seqlens = np.full(k_cache.shape[0], cache_seqlens)
    seqused = None if cache_seqlens is None else _ints(cache_seqlens)
    leftpad = np.zeros(batch, np.int64) if cache_leftpad is None else _ints(cache_leftpad)
    kv_rows = np.arange(batch) if cache_batch_idx is None else _ints(cache_batch_idx)
    is_causal, is_local, left, right = _resolve_window(
        seqlen_q, seqlen_k, causal, window_size[0], window_size[1], attention_chunk)

    rotary = None
    if rotary_cos is not None:
        rotary = (np.asarray(rotary_cos, np.float64), np.asarray(rotary_sin, np.float64))
        starts = _ints(rotary_seqlens) if rotary_seqlens is not None else seqused

    new_lens = np.zeros(batch, np.int64)
    if k is not None:
        cu_new = None if cu_seqlens_k_new is None else _ints(cu_seqlens_k_new)
        for b in range(batch):
            new_k = k[cu_new[b]:cu_new[b + 1]] if cu_new is not None else k[b]
            new_v = v[cu_new[b]:cu_new[b + 1]] if cu_new is not None else v[b]
            new_lens[b] = new_k.shape[0]
            if rotary is not None:
                positions = int(starts[b]) + np.arange(new_k.shape[0])
                new_k = _round(_rotate(new_k, *rotary, positions, rotary_interleaved), k.torch_dtype)
            for t in range(new_k.shape[0]):
                row, index = _slot(int(seqused[b]) + t, kv_rows[b], pages, page_size)
                k_cache[row, index] = new_k[t]
                v_cache[row, index] = new_v[t]

    out = np.zeros(q.shape[:-1] + (head_dim_v,), np.float64)
    lse = np.full((heads, q.shape[0]) if varlen else (batch, heads, seqlen_q), -np.inf)
    for b in range(batch):
        rows = slice(cu_q[b], cu_q[b + 1]) if varlen else slice(None)
        q_b = np.asarray(q[rows] if varlen else q[b], np.float64)  # (sq, h, d)
        if rotary is not None:  # queries advance only when the resolved mask is causal or local
            step = 1 if is_causal or is_local else 0
            positions = int(starts[b]) + step * np.arange(q_b.shape[0])
            q_b = _round(_rotate(q_b, *rotary, positions, rotary_interleaved), q.torch_dtype)
        old = (seqlen_k if seqused is None else int(seqused[b])) - int(leftpad[b])
        keys = old + int(new_lens[b])
        slots = [_slot(int(leftpad[b]) + j, kv_rows[b], pages, page_size) for j in range(keys)]
        k_b = np.array([k_cache[r, i] for r, i in slots], np.float64).reshape(keys, heads_k, head_dim)
        v_b = np.array([v_cache[r, i] for r, i in slots], np.float64).reshape(keys, heads_k, head_dim_v)
        k_b, v_b = np.repeat(k_b, group, axis=1), np.repeat(v_b, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q_b, k_b) * scale
        if softcap > 0:
            scores = softcap * np.tanh(scores / softcap)
        mask = _allowed(q_b.shape[0], keys, keys - q_b.shape[0], is_causal, is_local, left, right,
                        attention_chunk)
        scores = np.where(mask[None], scores, -np.inf)
        # A learnable sink adds exp(sink) of its head to every row's denominator (unscaled).
        sink = None if sinks is None else np.asarray(sinks, np.float64)[:, None, None]
        peak = scores.max(axis=-1, keepdims=True, initial=-np.inf)
        if sink is not None:
            peak = np.maximum(peak, sink)
        shift = np.where(np.isfinite(peak), peak, 0.0)
        weights = np.exp(scores - shift)
        total = weights.sum(axis=-1, keepdims=True) + (0.0 if sink is None else np.exp(sink - shift))
        # A row that sees no key keeps lse = sink (the device's rule, as in the torch stand-in)
        # when its sequence has keys; a sequence without keys has -inf.
        defined = total[..., 0] > 0 if keys else np.zeros(total.shape[:-1], bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            probs = np.where(total > 0, weights / total, 0.0)
            row_lse = np.where(defined, np.log(total[..., 0]) + shift[..., 0], -np.inf)
        o_b = np.einsum("hqk,khd->qhd", probs, v_b)
        if varlen:
            out[rows] = o_b
            lse[:, rows] = row_lse
        else:
            out[b] = o_b
            lse[b] = row_lse
    out = _tagged(out, q, q.torch_dtype)
    if not return_softmax_lse:
        return out
    empty = _tagged(np.zeros(0), q, "float32")
    return out, _tagged(lse, q, "float32"), empty, empty
