//! mate's paged-KV tests: `test_paged_attn` and `test_paged_attn_advance` of mate's own test file
//! (MooreThreads/mate@3f58cc3e tests/test_fmha.py:L1000-L1337 and L1338-L1591, calling
//! `mate.flash_attn_with_kvcache`, i.e. `mate.mha_interface`) and `test_paged_attn` of its
//! FA3-compatible wrapper's (wrappers/flash-attention/tests/test_flash_attn.py:L204-L399, calling
//! `flash_attn_interface.flash_attn_with_kvcache`).
//!
//! Facts read from the tests:
//! - grids: mate's test (L1003-L1022) dtype bf16, cp_world_size 1, 2, 4, num_splits 0, 5,
//!   pack_gqa True/False, mask None/"causal", page_size 1, 3, 4, 16, 64, 111, four seq_lens lists
//!   (L1009-L1017), num_heads (40, 8), (96, 8), (32, 8), (64, 4), (8, 1), headdim (128, 128),
//!   (256, 256); the wrapper's (L204-L219) num_splits 0, 5, pack_gqa True, mask None/"causal",
//!   page_size 1, 4, 16, 64, seq_lens [(32, 512), (192, 192), (128, 256)], num_heads (64, 4),
//!   headdim as mate's; `test_paged_attn_advance` (L1340-L1357) num_splits 0, 5, pack_gqa
//!   True/False, is_learnable_sink True/False, is_varlen_q True/False, mask None/"causal"/(44, 88),
//!   page_size 1, 4, 16, 64, seq_lens [(111, 1328), (55, 666), (222, 463)], num_heads (40, 8),
//!   (8, 1), headdim as above. Only the advance test skips: a learnable sink without the local
//!   mask (L1437-L1438).
//! - data: q unpadded to (total_q, heads, headdim) with `cu_seqlens_q` the running sum of the
//!   query lengths and `max_seqlen_q` their maximum (the advance test without varlen: q padded to
//!   (batch, max_q, heads, headdim), neither passed); a learnable sink of (heads,) bf16; the mask
//!   (44, 88) is the window; `cache_seqlens` the key lengths;
//!   `generate_block_kvcache` (mate/testing/flash_attn.py:L521-L558): ceil(max_k / page)·batch·3
//!   pages, page table a randperm reshaped to (batch, pages / batch); softmax_scale
//!   headdim^-0.5; window_size (None, None); causal for mask "causal".
//! - metadata: `get_scheduler_metadata` with the call's own arguments whenever num_splits >= 0
//!   (always, on these grids; mate's test L1210-L1237, the wrapper's L318-L340).
//! - the call: keywords only; mate's test passes `learnable_sink=None` and, with
//!   cp_world_size > 1, one call per rank with `cp_world_size`, `cp_rank`, `cp_tot_seqused_k` (the
//!   global key lengths) on rank-local caches and lengths, its metadata computed for them
//!   (L1124-L1183, [`rank_local_layout`]), then combines the ranks' outputs by their lse
//!   (`_combine_cp_partials`, mate/testing/flash_attn.py:L921-L950) and compares with the
//!   attention over the whole cache; the wrapper's test passes `sinks=None, s_aux=None`.

use super::{GridPoint, Rng, UpstreamCall, cumulative, int_tensor, owned_keywords, randperm};
use crate::call::{Dtype, KvCacheCall, MetadataArgsSpec, PyValue, TensorArg};

/// Which of the three tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// tests/test_fmha.py::test_paged_attn, through `mate.mha_interface`.
    Mate,
    /// tests/test_fmha.py::test_paged_attn_advance, through `mate.mha_interface`.
    MateAdvance,
    /// wrappers/flash-attention/tests/test_flash_attn.py::test_paged_attn.
    Wrapper,
}

/// A test's mask parameter: None, "causal" or a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mask {
    Full,
    Causal,
    Window(i64, i64),
}

struct Grid {
    cp_world_sizes: &'static [usize],
    num_splits: &'static [i64],
    pack_gqa: &'static [bool],
    learnable_sink: &'static [bool],
    varlen_q: &'static [bool],
    masks: &'static [Mask],
    page_sizes: &'static [usize],
    seq_lens: &'static [&'static [(usize, usize)]],
    num_heads: &'static [(usize, usize)],
}

