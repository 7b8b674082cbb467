/*
 * fa3_host: a host (CPU) implementation, in portable C11, of the forward path the MUSA device runs
 * for flash_attn_with_kvcache, with the device's decomposition: append-KV pass, forward work tiles
 * (m_block x head x batch x split, online softmax in f32), combine of split partials.
 *
 * Every tensor is described by a pointer, its element count (for the index checks of the
 * FA3_HOST_CHECKED build) and strides in elements. Varlen tensors (cu_seqlens given) use a batch
 * stride of 0; rows are then offset by the cu_seqlens entry. The scheduler (which tiles run, and
 * in which order) lives with the caller: each call below runs one unit of work, touches only the
 * memory its params name and keeps no state, so calls may run concurrently on disjoint outputs.
 */
#ifndef FA3_HOST_H
#define FA3_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the floating-point tensors. */
typedef enum fa3_dtype {
    FA3_DTYPE_F32 = 0,
    FA3_DTYPE_F16 = 1,
    FA3_DTYPE_BF16 = 2,
    FA3_DTYPE_E4M3 = 3
} fa3_dtype;

/* Instruction-set variants of the forward tile; the caller detects what the CPU supports. */
typedef enum fa3_isa {
    FA3_ISA_PORTABLE = 0,
    FA3_ISA_X86_AVX2_FMA = 1,
    FA3_ISA_X86_AVX512 = 2
} fa3_isa;

/* A floating-point tensor: data of `dtype`, `numel` elements reachable, up to 4 strides. */
typedef struct fa3_tensor {
    void *data;
    int64_t numel;
    int32_t dtype;
    int64_t stride[4];
} fa3_tensor;

/* How the forward reads cache rows the call's lengths do not bound (docs/musa-device.md §1): the
 * V rows after a sequence's last key inside its last key block (multiplied by P = 0, D3) and key
 * positions past the capacity (D5). Every variant stays inside the buffers it is given. */
typedef enum fa3_kv_reads {
    /* Only the sequence's keys, which the caller checked lie within the capacity (the CUDA
     * stacks' model). */
    FA3_KV_READS_KEYS = 0,
    /* mate's TME loads of a contiguous cache: the whole block, bounded by the cache tensor's shape
     * (positions past the capacity read as zero). */
    FA3_KV_READS_SHAPE_BOUNDED = 1,
    /* mate's LSU loads and every paged load: the whole block, addressed through the cache row or
     * the page table as the device computes it; a page-table entry past the table reads as 0,
     * an element outside the cache buffer as zero (robust loads). */
    FA3_KV_READS_ROBUST = 2
} fa3_kv_reads;

/* An int32 vector (cu_seqlens, cache_seqlens, ...): NULL data means "not given". */
typedef struct fa3_index {
    const int32_t *data;
    int64_t numel;
} fa3_index;

/* The forward call, mirroring the device's forward params. Strides: q/out/qv
 * (batch, row, head, -); k_cache/v_cache (batch or page, row, head, -); k_new/v_new
 * (batch, row, head, -); lse (batch, head, row, -); o_accum (batch, head, split, row) with dim
 * contiguous; lse_accum (batch, head, split, row); descales (batch, kv head, -, -). */
typedef struct fa3_fwd_params {
    fa3_tensor q, k_cache, v_cache, k_new, v_new, qv;
    fa3_tensor out, lse, o_accum, lse_accum;
    fa3_tensor rotary_cos, rotary_sin; /* (seqlen_ro, rotary_dim / 2), contiguous */
    fa3_tensor q_descale, k_descale, v_descale; /* f32, data NULL when not given */
    fa3_tensor sinks;                           /* f32 (num_heads), data NULL when not given */

    fa3_index cu_seqlens_q, cache_seqlens, cu_seqlens_k_new, cache_batch_idx, cache_leftpad,
        page_table, rotary_seqlens;
    int64_t page_table_stride; /* elements between page-table rows */
    int64_t page_size;         /* tokens per page; paged iff page_table.data != NULL */

    int64_t batch, seqlen_q, seqlen_k, seqlen_k_new; /* static sizes (capacity for seqlen_k) */
    int64_t num_heads, num_heads_k, head_dim, head_dim_v, rotary_dim;
    int32_t rotary_interleaved;

    /* Resolved mask (mate _resolve_mask): window sizes already made finite. */
    int32_t is_causal, is_local;
    int64_t window_left, window_right, attention_chunk;
    /* Context parallelism (mate's FA3 wrapper; off while cp_world_size <= 1): local key j is
     * global key j * cp_world_size + cp_rank of cp_tot_seqused_k[b] keys; not with is_local. */
    int64_t cp_world_size, cp_rank;
    fa3_index cp_tot_seqused_k;
    float softmax_scale, softcap; /* softcap != 0 enables it */

    int32_t pack_gqa;
    int64_t tile_m, tile_n;
    int64_t num_splits; /* S_F: split slots of o_accum/lse_accum */

    /* Where the modelled device departs from clean attention (docs/musa-device.md). */
    int32_t clamp_row_max;      /* a running row maximum of -inf becomes 0 (mate, D1) */
    int32_t sink_on_empty_rows; /* a row with no visible key in a tile with a key block: LSE = sink */
    int32_t round_p;            /* P is rounded to q's dtype (f16/bf16) before P.V */
    int32_t k_reads, v_reads;   /* fa3_kv_reads of K and of V */
    int64_t append_dim, append_dim_v; /* columns the append stores per row; those past head_dim
                                       * (head_dim_v) are written as zero (D4) */
    int64_t rotary_rows;        /* cos/sin rows the device reads; rows past them (or past the
                                 * tensor) read as 0 (D5) */

    /* Scheduler metadata (indexed by sorted position); data NULL when the call has none. */
    fa3_index num_splits_dynamic, batch_table, num_m_blocks;

    int32_t isa;
} fa3_fwd_params;

/* One forward work tile: rows [m_block * tile_m, ...) of `head_block` (a KV head when pack_gqa,
 * else a query head) of `batch`, KV split `split` of `num_splits_of_batch`; a split count <= 1
 * writes final O/LSE, more writes partials into slot `split`. */
typedef struct fa3_tile {
    int64_t batch, head_block, m_block, split, num_splits_of_batch;
} fa3_tile;

/* Floats of scratch memory one fa3_fwd_tile call needs. */
int64_t fa3_fwd_workspace_floats(const fa3_fwd_params *params);

/* Append-KV pass for one batch entry: rotates k_new (when rotary_cos is given) and writes k_new /
 * v_new into the caches at cache_seqlens[b] through cache_batch_idx or the page table, addressed as
 * the device addresses them (a position past the capacity lands in the next cache row or the page
 * the next page-table entry names); stores outside the cache buffer are dropped. */
void fa3_append_kv(const fa3_fwd_params *params, int64_t batch);

/* Runs one forward tile with `workspace` of fa3_fwd_workspace_floats floats. */
void fa3_fwd_tile(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace);

/* Merges the split partials of query head `head` of the batch at sorted position `position` into
 * out/lse (a no-op when its split count is <= 1). */
void fa3_combine(const fa3_fwd_params *params, int64_t position, int64_t head);

#ifdef __cplusplus
}
#endif

#endif /* FA3_HOST_H */
