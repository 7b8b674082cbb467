//! FA3's scheduler metadata (cuda-fa3.md C.3, D.8): the layout and size rule both
//! `get_scheduler_metadata` and `mha_fwd` apply, and the prepare kernel that fills it, with the
//! host's resolved tiles, split count and pack-GQA flag ([`super`]) as inputs.

/// The vectors of a metadata tensor, in the order they are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fa3Vector {
    NumSplitsDynamic,
    NumMBlocks,
    /// Virtual → actual batch (present when sorting, i.e. not local).
    VarlenBatchIdx,
    NumNheadsInL2,
    /// The tile counter (one element).
    Semaphore,
}

/// Which vectors a metadata tensor holds, for `batch` sequences (C.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fa3Layout {
    pub batch: usize,
    pub prepare_varlen: bool,
    /// `!is_local`: batches sorted, `varlen_batch_idx` present.
    pub sort: bool,
    /// `is_causal || is_local`: `num_nheads_in_l2` present.
    pub swizzle: bool,
    pub semaphore: bool,
}

impl Fa3Layout {
    /// The tensor `get_scheduler_metadata` returns (`flash_api.cpp` L623–L650): always
    /// prepare-varlen; semaphore when `arch >= 90 || num_splits > 1`.
    pub fn of_get_scheduler_metadata(
        batch: usize,
        is_causal: bool,
        is_local: bool,
        num_splits: i64,
        arch: u32,
    ) -> Fa3Layout {
        Fa3Layout {
            batch,
            prepare_varlen: true,
            sort: !is_local,
            swizzle: is_causal || is_local,
            semaphore: arch >= 90 || num_splits > 1,
        }
    }

    /// The tensor `mha_fwd` expects (L990–L1026) for its resolved flags.
    pub fn of_mha_fwd(
        batch: usize,
        is_causal: bool,
        is_local: bool,
        is_varlen: bool,
        num_splits: i64,
        arch: u32,
    ) -> Fa3Layout {
        let semaphore = if arch >= 90 {
            ((is_causal || is_local) && num_splits == 1) || is_varlen
        } else {
            (is_causal && !is_varlen) || (is_varlen && num_splits > 1)
        };
        Fa3Layout {
            batch,
            prepare_varlen: is_varlen,
            sort: !is_local,
            swizzle: is_causal || is_local,
            semaphore,
        }
    }

    /// `mha_fwd` reads (and checks) a passed tensor only when this holds; otherwise it is ignored.
    pub fn read_by_mha_fwd(&self) -> bool {
        self.semaphore || self.prepare_varlen
    }

    /// `round_up(b, 4)`.
    pub fn b_rounded(&self) -> usize {
        self.batch.div_ceil(4) * 4
    }

    /// V: per-batch vectors counted by the size formula.
    pub fn vectors(&self) -> usize {
        2 * usize::from(self.prepare_varlen) + usize::from(self.sort) + usize::from(self.swizzle)
    }

    /// `metadata_size = V·b_rounded + semaphore` (int32 elements).
    pub fn size(&self) -> usize {
        self.vectors() * self.b_rounded() + usize::from(self.semaphore)
    }

    /// The element offset of a vector, `None` when absent (C.3 table).
    pub fn offset(&self, vector: Fa3Vector) -> Option<usize> {
        let br = self.b_rounded();
        match vector {
            Fa3Vector::NumSplitsDynamic => self.prepare_varlen.then_some(0),
            Fa3Vector::NumMBlocks => self.prepare_varlen.then_some(br),
            Fa3Vector::VarlenBatchIdx => (self.prepare_varlen && self.sort).then_some(2 * br),
            Fa3Vector::NumNheadsInL2 => {
                (self.prepare_varlen && self.swizzle).then_some(if self.sort { 3 } else { 2 } * br)
            }
            Fa3Vector::Semaphore => self.semaphore.then_some(self.vectors() * br),
        }
    }
}

/// The prepare kernel's inputs after host resolution (D.8).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fa3PrepareArgs {
    pub num_heads: usize,
    pub num_heads_k: usize,
    /// Unrounded head dims (the L2 budget uses them).
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Bytes per element: 1 for fp8, else 2.
    pub element_size: usize,
    pub max_seqlen_q: i64,
    pub max_seqlen_k: i64,
    pub max_seqlen_k_new: i64,
    pub seqused_k: Option<Vec<i64>>,
    pub cu_seqlens_q: Option<Vec<i64>>,
    pub cu_seqlens_k_new: Option<Vec<i64>>,
    pub leftpad_k: Option<Vec<i64>>,
    pub tile_m: i64,
    pub tile_n: i64,
    pub pack_gqa: bool,
    pub is_causal: bool,
    /// The resolved `num_splits` (an upper bound).
    pub num_splits: i64,
    /// `multiProcessorCount − sm_margin`.
    pub num_sm: i64,
}

