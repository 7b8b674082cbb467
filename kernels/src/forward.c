/*
 * One forward work tile (cuda-fa3.md D.2, D.12, D.15; musa-fa3.md §6.9): load the Q tile (rotated
 * when rotary applies), walk the tile's KV blocks of its split with an online softmax in f32
 * (base 2, scores scaled by softmax_scale * log2(e) as the devices do), finish with the sink and
 * write final O/LSE or the split's partials.
 *
 * This file is compiled once per instruction-set variant (FA3_VARIANT names the entry point, the
 * build adds the target flags); dispatch.c picks one at run time. Contraction into FMA is allowed
 * here, so variants may differ in the last bits.
 */
#include "fa3_internal.h"

#ifndef FA3_VARIANT
#error "FA3_VARIANT must name the variant (portable, avx2, avx512)"
#endif
#define FA3_CONCAT2(a, b) a##_##b
#define FA3_CONCAT(a, b) FA3_CONCAT2(a, b)
#define FA3_TILE_FN FA3_CONCAT(fa3_fwd_tile, FA3_VARIANT)

void FA3_TILE_FN(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace);

/* Register block of the matrix products: FA3_ROWS rows x 16 columns, one 16-float vector per row
 * (GNU vector extension, lowered to whatever the variant's vector width is). Vectors are moved
 * with memcpy (unaligned) and never passed by value, so no function's ABI depends on the ISA. */
#define FA3_ROWS 4
#define FA3_COLS 16
typedef float fa3_v16 __attribute__((vector_size(FA3_COLS * sizeof(float))));

/* c[m][n] += a[m][k] * b[k][n] (row strides lda, ldb, ldc); n is a multiple of FA3_COLS. */
static void gemm_acc(float *restrict c, int64_t ldc, const float *restrict a, int64_t lda,
                     const float *restrict b, int64_t ldb, int64_t m, int64_t n, int64_t k) {
    int64_t i = 0;
    for (; i + FA3_ROWS <= m; i += FA3_ROWS) {
        const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        for (int64_t j = 0; j < n; j += FA3_COLS) {
            fa3_v16 acc0, acc1, acc2, acc3, bv;
            memcpy(&acc0, c + i * ldc + j, sizeof acc0);
            memcpy(&acc1, c + (i + 1) * ldc + j, sizeof acc1);
            memcpy(&acc2, c + (i + 2) * ldc + j, sizeof acc2);
            memcpy(&acc3, c + (i + 3) * ldc + j, sizeof acc3);
            for (int64_t p = 0; p < k; ++p) {
                memcpy(&bv, b + p * ldb + j, sizeof bv);
                acc0 += a0[p] * bv;
                acc1 += a1[p] * bv;
                acc2 += a2[p] * bv;
                acc3 += a3[p] * bv;
            }
            memcpy(c + i * ldc + j, &acc0, sizeof acc0);
            memcpy(c + (i + 1) * ldc + j, &acc1, sizeof acc1);
            memcpy(c + (i + 2) * ldc + j, &acc2, sizeof acc2);
            memcpy(c + (i + 3) * ldc + j, &acc3, sizeof acc3);
        }
    }
    for (; i < m; ++i) {
        for (int64_t j = 0; j < n; j += FA3_COLS) {
            fa3_v16 acc, bv;
            memcpy(&acc, c + i * ldc + j, sizeof acc);
            for (int64_t p = 0; p < k; ++p) {
                memcpy(&bv, b + p * ldb + j, sizeof bv);
                acc += a[i * lda + p] * bv;
            }
            memcpy(c + i * ldc + j, &acc, sizeof acc);
        }
    }
}

/* 2^x, branch-free so that loops over it vectorise: exactly 0 at and below -127 (and for -inf),
 * +inf from 127.5 on (and for +inf), NaN for NaN. Degree-6 polynomial on [-0.5, 0.5], relative
 * error about 1e-7. */
static inline float exp2_approx(float x) {
    float clamped = x < -127.0f ? -127.0f : (x > 128.0f ? 128.0f : x);
    float n = (clamped + 12582912.0f) - 12582912.0f; /* round to nearest integer */
    float f = clamped - n;
    float p = 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    /* A NaN x compares false both ways above; keep it out of the integer conversion. */
    int32_t e = (x == x ? (int32_t)n : 0) + 127;
    float r = p * fa3_bits_f32((uint32_t)e << 23);
    return x == x ? r : x;
}

