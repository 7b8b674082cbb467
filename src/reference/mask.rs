//! Which keys a query row attends to: resolution of causal / window / chunk per stack, and the
//! attended key interval of a row (cuda-fa3.md D.1–D.2; musa-fa3.md §6.1–6.2).

use super::Stack;
use crate::mate::RankKeys;

/// The resolved mask. Window sides are already made finite from the static sizes and capped by
/// the chunk, so an "infinite" side never masks anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Every key.
    Full,
    /// Key `j` allowed for row `i` iff `j ≤ i + sk − sq`.
    Causal,
    /// `i + o − left ≤ j ≤ i + o + right` (`o = sk − sq`), and with `chunk > 0` also within the
    /// chunk of `i + o`.
    Local { left: i64, right: i64, chunk: i64 },
}

/// What the caller asked for, before resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskRequest {
    pub causal: bool,
    pub window_left: i64,
    pub window_right: i64,
    pub attention_chunk: i64,
}

/// The static sizes resolution reads (`max_seqlen_q` or `q.shape[1]`; the cache capacity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticSizes {
    pub seqlen_q: i64,
    pub seqlen_k: i64,
    pub head_size: i64,
    pub paged: bool,
    /// mate's "fixed length" test for its chunk reset (§6.2): no `cu_seqlens_q`, `cache_seqlens`,
    /// `cache_leftpad`, `page_table` or new KV.
    pub fixed_length: bool,
}

/// A resolved mask and whether rotary query positions advance with the row (the resolved flags
/// are causal or local, cuda-fa3.md D.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub mask: Mask,
    pub rotary_positions_advance: bool,
}

/// Resolves a mask request as `stack` does.
pub fn resolve(stack: Stack, request: MaskRequest, sizes: StaticSizes) -> Resolved {
    let StaticSizes {
        seqlen_q: sq,
        seqlen_k: sk,
        ..
    } = sizes;
    let mut chunk = request.attention_chunk;
    if stack == Stack::Musa && chunk > 0 && sizes.fixed_length && sq <= sk && chunk >= sk {
        chunk = 0;
    }
    let mut causal = request.causal;
    let mut wl = request.window_left;
    let mut wr = request.window_right;
    if wl >= sk - 1 {
        wl = -1;
    }
    if wr >= sq - 1 {
        wr = -1;
    }
    // FA3 drops causal for single-query calls (kept for paged 64 < d ≤ 128 only to pick a tile);
    // a single bottom-right-aligned row sees every key either way.
    let keeps_causal_for_tiles = sizes.paged && sizes.head_size > 64 && sizes.head_size <= 128;
    if stack != Stack::Musa
        && sq == 1
        && wl == -1
        && wr == -1
        && chunk == 0
        && !keeps_causal_for_tiles
    {
        causal = false;
    }
    if causal {
        wr = 0;
    }
    let is_causal = wl < 0 && wr == 0 && chunk == 0;
    let is_local = (wl >= 0 || wr >= 0 || chunk >= 1) && !is_causal;
    let mask = if is_causal {
        Mask::Causal
    } else if is_local {
        let mut left = if wl < 0 { sk - 1 } else { wl };
        let mut right = if wr < 0 { sq - 1 } else { wr };
        if chunk > 0 {
            left = left.min(chunk - 1);
            right = right.min(chunk - 1);
        }
        Mask::Local { left, right, chunk }
    } else {
        Mask::Full
    };
    Resolved {
        mask,
        rotary_positions_advance: is_causal || is_local,
    }
}

/// One rank's share of a context-parallel call (mate's FA3 wrapper's `cp_world_size`, `cp_rank`,
/// `cp_tot_seqused_k`; musa-fa3.md §2.2). The rank's cache holds the keys `rank`, `rank + W`,
/// `rank + 2W`, ... of each sequence of `tot_seqused_k[b]` keys: local key `j` is global key
/// `j·W + rank` (MooreThreads/mate@3f58cc3e include/mate/attention/fmha/mask.hpp:L122-L131,
/// L162-L177; seqlen.hpp:L136-L141 reads the total per batch). The query rows are the sequence's
/// last `sq` positions, so the causal limit is global: row `i` attends global keys
/// `g ≤ i + tot − sq`, and no rank attends `g ≥ tot` (mask.hpp:L169-L175). The rank returns the
/// attention over its own keys and their lse; combining the ranks' results by their lse gives the
/// attention over the whole sequence (`_combine_cp_partials`, mate/testing/flash_attn.py:L921-L950).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextParallel {
    pub world_size: usize,
    pub rank: usize,
    /// Every sequence's key count over all ranks, per batch.
    pub tot_seqused_k: Vec<usize>,
}

