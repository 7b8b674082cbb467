//! mate's scheduler metadata (musa-fa3.md §6.7, §6.8): the host part of `_fmha_get_metadata` and
//! a sequential model of its JIT metadata kernel.
//!
//! The kernel runs one thread per batch entry (31 per warp, lane 31 only feeds its neighbour) in
//! CTAs of 992 entries; here each CTA's chunk is processed as a whole, in thread order, which is
//! the intended semantics of the split-reduction loop (§6.8 step 3c; the device's unsynchronised
//! flag update is not modelled).

use super::{
    L2_BYTES, SplitHeuristicArgs, UnsupportedHeadDims, kernel_config, num_splits_heuristic,
    reset_attention_chunk, resolve_mask,
};

/// Batch entries one metadata CTA handles (32 warps of 31 valid lanes).
const ENTRIES_PER_CTA: usize = 992;

/// The arguments of `_fmha_get_metadata`, after the SGLang and interface layers (§2.5).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetadataArgs {
    pub batch: usize,
    pub max_seqlen_q: usize,
    pub max_seqlen_k: usize,
    pub num_heads: usize,
    pub num_heads_k: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub seqused_q: Option<Vec<i64>>,
    /// `cache_seqlens`.
    pub seqused_k: Option<Vec<i64>>,
    pub cu_seqlens_q: Option<Vec<i64>>,
    pub cu_seqlens_k: Option<Vec<i64>>,
    pub cu_seqlens_k_new: Option<Vec<i64>>,
    pub leftpad_k: Option<Vec<i64>>,
    pub max_seqlen_k_new: usize,
    pub is_causal: bool,
    pub window_left: Option<i64>,
    pub window_right: Option<i64>,
    pub attention_chunk: i64,
    pub num_splits: i64,
    pub pack_gqa: Option<bool>,
    /// Multiprocessor count of the device (see [`super::DEFAULT_MP`]).
    pub mp: usize,
    pub mp_margin: usize,
}

/// The four vectors of the metadata tensor, each indexed by sorted position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerMetadata {
    pub num_splits_dynamic: Vec<i32>,
    pub batch_table: Vec<i32>,
    pub num_m_blocks: Vec<i32>,
    pub num_nheads_in_l2: Vec<i32>,
}

