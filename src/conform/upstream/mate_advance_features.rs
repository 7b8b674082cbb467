//! mate's `test_advance_features` (MooreThreads/mate@3f58cc3e tests/test_fmha.py:L1735-L2200,
//! calling `mate.flash_attn_with_kvcache`, i.e. `mate.mha_interface`): appended keys with rotary,
//! left padding, a cache batch index, softcap and attention chunks on a varlen query.
//!
//! Facts read from the test:
//! - grid (L1737-L1804): dtype bf16; num_splits 0, 5; new_kv True; local False; causal
//!   False/True; seqlen_new_eq_seqlen_q True/False; has_rotary_seqlens False/True;
//!   rotary_interleaved False/True; rotary_fraction 0, 0.5, 1; page_size None, 1, 64;
//!   has_leftpad True/False; has_batch_idx True; pack_gqa True; varlen_q True; headdim (128, 128);
//!   heads (96, 8); (seqlen_q, seqlen_k) (1, 128), (1, 339), (3, 1024), (64, 800), (3, 799),
//!   (16, 20000); batch_size 1, 77; softcap 0, 50; attention_chunk 0, 65.
//! - skips (L1832-L1839): seqlen_q > seqlen_k with new_kv (never, on this grid); without rotary,
//!   rotary_seqlens or a non-interleaved rotary.
//! - data (L1849-L1991): rotary_dim = floor(int(fraction · 128) / 16) · 16; cache rows
//!   2 · batch_size; query and new-key lengths from `generate_random_padding_mask(.., "random")`
//!   (mate/testing/flash_attn.py:L98-L128: randint(max(1, s - 20), s + 1) each), unpadded, so
//!   q (total_q, 96, 128), `cu_seqlens_q`, `max_seqlen_q` the longest query, k and v
//!   (total_new, 8, 128), `cu_seqlens_k_new`; seqlen_new = seqlen_q or `random.randint(1,
//!   seqlen_q)`; window_size (None, None); a paged cache from `generate_block_kvcache`
//!   (mate/testing/flash_attn.py:L521-L558: ceil(seqlen_k / page) · rows · 3 pages, a randperm
//!   page table of (rows, pages / rows)), else (rows, seqlen_k, 8, 128); cache_seqlens
//!   randint(0, seqlen_k - taken + 1) with taken seqlen_q when (causal or attention_chunk > 0)
//!   and rotary_dim > 1, else seqlen_new (L1930-L1949); leftpad randint(0, cache_seqlens[b]) (0 for
//!   an empty cache); batch index randperm(rows)[:batch_size]; rotary tables of (seqlen_k or
//!   pages · page) rows and rotary_dim / 2 columns in bf16; rotary_seqlens cache_seqlens, or
//!   cache_seqlens // 2 with has_rotary_seqlens.
//! - metadata (L2062-L2088): `get_scheduler_metadata` whenever num_splits >= 0 (always), with
//!   max_seqlen_k = seqlen_k, max_seqlen_k_new = seqlen_new and the call's other arguments.
//! - the call (L2095-L2120): q, k_cache, v_cache, k, v positionally, then keywords, no
//!   softmax_scale, `return_softmax_lse=True`, `pack_gqa=True`.
//!
//! The random values are drawn from this module's own generator with the test's distributions,
//! in the test's order, seeded by the grid point (the test seeds torch and `random` with 666).

use super::{
    GridPoint, Rng, UpstreamCall, cumulative, int_tensor, owned_keywords, randperm,
    seqlen_mask_lengths,
};
use crate::call::{Dtype, KvCacheCall, MetadataArgsSpec, PyValue, TensorArg};
use rand::Rng as _;

