/*
 * Internal helpers shared by the fa3_host translation units: index checks, dtype conversions,
 * per-batch lengths and cache addressing (cuda-fa3.md D.11, D.13b).
 */
#ifndef FA3_INTERNAL_H
#define FA3_INTERNAL_H

#include "fa3_host.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef FA3_HOST_CHECKED
#include <stdio.h>
#include <stdlib.h>
#define FA3_CHECK(cond, what, value, bound)                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fa3_host index check failed at %s:%d: %s = %lld, bound %lld\n",       \
                    __FILE__, __LINE__, (what), (long long)(value), (long long)(bound));           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define FA3_CHECK(cond, what, value, bound) ((void)0)
#endif

/* Checks that elements [first, first + count) lie inside a buffer of `numel` elements. */
#define FA3_CHECK_RANGE(first, count, numel, what)                                                 \
    do {                                                                                           \
        FA3_CHECK((first) >= 0, what, (first), 0);                                                 \
        FA3_CHECK((count) <= 0 || (first) + (count) <= (numel), what, (first) + (count), (numel)); \
    } while (0)

#define FA3_LOG2E 1.4426950408889634f
#define FA3_LN2 0.6931471805599453f

static inline int64_t fa3_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t fa3_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t fa3_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Floor division (for negative numerators too). */
static inline int64_t fa3_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int32_t fa3_index_at(const fa3_index *index, int64_t i, const char *what) {
    FA3_CHECK(i >= 0 && i < index->numel, what, i, index->numel);
    (void)what;
    return index->data[i];
}

/* ---- dtype conversions (round to nearest even, as torch converts) ---- */

