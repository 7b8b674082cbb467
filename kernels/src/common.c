/*
 * Shared pieces of the host forward path: row conversion, rotary, per-batch lengths, cache
 * addressing. Compiled without floating-point contraction (ISO C mode), so rotary results are the
 * same on every target.
 */
#include "fa3_internal.h"

void fa3_load_row(const fa3_tensor *t, int64_t first, int64_t count, float *dst) {
    FA3_CHECK_RANGE(first, count, t->numel, "row");
    switch (t->dtype) {
    case FA3_DTYPE_F16: {
        const uint16_t *src = (const uint16_t *)t->data + first;
        for (int64_t i = 0; i < count; ++i) {
            dst[i] = fa3_f16_to_f32(src[i]);
        }
        break;
    }
    case FA3_DTYPE_BF16: {
        const uint16_t *src = (const uint16_t *)t->data + first;
        for (int64_t i = 0; i < count; ++i) {
            dst[i] = fa3_bits_f32((uint32_t)src[i] << 16);
        }
        break;
    }
    case FA3_DTYPE_E4M3: {
        const uint8_t *src = (const uint8_t *)t->data + first;
        for (int64_t i = 0; i < count; ++i) {
            dst[i] = fa3_e4m3_to_f32(src[i]);
        }
        break;
    }
    default:
        memcpy(dst, (const float *)t->data + first, (size_t)count * sizeof(float));
    }
}

/* Entry `i` of a cos/sin table for a row the device reads: 0 past the rows it reads (robust load)
 * or past the tensor. */
static float rotary_entry(const fa3_fwd_params *params, const fa3_tensor *t, int64_t position,
                          int64_t i) {
    int64_t at = position * t->stride[0] + i;
    int readable = position >= 0 && position < params->rotary_rows && at < t->numel;
    return readable ? fa3_load(t, at) : 0.0f;
}

void fa3_rotate(const fa3_fwd_params *params, int64_t position, float *x, int32_t dtype) {
    int64_t half = params->rotary_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
        float c = rotary_entry(params, &params->rotary_cos, position, i);
        float s = rotary_entry(params, &params->rotary_sin, position, i);
        /* Interleaved pairs (2i, 2i+1); GPT-NeoX pairs (i, i + rotary_dim/2). */
        int64_t i0 = params->rotary_interleaved ? 2 * i : i;
        int64_t i1 = params->rotary_interleaved ? 2 * i + 1 : i + half;
        float x0 = x[i0];
        float x1 = x[i1];
        float x0c = x0 * c, x1s = x1 * s, x0s = x0 * s, x1c = x1 * c;
        x[i0] = x0c - x1s;
        x[i1] = x0s + x1c;
    }
    for (int64_t i = 0; i < params->rotary_dim; ++i) {
        x[i] = fa3_round_to(dtype, x[i]);
    }
}

fa3_seqlens fa3_seqlens_of(const fa3_fwd_params *params, int64_t batch) {
    fa3_seqlens s;
    s.leftpad = params->cache_leftpad.data ? fa3_index_at(&params->cache_leftpad, batch, "cache_leftpad") : 0;
    if (params->cu_seqlens_q.data) {
        s.q_row_base = fa3_index_at(&params->cu_seqlens_q, batch, "cu_seqlens_q");
        s.seqlen_q = fa3_index_at(&params->cu_seqlens_q, batch + 1, "cu_seqlens_q") - s.q_row_base;
    } else {
        s.q_row_base = 0;
        s.seqlen_q = params->seqlen_q;
    }
    int64_t used = params->cache_seqlens.data
                       ? fa3_index_at(&params->cache_seqlens, batch, "cache_seqlens")
                       : params->seqlen_k;
    s.seqlen_k_old = used - s.leftpad;
    s.knew_row_base = 0;
    s.seqlen_k_new = 0;
    if (params->k_new.data) {
        if (params->cu_seqlens_k_new.data) {
            s.knew_row_base = fa3_index_at(&params->cu_seqlens_k_new, batch, "cu_seqlens_k_new");
            s.seqlen_k_new = fa3_index_at(&params->cu_seqlens_k_new, batch + 1, "cu_seqlens_k_new") -
                             s.knew_row_base;
        } else {
            s.seqlen_k_new = params->seqlen_k_new;
        }
    }
    s.seqlen_k = s.seqlen_k_old + s.seqlen_k_new;
    s.rotary_start = (params->k_new.data && params->rotary_seqlens.data)
                         ? fa3_index_at(&params->rotary_seqlens, batch, "rotary_seqlens")
                         : used;
    s.kv_batch = params->cache_batch_idx.data
                     ? fa3_index_at(&params->cache_batch_idx, batch, "cache_batch_idx")
                     : batch;
    s.seqlen_k_total = params->cp_world_size > 1
                           ? fa3_index_at(&params->cp_tot_seqused_k, batch, "cp_tot_seqused_k")
                           : s.seqlen_k;
    return s;
}

