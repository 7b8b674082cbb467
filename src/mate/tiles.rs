//! mate's tile geometry on the device (docs/musa-device.md §1): which query rows share an m-block
//! (pack-GQA packs row `position · r + g`), the key blocks an m-block visits
//! (`block_info.hpp` `get_n_block_min_max`, L24-L91), how many m-blocks the grid has
//! (`fwd_kern.j2` L419) and which rows see no key in the first block their tile processes.

use super::{KernelConfig, ResolvedMask};

/// The forward's tiling of one call (per-batch lengths are arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    pub tile_m: usize,
    pub tile_n: usize,
    pub pack_gqa: bool,
    /// Query heads per KV head, `r`.
    pub group: usize,
    pub mask: ResolvedMask,
}

/// Where one query row sits in the tiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowTile {
    pub m_block: usize,
    /// The m-block has at least one key block (else the tile stores O = 0, LSE = −inf).
    pub has_key_block: bool,
    /// The row's first processed key block (the last of its range) holds none of its keys, so
    /// mate keeps its running maximum at 0 (D1).
    pub masked_in_first_block: bool,
}

/// A context-parallel rank's view of one sequence (mate's `EnableCP`, `cp_world_size > 1`): local
/// key `j` is global key `j · world_size + rank` of `tot_seqlen_k` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankKeys {
    pub world_size: usize,
    pub rank: usize,
    pub tot_seqlen_k: usize,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    // The device's integer ceil_div on ints: (a + b − 1) / b, truncating.
    (a + b - 1) / b
}

impl Tiles {
    pub fn new(config: &KernelConfig, group: usize, mask: ResolvedMask) -> Tiles {
        Tiles {
            tile_m: config.tile_m,
            tile_n: config.tile_n,
            pack_gqa: config.pack_gqa,
            group,
            mask,
        }
    }

    fn rows_per_position(&self) -> usize {
        if self.pack_gqa { self.group } else { 1 }
    }

    /// m-blocks of the grid for a static `max_seqlen_q`.
    pub fn grid_m_blocks(&self, max_seqlen_q: usize) -> usize {
        (max_seqlen_q * self.rows_per_position()).div_ceil(self.tile_m)
    }

    /// The tile row of query `position` of query head `g` within its KV head's group.
    pub fn packed_row(&self, position: usize, g: usize) -> usize {
        if self.pack_gqa {
            position * self.group + g
        } else {
            position
        }
    }

    /// Key blocks `[n_min, n_max)` of m-block `m_block` (unsplit) for a batch with `seqlen_q`
    /// queries and `seqlen_k` (local) keys, on a context-parallel rank where `rank` says so.
    pub fn key_blocks(
        &self,
        m_block: usize,
        seqlen_q: usize,
        seqlen_k: usize,
        rank: Option<RankKeys>,
    ) -> (i64, i64) {
        let (bm, bn) = (self.tile_m as i64, self.tile_n as i64);
        let (sq, sk) = (seqlen_q as i64, seqlen_k as i64);
        let r = self.rows_per_position() as i64;
        let ResolvedMask {
            is_causal,
            is_local,
            window_left,
            window_right,
            attention_chunk: chunk,
        } = self.mask;
        // mate refuses a local mask with context parallelism (F-39); its block range ignores it
        let rank = rank.filter(|_| !is_local);
        let mut n_max = ceil_div(sk, bn);
        if is_causal || is_local {
            let m_idx_max = ceil_div((m_block as i64 + 1) * bm, r);
            // a rank's causal limit is global (block_info.hpp L40-L41)
            let tot_sk = rank.map_or(sk, |rank| rank.tot_seqlen_k as i64);
            let n_idx = m_idx_max + tot_sk - sq;
            let mut n_token_max = n_idx + if is_local { window_right } else { 0 };
            if is_local && chunk > 0 {
                // The end of the chunk holding n_idx − 1: ceil(n_idx / chunk) · chunk.
                n_token_max = n_token_max.min(-(-n_idx).div_euclid(chunk) * chunk);
            }
            if let Some(rank) = rank {
                // the global limit as a count of local keys, rounded as mate rounds it
                // (block_info.hpp L49-L56)
                n_token_max = ceil_div(n_token_max - rank.rank as i64, rank.world_size as i64);
            }
            n_max = n_max.min(ceil_div(n_token_max, bn));
        }
        let mut n_min = 0;
        if is_local {
            let m_idx_min = m_block as i64 * bm / r;
            let n_idx = m_idx_min + sk - sq;
            let mut left = n_idx - window_left;
            if chunk > 0 {
                left = left.max(n_idx.div_euclid(chunk) * chunk);
            }
            n_min = (left / bn).max(0);
        }
        (n_min, n_max)
    }

    /// Where query `position` of head `g` of a batch with `seqlen_q` queries and `seqlen_k` keys
    /// sits, given `last_key`, the last key it attends to (`None`: no key).
    pub fn row_tile(
        &self,
        position: usize,
        g: usize,
        seqlen_q: usize,
        seqlen_k: usize,
        last_key: Option<usize>,
        rank: Option<RankKeys>,
    ) -> RowTile {
        let m_block = self.packed_row(position, g) / self.tile_m;
        let (n_min, n_max) = self.key_blocks(m_block, seqlen_q, seqlen_k, rank);
        let has_key_block = n_min < n_max;
        let first_block_start = (n_max - 1) * self.tile_n as i64;
        RowTile {
            m_block,
            has_key_block,
            masked_in_first_block: has_key_block
                && last_key.is_none_or(|k| (k as i64) < first_block_start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causal_tiles(tile_m: usize) -> Tiles {
        Tiles {
            tile_m,
            tile_n: 64,
            pack_gqa: false,
            group: 1,
            mask: ResolvedMask {
                is_causal: true,
                is_local: false,
                window_left: 0,
                window_right: 0,
                attention_chunk: 0,
            },
        }
    }

    /// Rows of a square causal prefill that see no key in their first block: all but the last
    /// 64 of every m-block (docs/musa-device.md D1).
    #[test]
    fn square_causal_prefill_masks_all_but_the_last_64_rows_of_each_block() {
        for (tile_m, sq) in [(128, 128), (192, 192), (256, 512)] {
            let tiles = causal_tiles(tile_m);
            let masked: Vec<usize> = (0..sq)
                .filter(|&i| {
                    tiles
                        .row_tile(i, 0, sq, sq, Some(i), None)
                        .masked_in_first_block
                })
                .collect();
            let expected: Vec<usize> = (0..sq).filter(|i| i % tile_m < tile_m - 64).collect();
            assert_eq!(masked, expected, "tile_m {tile_m}");
        }
        // tile_m = 64: the first block is the diagonal block, every row sees its first key.
        let tiles = causal_tiles(64);
        assert!((0..64).all(|i| {
            !tiles
                .row_tile(i, 0, 64, 64, Some(i), None)
                .masked_in_first_block
        }));
    }

    #[test]
    fn an_m_block_wholly_above_the_diagonal_has_no_key_block() {
        // 300 queries, 100 keys, bottom-right aligned: rows 0..199 see nothing; m-block 0
        // (rows 0..127) ends at key index 128 + 100 − 300 < 0.
        let tiles = causal_tiles(128);
        assert!(!tiles.row_tile(0, 0, 300, 100, None, None).has_key_block);
        let row = tiles.row_tile(150, 0, 300, 100, None, None);
        assert!(row.has_key_block && row.masked_in_first_block);
    }
}
