//! FlashAttention-3's host-side configuration of the forward (`hopper/flash_api.cpp`,
//! `heuristics.h`, `tile_size.h`), as pure functions: head-dim rounding, the sm90 tile sizes, the
//! pack-GQA and split heuristics (cuda-fa3.md D.3-D.6), and the scheduler-metadata layout and
//! prepare kernel ([`metadata`]).
//!
//! The CUDA counterpart of [`crate::mate`]: shared by the validation profiles (`fa3`, `fa3-stable`,
//! `sgl-kernel` resolve a call through it) and the scheduler-metadata models.

mod metadata;

pub use metadata::{Fa3Layout, Fa3PrepareArgs, Fa3Vector, prepare};

/// The compute capability the CUDA profiles model (`sgl-kernel`, `fa3`, `fa3-stable`): Hopper.
pub const MODELLED_ARCH: u32 = 90;

/// Streaming multiprocessors of the modelled device: H100 SXM5 has 132 (H100 PCIe 114, H200 132).
pub const NUM_SM: i64 = 132;

/// `ceil(a / b)` for the block counts of the heuristics; 0 for an empty divisor.
pub fn ceil_div(a: i64, b: i64) -> i64 {
    if b == 0 { 0 } else { (a + b - 1).div_euclid(b) }
}

/// What FA3's host code makes of a call's mask arguments (cuda-fa3.md D.1: `mha_fwd`
/// `flash_api.cpp:L794-805` then `set_params_fprop` L146-160; `get_scheduler_metadata` L576-597
/// does the same with its `max_seqlen_q`, `max_seqlen_k` and "page_size given"). The resolved
/// flags, not the caller's `causal`, choose the kernel, the tiles and the metadata layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskResolution {
    pub is_causal: bool,
    pub is_local: bool,
    /// The windows as `int` parameters, -1 for unbounded (before `params.window_size_*`
    /// replaces a negative one by the static length).
    pub window_left: i64,
    pub window_right: i64,
    pub attention_chunk: i64,
}

/// The static lengths and layout facts [`resolve_mask`] reads.
#[derive(Clone, Copy, Debug)]
pub struct MaskShape {
    pub seqlen_q: i64,
    pub seqlen_k: i64,
    pub head_size: i64,
    pub paged: bool,
}

/// D.1's resolution of `causal`, `window_size = (wl, wr)` and `attention_chunk`.
pub fn resolve_mask(
    shape: MaskShape,
    causal: bool,
    wl: i64,
    wr: i64,
    chunk: i64,
) -> MaskResolution {
    let (mut causal, mut wl, mut wr) = (causal, wl, wr);
    if wl >= shape.seqlen_k - 1 {
        wl = -1;
    }
    if wr >= shape.seqlen_q - 1 {
        wr = -1;
    }
    // a single query row sees every key either way; causal is kept only where it picks the
    // paged kBlockN of 128
    if shape.seqlen_q == 1
        && wl == -1
        && wr == -1
        && chunk == 0
        && (shape.head_size <= 64 || shape.head_size > 128 || !shape.paged)
    {
        causal = false;
    }
    if causal {
        wr = 0;
    }
    // the C++ parameters are `int`
    let (wl, wr, chunk) = (as_c_int(wl), as_c_int(wr), as_c_int(chunk));
    let is_causal = wl < 0 && wr == 0 && chunk == 0;
    MaskResolution {
        is_causal,
        is_local: (wl >= 0 || wr >= 0 || chunk >= 1) && !is_causal,
        window_left: wl,
        window_right: wr,
        attention_chunk: chunk,
    }
}

/// The C++ `int` a 64-bit value is truncated to when stored in `Flash_fwd_params`.
pub fn as_c_int(x: i64) -> i64 {
    x as i32 as i64
}

/// `round_up_headdim` with every head dimension compiled (`flash_api.cpp:L492-509`).
pub fn round_up_headdim(d: i64) -> i64 {
    [64, 96, 128, 192, 256]
        .into_iter()
        .find(|&r| d <= r)
        .unwrap_or(256)
}

/// `round_up_headdimv` (`flash_api.cpp:L511-518`).
pub fn round_up_headdimv(d: i64) -> i64 {
    [64, 96, 128, 192, 256]
        .into_iter()
        .find(|&r| d <= r)
        .unwrap_or(512)
}

