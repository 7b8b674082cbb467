"""A ``flash_attn_with_kvcache`` in torch: the device stand-in of the torch tests.

Written from the stacks' documented semantics (FA3's docstring and its test reference
``attention_ref``: bottom-right aligned masks, windows, per-batch lengths, append-KV, paged caches),
independently of fa3conform's Rust reference, so that export -> ``fa3conform.run`` (torch backend)
-> verify is a real cross-implementation check. It computes in float64 and follows the MUSA stack's
conventions: SGLang's MUSA wrapper's ``ver`` gate and the first checks of mate (musa-fa3.md §5.1,
§5.3, F-9/F-10 of §5.5) with their exact messages; ``out`` in ``q``'s dtype; ``softmax_lse`` float32
``(b, h, seqlen_q)`` or ``(h, total_q)``; a row without any key gives ``out = 0``, ``lse = -inf``;
``return_softmax_lse`` returns ``(out, lse, o_accum, lse_accum)``.

Supported: contiguous and paged caches, any strides (expanded descales included), MQA/GQA, causal,
sliding windows and ``attention_chunk``, varlen ``q``, ``cache_seqlens`` (tensor or int),
``cache_leftpad``, ``cache_batch_idx``, ``softmax_scale``, ``softcap``, appending ``k``/``v`` (fixed
length or ``cu_seqlens_k_new``) with rotary embedding (interleaved or not, ``rotary_seqlens``),
``sinks``. Scheduling arguments do not change the result. ``qv`` raises NotImplementedError.
"""

import torch


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


def _mask(rows, keys, is_causal, is_local, left, right, chunk):
    """(rows, keys) booleans: which keys each query row sees, the last row aligned with the last key."""
    i = torch.arange(rows)[:, None] + (keys - rows)
    j = torch.arange(keys)[None, :]
    if is_causal:
        return j <= i
    if is_local:
        allowed = (j >= i - left) & (j <= i + right)
        if chunk > 0:
            start = torch.div(i, chunk, rounding_mode="floor") * chunk
            allowed &= (j >= start) & (j < start + chunk)
        return allowed
    return torch.ones(rows, keys, dtype=torch.bool)


def _rotate(x, cos, sin, positions, interleaved):
    """Rotary embedding of ``x`` (n, heads, d) in float64: row ``i`` by the angles at ``positions[i]``."""
    half = cos.shape[1]
    first = torch.arange(0, 2 * half, 2) if interleaved else torch.arange(half)
    second = first + 1 if interleaved else first + half
    c, s = cos[positions][:, None, :], sin[positions][:, None, :]
    out = x.clone()
    out[..., first] = x[..., first] * c - x[..., second] * s
    out[..., second] = x[..., first] * s + x[..., second] * c
    return out


