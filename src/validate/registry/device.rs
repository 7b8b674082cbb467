//! Hazards of what the MUSA device computes where mate's forward kernel departs from clean
//! attention (docs/musa-device.md D1-D6): found by [`crate::device::findings`] from the call and
//! the values its spec gives; the kernel path computes the numbers.

macro_rules! mate_src {
    ($path:literal, $lines:literal) => {
        concat!("MooreThreads/mate@3f58cc3e ", $path, ":", $lines)
    };
}

hazards! { HAZARDS:
    H_DEV_ROW_MAX_CLAMPED = hazard!(
        "H-DEV-ROW-MAX-CLAMPED",
        Warning,
        "fp16 rows {} see no key in the first key block their tile processes: mate keeps their running maximum at 0, so their probabilities are exp(s·scale) rounded to fp16 before P·V — where every visible scaled logit is below −9.70 the output loses precision, below −17.33 it is 0 when one split processes the row (the lse stays right)",
        mate_src!("include/mate/attention/fmha/softmax.hpp", "L76-L82"),
        "docs/musa-device.md D1. Tiles visit key blocks from the last down; in the first one a row with no visible key gets row_max = −inf, which mate replaces by 0 in row_max itself, and later blocks take max(0, block max). P = exp(s·scale − 0) is converted to fp16 (subnormal below 2^-14, zero below 2^-25) while the row sum keeps it in f32. Rows: in a square causal prefill all but the last 64 rows of every m-block (tile_m 128/192/256); with a prefix it depends on seqlen_k mod 64. With split-KV (scheduler metadata) only the split holding a row's last key is clamped, and only where that split goes on past the key's block, so the loss depends on the split count. The CUDA stacks use the true maximum. Fix: bf16 (affected only below −87), or logits that are not all very negative."
    ),
    H_DEV_ROWS_UNCOVERED = hazard!(
        "H-DEV-ROWS-UNCOVERED",
        Warning,
        "rows {} of q are in no cu_seqlens_q segment: the device never writes out and lse there (torch.empty leaves whatever memory held)",
        mate_src!("mate/jit/attention/fmha/fmha_fwd.py", "L743-L757"),
        "docs/musa-device.md D2. Tiles store only rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]; rows before cu_seqlens_q[0] or from cu_seqlens_q[-1] on are unspecified. fa3conform does not compare them. Fix: make the segments cover q, or ignore those rows."
    ),
    H_DEV_NONFINITE_PAST_LAST_KEY = hazard!(
        "H-DEV-NONFINITE-PAST-LAST-KEY",
        Error,
        "v_cache holds {} after the last key of batch {} inside its last key block (cache position {}): the device multiplies it by P = 0, so out is NaN for every row that processes that block (the lse stays finite)",
        mate_src!("include/mate/attention/fmha/paged_kv.hpp", "L223-L254"),
        "docs/musa-device.md D3. A tile multiplies P with all 64 V rows of its key block; the rows past the sequence's last key get P = 0 but their V is whatever the cache holds there (LSU paged loads: 'TODO: clear oob'; TME loads read the rest of the block). 0 · inf = NaN. FA3's TMA paths on CUDA do the same. Fix: keep cache slots past cache_seqlens finite (zero-initialise the cache)."
    ),
    H_DEV_PAGED_APPEND_OVERRUN = hazard!(
        "H-DEV-PAGED-APPEND-OVERRUN",
        Error,
        "a paged append with head dims {}-{} stores the kernel's rounded {}-{} columns per new row: {} past each row land in the memory after it (the next KV head's first dims, or the next slot's), racing with those rows' own stores — the caches after the call and every output row that attends a new key are unspecified",
        mate_src!("include/mate/attention/fmha/paged_kv.hpp", "L256-L327"),
        "docs/musa-device.md D4. PagedKVManager::store_K/store_V predicate rows only; every tile of the call (all m-blocks, heads, splits) stores the new rows with their out-of-shape columns (zero on TMA-like hardware, UNVERIFIED for TME). The contiguous path and the rotary K store check columns; V overruns with rotary too. Fix: head dims 64/128/192/256, or append k/v outside the call (e.g. SGLang's set_kv_buffer) and pass no k/v."
    ),
    H_DEV_APPEND_PREDICATE_UB = hazard!(
        "H-DEV-APPEND-PREDICATE-UB",
        Error,
        "a contiguous append with head dims {}-{} (the 192-128 kernel) predicates the three 64-column chunks of each new K row with the V predicate array of two entries: whether columns 128..192 of the new keys are written is undefined, and so is every output row that attends a new key",
        mate_src!(
            "include/mate/attention/fmha/mp31_fmha_fwd_tme_warpspecialized.hpp",
            "L1573-L1601"
        ),
        "docs/musa-device.md D4. store_K uses tVpV(k) for k = 0..2 where tVpV has size<2>(tVsV) = 2 entries (out-of-bounds register read). With rotary the K store uses its own predicate. Fix: rotary, a paged cache with equal head dims, or appending outside the call."
    ),
    H_DEV_SEGMENT_OVER_MAX_SEQLEN_Q = hazard!(
        "H-DEV-SEGMENT-OVER-MAX-SEQLEN-Q",
        Info,
        "cu_seqlens_q segment {} has {} rows, more than max_seqlen_q = {}: {}",
        mate_src!("csrc/templates/attention/fmha/fwd_kern.j2", "L419"),
        "docs/musa-device.md D5. The grid has ceil(max_seqlen_q · (r with pack-GQA) / tile_m) m-blocks; a tile runs when its first row lies within the segment. Packed rows past the grid's m-blocks are never written (unspecified); rows within them are computed correctly. Fix: pass max_seqlen_q ≥ every segment's length."
    ),
    H_DEV_APPEND_PAST_CAPACITY = hazard!(
        "H-DEV-APPEND-PAST-CAPACITY",
        Error,
        "batch {} appends at cache positions {}, past its capacity {}: {}",
        mate_src!(
            "include/mate/attention/fmha/mp31_fmha_fwd_tme_warpspecialized.hpp",
            "L1508, L1595-L1599"
        ),
        "docs/musa-device.md D5. The append addresses row offset_k + seqlen_k_og + t with a row predicate only: a contiguous cache takes the next cache row's first slots (dropped past the buffer), a paged cache the pages its following page-table entries name (past the table, entry 0). Those writes race with the owners of that memory. Fix: cache_seqlens + new keys ≤ the capacity."
    ),
    H_DEV_READ_PAST_CAPACITY = hazard!(
        "H-DEV-READ-PAST-CAPACITY",
        Error,
        "batch {} attends {} keys, past its capacity {}: {}",
        mate_src!("include/mate/attention/fmha/paged_kv.hpp", "L120-L173"),
        "docs/musa-device.md D5. Nothing bounds cache_seqlens: a contiguous cache read by TME gives zero keys and values past the capacity (they take part with score 0), LSU reads (cache_leftpad) the next cache row, a paged cache the pages of the following page-table entries. Fix: cache_seqlens ≤ the capacity."
    ),
    H_DEV_ROTARY_PAST_TABLE = hazard!(
        "H-DEV-ROTARY-PAST-TABLE",
        Error,
        "batch {} rotates positions up to {}, but the device reads cos/sin only below {}: {}",
        mate_src!("include/mate/attention/fmha/rotary.hpp", "L203-L228"),
        "docs/musa-device.md D5. The cos/sin descriptor covers {capacity, rotary_dim/2} (fwd_kern.j2 L359); robust loads past it return 0, so the rotated part of such keys and queries becomes 0. Positions below the capacity but past rotary_cos.shape[0] read the memory after the table (unspecified). Fix: a cos/sin table covering every rotated position, within the capacity."
    ),
    H_DEV_NEGATIVE_SCALE = hazard!(
        "H-DEV-NEGATIVE-SCALE",
        Error,
        "softmax_scale = {} < 0: the row maximum is taken over raw scores, so every exponent is ≥ 0 — {}",
        mate_src!("include/mate/attention/fmha/softmax.hpp", "L89-L107"),
        "docs/musa-device.md D6. exp2((s − max)·scale·log2e) with a negative scale: a masked score (−inf) gives +inf, so a row whose processed key blocks hold one returns out NaN, lse +inf (causal/local masks, the key-length padding of a last block when seqlen_k is not a multiple of 64); other rows are clean attention until (max − s)·|scale| overflows P in the input dtype (≈ 11.09 in fp16, 88.7 in bf16). FA3 on CUDA computes the same way. Fix: a positive scale (negate q or k instead)."
    ),
    H_DEV_SINK_LSE = hazard!(
        "H-DEV-SINK-LSE",
        Info,
        "rows {} attend no key: mate returns lse = sink (out 0) for {} (their tile has a key block) and lse = −inf for {}",
        mate_src!("include/mate/attention/fmha/softmax.hpp", "L150-L187"),
        "docs/musa-device.md D1 and §3, musa-fa3.md §7. The tail adds exp(sink − row_max·scale) to the row sum with row_max clamped to 0, so a fully masked row of a tile that ran its main loop gets lse = sink; a tile without key blocks stores −inf. sgl-kernel on CUDA follows the same rule with FA3's tiles. fa3conform's reference models mate's."
    ),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_name_kernel_sources() {
        for h in HAZARDS {
            assert!(
                h.citation.starts_with("MooreThreads/mate@3f58cc3e "),
                "{}",
                h.code
            );
            assert!(h.explain.starts_with("docs/musa-device.md"), "{}", h.code);
        }
    }
}