/* Keys whose K and V rows are prefetched ahead of the one being converted: paged and
 * head-strided rows defeat the hardware prefetcher, and decode tiles are bound by their latency. */
#define FA3_PREFETCH_KEYS 16

static void prefetch_row(const fa3_tensor *t, int64_t offset, int64_t count) {
    static const int64_t element_bytes[] = {4, 2, 2, 1}; /* by fa3_dtype */
    const char *row = (const char *)t->data + offset * element_bytes[t->dtype];
    for (int64_t byte = 0; byte < count * element_bytes[t->dtype]; byte += 64) {
        __builtin_prefetch(row + byte);
    }
}

/* How many local keys j of a context-parallel rank have global position j * W + rank <= last. */
static int64_t cp_keys_through(const fa3_fwd_params *params, int64_t last) {
    return last < params->cp_rank ? 0 : (last - params->cp_rank) / params->cp_world_size + 1;
}

/* Keys [lo, hi) query position `i` may attend to (D.2), with o = sk - sq. With context parallelism
 * the limits hold for global positions and o = total - sq (mate mask.hpp L122-L131, L162-L177). */
static void key_interval(const fa3_fwd_params *params, const fa3_seqlens *s, int64_t i,
                         int64_t *lo, int64_t *hi) {
    int64_t diag = i + s->seqlen_k - s->seqlen_q;
    *lo = 0;
    *hi = s->seqlen_k;
    if (params->cp_world_size > 1) {
        *hi = fa3_min64(*hi, cp_keys_through(params, s->seqlen_k_total - 1));
        if (params->is_causal) {
            *hi = fa3_min64(*hi, cp_keys_through(params, i + s->seqlen_k_total - s->seqlen_q));
        }
        return;
    }
    if (params->is_causal) {
        *hi = fa3_min64(*hi, diag + 1);
    } else if (params->is_local) {
        *lo = fa3_max64(0, diag - params->window_left);
        *hi = fa3_min64(*hi, diag + params->window_right + 1);
        if (params->attention_chunk > 0) {
            int64_t c0 = fa3_floor_div(diag, params->attention_chunk) * params->attention_chunk;
            *lo = fa3_max64(*lo, c0);
            *hi = fa3_min64(*hi, c0 + params->attention_chunk);
        }
    }
}

/* The tile's key-block range before splitting (D.12, block_info.hpp). */
static void block_range(const fa3_fwd_params *params, const fa3_seqlens *s, int64_t m_block,
                        int64_t group, int64_t *n_min, int64_t *n_max) {
    int64_t bm = params->tile_m, bn = params->tile_n;
    int64_t offset = s->seqlen_k - s->seqlen_q;
    *n_min = 0;
    *n_max = fa3_ceil_div(s->seqlen_k, bn);
    if (params->is_causal || params->is_local) {
        int64_t m_max = params->pack_gqa ? ((m_block + 1) * bm - 1) / group + 1 : (m_block + 1) * bm;
        int64_t right = m_max + offset + (params->is_local ? params->window_right : 0);
        if (params->is_local && params->attention_chunk > 0) {
            int64_t chunk = params->attention_chunk;
            right = fa3_min64(right, -fa3_floor_div(-(m_max + offset), chunk) * chunk);
        }
        if (params->cp_world_size > 1 && params->is_causal) {
            /* global limit to local keys (block_info.hpp L37-L57) */
            right = fa3_ceil_div(m_max + s->seqlen_k_total - s->seqlen_q - params->cp_rank,
                                 params->cp_world_size);
        }
        *n_max = fa3_min64(*n_max, fa3_ceil_div(right, bn));
    }
    if (params->is_local) {
        int64_t m_min = params->pack_gqa ? m_block * bm / group : m_block * bm;
        int64_t left = m_min + offset - params->window_left;
        if (params->attention_chunk > 0) {
            int64_t chunk = params->attention_chunk;
            left = fa3_max64(left, fa3_floor_div(m_min + offset, chunk) * chunk);
        }
        *n_min = fa3_max64(0, left / bn);
    }
}