def _as_ints(x):
    return [int(v) for v in x.reshape(-1).tolist()]


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, sinks=None,
                            score_mod=None, aux_tensors=None, ver=3):
    if ver != 3:
        raise ValueError("Only ver=3 is supported for MUSA FA3.")
    assert k_cache.stride(-1) == 1, "k_cache must have contiguous last dimension"
    assert v_cache.stride(-1) == 1, "v_cache must have contiguous last dimension"
    if qv is not None:
        raise NotImplementedError("the torch stand-in does not model qv")
    assert q.dtype in (torch.float16, torch.bfloat16), "inputs must be float16 or bfloat16"
    assert q.dtype == k_cache.dtype == v_cache.dtype, "inputs must have the same dtype"
    attention_chunk = attention_chunk or 0
    varlen = cu_seqlens_q is not None
    cu_q = _as_ints(cu_seqlens_q) if varlen else None
    batch = len(cu_q) - 1 if varlen else q.shape[0]
    seqlen_q = int(max_seqlen_q) if varlen else q.shape[1]
    heads, head_dim = q.shape[-2:]
    heads_k, head_dim_v = k_cache.shape[2], v_cache.shape[3]
    group = heads // heads_k
    page_size = k_cache.shape[1]
    pages = None if page_table is None else page_table.cpu().to(torch.int64)
    capacity = pages.shape[1] * page_size if pages is not None else k_cache.shape[1]
    scale = head_dim ** -0.5 if softmax_scale is None else float(softmax_scale)
    if isinstance(cache_seqlens, int):  # mate expands an int to k_cache.shape[0] entries
        cache_seqlens = torch.full((k_cache.shape[0],), cache_seqlens)
    seqused = None if cache_seqlens is None else _as_ints(cache_seqlens)
    leftpad = [0] * batch if cache_leftpad is None else _as_ints(cache_leftpad)
    kv_rows = list(range(batch)) if cache_batch_idx is None else _as_ints(cache_batch_idx)
    is_causal, is_local, left, right = _resolve_window(
        seqlen_q, capacity, causal, window_size[0], window_size[1], attention_chunk)

    def slots(row, positions):
        """(cache rows, indices inside them) of the logical key ``positions`` of KV row ``row``."""
        positions = torch.as_tensor(positions, dtype=torch.int64)
        if pages is None:
            return torch.full_like(positions, row), positions
        return pages[row, positions // page_size], positions % page_size

    rotary = None
    if rotary_cos is not None:
        rotary = (rotary_cos.cpu().double(), rotary_sin.cpu().double())
        starts = _as_ints(rotary_seqlens) if rotary_seqlens is not None else seqused

    new_lens = [0] * batch
    if k is not None:
        cu_new = None if cu_seqlens_k_new is None else _as_ints(cu_seqlens_k_new)
        for b in range(batch):
            new_k = k[cu_new[b]:cu_new[b + 1]] if cu_new is not None else k[b]
            new_v = v[cu_new[b]:cu_new[b + 1]] if cu_new is not None else v[b]
            new_lens[b] = new_k.shape[0]
            if rotary is not None:
                positions = starts[b] + torch.arange(new_k.shape[0])
                new_k = _rotate(new_k.cpu().double(), *rotary, positions, rotary_interleaved)
            rows, index = slots(kv_rows[b], seqused[b] + torch.arange(new_k.shape[0]))
            k_cache[rows, index] = new_k.to(k_cache.dtype).to(k_cache.device)
            v_cache[rows, index] = new_v.to(v_cache.dtype).to(v_cache.device)

    out = torch.zeros(q.shape[:-1] + (head_dim_v,), dtype=torch.float64)
    lse = torch.full((heads, q.shape[0]) if varlen else (batch, heads, seqlen_q), float("-inf"),
                     dtype=torch.float64)
    sink = None if sinks is None else sinks.cpu().double()[:, None, None]
    for b in range(batch):
        rows_q = slice(cu_q[b], cu_q[b + 1]) if varlen else slice(None)
        q_b = (q[rows_q] if varlen else q[b]).cpu().double()  # (sq, h, d)
        if rotary is not None:  # queries advance only when the resolved mask is causal or local
            step = 1 if is_causal or is_local else 0
            positions = starts[b] + step * torch.arange(q_b.shape[0])
            q_b = _rotate(q_b, *rotary, positions, rotary_interleaved).to(q.dtype).double()
        old = (capacity if seqused is None else seqused[b]) - leftpad[b]
        keys = old + new_lens[b]
        rows, index = slots(kv_rows[b], leftpad[b] + torch.arange(keys))
        k_b = k_cache[rows, index].cpu().double().repeat_interleave(group, dim=1)
        v_b = v_cache[rows, index].cpu().double().repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q_b, k_b) * scale
        if softcap > 0:
            scores = softcap * torch.tanh(scores / softcap)
        allowed = _mask(q_b.shape[0], keys, is_causal, is_local, left, right, attention_chunk)
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        seen = allowed.any(dim=-1)[None, :].expand(heads, -1)  # rows with at least one key
        peak = scores.amax(dim=-1, keepdim=True) if keys else torch.full(scores.shape[:-1] + (1,), float("-inf"))
        if sink is not None:
            peak = torch.maximum(peak, sink.expand_as(peak))
        shift = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
        weights = torch.exp(scores - shift)
        total = weights.sum(dim=-1, keepdim=True)
        if sink is not None:
            total = total + torch.exp(sink - shift)
        probs = torch.where(seen[..., None], weights / total, torch.zeros_like(weights))
        # A sink is in every row's denominator: on MUSA a row that sees no key still has
        # lse = sink when its tile loads a key block (docs/musa-device.md). This stand-in takes
        # that to be every row of a sequence that has keys, which holds for the suites' calls the
        # tests export; a sequence without keys, or a row without a sink, has -inf.
        defined = total[..., 0] > 0 if keys else torch.zeros_like(seen)
        row_lse = torch.where(defined, torch.log(total[..., 0]) + shift[..., 0],
                              torch.full_like(shift[..., 0], float("-inf")))
        o_b = torch.einsum("hqk,khd->qhd", probs, v_b)
        if varlen:
            out[rows_q] = o_b
            lse[:, rows_q] = row_lse
        else:
            out[b] = o_b
            lse[b] = row_lse
    out = out.to(q.dtype).to(q.device)
    if not return_softmax_lse:
        return out
    empty = torch.empty(0, dtype=torch.float32, device=q.device)
    return out, lse.float().to(q.device), empty, empty