int64_t fa3_cache_offset(const fa3_fwd_params *params, const fa3_tensor *t, int64_t kv_batch,
                         int64_t position, int64_t head) {
    if (params->page_table.data) {
        int64_t entry = kv_batch * params->page_table_stride + position / params->page_size;
        int64_t page = fa3_index_at(&params->page_table, entry, "page_table");
        return page * t->stride[0] + (position % params->page_size) * t->stride[1] +
               head * t->stride[2];
    }
    return kv_batch * t->stride[0] + position * t->stride[1] + head * t->stride[2];
}

int64_t fa3_device_offset(const fa3_fwd_params *params, const fa3_tensor *t, int64_t kv_batch,
                          int64_t position, int64_t head) {
    if (params->page_table.data) {
        int64_t entry = kv_batch * params->page_table_stride + position / params->page_size;
        int64_t page = entry < params->page_table.numel ? params->page_table.data[entry] : 0;
        return page * t->stride[0] + (position % params->page_size) * t->stride[1] +
               head * t->stride[2];
    }
    return kv_batch * t->stride[0] + position * t->stride[1] + head * t->stride[2];
}

int64_t fa3_kv_read_offset(const fa3_fwd_params *params, const fa3_tensor *t, int32_t reads,
                           int64_t kv_batch, int64_t position, int64_t head, int64_t count) {
    if (reads == FA3_KV_READS_KEYS) {
        return fa3_cache_offset(params, t, kv_batch, position, head);
    }
    if (reads == FA3_KV_READS_SHAPE_BOUNDED && !params->page_table.data && position >= params->seqlen_k) {
        return -1;
    }
    int64_t at = fa3_device_offset(params, t, kv_batch, position, head);
    return at >= 0 && at + count <= t->numel ? at : -1;
}

/* Stores `count` values at the device's address of (position, head); values that fall outside the
 * cache buffer are dropped, as the device's robust stores drop them. */
static void store_row(const fa3_fwd_params *params, const fa3_tensor *t, int64_t kv_batch,
                      int64_t position, int64_t head, const float *row, int64_t count) {
    int64_t at = fa3_device_offset(params, t, kv_batch, position, head);
    for (int64_t i = 0; i < count; ++i) {
        if (at + i >= 0 && at + i < t->numel) {
            fa3_store(t, at + i, row[i]);
        }
    }
}

void fa3_append_kv(const fa3_fwd_params *params, int64_t batch) {
    fa3_seqlens s = fa3_seqlens_of(params, batch);
    int64_t k_dims = fa3_max64(params->head_dim, params->append_dim);
    int64_t v_dims = fa3_max64(params->head_dim_v, params->append_dim_v);
    /* Head dims are bounded by the caller (at most a few thousand); a VLA keeps this allocation-free. */
    float row[fa3_max64(k_dims, v_dims)];
    int64_t first_position = s.leftpad + s.seqlen_k_old;
    for (int64_t t = 0; t < s.seqlen_k_new; ++t) {
        int64_t position = first_position + t;
        int64_t src_row = s.knew_row_base + t;
        for (int64_t h = 0; h < params->num_heads_k; ++h) {
            int64_t k_src = batch * params->k_new.stride[0] + src_row * params->k_new.stride[1] +
                            h * params->k_new.stride[2];
            fa3_load_row(&params->k_new, k_src, params->head_dim, row);
            if (params->rotary_cos.data) {
                fa3_rotate(params, s.rotary_start + t, row, params->k_cache.dtype);
            }
            /* Columns past the head dim: the staged tile's fill (docs/musa-device.md D4). */
            memset(row + params->head_dim, 0, (size_t)(k_dims - params->head_dim) * sizeof(float));
            store_row(params, &params->k_cache, s.kv_batch, position, h, row, params->append_dim);
            int64_t v_src = batch * params->v_new.stride[0] + src_row * params->v_new.stride[1] +
                            h * params->v_new.stride[2];
            fa3_load_row(&params->v_new, v_src, params->head_dim_v, row);
            memset(row + params->head_dim_v, 0, (size_t)(v_dims - params->head_dim_v) * sizeof(float));
            store_row(params, &params->v_cache, s.kv_batch, position, h, row, params->append_dim_v);
        }
    }
}