void FA3_TILE_FN(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace) {
    const int64_t bm = params->tile_m, bn = params->tile_n;
    const int64_t d = params->head_dim, dv = params->head_dim_v;
    const int64_t dv_pad = fa3_ceil_div(dv, 16) * 16;
    const int64_t group = params->num_heads / params->num_heads_k;
    const fa3_seqlens s = fa3_seqlens_of(params, tile->batch);
    const int64_t b = tile->batch;
    const int64_t rows_total = s.seqlen_q * (params->pack_gqa ? group : 1);
    const int64_t m0 = tile->m_block * bm;
    if (m0 >= rows_total) {
        return;
    }
    const int64_t rows = fa3_min64(bm, rows_total - m0);
    const int64_t kv_head = params->pack_gqa ? tile->head_block : tile->head_block / group;
    const int has_qv = params->qv.data != NULL;

    float *q = workspace;               /* bm x d */
    float *scores = q + bm * d;         /* bm x bn */
    float *o = scores + bm * bn;        /* bm x dv_pad */
    float *row_max = o + bm * dv_pad;   /* bm, base-2 scaled */
    float *row_sum = row_max + bm;      /* bm */
    float *kt = row_sum + bm;           /* d x bn */
    float *v = kt + d * bn;             /* bn x dv_pad */
    float *qv = v + bn * dv_pad;        /* bm x dv_pad (qv only) */
    float *vt = qv + bm * dv_pad;       /* dv_pad x bn (qv only) */

    /* Query rows: packed row r is position r / group of head head_block * group + r % group. */
    int64_t position[bm], head[bm], key_lo[bm], key_hi[bm];
    for (int64_t r = 0; r < rows; ++r) {
        int64_t packed = m0 + r;
        position[r] = params->pack_gqa ? packed / group : packed;
        head[r] = params->pack_gqa ? tile->head_block * group + packed % group : tile->head_block;
        key_interval(params, &s, position[r], &key_lo[r], &key_hi[r]);
        int64_t qrow = s.q_row_base + position[r];
        int64_t q_at = b * params->q.stride[0] + qrow * params->q.stride[1] + head[r] * params->q.stride[2];
        fa3_load_row(&params->q, q_at, d, q + r * d);
        if (params->rotary_cos.data) {
            int64_t rot = s.rotary_start + ((params->is_causal || params->is_local) ? position[r] : 0);
            fa3_rotate(params, rot, q + r * d, params->q.dtype);
        }
        if (has_qv) {
            int64_t qv_at = b * params->qv.stride[0] + qrow * params->qv.stride[1] + head[r] * params->qv.stride[2];
            fa3_load_row(&params->qv, qv_at, dv, qv + r * dv_pad);
            memset(qv + r * dv_pad + dv, 0, (size_t)(dv_pad - dv) * sizeof(float));
        }
        row_max[r] = -INFINITY;
        row_sum[r] = 0.0f;
    }
    memset(o, 0, (size_t)(rows * dv_pad) * sizeof(float));

    float descale_qk = 1.0f, descale_v = 1.0f;
    if (params->q_descale.data) {
        descale_qk *= fa3_load(&params->q_descale, b * params->q_descale.stride[0] + kv_head * params->q_descale.stride[1]);
    }
    if (params->k_descale.data) {
        descale_qk *= fa3_load(&params->k_descale, b * params->k_descale.stride[0] + kv_head * params->k_descale.stride[1]);
    }
    if (params->v_descale.data) {
        descale_v = fa3_load(&params->v_descale, b * params->v_descale.stride[0] + kv_head * params->v_descale.stride[1]);
    }
    /* Scores stay raw (q.k, or softcap.tanh(q.k.scale/softcap) with the scale then 1), the row
     * maximum is taken over raw scores and the exponent scales both (docs/musa-device.md §1). */
    const int has_softcap = params->softcap != 0.0f;
    const float scale_ln = has_softcap ? 1.0f : descale_qk * params->softmax_scale;
    const float scale_log2 = scale_ln * FA3_LOG2E;
    const float softcap_arg = has_softcap ? descale_qk * params->softmax_scale / params->softcap : 0.0f;
    const int round_p = params->round_p &&
                        (params->q.dtype == FA3_DTYPE_F16 || params->q.dtype == FA3_DTYPE_BF16);

    int64_t n_min, n_max;
    block_range(params, &s, tile->m_block, group, &n_min, &n_max);
    int64_t splits = tile->num_splits_of_batch > 1 ? tile->num_splits_of_batch : 1;
    int64_t per = n_max <= n_min ? 0 : fa3_ceil_div(n_max - n_min, splits);
    int64_t n_begin = n_min + tile->split * per;
    int64_t n_end = fa3_min64(n_max, n_begin + per);

    float kv_row[d > dv ? d : dv];
    /* Key blocks from the last down, as the device visits them. */
    for (int64_t n = n_end - 1; n >= n_begin; --n) {
        const int first = n == n_end - 1;
        int64_t key0 = n * bn;
        int64_t keys = fa3_min64(bn, s.seqlen_k - key0);
        /* The device multiplies P with every V row of the block; rows past the last key (P = 0)
         * hold whatever its load path reads there (D3). K's rows past it only meet masked scores. */
        int64_t v_rows = params->v_reads == FA3_KV_READS_KEYS ? keys : bn;
        if (keys < bn) {
            for (int64_t c = 0; c < d; ++c) {
                memset(kt + c * bn + keys, 0, (size_t)(bn - keys) * sizeof(float));
            }
        }
        for (int64_t j = 0; j < v_rows; ++j) {
            /* Prefetch FA3_PREFETCH_KEYS rows ahead, into the next block visited near the end. */
            int64_t ahead = j + FA3_PREFETCH_KEYS;
            int64_t next = ahead < keys ? key0 + ahead : (n > n_begin ? key0 - bn + (ahead - keys) : -1);
            if (next >= 0 && next < key0 + bn) {
                int64_t pos = s.leftpad + next;
                int64_t k_next = fa3_kv_read_offset(params, &params->k_cache, params->k_reads, s.kv_batch, pos, kv_head, d);
                int64_t v_next = fa3_kv_read_offset(params, &params->v_cache, params->v_reads, s.kv_batch, pos, kv_head, dv);
                if (k_next >= 0) {
                    prefetch_row(&params->k_cache, k_next, d);
                }
                if (v_next >= 0) {
                    prefetch_row(&params->v_cache, v_next, dv);
                }
            }
            int64_t cache_pos = s.leftpad + key0 + j;
            if (j < keys) {
                int64_t k_at = fa3_kv_read_offset(params, &params->k_cache, params->k_reads, s.kv_batch, cache_pos, kv_head, d);
                if (k_at >= 0) {
                    fa3_load_row(&params->k_cache, k_at, d, kv_row);
                } else {
                    memset(kv_row, 0, (size_t)d * sizeof(float));
                }
                for (int64_t c = 0; c < d; ++c) {
                    kt[c * bn + j] = kv_row[c];
                }
            }
            int64_t v_at = fa3_kv_read_offset(params, &params->v_cache, params->v_reads, s.kv_batch, cache_pos, kv_head, dv);
            if (v_at >= 0) {
                fa3_load_row(&params->v_cache, v_at, dv, v + j * dv_pad);
            } else {
                memset(v + j * dv_pad, 0, (size_t)dv * sizeof(float));
            }
            memset(v + j * dv_pad + dv, 0, (size_t)(dv_pad - dv) * sizeof(float));
        }
        memset(scores, 0, (size_t)(rows * bn) * sizeof(float));
        gemm_acc(scores, bn, q, d, kt, bn, rows, bn, d);
        if (has_qv) {
            for (int64_t j = 0; j < bn; ++j) {
                for (int64_t c = 0; c < dv_pad; ++c) {
                    vt[c * bn + j] = j < keys ? v[j * dv_pad + c] : 0.0f;
                }
            }
            gemm_acc(scores, bn, qv, dv_pad, vt, bn, rows, bn, dv_pad);
        }
        for (int64_t r = 0; r < rows; ++r) {
            float *srow = scores + r * bn;
            int64_t lo = key_lo[r] - key0, hi = key_hi[r] - key0;
            if (has_softcap) {
                for (int64_t j = 0; j < bn; ++j) {
                    srow[j] = params->softcap * tanhf(srow[j] * softcap_arg);
                }
            }
            for (int64_t j = 0; j < bn; ++j) {
                srow[j] = (j >= lo && j < hi) ? srow[j] : -INFINITY;
            }
            /* Reductions over FA3_COLS independent lanes, so that they vectorise. */
            float lane[FA3_COLS];
            for (int x = 0; x < FA3_COLS; ++x) {
                lane[x] = -INFINITY;
            }
            for (int64_t j = 0; j < bn; j += FA3_COLS) {
                for (int x = 0; x < FA3_COLS; ++x) {
                    lane[x] = lane[x] > srow[j + x] ? lane[x] : srow[j + x];
                }
            }
            float block_max = -INFINITY;
            for (int x = 0; x < FA3_COLS; ++x) {
                block_max = block_max > lane[x] ? block_max : lane[x];
            }
            float previous = row_max[r];
            float new_max = first || block_max > previous ? block_max : previous;
            if (params->clamp_row_max && new_max == -INFINITY) {
                /* mate keeps 0 as the row's maximum (softmax.hpp L80-L82, D1). */
                new_max = 0.0f;
            }
            /* A maximum of -inf (nothing visible yet) counts as 0 in the exponent. */
            float max_used = new_max == -INFINITY ? 0.0f : new_max;
            float max_scaled = max_used * scale_log2;
            for (int x = 0; x < FA3_COLS; ++x) {
                lane[x] = 0.0f;
            }
            for (int64_t j = 0; j < bn; j += FA3_COLS) {
                for (int x = 0; x < FA3_COLS; ++x) {
                    float p = exp2_approx(srow[j + x] * scale_log2 - max_scaled);
                    lane[x] += p;
                    srow[j + x] = round_p ? fa3_round_to(params->q.dtype, p) : p;
                }
            }
            float sum = 0.0f;
            for (int x = 0; x < FA3_COLS; ++x) {
                sum += lane[x];
            }
            row_max[r] = new_max;
            if (first) {
                row_sum[r] = sum;
            } else {
                float rescale = exp2_approx((previous - max_used) * scale_log2);
                row_sum[r] = row_sum[r] * rescale + sum;
                float *orow = o + r * dv_pad;
                for (int64_t c = 0; c < dv_pad; ++c) {
                    orow[c] *= rescale;
                }
            }
        }
        gemm_acc(o, dv_pad, scores, bn, v, dv_pad, rows, dv_pad, v_rows);
    }

    const int partial = tile->num_splits_of_batch > 1;
    const int tile_valid = n_end > n_begin;
    const int with_sink = params->sinks.data != NULL && tile->split == 0;
    for (int64_t r = 0; r < rows; ++r) {
        int64_t qrow = s.q_row_base + position[r];
        /* A tile with no key block stores O = 0, LSE = -inf; otherwise softmax.hpp's tail. */
        float lse = -INFINITY, inv_sum = 0.0f;
        if (tile_valid) {
            int empty = row_max[r] == -INFINITY;
            float max_used = empty ? 0.0f : row_max[r];
            float sum = row_sum[r];
            if (with_sink && (!empty || params->sink_on_empty_rows)) {
                sum += exp2f(fa3_load(&params->sinks, head[r]) * FA3_LOG2E - max_used * scale_log2);
            }
            if (sum != 0.0f && sum == sum) {
                inv_sum = 1.0f / sum;
                lse = max_used * scale_ln + logf(sum);
            }
        }
        const float *orow = o + r * dv_pad;
        if (partial) {
            const fa3_tensor *acc = &params->o_accum;
            int64_t at = b * acc->stride[0] + head[r] * acc->stride[1] + tile->split * acc->stride[2] +
                         qrow * acc->stride[3];
            for (int64_t c = 0; c < dv; ++c) {
                fa3_store(acc, at + c, tile_valid ? orow[c] * inv_sum * descale_v : 0.0f);
            }
            const fa3_tensor *lacc = &params->lse_accum;
            fa3_store(lacc, b * lacc->stride[0] + head[r] * lacc->stride[1] + tile->split * lacc->stride[2] + qrow * lacc->stride[3], lse);
        } else {
            int64_t at = b * params->out.stride[0] + qrow * params->out.stride[1] + head[r] * params->out.stride[2];
            for (int64_t c = 0; c < dv; ++c) {
                fa3_store(&params->out, at + c, tile_valid ? orow[c] * inv_sum * descale_v : 0.0f);
            }
            fa3_store(&params->lse, b * params->lse.stride[0] + head[r] * params->lse.stride[1] + qrow * params->lse.stride[2], lse);
        }
    }
}
