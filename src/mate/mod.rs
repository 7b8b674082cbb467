//! mate's host-side configuration of the FA3 forward, as pure functions (musa-fa3.md §6).
//!
//! Shared by the validation profile, the kernel path and the scheduler-metadata model: mask
//! resolution (§6.1), the fixed-length `attention_chunk` reset (§6.2), head-dim rounding and the
//! kernel configuration table (§6.3), the pack-GQA decision and candidate tile_m (§6.4), the host
//! split heuristic (§6.6) and the metadata kernel (§6.7, §6.8).
//!
//! The multiprocessor count `MP` of the MUSA device is a parameter everywhere; [`DEFAULT_MP`] is
//! the value the worked examples of the spec assume.

mod metadata;
pub mod python;
mod tiles;

pub use metadata::{MetadataArgs, SchedulerMetadata, scheduler_metadata};
pub use tiles::{RankKeys, RowTile, Tiles};

use python::PyNum;
use thiserror::Error;

/// Multiprocessor count assumed when the caller names none (the spec's worked examples use 48).
pub const DEFAULT_MP: usize = 48;

/// Key tile size of every mate forward configuration (§6.3).
pub const TILE_N: usize = 64;

/// L2 budget of the split heuristic and the metadata kernel, in bytes (1.5 MiB).
pub const L2_BYTES: i64 = 1_572_864;

/// Most splits the heuristic returns.
pub const MAX_SPLITS: usize = 128;

/// The mask after `_resolve_mask` (§6.1): these values replace the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedMask {
    pub is_causal: bool,
    pub is_local: bool,
    pub window_left: i64,
    pub window_right: i64,
    /// The attention chunk the kernel uses (after §6.2; unchanged by §6.1).
    pub attention_chunk: i64,
}

/// `_resolve_mask(seqlen_q, seqlen_k, is_causal, wl, wr, attention_chunk)` (§6.1) on ints. A window
/// side of `None` is Python's `None`.
pub fn resolve_mask(
    seqlen_q: i64,
    seqlen_k: i64,
    is_causal: bool,
    window_left: Option<i64>,
    window_right: Option<i64>,
    attention_chunk: i64,
) -> ResolvedMask {
    python::resolve_mask(
        seqlen_q,
        seqlen_k,
        is_causal,
        window_left.map(PyNum::int),
        window_right.map(PyNum::int),
        PyNum::int(attention_chunk),
    )
    .resolved(attention_chunk)
}

/// The §6.2 reset on ints: a fixed-length call (the caller decides which inputs count, the forward
/// and the metadata differ) whose chunk covers the whole key range runs without chunking.
pub fn reset_attention_chunk(
    attention_chunk: i64,
    fixed_length: bool,
    seqlen_q: i64,
    seqlen_k: i64,
) -> i64 {
    let reset = python::reset_chunk(
        PyNum::int(attention_chunk),
        fixed_length,
        seqlen_q,
        seqlen_k,
    );
    // The reset gives the int 0 or the chunk as is (kept exact beyond f64's integers).
    if reset.value == 0.0 {
        0
    } else {
        attention_chunk
    }
}

/// `_roundup_headdim` (§6.3): ≤64, ≤128, ≤192, ≤256, ≤384, else 512 (no upper bound).
pub fn round_head_dim(head_dim: usize) -> usize {
    [64, 128, 192, 256, 384]
        .into_iter()
        .find(|&bucket| head_dim <= bucket)
        .unwrap_or(512)
}

/// `_check_enable_packgqa` (§6.4): an explicit `pack_gqa` wins, else `max_seqlen_q * r <= 256`.
/// Sizes are Python ints here (validation meets any value a caller passes), so they are `i64`
/// and the product saturates instead of overflowing.
pub fn enable_pack_gqa(pack_gqa: Option<bool>, max_seqlen_q: i64, group_size: i64) -> bool {
    pack_gqa.unwrap_or(max_seqlen_q.saturating_mul(group_size) <= 256)
}