impl ContextParallel {
    /// The share as the kernel applies it to a call of `batch` sequences: none while the world
    /// size is 1 (mate's `enable_cp` is `cp_world_size > 1`); refused where mate refuses the call
    /// (a local mask, F-39) or the kernel would read a total past `tot_seqused_k`.
    pub fn applied(&self, local_mask: bool, batch: usize) -> Result<Option<&Self>, String> {
        if self.world_size <= 1 {
            return Ok(None);
        }
        if local_mask {
            return Err("mate refuses a local mask with context parallelism (F-39)".into());
        }
        if self.tot_seqused_k.len() < batch {
            return Err(format!(
                "cp_tot_seqused_k has {} elements, the call {batch} sequences",
                self.tot_seqused_k.len()
            ));
        }
        Ok(Some(self))
    }

    /// Batch `b`'s sequence as this rank's kernel sees it.
    pub fn rank_keys(&self, b: usize) -> RankKeys {
        RankKeys {
            world_size: self.world_size,
            rank: self.rank,
            tot_seqlen_k: self.tot_seqused_k[b],
        }
    }

    /// The keys `[0, hi)` row `i` of batch `b` (`sq` rows, `sk` local keys) attends to under
    /// `mask`: the local keys whose global position the mask admits. Only `Full` and `Causal`
    /// masks exist here: mate refuses a local mask with context parallelism (F-39).
    pub fn key_range(
        &self,
        mask: Mask,
        b: usize,
        i: usize,
        sq: usize,
        sk: usize,
    ) -> (usize, usize) {
        let (world, rank) = (self.world_size as i64, self.rank as i64);
        let tot = self.tot_seqused_k[b] as i64;
        // the number of local keys j with j·W + rank ≤ last
        let through = |last: i64| {
            if last < rank {
                0
            } else {
                (last - rank) / world + 1
            }
        };
        let mut hi = (sk as i64).min(through(tot - 1));
        if mask == Mask::Causal {
            hi = hi.min(through(i as i64 + tot - sq as i64));
        }
        (0, hi.max(0) as usize)
    }
}