const MIXED: [(usize, usize); 11] = [
    (0, 1234),
    (1, 1235),
    (2, 1236),
    (3, 1237),
    (4, 1238),
    (5, 1239),
    (6, 1240),
    (7, 1241),
    (8, 1242),
    (9, 1243),
    (10, 1244),
];

const PLAIN_MASKS: &[Mask] = &[Mask::Full, Mask::Causal];

const MATE: Grid = Grid {
    cp_world_sizes: &[1, 2, 4],
    num_splits: &[0, 5],
    pack_gqa: &[true, false],
    learnable_sink: &[false],
    varlen_q: &[true],
    masks: PLAIN_MASKS,
    page_sizes: &[1, 3, 4, 16, 64, 111],
    seq_lens: &[
        &[(32, 512), (192, 192), (128, 256)],
        &MIXED,
        &[(55, 666), (222, 463), (111, 1328)],
        &[(111, 1328), (55, 666), (222, 463)],
    ],
    num_heads: &[(40, 8), (96, 8), (32, 8), (64, 4), (8, 1)],
};

const MATE_ADVANCE: Grid = Grid {
    cp_world_sizes: &[1],
    num_splits: &[0, 5],
    pack_gqa: &[true, false],
    learnable_sink: &[true, false],
    varlen_q: &[true, false],
    masks: &[Mask::Full, Mask::Causal, Mask::Window(44, 88)],
    page_sizes: &[1, 4, 16, 64],
    seq_lens: &[&[(111, 1328), (55, 666), (222, 463)]],
    num_heads: &[(40, 8), (8, 1)],
};

const WRAPPER: Grid = Grid {
    cp_world_sizes: &[1],
    num_splits: &[0, 5],
    pack_gqa: &[true],
    learnable_sink: &[false],
    varlen_q: &[true],
    masks: PLAIN_MASKS,
    page_sizes: &[1, 4, 16, 64],
    seq_lens: &[&[(32, 512), (192, 192), (128, 256)]],
    num_heads: &[(64, 4)],
};

const HEADDIMS: [usize; 2] = [128, 256];