/// The candidate tile_m for the (possibly packed) number of query rows (§6.4).
pub fn candidate_tile_m(rows: i64) -> usize {
    [32, 64, 128, 192]
        .into_iter()
        .find(|&tile| rows <= tile as i64)
        .unwrap_or(256)
}

/// The forward kernel's compile-time configuration (§6.3, §6.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    pub head_dim_rounded: usize,
    pub head_dim_v_rounded: usize,
    pub pack_gqa: bool,
    pub tile_m: usize,
    pub tile_n: usize,
    pub stages_k: usize,
    pub stages_v: usize,
}

/// C-2: the rounded head-dim pair has no kernel.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("Add config for headdim {head_dim}-{head_dim_v}")]
pub struct UnsupportedHeadDims {
    /// Rounded values, as the assertion message prints them.
    pub head_dim: usize,
    pub head_dim_v: usize,
}

/// `_get_fwd_kernel_config` (§6.3) for raw head dims, the `m` of §6.4 and the group size `r`.
pub fn kernel_config(
    head_dim: usize,
    head_dim_v: usize,
    max_seqlen_q: i64,
    group_size: i64,
    pack_gqa: Option<bool>,
) -> Result<KernelConfig, UnsupportedHeadDims> {
    let d = round_head_dim(head_dim);
    let dv = round_head_dim(head_dim_v);
    let pack = enable_pack_gqa(pack_gqa, max_seqlen_q, group_size);
    let candidate = candidate_tile_m(if pack {
        max_seqlen_q.saturating_mul(group_size)
    } else {
        max_seqlen_q
    });
    let (tile_m, stages) = match (d, dv) {
        (64, 64) | (128, 128) => (candidate, 2),
        (192, 128) | (192, 192) => (candidate, 1),
        (256, 256) if pack => (32, 2),
        (256, 256) => (192, 1),
        (384, 384) => (64, 1),
        (512, 512) => (32, 1),
        _ => {
            return Err(UnsupportedHeadDims {
                head_dim: d,
                head_dim_v: dv,
            });
        }
    };
    Ok(KernelConfig {
        head_dim_rounded: d,
        head_dim_v_rounded: dv,
        pack_gqa: pack,
        tile_m,
        tile_n: TILE_N,
        stages_k: stages,
        stages_v: stages,
    })
}

/// Inputs of the host split heuristic (§6.6), named as the spec names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitHeuristicArgs {
    pub batch: usize,
    pub num_heads: usize,
    pub num_heads_k: usize,
    pub seqlen_q: usize,
    pub seqlen_k: usize,
    /// Raw (unrounded) head dims.
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// `MP − mp_margin`.
    pub num_mp: i64,
    pub mask: ResolvedMask,
    pub tile_m: usize,
    pub tile_n: usize,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// The host split heuristic of metadata.hpp (§6.6): the number of KV splits for a call.