impl Mask {
    /// The keys `[lo, hi)` row `i` of a batch with `sq` rows and `sk` keys attends to (empty when
    /// `lo == hi`).
    pub fn key_range(self, i: usize, sq: usize, sk: usize) -> (usize, usize) {
        let sk_i = sk as i64;
        let t = i as i64 + sk_i - sq as i64;
        let (lo, hi) = match self {
            Mask::Full => (0, sk_i),
            Mask::Causal => (0, t + 1),
            Mask::Local { left, right, chunk } => {
                let (mut lo, mut hi) = (t - left, t + right + 1);
                if chunk > 0 {
                    let c0 = t.div_euclid(chunk) * chunk;
                    lo = lo.max(c0);
                    hi = hi.min(c0 + chunk);
                }
                (lo, hi)
            }
        };
        let hi = hi.clamp(0, sk_i);
        let lo = lo.clamp(0, hi);
        (lo as usize, hi as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(sq: i64, sk: i64) -> StaticSizes {
        StaticSizes {
            seqlen_q: sq,
            seqlen_k: sk,
            head_size: 128,
            paged: false,
            fixed_length: false,
        }
    }

    fn request(causal: bool, wl: i64, wr: i64, chunk: i64) -> MaskRequest {
        MaskRequest {
            causal,
            window_left: wl,
            window_right: wr,
            attention_chunk: chunk,
        }
    }

    #[test]
    fn window_minus_one_zero_is_causal() {
        for stack in Stack::ALL {
            let r = resolve(stack, request(false, -1, 0, 0), sizes(4, 8));
            assert_eq!(r.mask, Mask::Causal);
            assert!(r.rotary_positions_advance);
        }
    }

    #[test]
    fn causal_with_chunk_is_local_with_right_zero() {
        let r = resolve(Stack::Fa3, request(true, -1, -1, 3), sizes(4, 8));
        assert_eq!(
            r.mask,
            Mask::Local {
                left: 2,
                right: 0,
                chunk: 3
            }
        );
    }

    #[test]
    fn windows_as_large_as_the_static_sizes_are_dropped() {
        // wl = 7 ≥ sk − 1, wr = 3 ≥ sq − 1: not local, and rotary positions stay fixed.
        let r = resolve(Stack::Fa3, request(false, 7, 3, 0), sizes(4, 8));
        assert_eq!(r.mask, Mask::Full);
        assert!(!r.rotary_positions_advance);
    }

    #[test]
    fn mate_resets_a_chunk_covering_a_fixed_length_cache() {
        let mut s = sizes(4, 8);
        s.fixed_length = true;
        let r = resolve(Stack::Musa, request(false, -1, -1, 8), s);
        assert_eq!(r.mask, Mask::Full);
        let r = resolve(Stack::Fa3, request(false, -1, -1, 8), s);
        assert!(matches!(r.mask, Mask::Local { chunk: 8, .. }));
        assert!(r.rotary_positions_advance);
    }

    /// Worked by hand from mask.hpp's rule `g = j·W + r`, masked when `g > i + tot − sq` or
    /// `g ≥ tot`.
    #[test]
    fn a_rank_attends_its_keys_at_their_global_positions() {
        // 7 keys over 3 ranks: rank 1 holds global keys 1 and 4 (local 0, 1); rank 0 holds 0, 3, 6
        let cp = |rank| ContextParallel {
            world_size: 3,
            rank,
            tot_seqused_k: vec![7],
        };
        // 2 query rows at global positions 5 and 6
        assert_eq!(cp(1).key_range(Mask::Causal, 0, 0, 2, 2), (0, 2));
        assert_eq!(cp(0).key_range(Mask::Causal, 0, 0, 2, 3), (0, 2));
        assert_eq!(cp(0).key_range(Mask::Causal, 0, 1, 2, 3), (0, 3));
        // 4 query rows at 3..7: row 0 sees global 0..=3, so rank 1 only its key 1 (not 4), rank 2
        // only its key 2 (not 5)
        assert_eq!(cp(1).key_range(Mask::Causal, 0, 0, 4, 2), (0, 1));
        assert_eq!(cp(2).key_range(Mask::Causal, 0, 0, 4, 2), (0, 1));
        // 8 query rows (more than keys): row 0 is at global −1 and sees nothing
        assert_eq!(cp(0).key_range(Mask::Causal, 0, 0, 8, 3), (0, 0));
        // without causality every local key below the total; a cache longer than its share
        // is cut at the total (rank 2's third key would be global 8)
        assert_eq!(cp(2).key_range(Mask::Full, 0, 0, 1, 3), (0, 2));
        assert_eq!(cp(1).key_range(Mask::Full, 0, 0, 1, 1), (0, 1));
    }

    #[test]
    fn key_ranges_are_bottom_right_aligned() {
        // sq = 2, sk = 5: o = 3. Causal row 0 sees keys 0..=3, row 1 sees 0..=4.
        assert_eq!(Mask::Causal.key_range(0, 2, 5), (0, 4));
        assert_eq!(Mask::Causal.key_range(1, 2, 5), (0, 5));
        // More queries than keys: the first rows see nothing.
        assert_eq!(Mask::Causal.key_range(0, 4, 2), (0, 0));
        assert_eq!(Mask::Causal.key_range(2, 4, 2), (0, 1));
        // Window (1, 0): row 1 (t = 4) sees keys 3..=4.
        let local = Mask::Local {
            left: 1,
            right: 0,
            chunk: 0,
        };
        assert_eq!(local.key_range(1, 2, 5), (3, 5));
        // Chunk 2, wide window: t = 3 lies in chunk [2, 4); t = 4 in [4, 6) ∩ [0, 5).
        let chunked = Mask::Local {
            left: 1,
            right: 1,
            chunk: 2,
        };
        assert_eq!(chunked.key_range(0, 2, 5), (2, 4));
        assert_eq!(chunked.key_range(1, 2, 5), (4, 5));
        // Negative t floors to the chunk below 0: nothing to see.
        assert_eq!(chunked.key_range(0, 5, 2), (0, 0));
    }
}