/// The prepare kernel (D.8) writing into a tensor of `layout`: each element, `None` where the
/// kernel never writes (padding up to `b_rounded`). Batches are processed in CTAs of 992.
pub fn prepare(layout: &Fa3Layout, args: &Fa3PrepareArgs) -> Vec<Option<i32>> {
    let b = layout.batch;
    let group = args.num_heads.div_ceil(args.num_heads_k.max(1)) as i64;
    let heads = if args.pack_gqa {
        args.num_heads_k
    } else {
        args.num_heads
    } as i64;
    let l2 = 8 * 1024 * 1024
        / (args.tile_n * ((args.head_dim + args.head_dim_v) * args.element_size) as i64);
    let diff = |cu: &Option<Vec<i64>>, x: usize| cu.as_ref().map(|c| c[x + 1] - c[x]);
    let per_batch = |x: usize| {
        let lq = diff(&args.cu_seqlens_q, x).unwrap_or(args.max_seqlen_q)
            * if args.pack_gqa { group } else { 1 };
        let lk = args.seqused_k.as_ref().map_or(args.max_seqlen_k, |s| s[x]);
        let ln = diff(&args.cu_seqlens_k_new, x).unwrap_or(args.max_seqlen_k_new);
        let pad = args.leftpad_k.as_ref().map_or(0, |l| l[x]);
        (
            (lq + args.tile_m - 1) / args.tile_m,
            (lk - pad + ln + args.tile_n - 1) / args.tile_n,
        )
    };
    let mut out = vec![None; layout.size()];
    let mut put = |vector: Fa3Vector, v: usize, value: i64| {
        if let Some(offset) = layout.offset(vector) {
            out[offset + v] = Some(value as i32);
        }
    };
    let single_cta = b <= 992;
    for start in (0..b).step_by(992) {
        let chunk: Vec<usize> = (start..b.min(start + 992)).collect();
        let mut items: Vec<(usize, i64, i64, i64)> = chunk
            .iter()
            .map(|&x| {
                let (m, n) = per_batch(x);
                (x, m, n, 1)
            })
            .collect();
        if single_cta && args.num_splits != 1 {
            let total: i64 = items.iter().map(|&(_, m, n, _)| m * n).sum();
            let bps = (total as f32 * 1.1f32 * heads as f32 / args.num_sm as f32).ceil() as i64;
            for item in &mut items {
                let splits = if bps == 0 {
                    1
                } else {
                    (item.2 + bps - 1) / bps
                };
                item.3 = splits.min(args.num_splits).max(1);
                item.2 = (item.2 + item.3 - 1) / item.3;
            }
        }
        let heads_in_l2 = |n: i64| {
            let g = [16, 8, 4, 2].into_iter().find(|g| g * n <= l2).unwrap_or(1);
            (g * if args.pack_gqa { 1 } else { group }).min(heads)
        };
        if layout.sort {
            // Descending by key; equal keys keep batch order (CUB's merge takes the left run).
            items.sort_by_key(|&(_, m, n, _)| {
                std::cmp::Reverse(if args.is_causal {
                    n * args.tile_n - m * args.tile_m
                } else {
                    n
                })
            });
        }
        for (p, &(x, m, n, s)) in items.iter().enumerate() {
            let v = start + p;
            put(Fa3Vector::NumSplitsDynamic, v, s);
            put(Fa3Vector::NumMBlocks, v, m);
            put(Fa3Vector::VarlenBatchIdx, v, x as i64);
            if layout.swizzle {
                put(Fa3Vector::NumNheadsInL2, v, heads_in_l2(n.max(1)));
            }
        }
    }
    if let Some(offset) = layout.offset(Fa3Vector::Semaphore) {
        out[offset] = Some(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_rule_of_the_spec_example_and_the_layout_confusion() {
        // sm90, varlen, causal, b = 5: b_rounded 8, V = 4, semaphore → 33, counter at 32.
        let layout = Fa3Layout::of_mha_fwd(5, true, false, true, 1, 90);
        assert_eq!(
            (layout.size(), layout.offset(Fa3Vector::Semaphore)),
            (33, Some(32))
        );
        // Non-causal non-local and local both have V = 3: same size, other vectors at 2·b_rounded.
        let plain = Fa3Layout::of_get_scheduler_metadata(5, false, false, 0, 90);
        let local = Fa3Layout::of_get_scheduler_metadata(5, false, true, 0, 90);
        assert_eq!((plain.size(), local.size()), (25, 25));
        assert_eq!(plain.offset(Fa3Vector::VarlenBatchIdx), Some(16));
        assert_eq!(local.offset(Fa3Vector::NumNheadsInL2), Some(16));
        // Not varlen, sm90, causal with one split: the sort/swizzle vectors without the prepare
        // ones (V = 2) plus the counter: 2·8 + 1; nothing is read when neither holds.
        let fixed = Fa3Layout::of_mha_fwd(5, true, false, false, 1, 90);
        assert_eq!(fixed.size(), 17);
        assert!(!Fa3Layout::of_mha_fwd(5, false, false, false, 2, 90).read_by_mha_fwd());
    }

    #[test]
    fn prepare_reproduces_the_worked_example_of_d8() {
        // b = 3, sq = 4, 8/2 heads, d = 128, cache [100, 1000, 0], causal, sm90 with 132 SMs:
        // host resolution gives tiles (128, 128), num_splits 7, pack-GQA.
        let layout = Fa3Layout::of_get_scheduler_metadata(3, true, false, 7, 90);
        let args = Fa3PrepareArgs {
            num_heads: 8,
            num_heads_k: 2,
            head_dim: 128,
            head_dim_v: 128,
            element_size: 2,
            max_seqlen_q: 4,
            max_seqlen_k: 1024,
            seqused_k: Some(vec![100, 1000, 0]),
            tile_m: 128,
            tile_n: 128,
            pack_gqa: true,
            is_causal: true,
            num_splits: 7,
            num_sm: 132,
            ..Fa3PrepareArgs::default()
        };
        let n = None;
        let s = Some;
        assert_eq!(
            prepare(&layout, &args),
            [
                s(7),
                s(1),
                s(1),
                n,
                s(1),
                s(1),
                s(1),
                n,
                s(1),
                s(0),
                s(2),
                n,
                s(2),
                s(2),
                s(2),
                n,
                s(0)
            ]
        );
    }
}
