//! mate's MLA decode tests (MooreThreads/mate@3f58cc3e tests/test_mla.py) as far as they call
//! `mate.mha_interface.flash_attn_with_kvcache`, whose MLA branch (musa-fa3.md §5.4, §6.12)
//! takes a call with `qv` of last dim 512 and `q` of last dim 64.
//!
//! Facts read from the test file:
//! - `test_fa_interface` (L139-L226): grid batch_size 1, 56, 60; kv_len 33, 97, 129; qo_len 1, 3,
//!   5; num_heads 8, 16, 32, 64, 128; causal False/True; page_size 64; dtype bf16, fp16;
//!   schedule_mode "inited"/"uninited". q_nope (b, qo_len, h, 512) and q_pe (b, qo_len, h, 64)
//!   contiguous; ceil(kv_len / 64) pages per sequence, `kv_concat` (b·pages, 64, 576) with the
//!   caches its views `[:, :, 512:]` (k_cache, 3-D) and `[:, :, :512]` (v_cache); cache_seqlens
//!   all kv_len (int32); page_table `arange(b·pages)` reshaped to (b, pages); softmax_scale
//!   1 / 576^0.5. The call (L195-L222): q_pe, k_cache, v_cache positionally, then `qv`,
//!   `cache_seqlens`, `page_table`, `softmax_scale`, `causal`, `scheduler_metadata`,
//!   `return_softmax_lse=True`; `scheduler_metadata` is `(workspace, False)` with a 128 MiB uint8
//!   workspace, and "inited" first makes that call, then the same call with `(workspace, True)`.
//! - `test_mla_decode_varlen` (L312-L410): grid num_heads_q 8, 16, 32, 64, 128; block_size 64;
//!   dtype bf16, fp16; is_causal True/False; batch_size 1, 32, 56; kv_len 1024; max_seqlen_q 3.
//!   Query lengths `randint(1, max_seqlen_q + 1)` each, `cu_seqlens_q` their running sum (int32);
//!   q (total_q, h, 576) contiguous with q_nope, q_pe its views `[..., :512]`, `[..., 512:]`;
//!   `kv_concat` (b·16, 64, 1, 576) (`unsqueeze(2)` of a contiguous tensor) with the caches its
//!   views `[..., 512:]`, `[..., :512]`; the call (L387-L407) all keywords, `max_seqlen_q=3`
//!   whatever the drawn lengths, `window_size=(-1, -1)`, `attention_chunk=0`, `softcap=0.0`,
//!   `rotary_interleaved=False`, `scheduler_metadata=(workspace, False)`, `num_splits=1`,
//!   `pack_gqa=None`, `sm_margin=0`, `return_softmax_lse=True`.
//! - `test_mla_q_not_contig` (L413-L555): grid num_heads_q 32, 128; block_size 64; dtype bf16,
//!   fp16; is_causal True/False; is_varlen True/False; batch_size 32; kv_len 128; max_seqlen_q 3.
//!   With is_varlen, q is `randn(h, total_q, 576).transpose(0, 1)` (strides (576, total_q·576, 1))
//!   and the call is `test_mla_decode_varlen`'s (L531-L551); without, it calls
//!   `mate.flashmla.flash_mla_with_kvcache`.
//!
//! Not enumerated: `test_flashmla_interface` (L229-L309) and the non-varlen half of
//! `test_mla_q_not_contig`, which call `mate.flashmla.flash_mla_with_kvcache` — a separate entry
//! point no profile models.
//!
//! The kernel path does not model the MLA branch: a grid point is checked by validation only.

use super::{
    CaseResult, GridPoint, Rng, UpstreamCall, accepted, cumulative, int_tensor, owned_keywords,
    through_mate_wrapper, through_sglang, validate,
};
use crate::call::{Dtype, KvCacheCall, PyValue, TensorArg};
use rand::Rng as _;

/// Which of the three tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// `test_fa_interface`: 4-D queries, 3-D caches, metadata computed or reused.
    FaInterface,
    /// `test_mla_decode_varlen`: varlen queries, 4-D caches.
    DecodeVarlen,
    /// `test_mla_q_not_contig`, its varlen half: queries with heads outermost in memory.
    QNotContig,
}

/// The latent (value) and rope head dims of mate's MLA.
const LATENT: usize = 512;
const ROPE: usize = 64;
const PAGE_SIZE: usize = 64;
/// The tests' workspace: `torch.empty(128 * 1024 * 1024, dtype=torch.uint8)`.
const WORKSPACE_BYTES: usize = 128 << 20;
const DTYPES: [Dtype; 2] = [Dtype::Bfloat16, Dtype::Float16];

