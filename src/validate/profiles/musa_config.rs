//! mate v0.2.2's host-side configuration, as much as validation needs: head-dim rounding and the
//! kernel configuration (with its `Add config for headdim` failure), pack-GQA, mask resolution and
//! the attention-chunk reset (musa-fa3.md §6.1–§6.4).
//!
//! Stand-in until `crate::mate` (the kernel engineer's module) is merged; the lead replaces this
//! module with it.

/// `_roundup_headdim` for one dim (fmha_utils.py): the next of 64, 128, 192, 256, 384, else 512.
pub fn round_headdim(d: usize) -> usize {
    match d {
        0..=64 => 64,
        65..=128 => 128,
        129..=192 => 192,
        193..=256 => 256,
        257..=384 => 384,
        _ => 512,
    }
}

/// What `_get_fwd_kernel_config` returns that later stages need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    pub tile_m: usize,
    pub tile_n: usize,
    pub headdim_rounded: usize,
    pub headdim_v_rounded: usize,
    pub pack_gqa: bool,
}

/// `_check_enable_packgqa` / the `pack_gqa` override (fmha_utils.py `_get_tile_m`).
pub fn enable_pack_gqa(seqlen_q: i64, head_ratio: i64, pack_gqa: Option<bool>) -> bool {
    pack_gqa.unwrap_or(seqlen_q.saturating_mul(head_ratio) <= 256)
}

/// `_get_tile_m`'s candidate from the (packed) row count.
fn candidate_tile_m(rows: i64) -> usize {
    match rows {
        i64::MIN..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        129..=192 => 192,
        _ => 256,
    }
}

/// `_get_fwd_kernel_config(m, head_ratio, headdim, headdim_v, pack_gqa)`; `Err` carries the rounded
/// pair of the `Add config for headdim {d}-{dv}` assertion.
pub fn kernel_config(
    seqlen_q: i64,
    head_ratio: i64,
    headdim: usize,
    headdim_v: usize,
    pack_gqa: Option<bool>,
) -> Result<KernelConfig, (usize, usize)> {
    let (d, dv) = (round_headdim(headdim), round_headdim(headdim_v));
    let packed = enable_pack_gqa(seqlen_q, head_ratio, pack_gqa);
    let rows = if packed {
        seqlen_q.saturating_mul(head_ratio)
    } else {
        seqlen_q
    };
    let candidate = candidate_tile_m(rows);
    let tile_m = match (d, dv) {
        (64, 64) | (128, 128) | (192, 128) | (192, 192) => candidate,
        (256, 256) if packed => 32,
        (256, 256) => 192,
        (384, 384) => 64,
        (512, 512) => 32,
        _ => return Err((d, dv)),
    };
    Ok(KernelConfig {
        tile_m,
        tile_n: 64,
        headdim_rounded: d,
        headdim_v_rounded: dv,
        pack_gqa: packed,
    })
}

/// The mask `_resolve_mask` settles on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    pub is_causal: bool,
    pub is_local: bool,
    pub window_left: i64,
    pub window_right: i64,
}

/// `_resolve_mask(seqlen_q, seqlen_k, is_causal, wl, wr, attention_chunk)` (§6.1); `None` windows are
/// Python `None`.
pub fn resolve_mask(
    seqlen_q: i64,
    seqlen_k: i64,
    causal: bool,
    wl: Option<i64>,
    wr: Option<i64>,
    attention_chunk: i64,
) -> Mask {
    let mut wl = wl.filter(|&w| w < seqlen_k.saturating_sub(1)).unwrap_or(-1);
    let mut wr = wr.filter(|&w| w < seqlen_q.saturating_sub(1)).unwrap_or(-1);
    if causal {
        wr = 0;
    }
    let is_causal = wl < 0 && wr == 0 && attention_chunk == 0;
    let is_local = (wl >= 0 || wr >= 0 || attention_chunk >= 1) && !is_causal;
    if wl < 0 {
        wl = seqlen_k.saturating_sub(1);
    }
    if wr < 0 {
        wr = seqlen_q.saturating_sub(1);
    }
    if attention_chunk > 0 {
        wl = wl.min(attention_chunk.saturating_sub(1));
        wr = wr.min(attention_chunk.saturating_sub(1));
    }
    Mask {
        is_causal,
        is_local,
        window_left: wl,
        window_right: wr,
    }
}

/// The fwd's attention-chunk reset for fixed-length calls (§6.2): a chunk covering the whole key
/// range is no chunk.
pub fn reset_chunk(attention_chunk: i64, fixed_length: bool, seqlen_q: i64, seqlen_k: i64) -> i64 {
    if attention_chunk > 0 && fixed_length && seqlen_q <= seqlen_k && attention_chunk >= seqlen_k {
        0
    } else {
        attention_chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_supported_pairs() {
        assert_eq!(round_headdim(80), 128);
        assert_eq!(round_headdim(600), 512);
        assert_eq!(kernel_config(1, 1, 64, 128, None), Err((64, 128)));
        // 1 row x 8 heads per KV head packs (8 <= 256): tile 32.
        let c = kernel_config(1, 8, 128, 128, None).unwrap();
        assert_eq!((c.tile_m, c.pack_gqa), (32, true));
        // 200 x 8 = 1600 > 256: no packing, tile from 200 rows.
        let c = kernel_config(200, 8, 128, 128, None).unwrap();
        assert_eq!((c.tile_m, c.pack_gqa), (256, false));
        assert_eq!(
            kernel_config(1, 1, 256, 256, Some(false)).unwrap().tile_m,
            192
        );
        assert_eq!(kernel_config(1, 1, 576, 512, None).unwrap().tile_m, 32);
    }

    #[test]
    fn mask_resolution() {
        // (-1, 0) without causal is causal.
        let m = resolve_mask(4, 100, false, Some(-1), Some(0), 0);
        assert_eq!(
            (m.is_causal, m.is_local, m.window_left, m.window_right),
            (true, false, 99, 0)
        );
        // seqlen_q 1 turns wr = 0 into -1 and then seqlen_q.saturating_sub(1) = 0: no mask.
        let m = resolve_mask(1, 100, false, Some(-1), Some(0), 0);
        assert_eq!((m.is_causal, m.is_local), (false, false));
        let m = resolve_mask(8, 100, true, Some(16), None, 0);
        assert_eq!(
            (m.is_causal, m.is_local, m.window_left, m.window_right),
            (false, true, 16, 0)
        );
        let m = resolve_mask(8, 100, false, None, None, 32);
        assert_eq!((m.is_local, m.window_left, m.window_right), (true, 31, 7));
        assert_eq!(reset_chunk(128, true, 8, 100), 0);
        assert_eq!(reset_chunk(128, false, 8, 100), 128);
    }
}