const NUM_SPLITS: [i64; 2] = [0, 5];
const ROTARY_FRACTIONS: [f64; 3] = [0.0, 0.5, 1.0];
const PAGE_SIZES: [Option<usize>; 3] = [None, Some(1), Some(64)];
const SEQLENS: [(usize, usize); 6] = [
    (1, 128),
    (1, 339),
    (3, 1024),
    (64, 800),
    (3, 799),
    (16, 20000),
];
const BATCH_SIZES: [usize; 2] = [1, 77];
const SOFTCAPS: [f64; 2] = [0.0, 50.0];
const ATTENTION_CHUNKS: [i64; 2] = [0, 65];
const HEADS: usize = 96;
const HEADS_K: usize = 8;
const HEADDIM: usize = 128;

/// The radices of the grid's varying lists, outermost (first decorator) first.
const RADICES: [usize; 12] = [2, 2, 2, 2, 2, 3, 3, 2, 6, 2, 2, 2];

/// One point of the grid.
#[derive(Clone, Copy, Debug)]
struct Params {
    num_splits: i64,
    causal: bool,
    seqlen_new_eq_seqlen_q: bool,
    has_rotary_seqlens: bool,
    rotary_interleaved: bool,
    rotary_fraction: f64,
    page_size: Option<usize>,
    has_leftpad: bool,
    seqlen_q: usize,
    seqlen_k: usize,
    batch: usize,
    softcap: f64,
    attention_chunk: i64,
}

fn params(point: usize) -> Params {
    let mut digits = [0usize; RADICES.len()];
    let mut rest = point;
    for (digit, radix) in digits.iter_mut().zip(RADICES).rev() {
        *digit = rest % radix;
        rest /= radix;
    }
    let (seqlen_q, seqlen_k) = SEQLENS[digits[8]];
    Params {
        num_splits: NUM_SPLITS[digits[0]],
        causal: digits[1] == 1,
        seqlen_new_eq_seqlen_q: digits[2] == 0,
        has_rotary_seqlens: digits[3] == 1,
        rotary_interleaved: digits[4] == 1,
        rotary_fraction: ROTARY_FRACTIONS[digits[5]],
        page_size: PAGE_SIZES[digits[6]],
        has_leftpad: digits[7] == 0,
        seqlen_q,
        seqlen_k,
        batch: BATCH_SIZES[digits[9]],
        softcap: SOFTCAPS[digits[10]],
        attention_chunk: ATTENTION_CHUNKS[digits[11]],
    }
}

/// The test's skips (new_kv is always True).
fn runs(p: &Params) -> bool {
    let appends_fit = p.seqlen_q <= p.seqlen_k;
    let rotary_variant_matters =
        p.rotary_fraction != 0.0 || (!p.has_rotary_seqlens && p.rotary_interleaved);
    appends_fit && rotary_variant_matters
}

/// Every grid point the test runs, in grid order.
pub fn points() -> Vec<usize> {
    let size: usize = RADICES.iter().product();
    (0..size).filter(|&i| runs(&params(i))).collect()
}