impl Test {
    fn grid(self) -> &'static Grid {
        match self {
            Test::Mate => &MATE,
            Test::MateAdvance => &MATE_ADVANCE,
            Test::Wrapper => &WRAPPER,
        }
    }

    /// Every grid point the test runs.
    pub fn points(self) -> Vec<usize> {
        let g = self.grid();
        let size = g.cp_world_sizes.len()
            * g.num_splits.len()
            * g.pack_gqa.len()
            * g.learnable_sink.len()
            * g.varlen_q.len()
            * g.masks.len()
            * g.page_sizes.len()
            * g.seq_lens.len()
            * g.num_heads.len()
            * HEADDIMS.len();
        (0..size)
            .filter(|&point| self.params(point).runs())
            .collect()
    }

    /// The parameters of grid `point` (the last decorator's list varies fastest).
    fn params(self, point: usize) -> Params {
        let g = self.grid();
        let mut rest = point;
        let mut pick = |count: usize| {
            let d = rest % count;
            rest /= count;
            d
        };
        let headdim = HEADDIMS[pick(HEADDIMS.len())];
        let num_heads = g.num_heads[pick(g.num_heads.len())];
        let seq_lens = g.seq_lens[pick(g.seq_lens.len())];
        let page_size = g.page_sizes[pick(g.page_sizes.len())];
        let mask = g.masks[pick(g.masks.len())];
        let varlen_q = g.varlen_q[pick(g.varlen_q.len())];
        let learnable_sink = g.learnable_sink[pick(g.learnable_sink.len())];
        let pack_gqa = g.pack_gqa[pick(g.pack_gqa.len())];
        let num_splits = g.num_splits[pick(g.num_splits.len())];
        let cp_world_size = g.cp_world_sizes[pick(g.cp_world_sizes.len())];
        Params {
            cp_world_size,
            num_splits,
            pack_gqa,
            learnable_sink,
            varlen_q,
            mask,
            page_size,
            seq_lens,
            num_heads,
            headdim,
        }
    }

    /// The calls the test makes at `point`: one, or with cp_world_size > 1 one per rank on its
    /// rank-local caches, rank 0's first.
    pub fn call(self, point: GridPoint, rng: &mut Rng) -> UpstreamCall {
        let params = self.params(point.0);
        let Params {
            cp_world_size,
            page_size,
            seq_lens,
            num_heads: (_, heads_k),
            headdim,
            ..
        } = params;
        let batch = seq_lens.len();
        let lengths_k: Vec<i64> = seq_lens.iter().map(|&(_, k)| k as i64).collect();
        let max_k = seq_lens.iter().map(|&(_, k)| k).max().unwrap_or(0);
        let pages = max_k.div_ceil(page_size) * batch * 3;
        let cache = TensorArg::new(Dtype::Bfloat16, &[pages, page_size, heads_k, headdim]);
        let page_table = int_tensor(Dtype::Int32, &[batch, pages / batch], randperm(pages, rng));
        let mut calls: Vec<KvCacheCall> = if cp_world_size == 1 {
            let layout = KvLayout {
                cache,
                page_table,
                lengths_k,
            };
            vec![self.rank_call(&params, layout, None)]
        } else {
            (0..cp_world_size)
                .map(|rank| {
                    let layout = rank_local_layout(&params, &lengths_k, rank, rng);
                    let cp = ContextParallel {
                        world_size: cp_world_size,
                        rank,
                        tot_seqused_k: lengths_k.clone(),
                    };
                    self.rank_call(&params, layout, Some(cp))
                })
                .collect()
        };
        let call = calls.remove(0);
        UpstreamCall {
            call,
            other_ranks: calls,
            description: format!("{params:?}"),
        }
    }

    /// The call with the caches `layout` describes, keywords in the test's order.
    fn rank_call(
        self,
        params: &Params,
        layout: KvLayout,
        cp: Option<ContextParallel>,
    ) -> KvCacheCall {
        let Params {
            num_splits,
            pack_gqa,
            learnable_sink,
            varlen_q,
            mask,
            seq_lens,
            page_size,
            num_heads: (heads_q, heads_k),
            headdim,
            ..
        } = *params;
        let KvLayout {
            cache,
            page_table,
            lengths_k,
        } = layout;
        let causal = mask == Mask::Causal;
        let window = match mask {
            Mask::Window(left, right) => Some([left, right]),
            Mask::Full | Mask::Causal => None,
        };
        let batch = seq_lens.len();
        let max_q = seq_lens.iter().map(|&(q, _)| q).max().unwrap_or(0);
        let max_k = lengths_k.iter().copied().max().unwrap_or(0).max(0) as usize;
        let total_q: usize = seq_lens.iter().map(|&(q, _)| q).sum();
        let cu_seqlens_q = cumulative(&seq_lens.iter().map(|&(q, _)| q).collect::<Vec<_>>());
        let seqlens = |values: &[i64]| {
            PyValue::Tensor(int_tensor(Dtype::Int32, &[values.len()], values.to_vec()))
        };
        let window_size = match window {
            Some([left, right]) => PyValue::Tuple(vec![PyValue::Int(left), PyValue::Int(right)]),
            None => PyValue::Tuple(vec![PyValue::None, PyValue::None]),
        };
        let q = if varlen_q {
            PyValue::tensor(Dtype::Bfloat16, &[total_q, heads_q, headdim])
        } else {
            PyValue::tensor(Dtype::Bfloat16, &[batch, max_q, heads_q, headdim])
        };
        let metadata_args = MetadataArgsSpec {
            batch_size: batch,
            max_seqlen_q: max_q,
            max_seqlen_k: max_k,
            num_heads_q: heads_q,
            num_heads_kv: heads_k,
            headdim,
            cache_seqlens: lengths_k.clone(),
            qkv_dtype: Some("torch.bfloat16".into()),
            headdim_v: Some(headdim),
            cu_seqlens_q: varlen_q.then(|| cu_seqlens_q.clone()),
            cu_seqlens_k_new: None,
            cache_leftpad: None,
            page_size: Some(page_size),
            max_seqlen_k_new: 0,
            causal,
            // (None, None): mate reads a None side as no window
            window_size: window,
            attention_chunk: 0,
            has_softcap: false,
            num_splits,
            pack_gqa: Some(pack_gqa),
            sm_margin: 0,
        };
        let mut keywords: Vec<(&str, PyValue)> = vec![
            ("q", q),
            ("k_cache", PyValue::Tensor(cache.clone())),
            ("v_cache", PyValue::Tensor(cache)),
        ];
        // the call with context parallelism passes fewer keywords (L1165-L1183)
        let all_keywords = cp.is_none();
        if all_keywords {
            keywords.extend([
                ("k", PyValue::None),
                ("v", PyValue::None),
                ("qv", PyValue::None),
                ("rotary_cos", PyValue::None),
                ("rotary_sin", PyValue::None),
            ]);
        }
        keywords.push(("cache_seqlens", seqlens(&lengths_k)));
        if all_keywords {
            keywords.extend([
                ("cache_batch_idx", PyValue::None),
                ("cache_leftpad", PyValue::None),
            ]);
        }
        let (cu_seqlens_q, max_seqlen_q) = if varlen_q {
            (seqlens(&cu_seqlens_q), PyValue::Int(max_q as i64))
        } else {
            (PyValue::None, PyValue::None)
        };
        keywords.extend([
            ("page_table", PyValue::Tensor(page_table)),
            ("cu_seqlens_q", cu_seqlens_q),
        ]);
        if all_keywords {
            keywords.push(("cu_seqlens_k_new", PyValue::None));
        }
        keywords.push(("max_seqlen_q", max_seqlen_q));
        if all_keywords {
            keywords.extend([
                ("rotary_seqlens", PyValue::None),
                ("q_descale", PyValue::None),
                ("k_descale", PyValue::None),
                ("v_descale", PyValue::None),
            ]);
        }
        keywords.extend([
            ("softmax_scale", PyValue::Float((headdim as f64).powf(-0.5))),
            ("causal", PyValue::Bool(causal)),
            ("window_size", window_size),
        ]);
        let sink = learnable_sink.then(|| PyValue::tensor(Dtype::Bfloat16, &[heads_q]));
        match self {
            Test::Mate | Test::MateAdvance => {
                keywords.push(("learnable_sink", sink.unwrap_or(PyValue::None)));
            }
            Test::Wrapper => {}
        }
        if all_keywords {
            keywords.extend([
                ("attention_chunk", PyValue::Int(0)),
                ("softcap", PyValue::Float(0.0)),
                ("rotary_interleaved", PyValue::Bool(false)),
            ]);
        }
        keywords.extend([
            // the values metadata_args describe are filled in before the call is checked
            ("scheduler_metadata", PyValue::None),
            ("num_splits", PyValue::Int(num_splits)),
            ("pack_gqa", PyValue::Bool(pack_gqa)),
            ("sm_margin", PyValue::Int(0)),
            ("return_softmax_lse", PyValue::Bool(true)),
        ]);
        if let Some(cp) = cp {
            keywords.extend([
                ("cp_world_size", PyValue::Int(cp.world_size as i64)),
                ("cp_rank", PyValue::Int(cp.rank as i64)),
                ("cp_tot_seqused_k", seqlens(&cp.tot_seqused_k)),
            ]);
        }
        if self == Test::Wrapper {
            keywords.extend([("sinks", PyValue::None), ("s_aux", PyValue::None)]);
        }
        KvCacheCall {
            keywords: owned_keywords(keywords),
            metadata_args: Some(metadata_args),
            ..KvCacheCall::default()
        }
    }
}

