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
//!   cp_world_size > 1, one call per rank with `cp_world_size`, `cp_rank`, `cp_tot_seqused_k` on
//!   rank-local caches (L1124-L1183); the wrapper's passes `sinks=None, s_aux=None`.

use super::{GridPoint, Rng, UpstreamCall, int_tensor, randperm};
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

    /// The call the test makes at `point`. With cp_world_size > 1 the test makes one call per
    /// rank on rank-local caches; this is rank 0's with the whole caches, which only says which
    /// context-parallel arguments it passes (such a case needs the mate profile and is not
    /// checked).
    pub fn call(self, point: GridPoint, rng: &mut Rng) -> UpstreamCall {
        let params = self.params(point.0);
        let Params {
            cp_world_size,
            num_splits,
            pack_gqa,
            learnable_sink,
            varlen_q,
            mask,
            page_size,
            seq_lens,
            num_heads: (heads_q, heads_k),
            headdim,
        } = params;
        let causal = mask == Mask::Causal;
        let window = match mask {
            Mask::Window(left, right) => Some([left, right]),
            Mask::Full | Mask::Causal => None,
        };

        let batch = seq_lens.len();
        let lengths_q: Vec<i64> = seq_lens.iter().map(|&(q, _)| q as i64).collect();
        let lengths_k: Vec<i64> = seq_lens.iter().map(|&(_, k)| k as i64).collect();
        let max_q = seq_lens.iter().map(|&(q, _)| q).max().unwrap_or(0);
        let max_k = seq_lens.iter().map(|&(_, k)| k).max().unwrap_or(0);
        let total_q: usize = seq_lens.iter().map(|&(q, _)| q).sum();
        let cu_seqlens_q: Vec<i64> = std::iter::once(0)
            .chain(lengths_q.iter().scan(0, |sum, len| {
                *sum += len;
                Some(*sum)
            }))
            .collect();
        let pages = max_k.div_ceil(page_size) * batch * 3;
        let cache = TensorArg::new(Dtype::Bfloat16, &[pages, page_size, heads_k, headdim]);
        let page_table = int_tensor(Dtype::Int32, &[batch, pages / batch], randperm(pages, rng));
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
        if cp_world_size == 1 {
            keywords.extend([
                ("k", PyValue::None),
                ("v", PyValue::None),
                ("qv", PyValue::None),
                ("rotary_cos", PyValue::None),
                ("rotary_sin", PyValue::None),
            ]);
        }
        keywords.push(("cache_seqlens", seqlens(&lengths_k)));
        if cp_world_size == 1 {
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
        if cp_world_size == 1 {
            keywords.push(("cu_seqlens_k_new", PyValue::None));
        }
        keywords.push(("max_seqlen_q", max_seqlen_q));
        if cp_world_size == 1 {
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
        if cp_world_size == 1 {
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
        match self {
            Test::Mate if cp_world_size > 1 => keywords.extend([
                ("cp_world_size", PyValue::Int(cp_world_size as i64)),
                ("cp_rank", PyValue::Int(0)),
                ("cp_tot_seqused_k", seqlens(&lengths_k)),
            ]),
            Test::Mate | Test::MateAdvance => {}
            Test::Wrapper => keywords.extend([("sinks", PyValue::None), ("s_aux", PyValue::None)]),
        }
        let call = KvCacheCall {
            keywords: keywords
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
            metadata_args: Some(metadata_args),
            ..KvCacheCall::default()
        };
        UpstreamCall {
            call,
            description: format!("{params:?}"),
        }
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
}