///
/// `num_mp ≤ 0` (a margin at least the MP count) is not specified by the source; it gives 1 here.
pub fn num_splits_heuristic(args: &SplitHeuristicArgs) -> usize {
    let num_mp = args.num_mp;
    if num_mp <= 0 {
        return 1;
    }
    let seqlen_q_pack = (args.seqlen_q * (args.num_heads / args.num_heads_k.max(1))) as i64;
    let seqlen_k = args.seqlen_k as i64;
    let mask = args.mask;
    let seqlen_k_loaded = if mask.is_local {
        (mask.window_right + mask.window_left + 1 + args.tile_m as i64)
            .min(seqlen_k)
            .max(0)
    } else {
        seqlen_k
    };
    let n_blocks = ceil_div(seqlen_k_loaded, args.tile_n as i64);
    let m_blocks = ceil_div(seqlen_q_pack, args.tile_m as i64);
    // A 32-bit int on the device.
    let size_kv = (args.seqlen_k as i32)
        .wrapping_mul((args.head_dim + args.head_dim_v) as i32)
        .wrapping_mul(2) as i64;
    let total_m = (args.batch * args.num_heads_k) as i64 * m_blocks;
    if total_m as f32 >= 0.8f32 * num_mp as f32 {
        let long_enough = size_kv > L2_BYTES && m_blocks >= 2 * num_mp;
        return if long_enough && !(mask.is_causal || mask.is_local) {
            (ceil_div(size_kv, L2_BYTES) as usize).min(MAX_SPLITS)
        } else {
            1
        };
    }
    if n_blocks <= 4 {
        return 1;
    }
    let max_splits = (MAX_SPLITS as i64).min(num_mp).min(n_blocks);
    let efficiency: Vec<f32> = (1..=max_splits)
        .map(|s| {
            let waves = (total_m * s) as f32 / num_mp as f32;
            waves / waves.ceil()
        })
        .collect();
    let max_efficiency = efficiency.iter().copied().fold(0.0f32, f32::max);
    efficiency
        .iter()
        .position(|&e| e as f64 >= 0.85 * max_efficiency as f64)
        .map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_without_causal_that_looks_causal_is_causal() {
        // §6.1 consequence: window (-1, 0) without causal is treated as causal.
        let m = resolve_mask(100, 500, false, Some(-1), Some(0), 0);
        assert_eq!(
            m,
            ResolvedMask {
                is_causal: true,
                is_local: false,
                window_left: 499,
                window_right: 0,
                attention_chunk: 0
            }
        );
    }

    #[test]
    fn single_query_drops_a_zero_right_window_unless_causal() {
        let m = resolve_mask(1, 500, false, Some(10), Some(0), 0);
        assert_eq!((m.is_causal, m.is_local), (false, true));
        assert_eq!((m.window_left, m.window_right), (10, 0)); // wr: -1 then seqlen_q - 1 = 0
        let m = resolve_mask(1, 500, true, None, None, 0);
        assert_eq!((m.is_causal, m.is_local, m.window_right), (true, false, 0));
    }

    #[test]
    fn infinite_windows_are_not_local() {
        let m = resolve_mask(8, 16, false, Some(15), Some(7), 0);
        assert_eq!((m.is_causal, m.is_local), (false, false));
        assert_eq!((m.window_left, m.window_right), (15, 7));
    }

    #[test]
    fn chunk_makes_causal_local_and_clamps_both_windows() {
        let m = resolve_mask(8, 16, true, None, None, 4);
        assert_eq!(
            m,
            ResolvedMask {
                is_causal: false,
                is_local: true,
                window_left: 3,
                window_right: 0,
                attention_chunk: 4
            }
        );
        let m = resolve_mask(8, 16, false, Some(2), None, 4);
        assert_eq!((m.window_left, m.window_right, m.is_local), (2, 3, true));
    }

    #[test]
    fn chunk_reset_needs_fixed_length_and_a_chunk_covering_the_keys() {
        assert_eq!(reset_attention_chunk(64, true, 10, 64), 0);
        assert_eq!(reset_attention_chunk(63, true, 10, 64), 63);
        assert_eq!(reset_attention_chunk(64, false, 10, 64), 64);
        assert_eq!(reset_attention_chunk(128, true, 65, 64), 128);
        assert_eq!(reset_attention_chunk(0, true, 10, 64), 0);
    }

    #[test]
    fn head_dims_round_up_to_buckets_without_upper_bound() {
        let rounded: Vec<usize> = [1, 64, 65, 128, 129, 192, 193, 256, 257, 384, 385, 600]
            .into_iter()
            .map(round_head_dim)
            .collect();
        assert_eq!(
            rounded,
            [64, 64, 128, 128, 192, 192, 256, 256, 384, 384, 512, 512]
        );
    }

    #[test]
    fn pack_gqa_default_is_rows_times_group_at_most_256() {
        assert!(enable_pack_gqa(None, 64, 4));
        assert!(!enable_pack_gqa(None, 65, 4));
        assert!(!enable_pack_gqa(Some(false), 1, 4));
        assert!(enable_pack_gqa(Some(true), 4096, 1));
    }

    #[test]
    fn kernel_config_table() {
        let cfg = kernel_config(128, 128, 1, 4, None).unwrap();
        assert_eq!(
            (cfg.pack_gqa, cfg.tile_m, cfg.tile_n, cfg.stages_k),
            (true, 32, 64, 2)
        );
        let cfg = kernel_config(100, 100, 2048, 1, None).unwrap();
        assert_eq!(
            (cfg.head_dim_rounded, cfg.pack_gqa, cfg.tile_m),
            (128, false, 256)
        );
        let cfg = kernel_config(192, 128, 100, 1, Some(false)).unwrap();
        assert_eq!((cfg.tile_m, cfg.stages_v), (128, 1));
        let cfg = kernel_config(256, 256, 1, 8, None).unwrap();
        assert_eq!((cfg.tile_m, cfg.stages_k), (32, 2));
        let cfg = kernel_config(256, 256, 1000, 8, None).unwrap();
        assert_eq!((cfg.tile_m, cfg.stages_k), (192, 1));
        assert_eq!(kernel_config(384, 300, 1, 1, None).unwrap().tile_m, 64);
        assert_eq!(kernel_config(600, 600, 1, 1, None).unwrap().tile_m, 32);
        let err = kernel_config(64, 128, 1, 1, None).unwrap_err();
        assert_eq!(err.to_string(), "Add config for headdim 64-128");
        let err = kernel_config(150, 40, 1, 1, None).unwrap_err();
        assert_eq!(err.to_string(), "Add config for headdim 192-64");
    }

    fn heuristic(batch: usize, seqlen_q: usize, seqlen_k: usize, mask: ResolvedMask) -> usize {
        num_splits_heuristic(&SplitHeuristicArgs {
            batch,
            num_heads: 32,
            num_heads_k: 8,
            seqlen_q,
            seqlen_k,
            head_dim: 128,
            head_dim_v: 128,
            num_mp: 48,
            mask,
            tile_m: 32,
            tile_n: 64,
        })
    }

    #[test]
    fn split_heuristic_of_the_worked_example() {
        // §6.8: total_m = 24 < 38.4, 79 blocks, eff(1) = 0.5, eff(2) = 1.0 → 2.
        let mask = resolve_mask(1, 5000, true, Some(-1), Some(-1), 0);
        assert_eq!(heuristic(3, 1, 5000, mask), 2);
    }

    #[test]
    fn split_heuristic_short_keys_and_full_machine() {
        let mask = resolve_mask(1, 256, false, None, None, 0);
        // 4 key blocks → 1.
        assert_eq!(heuristic(1, 1, 256, mask), 1);
        // b = 5: total_m = 40 ≥ 38.4; size_kv = 5000·256·2 = 2 560 000 > L2 but m_blocks = 1 → 1.
        assert_eq!(heuristic(5, 1, 5000, mask), 1);
        // b = 1, total_m = 8: waves = 8s/48; eff = 1 at s = 6, 12, ...; the first s with
        // eff ≥ 0.85 is s = 6 (eff(5) = 40/48 = 0.833).
        assert_eq!(heuristic(1, 1, 5000, mask), 6);
    }

    #[test]
    fn split_heuristic_long_sequences_split_by_l2_when_not_causal() {
        // b·h_k·m_blocks = 1·8·(4096·4/32 = 512) ≥ 38.4; m_blocks 512 ≥ 96; size_kv = 8192·256·2
        // = 4 194 304 → ceil(4 194 304 / 1 572 864) = 3.
        let mask = resolve_mask(4096, 8192, false, None, None, 0);
        assert_eq!(heuristic(1, 4096, 8192, mask), 3);
        let causal = resolve_mask(4096, 8192, true, None, None, 0);
        assert_eq!(heuristic(1, 4096, 8192, causal), 1);
    }
}