/// One point of a test's grid.
#[derive(Clone, Copy, Debug)]
struct Params {
    batch: usize,
    kv_len: usize,
    /// `test_fa_interface`'s qo_len, the varlen tests' max_seqlen_q.
    seqlen_q: usize,
    heads: usize,
    causal: bool,
    dtype: Dtype,
    /// `test_fa_interface`'s schedule_mode "inited": a first call computes the metadata.
    inited: bool,
    /// `test_mla_q_not_contig`'s is_varlen.
    varlen: bool,
}

/// A grid's lists, the first decorator's first; the last decorator's list varies fastest.
struct Grid {
    batch: &'static [usize],
    kv_len: &'static [usize],
    seqlen_q: &'static [usize],
    heads: &'static [usize],
    causal: &'static [bool],
    inited: &'static [bool],
    varlen: &'static [bool],
}

const FA_INTERFACE: Grid = Grid {
    batch: &[1, 56, 60],
    kv_len: &[33, 97, 129],
    seqlen_q: &[1, 3, 5],
    heads: &[8, 16, 32, 64, 128],
    causal: &[false, true],
    inited: &[true, false],
    varlen: &[false],
};

const DECODE_VARLEN: Grid = Grid {
    batch: &[1, 32, 56],
    kv_len: &[1024],
    seqlen_q: &[3],
    heads: &[8, 16, 32, 64, 128],
    causal: &[true, false],
    inited: &[false],
    varlen: &[true],
};

const Q_NOT_CONTIG: Grid = Grid {
    batch: &[32],
    kv_len: &[128],
    seqlen_q: &[3],
    heads: &[32, 128],
    causal: &[true, false],
    inited: &[false],
    varlen: &[true, false],
};