/// A call's paged caches: the pool, its page table and the key lengths.
struct KvLayout {
    cache: TensorArg,
    page_table: TensorArg,
    lengths_k: Vec<i64>,
}

/// The context-parallel arguments of one rank's call.
struct ContextParallel {
    world_size: usize,
    rank: usize,
    /// The global key lengths (the test's `cache_seqlens`).
    tot_seqused_k: Vec<i64>,
}

/// `make_cp_rank_local_paged_kvcache` (mate/testing/flash_attn.py:L953-L1075): rank `rank` holds
/// the global keys `rank, rank + W, rank + 2W, ...` of each sequence, packed into a fresh pool of
/// `max_local_pages · batch · 3` pages (`max_local_pages = ceil(max local length / page_size)`,
/// at least 1) under a page table drawn from one `randperm` of the pool, taken in order for each
/// sequence's pages; table entries past a sequence's pages stay 0.
fn rank_local_layout(params: &Params, lengths_k: &[i64], rank: usize, rng: &mut Rng) -> KvLayout {
    let page = params.page_size;
    let local: Vec<i64> = lengths_k
        .iter()
        .map(|&len| {
            let past_rank = usize::try_from(len).unwrap_or(0).saturating_sub(rank);
            past_rank.div_ceil(params.cp_world_size) as i64
        })
        .collect();
    let batch = local.len();
    let max_local = local.iter().copied().max().unwrap_or(0) as usize;
    let max_pages = max_local.div_ceil(page).max(1);
    let pool = max_pages * batch * 3;
    let order = randperm(pool, rng);
    let mut table = vec![0i64; batch * max_pages];
    let mut cursor = order.iter();
    for (b, &len) in local.iter().enumerate() {
        for slot in &mut table[b * max_pages..][..(len as usize).div_ceil(page)] {
            *slot = *cursor
                .next()
                .expect("the pool has three times the pages used");
        }
    }
    let (_, heads_k) = params.num_heads;
    KvLayout {
        cache: TensorArg::new(Dtype::Bfloat16, &[pool, page, heads_k, params.headdim]),
        page_table: int_tensor(Dtype::Int32, &[batch, max_pages], table),
        lengths_k: local,
    }
}