/// The call the test makes at grid `point` (which [`points`] lists).
pub fn call(point: GridPoint, rng: &mut Rng) -> UpstreamCall {
    let p = params(point.0);
    let dtype = Dtype::Bfloat16;
    let rows = 2 * p.batch;
    let rotary_dim = ((p.rotary_fraction * HEADDIM as f64) as usize / 16) * 16;

    let lengths_q = seqlen_mask_lengths(p.seqlen_q, p.batch, rng);
    let total_q: usize = lengths_q.iter().sum();
    let max_seqlen_q = lengths_q.iter().copied().max().unwrap_or(0);
    let seqlen_new = if p.seqlen_new_eq_seqlen_q {
        p.seqlen_q
    } else {
        rng.gen_range(1..=p.seqlen_q)
    };
    let lengths_new = seqlen_mask_lengths(seqlen_new, p.batch, rng);
    let total_new: usize = lengths_new.iter().sum();
    let (k_cache, page_table, rotary_rows) = match p.page_size {
        None => (
            TensorArg::new(dtype, &[rows, p.seqlen_k, HEADS_K, HEADDIM]),
            None,
            p.seqlen_k,
        ),
        Some(page) => {
            let pages = p.seqlen_k.div_ceil(page) * rows * 3;
            let table = int_tensor(Dtype::Int32, &[rows, pages / rows], randperm(pages, rng));
            (
                TensorArg::new(dtype, &[pages, page, HEADS_K, HEADDIM]),
                Some(table),
                pages * page,
            )
        }
    };
    let taken = if (p.causal || p.attention_chunk > 0) && rotary_dim > 1 {
        p.seqlen_q
    } else {
        seqlen_new
    };
    let bound = p.seqlen_k - taken + 1;
    let cache_seqlens: Vec<i64> = (0..p.batch)
        .map(|_| rng.gen_range(0..bound) as i64)
        .collect();
    let cache_leftpad = p.has_leftpad.then(|| {
        cache_seqlens
            .iter()
            .map(|&len| if len > 0 { rng.gen_range(0..len) } else { 0 })
            .collect::<Vec<i64>>()
    });
    let mut cache_batch_idx = randperm(rows, rng);
    cache_batch_idx.truncate(p.batch);
    let rotary = (rotary_dim > 0).then(|| TensorArg::new(dtype, &[rotary_rows, rotary_dim / 2]));
    let rotary_seqlens: Vec<i64> = if p.has_rotary_seqlens {
        cache_seqlens.iter().map(|len| len / 2).collect()
    } else {
        cache_seqlens.clone()
    };
    let cu_seqlens_q = cumulative(&lengths_q);
    let cu_seqlens_k_new = cumulative(&lengths_new);

    let metadata_args = MetadataArgsSpec {
        batch_size: p.batch,
        max_seqlen_q,
        max_seqlen_k: p.seqlen_k,
        num_heads_q: HEADS,
        num_heads_kv: HEADS_K,
        headdim: HEADDIM,
        cache_seqlens: cache_seqlens.clone(),
        qkv_dtype: None,
        headdim_v: Some(HEADDIM),
        cu_seqlens_q: Some(cu_seqlens_q.clone()),
        cu_seqlens_k_new: Some(cu_seqlens_k_new.clone()),
        cache_leftpad: cache_leftpad.clone(),
        page_size: p.page_size,
        max_seqlen_k_new: seqlen_new,
        causal: p.causal,
        // (None, None): mate reads a None side as no window
        window_size: None,
        attention_chunk: p.attention_chunk,
        has_softcap: p.softcap != 0.0,
        num_splits: p.num_splits,
        pack_gqa: Some(true),
        sm_margin: 0,
    };

    let ints = |values: &[i64]| {
        PyValue::Tensor(int_tensor(Dtype::Int32, &[values.len()], values.to_vec()))
    };
    let optional = |t: Option<TensorArg>| t.map_or(PyValue::None, PyValue::Tensor);
    let new_keys = PyValue::tensor(dtype, &[total_new, HEADS_K, HEADDIM]);
    let keywords: Vec<(&str, PyValue)> = vec![
        ("rotary_cos", optional(rotary.clone())),
        ("rotary_sin", optional(rotary)),
        ("cache_seqlens", ints(&cache_seqlens)),
        ("cache_batch_idx", ints(&cache_batch_idx)),
        (
            "cache_leftpad",
            cache_leftpad.as_deref().map_or(PyValue::None, ints),
        ),
        ("page_table", optional(page_table)),
        ("cu_seqlens_q", ints(&cu_seqlens_q)),
        ("cu_seqlens_k_new", ints(&cu_seqlens_k_new)),
        ("max_seqlen_q", PyValue::Int(max_seqlen_q as i64)),
        ("rotary_seqlens", ints(&rotary_seqlens)),
        ("causal", PyValue::Bool(p.causal)),
        (
            "window_size",
            PyValue::Tuple(vec![PyValue::None, PyValue::None]),
        ),
        ("attention_chunk", PyValue::Int(p.attention_chunk)),
        ("softcap", PyValue::Float(p.softcap)),
        ("rotary_interleaved", PyValue::Bool(p.rotary_interleaved)),
        // the values metadata_args describe are filled in before the call is checked
        ("scheduler_metadata", PyValue::None),
        ("num_splits", PyValue::Int(p.num_splits)),
        ("return_softmax_lse", PyValue::Bool(true)),
        ("pack_gqa", PyValue::Bool(true)),
    ];
    let call = KvCacheCall {
        positional: vec![
            PyValue::tensor(dtype, &[total_q, HEADS, HEADDIM]),
            PyValue::Tensor(k_cache.clone()),
            PyValue::Tensor(k_cache),
            new_keys.clone(),
            new_keys,
        ],
        keywords: owned_keywords(keywords),
        metadata_args: Some(metadata_args),
        ..KvCacheCall::default()
    };
    UpstreamCall {
        call,
        other_ranks: Vec::new(),
        description: format!("{p:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_grid_runs_what_the_test_runs() {
        // 2^9 · 3 · 3 · 6 = 27,648 points; without rotary only the interleaved one without
        // rotary_seqlens runs: 27,648 · (2/3 + 1/3 · 1/4) = 20,736 (itertools.product over the
        // test's lists with its skips agrees)
        assert_eq!(points().len(), 20_736);
        assert!(points().iter().all(|&i| {
            let p = params(i);
            p.rotary_fraction > 0.0 || (p.rotary_interleaved && !p.has_rotary_seqlens)
        }));
    }

    /// 77 sequences of (64, 800) in pages of 64, causal, half rotary, left padding: 154 cache
    /// rows of ceil(800 / 64) = 13 pages, three times over; the keys a query's rotary consumes
    /// (64) leave room in every cache.
    #[test]
    fn a_paged_rotary_call_is_the_tests() {
        let point = points()
            .into_iter()
            .find(|&i| {
                let p = params(i);
                (p.batch, p.seqlen_q, p.page_size, p.rotary_fraction) == (77, 64, Some(64), 0.5)
                    && p.causal
                    && p.has_leftpad
                    && p.has_rotary_seqlens
            })
            .unwrap();
        let upstream = call(GridPoint(point), &mut Rng::seed_from_u64(9));
        let call = &upstream.call;
        let tensor = |name: &str| call.passed(name).unwrap().as_tensor().unwrap().clone();
        let ints = |name: &str| tensor(name).int_values().unwrap();
        assert_eq!(
            call.positional[1].as_tensor().unwrap().shape,
            vec![13 * 154 * 3, 64, 8, 128]
        );
        assert_eq!(tensor("page_table").shape, vec![154, 39]);
        // rotary_dim 64: 32 columns, a row per cached position
        assert_eq!(tensor("rotary_cos").shape, vec![13 * 154 * 3 * 64, 32]);
        let lengths = ints("cache_seqlens");
        assert!(lengths.iter().all(|&len| (0..=800 - 64).contains(&len)));
        let leftpad = ints("cache_leftpad");
        assert!(
            lengths
                .iter()
                .zip(&leftpad)
                .all(|(&len, &pad)| pad == 0 || pad < len)
        );
        let halves: Vec<i64> = lengths.iter().map(|len| len / 2).collect();
        assert_eq!(ints("rotary_seqlens"), halves);
        let mut rows = ints("cache_batch_idx");
        assert_eq!(rows.len(), 77);
        rows.sort_unstable();
        rows.dedup();
        assert!(rows.len() == 77 && rows.iter().all(|&r| (0..154).contains(&r)));
        let cu = ints("cu_seqlens_q");
        assert!(cu.windows(2).all(|w| (44..=64).contains(&(w[1] - w[0]))));
        assert_eq!(
            call.positional[0].as_tensor().unwrap().shape[0],
            cu[77] as usize
        );
    }
}