impl Test {
    fn grid(self) -> &'static Grid {
        match self {
            Test::FaInterface => &FA_INTERFACE,
            Test::DecodeVarlen => &DECODE_VARLEN,
            Test::QNotContig => &Q_NOT_CONTIG,
        }
    }

    /// Every grid point whose call goes through `flash_attn_with_kvcache` (the test's varlen
    /// points, for `test_mla_q_not_contig`).
    pub fn points(self) -> Vec<usize> {
        let g = self.grid();
        let size = g.batch.len()
            * g.kv_len.len()
            * g.seqlen_q.len()
            * g.heads.len()
            * g.causal.len()
            * DTYPES.len()
            * g.inited.len()
            * g.varlen.len();
        (0..size)
            .filter(|&point| self == Test::FaInterface || self.params(point).varlen)
            .collect()
    }

    fn params(self, point: usize) -> Params {
        let g = self.grid();
        let mut rest = point;
        let mut pick = |count: usize| {
            let d = rest % count;
            rest /= count;
            d
        };
        // one fixed order of the lists for the three tests (not pytest's): fastest first
        let inited = g.inited[pick(g.inited.len())];
        let varlen = g.varlen[pick(g.varlen.len())];
        let dtype = DTYPES[pick(DTYPES.len())];
        let causal = g.causal[pick(g.causal.len())];
        let heads = g.heads[pick(g.heads.len())];
        let seqlen_q = g.seqlen_q[pick(g.seqlen_q.len())];
        let kv_len = g.kv_len[pick(g.kv_len.len())];
        let batch = g.batch[pick(g.batch.len())];
        Params {
            batch,
            kv_len,
            seqlen_q,
            heads,
            causal,
            dtype,
            inited,
            varlen,
        }
    }

    /// The calls the test makes at `point`: one, or with "inited" metadata the call that
    /// computes it and then the one reusing it.
    pub fn call(self, point: GridPoint, rng: &mut Rng) -> UpstreamCall {
        let p = self.params(point.0);
        let row = LATENT + ROPE;
        let pages = p.kv_len.div_ceil(PAGE_SIZE);
        let blocks = p.batch * pages;
        let metadata = |inited: bool| {
            PyValue::Tuple(vec![
                PyValue::tensor(Dtype::Uint8, &[WORKSPACE_BYTES]),
                PyValue::Bool(inited),
            ])
        };
        // the caches: views `[..., 512:]`, `[..., :512]` of a contiguous (blocks, 64, 576)
        // tensor, unsqueezed to (blocks, 64, 1, 576) in the varlen tests
        let cache = |dim: usize| {
            PyValue::Tensor(if self == Test::FaInterface {
                strided(
                    p.dtype,
                    &[blocks, PAGE_SIZE, dim],
                    &[PAGE_SIZE * row, row, 1],
                )
            } else {
                let strides = [PAGE_SIZE * row, row, row, 1];
                strided(p.dtype, &[blocks, PAGE_SIZE, 1, dim], &strides)
            })
        };
        let cache_seqlens = int_tensor(Dtype::Int32, &[p.batch], vec![p.kv_len as i64; p.batch]);
        let page_table = int_tensor(
            Dtype::Int32,
            &[p.batch, pages],
            (0..blocks as i64).collect(),
        );
        let scale = PyValue::Float(1.0 / (row as f64).sqrt());
        let (positional, keywords): (Vec<PyValue>, Vec<(&str, PyValue)>) =
            if self == Test::FaInterface {
                let q_pe = PyValue::tensor(p.dtype, &[p.batch, p.seqlen_q, p.heads, ROPE]);
                let q_nope = PyValue::tensor(p.dtype, &[p.batch, p.seqlen_q, p.heads, LATENT]);
                let keywords = vec![
                    ("qv", q_nope),
                    ("cache_seqlens", PyValue::Tensor(cache_seqlens)),
                    ("page_table", PyValue::Tensor(page_table)),
                    ("softmax_scale", scale),
                    ("causal", PyValue::Bool(p.causal)),
                    ("scheduler_metadata", metadata(false)),
                    ("return_softmax_lse", PyValue::Bool(true)),
                ];
                (vec![q_pe, cache(ROPE), cache(LATENT)], keywords)
            } else {
                let lengths: Vec<usize> = (0..p.batch)
                    .map(|_| rng.gen_range(1..=p.seqlen_q))
                    .collect();
                let total_q = lengths.iter().sum();
                // (total_q, h, 576) contiguous, or the transpose of a contiguous (h, total_q, 576)
                let q_strides = if self == Test::QNotContig {
                    [row, total_q * row, 1]
                } else {
                    [p.heads * row, row, 1]
                };
                let query =
                    |dim| PyValue::Tensor(strided(p.dtype, &[total_q, p.heads, dim], &q_strides));
                let cu_seqlens_q = int_tensor(Dtype::Int32, &[p.batch + 1], cumulative(&lengths));
                let keywords = vec![
                    ("q", query(ROPE)),
                    ("k_cache", cache(ROPE)),
                    ("v_cache", cache(LATENT)),
                    ("qv", query(LATENT)),
                    ("cache_seqlens", PyValue::Tensor(cache_seqlens)),
                    ("page_table", PyValue::Tensor(page_table)),
                    ("cu_seqlens_q", PyValue::Tensor(cu_seqlens_q)),
                    ("max_seqlen_q", PyValue::Int(p.seqlen_q as i64)),
                    ("softmax_scale", scale),
                    ("causal", PyValue::Bool(p.causal)),
                    (
                        "window_size",
                        PyValue::Tuple(vec![PyValue::Int(-1), PyValue::Int(-1)]),
                    ),
                    ("attention_chunk", PyValue::Int(0)),
                    ("softcap", PyValue::Float(0.0)),
                    ("rotary_interleaved", PyValue::Bool(false)),
                    ("scheduler_metadata", metadata(false)),
                    ("num_splits", PyValue::Int(1)),
                    ("pack_gqa", PyValue::None),
                    ("sm_margin", PyValue::Int(0)),
                    ("return_softmax_lse", PyValue::Bool(true)),
                ];
                (Vec::new(), keywords)
            };
        let call = KvCacheCall {
            positional,
            keywords: owned_keywords(keywords),
            ..KvCacheCall::default()
        };
        let reuse = p.inited.then(|| {
            let mut reuse = call.clone();
            reuse.set("scheduler_metadata", metadata(true));
            reuse
        });
        UpstreamCall {
            call,
            other_ranks: reuse.into_iter().collect(),
            description: format!("{p:?}"),
        }
    }
}

/// A view of `shape` with strides `strides` (in elements) of a tensor of `dtype`.
fn strided(dtype: Dtype, shape: &[usize], strides: &[usize]) -> TensorArg {
    TensorArg {
        stride: Some(strides.to_vec()),
        ..TensorArg::new(dtype, shape)
    }
}