/// One point of a grid.
#[derive(Clone, Copy, Debug)]
struct Params {
    cp_world_size: usize,
    num_splits: i64,
    pack_gqa: bool,
    learnable_sink: bool,
    varlen_q: bool,
    mask: Mask,
    page_size: usize,
    seq_lens: &'static [(usize, usize)],
    num_heads: (usize, usize),
    headdim: usize,
}

impl Params {
    /// The advance test's skip: "learnable sink is tested for local attention".
    fn runs(&self) -> bool {
        !self.learnable_sink || matches!(self.mask, Mask::Window(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_sizes_are_the_products_of_the_tests_lists() {
        // 3·2·2·2·6·4·5·2 and 1·2·1·2·4·1·1·2; the advance test's 2·2·2·2·3·4·2·2 = 768 less
        // the 2·2·2·2·4·2·2 = 256 with a sink and no window
        assert_eq!(Test::Mate.points().len(), 5760);
        assert_eq!(Test::Wrapper.points().len(), 32);
        assert_eq!(Test::MateAdvance.points().len(), 512);
    }

    /// Rank `r` of `W` holds `len(range(r, sk, W))` keys of a sequence of `sk`, in a pool of
    /// three times the pages the longest needs, each sequence's pages distinct.
    #[test]
    fn rank_local_caches_hold_every_w_th_key() {
        let params = Test::Mate.params(0);
        assert_eq!(params.page_size, 1);
        let params = Params {
            cp_world_size: 3,
            page_size: 4,
            ..params
        };
        let mut rng = <Rng as rand::SeedableRng>::seed_from_u64(0);
        let lengths = [10, 0, 1, 2];
        let local = |rank| rank_local_layout(&params, &lengths, rank, &mut rng.clone());
        assert_eq!(local(0).lengths_k, vec![4, 0, 1, 1]);
        assert_eq!(local(1).lengths_k, vec![3, 0, 0, 1]);
        assert_eq!(local(2).lengths_k, vec![3, 0, 0, 0]);
        let layout = rank_local_layout(&params, &lengths, 0, &mut rng);
        // ceil(4 / 4) = 1 page per sequence, 1 · 4 · 3 pages
        assert_eq!(layout.cache.shape, vec![12, 4, 8, 128]);
        assert_eq!(layout.page_table.shape, vec![4, 1]);
        let table = layout.page_table.int_values().unwrap();
        assert_eq!(table[1], 0, "a sequence without keys keeps entry 0");
        assert_ne!(table[0], table[2]);
        assert_ne!(table[2], table[3]);
    }

    #[test]
    fn context_parallel_points_make_one_call_per_rank() {
        let point = (0..Test::Mate.points().len())
            .find(|&p| Test::Mate.params(p).cp_world_size == 4)
            .unwrap();
        let mut rng = <Rng as rand::SeedableRng>::seed_from_u64(1);
        let upstream = Test::Mate.call(GridPoint(point), &mut rng);
        assert_eq!(upstream.other_ranks.len(), 3);
        let rank = |call: &KvCacheCall| call.passed("cp_rank").cloned();
        assert_eq!(rank(&upstream.call), Some(PyValue::Int(0)));
        assert_eq!(rank(&upstream.other_ranks[2]), Some(PyValue::Int(3)));
    }
}