void fa3_combine(const fa3_fwd_params *params, int64_t position, int64_t head) {
    int64_t splits = fa3_index_at(&params->num_splits_dynamic, position, "num_splits_dynamic");
    if (splits <= 1) {
        return;
    }
    int64_t batch = fa3_index_at(&params->batch_table, position, "batch_table");
    fa3_seqlens s = fa3_seqlens_of(params, batch);
    int64_t used = fa3_min64(splits, params->num_splits);
    const float *lse_accum = (const float *)params->lse_accum.data;
    const float *o_accum = (const float *)params->o_accum.data;
    int64_t dv = params->head_dim_v;
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
        int64_t row = s.q_row_base + i;
        int64_t lse_base = batch * params->lse_accum.stride[0] + head * params->lse_accum.stride[1] +
                           row * params->lse_accum.stride[3];
        int64_t o_base = batch * params->o_accum.stride[0] + head * params->o_accum.stride[1] +
                         row * params->o_accum.stride[3];
        float lse_max = -INFINITY;
        int unwritten = 0;
        for (int64_t sp = 0; sp < used; ++sp) {
            int64_t at = lse_base + sp * params->lse_accum.stride[2];
            FA3_CHECK(at >= 0 && at < params->lse_accum.numel, "lse_accum", at, params->lse_accum.numel);
            unwritten |= isnan(lse_accum[at]);
            lse_max = fmaxf(lse_max, lse_accum[at]);
        }
        float lse = -INFINITY;
        if (unwritten) {
            /* A slot no tile wrote holds whatever the device's uninitialised accumulator held; the
             * host fills the slots with NaN and lets them poison the row, so that the symptom of
             * stale metadata is visible rather than a plausible value. */
            lse = NAN;
        } else if (lse_max != -INFINITY) {
            float sum = 0.0f;
            for (int64_t sp = 0; sp < used; ++sp) {
                sum += expf(lse_accum[lse_base + sp * params->lse_accum.stride[2]] - lse_max);
            }
            lse = lse_max + logf(sum);
        }
        int64_t out_base = batch * params->out.stride[0] + row * params->out.stride[1] +
                           head * params->out.stride[2];
        for (int64_t c = 0; c < dv; ++c) {
            float acc = unwritten ? NAN : 0.0f;
            if (!unwritten && lse != -INFINITY) {
                for (int64_t sp = 0; sp < used; ++sp) {
                    float weight = expf(lse_accum[lse_base + sp * params->lse_accum.stride[2]] - lse);
                    int64_t at = o_base + sp * params->o_accum.stride[2] + c;
                    FA3_CHECK(at >= 0 && at < params->o_accum.numel, "o_accum", at, params->o_accum.numel);
                    acc += weight * o_accum[at];
                }
            }
            fa3_store(&params->out, out_base + c, acc);
        }
        int64_t lse_at = batch * params->lse.stride[0] + head * params->lse.stride[1] +
                         row * params->lse.stride[2];
        fa3_store(&params->lse, lse_at, lse);
    }
}

int64_t fa3_fwd_workspace_floats(const fa3_fwd_params *params) {
    int64_t tm = params->tile_m, tn = params->tile_n, d = params->head_dim;
    int64_t dv_pad = fa3_ceil_div(params->head_dim_v, 16) * 16;
    int64_t qv = params->qv.data ? tm * dv_pad + dv_pad * tn : 0;
    /* q, scores, o, max, sum | k^T, v | qv, v^T */
    return tm * (d + tn + dv_pad + 2) + d * tn + tn * dv_pad + qv;
}