/// Every call of the grid point accepted by `mate` on its MLA decode branch and, through SGLang's
/// wrapper, by `musa`, with no error-severity hazard; no numbers (the kernel path does not model the MLA branch).
pub fn check(upstream: &UpstreamCall) -> Result<CaseResult, String> {
    let mut count = 0;
    for call in upstream.ranks() {
        let verdict = validate("mate", &through_mate_wrapper(call));
        accepted(&verdict)?;
        if !verdict.resolved().is_some_and(|r| r.mla_decode) {
            return Err("mate accepts the call off its MLA decode branch".to_string());
        }
        let sglang = through_sglang(call).map_err(|arg| {
            format!("an MLA call SGLang's wrapper cannot make ({arg}): not one of test_mla.py's")
        })?;
        accepted(&validate("musa", &sglang))?;
        count += 1;
    }
    let calls = match count {
        1 => "the call".to_string(),
        n => format!("each of its {n} calls"),
    };
    Ok(CaseResult::Passed(Some(format!(
        "mate, musa accept {calls}; numbers not modelled for MLA (the kernel path does not run \
         mate's MLA decode branch)"
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn grid_sizes_are_the_products_of_the_tests_lists() {
        // test_fa_interface 3·3·3·5·2·1·2·2; test_mla_decode_varlen 5·1·2·2·3·1·1;
        // test_mla_q_not_contig 2·1·2·2·2·1·1·1, of which the 8 with is_varlen call
        // flash_attn_with_kvcache
        assert_eq!(Test::FaInterface.points().len(), 1080);
        assert_eq!(Test::DecodeVarlen.points().len(), 60);
        assert_eq!(Test::QNotContig.points().len(), 8);
    }

    fn upstream(test: Test, point: usize) -> UpstreamCall {
        test.call(GridPoint(point), &mut Rng::seed_from_u64(3))
    }

    /// Every call of every point of the three tests, validation only (it is fast).
    #[test]
    fn every_call_is_accepted_on_the_mla_branch() {
        for test in [Test::FaInterface, Test::DecodeVarlen, Test::QNotContig] {
            for point in test.points() {
                let upstream = upstream(test, point);
                let result = check(&upstream);
                assert!(
                    matches!(result, Ok(CaseResult::Passed(_))),
                    "{test:?} {}: {result:?}",
                    upstream.description
                );
            }
        }
    }

    /// test_fa_interface with 56 sequences of 97 keys, 128 heads, "inited": two pages a
    /// sequence, 3-D caches viewed out of rows of 576, the metadata computed then reused.
    #[test]
    fn fa_interface_calls_are_the_tests() {
        let point = Test::FaInterface
            .points()
            .into_iter()
            .find(|&i| {
                let p = Test::FaInterface.params(i);
                (p.batch, p.kv_len, p.heads, p.seqlen_q, p.inited) == (56, 97, 128, 5, true)
            })
            .unwrap();
        let upstream = upstream(Test::FaInterface, point);
        let calls: Vec<&KvCacheCall> = upstream.ranks().collect();
        assert_eq!(calls.len(), 2);
        let k_cache = calls[0].positional[1].as_tensor().unwrap();
        assert_eq!(k_cache.shape, vec![112, 64, 64]);
        assert_eq!(k_cache.strides(), vec![64 * 576, 576, 1]);
        let page_table = calls[0].passed("page_table").unwrap().as_tensor().unwrap();
        assert_eq!(page_table.shape, vec![56, 2]);
        assert_eq!(page_table.int_values().unwrap()[2..4], [2, 3]);
        assert_eq!(
            calls[0].passed("softmax_scale"),
            Some(&PyValue::Float(1.0 / 24.0))
        );
        let inited = |call: &KvCacheCall| match call.passed("scheduler_metadata") {
            Some(PyValue::Tuple(items)) => items[1].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(inited(calls[0]), PyValue::Bool(false));
        assert_eq!(inited(calls[1]), PyValue::Bool(true));
    }

    /// test_mla_q_not_contig's varlen q: (total_q, h, 576) strided as the transpose of
    /// (h, total_q, 576), queries of 1 to 3 rows.
    #[test]
    fn q_not_contig_has_heads_outermost() {
        let upstream = upstream(Test::QNotContig, Test::QNotContig.points()[0]);
        let cu = upstream
            .call
            .passed("cu_seqlens_q")
            .unwrap()
            .as_tensor()
            .unwrap();
        let cu = cu.int_values().unwrap();
        assert_eq!(cu.len(), 33);
        assert!(cu.windows(2).all(|w| (1..=3).contains(&(w[1] - w[0]))));
        let total_q = cu[32] as usize;
        let q = upstream.call.passed("q").unwrap().as_tensor().unwrap();
        assert_eq!(q.shape[0], total_q);
        assert_eq!(q.shape[2], 64);
        assert_eq!(q.strides(), vec![576, total_q * 576, 1]);
    }
}