impl SchedulerMetadata {
    /// The int32 tensor of length 4·b, in the layout of §6.7.
    pub fn to_tensor(&self) -> Vec<i32> {
        [
            &self.num_splits_dynamic,
            &self.batch_table,
            &self.num_m_blocks,
            &self.num_nheads_in_l2,
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect()
    }

    /// Slices a metadata tensor of at least 4·b elements at offsets i·b, as the forward and the
    /// combine do (§6.7); `None` when it is shorter.
    pub fn from_tensor(values: &[i32], batch: usize) -> Option<SchedulerMetadata> {
        if values.len() < 4 * batch {
            return None;
        }
        let part = |i: usize| values[i * batch..(i + 1) * batch].to_vec();
        Some(SchedulerMetadata {
            num_splits_dynamic: part(0),
            batch_table: part(1),
            num_m_blocks: part(2),
            num_nheads_in_l2: part(3),
        })
    }
}

/// One batch entry as a metadata thread holds it.
#[derive(Clone, Copy, Debug)]
struct Entry {
    batch: usize,
    m_blocks: i64,
    n_blocks: i64,
    splits: i64,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// Length `i` of a `cu_seqlens`-style vector, or `None` when absent.
fn diff(cu: &Option<Vec<i64>>, i: usize) -> Option<i64> {
    cu.as_ref().map(|c| c[i + 1] - c[i])
}

/// `_fmha_get_metadata`: the host part (mask, configuration, split count S_M) and the kernel.
pub fn scheduler_metadata(args: &MetadataArgs) -> Result<SchedulerMetadata, UnsupportedHeadDims> {
    let group = args.num_heads / args.num_heads_k.max(1);
    let fixed_length = args.cu_seqlens_q.is_none()
        && args.cu_seqlens_k.is_none()
        && args.cu_seqlens_k_new.is_none()
        && args.seqused_q.is_none()
        && args.seqused_k.is_none();
    let (sq, sk) = (args.max_seqlen_q as i64, args.max_seqlen_k as i64);
    let chunk = reset_attention_chunk(args.attention_chunk, fixed_length, sq, sk);
    let mask = resolve_mask(
        sq,
        sk,
        args.is_causal,
        args.window_left,
        args.window_right,
        chunk,
    );
    let config = kernel_config(
        args.head_dim,
        args.head_dim_v,
        sq,
        group as i64,
        args.pack_gqa,
    )?;
    let (tile_m, tile_n) = (config.tile_m as i64, config.tile_n as i64);
    let k_l2 = L2_BYTES / (tile_n * (args.head_dim + args.head_dim_v) as i64 * 2);
    let splits_max = if args.num_splits > 0 {
        args.num_splits
    } else {
        num_splits_heuristic(&SplitHeuristicArgs {
            batch: args.batch,
            num_heads: args.num_heads,
            num_heads_k: args.num_heads_k,
            seqlen_q: args.max_seqlen_q,
            seqlen_k: args.max_seqlen_k,
            head_dim: args.head_dim,
            head_dim_v: args.head_dim_v,
            num_mp: args.mp as i64 - args.mp_margin as i64,
            mask,
            tile_m: config.tile_m,
            tile_n: config.tile_n,
        }) as i64
    };
    let num_head_arg = if config.pack_gqa {
        args.num_heads_k
    } else {
        args.num_heads
    } as i64;
    let pack_factor = if config.pack_gqa { group as i64 } else { 1 };
    let single_cta = args.batch <= ENTRIES_PER_CTA;

    let mut entries: Vec<Entry> = (0..args.batch)
        .map(|b| {
            let qlen = args
                .seqused_q
                .as_ref()
                .map(|s| s[b])
                .or_else(|| diff(&args.cu_seqlens_q, b))
                .unwrap_or(sq);
            let base = args
                .seqused_k
                .as_ref()
                .map(|s| s[b])
                .or_else(|| diff(&args.cu_seqlens_k, b))
                .unwrap_or(sk);
            let leftpad = args.leftpad_k.as_ref().map_or(0, |l| l[b]);
            let new = diff(&args.cu_seqlens_k_new, b).unwrap_or(args.max_seqlen_k_new as i64);
            let mut klen = base - leftpad + new;
            if mask.is_local {
                klen = klen
                    .min(mask.window_left + mask.window_right + 1 + tile_m)
                    .max(0);
            }
            Entry {
                batch: b,
                m_blocks: ceil_div(qlen * pack_factor, tile_m),
                n_blocks: ceil_div(klen, tile_n),
                splits: 1,
            }
        })
        .collect();

    if splits_max != 1 && single_cta {
        assign_splits(&mut entries, splits_max, num_head_arg, args.mp as i64);
    }

    let sort_key = |e: &Entry| {
        if mask.is_causal {
            e.n_blocks * tile_n - e.m_blocks * tile_m
        } else {
            e.n_blocks
        }
    };
    let l2_group = |n_blocks: i64| {
        [16, 8, 4, 2]
            .into_iter()
            .find(|g| g * n_blocks <= k_l2)
            .unwrap_or(1)
    };
    let mut metadata = SchedulerMetadata {
        num_splits_dynamic: Vec::with_capacity(args.batch),
        batch_table: Vec::with_capacity(args.batch),
        num_m_blocks: Vec::with_capacity(args.batch),
        num_nheads_in_l2: Vec::with_capacity(args.batch),
    };
    for chunk in entries.chunks_mut(ENTRIES_PER_CTA) {
        // Stable: equal keys keep thread (batch) order.
        chunk.sort_by_key(|e| std::cmp::Reverse(sort_key(e)));
        for e in chunk.iter() {
            let heads = (l2_group(e.n_blocks.max(1))
                * (if config.pack_gqa { 1 } else { group as i64 }))
            .min(num_head_arg);
            metadata.num_splits_dynamic.push(e.splits as i32);
            metadata.batch_table.push(e.batch as i32);
            metadata.num_m_blocks.push(e.m_blocks as i32);
            metadata.num_nheads_in_l2.push(heads as i32);
        }
    }
    Ok(metadata)
}

/// §6.8 step 3: per-entry split counts within the budget of MP CTAs, then blocks per split.
fn assign_splits(entries: &mut [Entry], splits_max: i64, num_head_arg: i64, mp: i64) {
    let total: i64 = entries.iter().map(|e| e.m_blocks * e.n_blocks).sum();
    let blocks_per_mp = (total as f32 * 1.1f32 * num_head_arg as f32 / mp as f32).ceil() as i64;
    for e in entries.iter_mut() {
        // The device divides by zero when no entry has work; every entry keeps one split here.
        e.splits = if blocks_per_mp == 0 {
            1
        } else {
            ceil_div(e.n_blocks, blocks_per_mp).min(splits_max).max(1)
        };
    }
    let mut overflow = entries.iter().map(|e| e.splits).sum::<i64>() - mp;
    while overflow > 0 {
        let cost = |e: &Entry| ceil_div(e.n_blocks, e.splits - 1) - ceil_div(e.n_blocks, e.splits);
        let mut candidates: Vec<(i64, usize)> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.splits > 1)
            .map(|(i, e)| (cost(e), i))
            .collect();
        candidates.sort_unstable();
        let reduced = candidates.len().min(overflow as usize);
        if reduced == 0 {
            break;
        }
        for &(_, i) in &candidates[..reduced] {
            entries[i].splits -= 1;
        }
        overflow -= reduced as i64;
    }
    for e in entries.iter_mut() {
        e.n_blocks = ceil_div(e.n_blocks, e.splits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worked_example() -> MetadataArgs {
        MetadataArgs {
            batch: 3,
            max_seqlen_q: 1,
            max_seqlen_k: 5000,
            num_heads: 32,
            num_heads_k: 8,
            head_dim: 128,
            head_dim_v: 128,
            seqused_k: Some(vec![100, 5000, 300]),
            cu_seqlens_q: Some(vec![0, 1, 2, 3]),
            is_causal: true,
            window_left: Some(-1),
            window_right: Some(-1),
            mp: 48,
            ..MetadataArgs::default()
        }
    }

    #[test]
    fn worked_example_of_section_6_8() {
        let metadata = scheduler_metadata(&worked_example()).unwrap();
        assert_eq!(metadata.to_tensor(), [2, 1, 1, 1, 2, 0, 1, 1, 1, 1, 8, 8]);
    }

    #[test]
    fn explicit_single_split_keeps_block_counts_and_sorts_by_key_length() {
        let args = MetadataArgs {
            num_splits: 1,
            ..worked_example()
        };
        let metadata = scheduler_metadata(&args).unwrap();
        // Causal keys n·64 − 32: [2, 79, 5] blocks → batches 1, 2, 0; L2 groups for n = 79, 5, 2.
        assert_eq!(metadata.batch_table, [1, 2, 0]);
        assert_eq!(metadata.num_splits_dynamic, [1, 1, 1]);
        assert_eq!(metadata.num_nheads_in_l2, [1, 8, 8]);
    }

    #[test]
    fn overflowing_split_budget_is_reduced_cheapest_first() {
        // MP = 4, one query row, forced S_M = 4, key blocks [100, 10, 10, 10]: T = 130,
        // bpm = ceil(130·1.1·1/4) = 36 → nsd = [3, 1, 1, 1], sum 6 > 4: overflow 2; only entry 0
        // is a candidate, so one split goes per round: 3 → 2 → 1.
        let args = MetadataArgs {
            batch: 4,
            max_seqlen_q: 1,
            max_seqlen_k: 6400,
            num_heads: 1,
            num_heads_k: 1,
            head_dim: 64,
            head_dim_v: 64,
            seqused_k: Some(vec![6400, 640, 640, 640]),
            num_splits: 4,
            mp: 4,
            ..MetadataArgs::default()
        };
        let metadata = scheduler_metadata(&args).unwrap();
        assert_eq!(metadata.num_splits_dynamic, [1, 1, 1, 1]);
        assert_eq!(metadata.batch_table, [0, 1, 2, 3]);
        let args = MetadataArgs { mp: 5, ..args };
        // bpm = ceil(130·1.1/5) = 29 → nsd = [4 (min(ceil(100/29), 4)), 1, 1, 1], sum 7 > 5 →
        // overflow 2 → 4 → 3 → 2.
        let metadata = scheduler_metadata(&args).unwrap();
        assert_eq!(metadata.num_splits_dynamic, [2, 1, 1, 1]);
    }

    #[test]
    fn local_mask_caps_key_blocks_and_short_tensors_do_not_slice() {
        let args = MetadataArgs {
            batch: 2,
            max_seqlen_q: 1,
            max_seqlen_k: 1000,
            num_heads: 4,
            num_heads_k: 4,
            head_dim: 64,
            head_dim_v: 64,
            seqused_k: Some(vec![1000, 50]),
            window_left: Some(100),
            window_right: Some(0),
            num_splits: 1,
            mp: 48,
            ..MetadataArgs::default()
        };
        let metadata = scheduler_metadata(&args).unwrap();
        // klen = min(1000, 100 + 0 + 1 + 32) = 133 → 3 blocks; 50 → 1 block.
        assert_eq!(metadata.batch_table, [0, 1]);
        let tensor = metadata.to_tensor();
        assert_eq!(SchedulerMetadata::from_tensor(&tensor, 2), Some(metadata));
        assert_eq!(SchedulerMetadata::from_tensor(&tensor[..7], 2), None);
    }
}