static inline uint32_t fa3_f32_bits(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

static inline float fa3_bits_f32(uint32_t bits) {
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static inline float fa3_bf16_to_f32(uint16_t h) { return fa3_bits_f32((uint32_t)h << 16); }

static inline uint16_t fa3_f32_to_bf16(float x) {
    uint32_t bits = fa3_f32_bits(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((bits >> 16) | 0x40u);
    }
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static inline float fa3_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) {
        return fa3_bits_f32(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        /* Subnormal: mant * 2^-24, exact in f32. */
        float magnitude = (float)mant * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    return fa3_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t fa3_f32_to_f16(float x) {
    uint32_t bits = fa3_f32_bits(x);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    bits &= 0x7fffffffu;
    if (bits > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (bits >= 0x477ff000u) { /* 65520 and above round to infinity */
        return sign | 0x7c00u;
    }
    if (bits < 0x38800000u) { /* below 2^-14: let float addition round the subnormal */
        float sum = fa3_bits_f32(bits) + 0.5f;
        return sign | (uint16_t)(fa3_f32_bits(sum) - 0x3f000000u);
    }
    uint32_t mant_odd = (bits >> 13) & 1u;
    bits += 0xc8000fffu + mant_odd; /* rebias (15 - 127) << 23, plus rounding */
    return sign | (uint16_t)(bits >> 13);
}

static inline float fa3_e4m3_to_f32(uint8_t code) {
    uint32_t exp = (code >> 3) & 0xfu;
    uint32_t mant = code & 0x7u;
    if (exp == 0xfu && mant == 0x7u) {
        return NAN;
    }
    float magnitude = exp == 0 ? (float)mant * 0.001953125f /* 2^-9 */
                               : fa3_bits_f32(((exp + 120u) << 23) | (mant << 20));
    return (code & 0x80u) ? -magnitude : magnitude;
}

/* torch's float8_e4m3fn conversion: magnitudes from 480 up, infinities and NaN become NaN. */
static inline uint8_t fa3_f32_to_e4m3(float x) {
    uint32_t bits = fa3_f32_bits(x);
    uint32_t sign = bits & 0x80000000u;
    bits ^= sign;
    uint8_t code;
    if (bits >= (1087u << 20)) {
        code = 0x7f;
    } else if (bits < (121u << 23)) {
        float sum = fa3_bits_f32(bits) + fa3_bits_f32(141u << 23);
        code = (uint8_t)(fa3_f32_bits(sum) - (141u << 23));
    } else {
        uint32_t mant_odd = (bits >> 20) & 1u;
        bits += 0xc407ffffu + mant_odd; /* rebias (7 - 127) << 23, plus rounding */
        code = (uint8_t)(bits >> 20);
    }
    return code | (uint8_t)(sign >> 24);
}

/* Element `i` of a tensor as f32. */
static inline float fa3_load(const fa3_tensor *t, int64_t i) {
    FA3_CHECK(i >= 0 && i < t->numel, "element", i, t->numel);
    switch (t->dtype) {
    case FA3_DTYPE_F16:
        return fa3_f16_to_f32(((const uint16_t *)t->data)[i]);
    case FA3_DTYPE_BF16:
        return fa3_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case FA3_DTYPE_E4M3:
        return fa3_e4m3_to_f32(((const uint8_t *)t->data)[i]);
    default:
        return ((const float *)t->data)[i];
    }
}

/* Stores `x` rounded to the tensor's dtype at element `i`. */
static inline void fa3_store(const fa3_tensor *t, int64_t i, float x) {
    FA3_CHECK(i >= 0 && i < t->numel, "element", i, t->numel);
    switch (t->dtype) {
    case FA3_DTYPE_F16:
        ((uint16_t *)t->data)[i] = fa3_f32_to_f16(x);
        break;
    case FA3_DTYPE_BF16:
        ((uint16_t *)t->data)[i] = fa3_f32_to_bf16(x);
        break;
    case FA3_DTYPE_E4M3:
        ((uint8_t *)t->data)[i] = fa3_f32_to_e4m3(x);
        break;
    default:
        ((float *)t->data)[i] = x;
    }
}

/* The value `x` takes once stored in `dtype`. */
static inline float fa3_round_to(int32_t dtype, float x) {
    switch (dtype) {
    case FA3_DTYPE_F16:
        return fa3_f16_to_f32(fa3_f32_to_f16(x));
    case FA3_DTYPE_BF16:
        return fa3_bf16_to_f32(fa3_f32_to_bf16(x));
    case FA3_DTYPE_E4M3:
        return fa3_e4m3_to_f32(fa3_f32_to_e4m3(x));
    default:
        return x;
    }
}

/* Converts `count` contiguous elements starting at element `first` to f32. */
void fa3_load_row(const fa3_tensor *t, int64_t first, int64_t count, float *dst);

/* Rotates the first rotary_dim entries of `x` by row `position` of cos/sin (D.14), in f32 with
 * separately rounded products, then rounds every entry to `dtype`. */
void fa3_rotate(const fa3_fwd_params *params, int64_t position, float *x, int32_t dtype);

/* ---- per-batch lengths (D.11) ---- */

typedef struct fa3_seqlens {
    int64_t q_row_base;    /* first row of this batch in q/out (varlen), else 0 */
    int64_t seqlen_q;      /* sq_b */
    int64_t leftpad;       /* leftpad_b */
    int64_t seqlen_k_old;  /* sk_og_b */
    int64_t seqlen_k_new;  /* sk_new_b */
    int64_t seqlen_k;      /* sk_b */
    int64_t knew_row_base; /* first row of this batch in k_new (varlen new), else 0 */
    int64_t rotary_start;  /* r_b */
    int64_t kv_batch;      /* kvb: cache row / page-table row */
    int64_t seqlen_k_total; /* keys over all context-parallel ranks (else sk_b) */
} fa3_seqlens;

fa3_seqlens fa3_seqlens_of(const fa3_fwd_params *params, int64_t batch);

/* Element offset of key position `position`, KV head `head` in a cache with `t`'s strides; the
 * caller checked that the position lies within the capacity and its page exists. */
int64_t fa3_cache_offset(const fa3_fwd_params *params, const fa3_tensor *t, int64_t kv_batch,
                         int64_t position, int64_t head);

/* The element offset the device computes for cache position `position` of KV head `head`: cache
 * row `kv_batch` at any position (past the capacity: the next row's memory), or the page the
 * page-table entry names (an entry past the table reads as 0). May lie outside `t`. */
int64_t fa3_device_offset(const fa3_fwd_params *params, const fa3_tensor *t, int64_t kv_batch,
                          int64_t position, int64_t head);

/* The offset of the `count` values the device reads for that position with load path `reads`
 * (fa3_kv_reads), or -1 where the read gives zeros. A returned row lies inside `t`. */
int64_t fa3_kv_read_offset(const fa3_fwd_params *params, const fa3_tensor *t, int32_t reads,
                           int64_t kv_batch, int64_t position, int64_t head, int64_t count);

#endif /* FA3_INTERNAL_H */