/// `(kBlockM, kBlockN)` of `tile_size_fwd_sm90` (`tile_size.h:10-55`), `v_colmajor = false`.
pub fn tile_size_fwd_sm90(
    d: i64,
    dv: i64,
    causal: bool,
    local: bool,
    element_size: i64,
    paged_non_tma: bool,
    softcap: bool,
) -> (i64, i64) {
    if element_size == 2 {
        match d {
            ..=64 if dv == 512 => (64, 64),
            ..=64 if dv == 256 => (128, 96),
            ..=64 => (
                192,
                if causal || local || paged_non_tma {
                    128
                } else {
                    192
                },
            ),
            65..=96 => (192, if local || paged_non_tma { 128 } else { 144 }),
            97..=128 => (
                128,
                if causal || local || paged_non_tma {
                    128
                } else {
                    176
                },
            ),
            129..=192 => (
                128,
                if paged_non_tma || local {
                    96
                } else if dv <= 128 {
                    128
                } else {
                    112
                },
            ),
            _ => (128, if local { 64 } else { 80 }),
        }
    } else {
        match d {
            ..=64 => (192, 160),
            65..=96 => (192, 128),
            97..=128 => (
                128,
                if paged_non_tma {
                    160
                } else if softcap && local {
                    192
                } else {
                    224
                },
            ),
            129..=192 => (
                128,
                if (paged_non_tma || softcap) && local {
                    128
                } else {
                    160
                },
            ),
            _ => (128, if local { 64 } else { 128 }),
        }
    }
}

/// `should_pack_gqa` for non-varlen q (`heuristics.h:9-17`), in float as the source computes it.
pub fn should_pack_gqa(seqlen_q: i64, group: i64, block_m: i64) -> bool {
    let round_up = |a: i64| ceil_div(a, block_m) * block_m;
    let nopack = seqlen_q as f32 / round_up(seqlen_q) as f32;
    let pack = (seqlen_q * group) as f32 / round_up(seqlen_q * group) as f32;
    f64::from(nopack) < 0.9 * f64::from(pack)
}

/// `num_splits_heuristic` (`heuristics.h:25-59`): float32 efficiencies, compared in double.
pub fn num_splits_heuristic(
    total_mblocks: i64,
    num_sms: i64,
    num_n_blocks: i64,
    num_m_blocks: i64,
    size_one_kv_head: i64,
    causal_or_local: bool,
    max_splits: i64,
) -> i64 {
    if total_mblocks as f32 >= 0.8f32 * num_sms as f32 {
        let size_l2 = 50 * 1024 * 1024;
        return if size_one_kv_head > size_l2 && num_m_blocks >= num_sms * 2 && !causal_or_local {
            ((size_one_kv_head + size_l2 - 1) / size_l2).min(max_splits)
        } else {
            1
        };
    }
    if num_n_blocks <= 4 {
        return 1;
    }
    let max_splits = max_splits.min(num_sms).min(num_n_blocks);
    let efficiency: Vec<f32> = (1..=max_splits)
        .map(|splits| {
            let waves = (total_mblocks * splits) as f32 / num_sms as f32;
            waves / waves.ceil()
        })
        .collect();
    let best = efficiency
        .iter()
        .fold(0f32, |best, &e| if e > best { e } else { best });
    efficiency
        .iter()
        .position(|&e| f64::from(e) >= 0.85 * f64::from(best))
        .map_or(1, |i| i as i64 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_heuristic_matches_the_spec_example() {
        // cuda-fa3.md D.8 worked example: total_m = 2, 132 SMs, n_blocks = 8, m_blocks = 1,
        // causal: eff[s] = s/66, first s with s/66 >= 0.85 * 8/66 is 7.
        assert_eq!(
            num_splits_heuristic(2, 132, 8, 1, 1024 * 256 * 2, true, 128),
            7
        );
        // Enough m-blocks to fill the SMs: one split.
        assert_eq!(num_splits_heuristic(106, 132, 8, 1, 0, false, 128), 1);
        // Few key blocks: one split.
        assert_eq!(num_splits_heuristic(2, 132, 4, 1, 0, false, 128), 1);
    }

    #[test]
    fn tiles_follow_tile_size_h() {
        assert_eq!(
            tile_size_fwd_sm90(128, 128, true, false, 2, false, false),
            (128, 128)
        );
        assert_eq!(
            tile_size_fwd_sm90(128, 128, false, false, 2, false, false),
            (128, 176)
        );
        assert_eq!(
            tile_size_fwd_sm90(64, 512, false, false, 2, false, false),
            (64, 64)
        );
        assert_eq!(
            tile_size_fwd_sm90(256, 256, false, true, 2, false, false),
            (128, 64)
        );
        assert_eq!(
            tile_size_fwd_sm90(128, 128, false, false, 1, false, false),
            (128, 224)
        );
        assert_eq!(round_up_headdim(80), 96);
        assert_eq!(round_up_headdimv(300), 512);
    }
}
