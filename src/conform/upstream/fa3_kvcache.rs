//! FA3's own `test_flash_attn_kvcache` (Dao-AILab/flash-attention@0251105a
//! hopper/test_flash_attn.py:L665-L1051): its parameter grid, skip conditions and the call it makes.
//!
//! Facts read from the test (all `DISABLE_*` switches off, as on an sm90 build with every feature):
//! - grid (L665-L714): dtype bf16, fp8_e4m3; mha_type mha/mqa/gqa (6 query heads; 6, 1 or 3 KV
//!   heads, L752); new_kv; (causal, local) in (F,F), (T,F), (F,T); seqlen_new_eq_seqlen_q;
//!   has_rotary_seqlens False; rotary_interleaved; rotary_fraction 0, 0.5, 1; page_size None, 1,
//!   4, 128; has_leftpad; has_batch_idx; varlen_q; d 128; eleven (seqlen_q, seqlen_k) pairs.
//! - skips (L733-L740): a page size not dividing seqlen_k; seqlen_q > seqlen_k with new_kv;
//!   rotary without new_kv; rotary_seqlens without rotary.
//! - inner loops (L756-L757, L925-L927): dv = d; attention_chunk in (randint(1, 2·seqlen_k), 0)
//!   when causal or local, else 0; num_splits 1, 3, 0; metadata precomputed or not.
//! - data (L741-L873): batch 5 (10 cache rows with a batch index); padding masks of lengths
//!   randint(max(1, s - 20), s + 1) (hopper/test_util.py:L9-L29); a local window is
//!   `torch.randint(0, seqlen_k, (2,))`, a tensor; `seqlen_new` = seqlen_q or randint(1,
//!   seqlen_q + 1); cache_seqlens randint(0 or 1, bound) with the bound of L817-L822; leftpad
//!   randint(0, cache_seqlens[b]); batch index randperm(10)[:5]; paged caches of
//!   ceil(seqlen_k / page)·rows·3 pages with a randperm page table (L1054-L1077); rotary tables of
//!   (seqlen_k or pages·page) rows and rotary_dim / 2 columns in the input dtype;
//!   `rotary_seqlens=cache_seqlens` passed always.
//! - the call (L936-L960): q, k_cache, v_cache, k, v positionally, then keywords, with
//!   `return_softmax_lse=True`; precomputed metadata from `get_scheduler_metadata` with the
//!   arguments of L929-L936.
//!
//! The random values are drawn from this module's own generator with the test's distributions,
//! seeded by the grid point, not torch's.

use super::{
    GridPoint, Rng, UpstreamCall, cumulative, int_tensor, owned_keywords, randperm,
    seqlen_mask_lengths,
};
use crate::call::{Dtype, KvCacheCall, MetadataArgsSpec, PyValue, TensorArg};
use crate::hopper::{Fa3Layout, MODELLED_ARCH, MaskShape, resolve_mask};
use rand::Rng as _;

const DTYPES: [Dtype; 2] = [Dtype::Bfloat16, Dtype::Float8E4m3fn];
/// KV heads for mha, mqa, gqa with 6 query heads.
const KV_HEADS: [usize; 3] = [6, 1, 3];
const CAUSAL_LOCAL: [(bool, bool); 3] = [(false, false), (true, false), (false, true)];
const ROTARY_FRACTIONS: [f64; 3] = [0.0, 0.5, 1.0];
const PAGE_SIZES: [Option<usize>; 4] = [None, Some(1), Some(4), Some(128)];
const SEQLENS: [(usize, usize); 11] = [
    (1, 128),
    (1, 339),
    (3, 1024),
    (64, 800),
    (64, 256),
    (3, 799),
    (64, 2048),
    (16, 20000),
    (128, 128),
    (256, 512),
    (2048, 3577),
];
const NUM_SPLITS: [i64; 3] = [1, 3, 0];
const BATCH: usize = 5;
const HEADS: usize = 6;
const HEADDIM: usize = 128;

/// One point of the grid, inner loops included.
#[derive(Clone, Copy, Debug)]
struct Params {
    dtype: Dtype,
    heads_k: usize,
    new_kv: bool,
    causal: bool,
    local: bool,
    seqlen_new_eq_seqlen_q: bool,
    rotary_interleaved: bool,
    rotary_fraction: f64,
    page_size: Option<usize>,
    has_leftpad: bool,
    has_batch_idx: bool,
    varlen_q: bool,
    seqlen_q: usize,
    seqlen_k: usize,
    /// 0: the random chunk, 1: no chunk (the random one only when causal or local).
    chunk_choice: usize,
    num_splits: i64,
    precompute_metadata: bool,
}

/// The radices of the grid, outermost first.
const RADICES: [usize; 15] = [2, 3, 2, 3, 2, 2, 3, 4, 2, 2, 2, 11, 2, 3, 2];

fn params(point: usize) -> Params {
    let mut digits = [0usize; RADICES.len()];
    let mut rest = point;
    for (digit, radix) in digits.iter_mut().zip(RADICES).rev() {
        *digit = rest % radix;
        rest /= radix;
    }
    let (causal, local) = CAUSAL_LOCAL[digits[3]];
    let (seqlen_q, seqlen_k) = SEQLENS[digits[11]];
    Params {
        dtype: DTYPES[digits[0]],
        heads_k: KV_HEADS[digits[1]],
        new_kv: digits[2] == 1,
        causal,
        local,
        seqlen_new_eq_seqlen_q: digits[4] == 0,
        rotary_interleaved: digits[5] == 1,
        rotary_fraction: ROTARY_FRACTIONS[digits[6]],
        page_size: PAGE_SIZES[digits[7]],
        has_leftpad: digits[8] == 1,
        has_batch_idx: digits[9] == 1,
        varlen_q: digits[10] == 1,
        seqlen_q,
        seqlen_k,
        chunk_choice: digits[12],
        num_splits: NUM_SPLITS[digits[13]],
        precompute_metadata: digits[14] == 1,
    }
}

/// The test's skips (L733-L740; has_rotary_seqlens is always False) and the inner loop's one
/// attention_chunk value without causal or local.
fn runs(p: &Params) -> bool {
    let page_divides = p.page_size.is_none_or(|page| p.seqlen_k % page == 0);
    let appends_fit = !(p.seqlen_q > p.seqlen_k && p.new_kv);
    let rotary_with_new_kv = p.new_kv || p.rotary_fraction == 0.0;
    let chunk_exists = p.chunk_choice == 1 || p.causal || p.local;
    page_divides && appends_fit && rotary_with_new_kv && chunk_exists
}

/// Every grid point the test runs, in grid order.
pub fn points() -> Vec<usize> {
    let size: usize = RADICES.iter().product();
    (0..size).filter(|&i| runs(&params(i))).collect()
}

/// The call the test makes at grid `point` (which [`points`] lists).
pub fn call(point: GridPoint, rng: &mut Rng) -> UpstreamCall {
    let p = params(point.0);
    let dtype = p.dtype;
    let batch_cache = if p.has_batch_idx { 2 * BATCH } else { BATCH };
    let rotary_dim = ((p.rotary_fraction * HEADDIM as f64) as usize / 16) * 16;
    let attention_chunk = if p.chunk_choice == 0 {
        rng.gen_range(1..2 * p.seqlen_k as i64)
    } else {
        0
    };

    let (q, cu_seqlens_q, max_seqlen_q) = if p.varlen_q {
        let lengths = seqlen_mask_lengths(p.seqlen_q, BATCH, rng);
        let total: usize = lengths.iter().sum();
        let max = lengths.iter().copied().max().unwrap_or(0);
        (
            TensorArg::new(dtype, &[total, HEADS, HEADDIM]),
            Some(cumulative(&lengths)),
            Some(max),
        )
    } else {
        (
            TensorArg::new(dtype, &[BATCH, p.seqlen_q, HEADS, HEADDIM]),
            None,
            None,
        )
    };
    // after q, as in the test (L779): a local window is a tensor of two draws
    let window_size = if p.local {
        let draws = vec![
            rng.gen_range(0..p.seqlen_k as i64),
            rng.gen_range(0..p.seqlen_k as i64),
        ];
        PyValue::Tensor(TensorArg::with_ints(Dtype::Int64, &[2], draws))
    } else {
        PyValue::Tuple(vec![PyValue::Int(-1), PyValue::Int(-1)])
    };
    let window_ints = window_size
        .as_tensor()
        .and_then(|t| t.values.as_ref())
        .map(|v| {
            let v = v.to_i64();
            [v[0], v[1]]
        });
    let seqlen_new = if p.seqlen_new_eq_seqlen_q {
        p.seqlen_q
    } else {
        rng.gen_range(1..=p.seqlen_q)
    };
    let (k, v, cu_seqlens_k_new) = if !p.new_kv {
        (PyValue::None, PyValue::None, None)
    } else if p.varlen_q {
        let lengths = seqlen_mask_lengths(seqlen_new, BATCH, rng);
        let total: usize = lengths.iter().sum();
        (
            PyValue::Tensor(TensorArg::new(dtype, &[total, p.heads_k, HEADDIM])),
            PyValue::Tensor(TensorArg::new(dtype, &[total, p.heads_k, HEADDIM])),
            Some(cumulative(&lengths)),
        )
    } else {
        let shape = [BATCH, seqlen_new, p.heads_k, HEADDIM];
        (
            PyValue::Tensor(TensorArg::new(dtype, &shape)),
            PyValue::Tensor(TensorArg::new(dtype, &shape)),
            None,
        )
    };
    let (k_cache, v_cache, page_table, rotary_rows) = match p.page_size {
        None => {
            let shape = [batch_cache, p.seqlen_k, p.heads_k, HEADDIM];
            (
                TensorArg::new(dtype, &shape),
                TensorArg::new(dtype, &shape),
                None,
                p.seqlen_k,
            )
        }
        Some(page) => {
            let pages = p.seqlen_k.div_ceil(page) * batch_cache * 3;
            let shape = [pages, page, p.heads_k, HEADDIM];
            let table = randperm(pages, rng);
            let table = int_tensor(Dtype::Int32, &[batch_cache, pages / batch_cache], table);
            (
                TensorArg::new(dtype, &shape),
                TensorArg::new(dtype, &shape),
                Some(table),
                pages * page,
            )
        }
    };
    let bound = if p.new_kv {
        let taken = if (p.causal || p.local) && rotary_dim > 1 {
            p.seqlen_q
        } else {
            seqlen_new
        };
        p.seqlen_k - taken + 1
    } else {
        p.seqlen_k + 1
    };
    let low = usize::from(!p.new_kv);
    let cache_seqlens: Vec<i64> = (0..BATCH)
        .map(|_| rng.gen_range(low..bound) as i64)
        .collect();
    let cache_leftpad = p.has_leftpad.then(|| {
        cache_seqlens
            .iter()
            .map(|&len| if len > 0 { rng.gen_range(0..len) } else { 0 })
            .collect::<Vec<i64>>()
    });
    let cache_batch_idx = p.has_batch_idx.then(|| {
        let mut order = randperm(batch_cache, rng);
        order.truncate(BATCH);
        order
    });
    let rotary = (rotary_dim > 0).then(|| TensorArg::new(dtype, &[rotary_rows, rotary_dim / 2]));

    let seqlens_tensor = |values: &[i64]| {
        PyValue::Tensor(int_tensor(Dtype::Int32, &[values.len()], values.to_vec()))
    };
    let optional = |t: Option<TensorArg>| t.map_or(PyValue::None, PyValue::Tensor);
    let optional_ints = |v: &Option<Vec<i64>>| v.as_deref().map_or(PyValue::None, seqlens_tensor);

    let metadata_args = p.precompute_metadata.then(|| MetadataArgsSpec {
        batch_size: BATCH,
        max_seqlen_q: max_seqlen_q.unwrap_or(p.seqlen_q),
        max_seqlen_k: match (p.page_size, &page_table) {
            (Some(page), Some(table)) => table.shape[1] * page,
            _ => p.seqlen_k,
        },
        num_heads_q: HEADS,
        num_heads_kv: p.heads_k,
        headdim: HEADDIM,
        cache_seqlens: cache_seqlens.clone(),
        qkv_dtype: Some(format!("torch.{}", dtype.torch_name())),
        headdim_v: Some(HEADDIM),
        cu_seqlens_q: cu_seqlens_q.clone(),
        cu_seqlens_k_new: cu_seqlens_k_new.clone(),
        cache_leftpad: cache_leftpad.clone(),
        page_size: p.page_size,
        max_seqlen_k_new: seqlen_new,
        causal: p.causal,
        window_size: window_ints,
        attention_chunk,
        has_softcap: false,
        num_splits: p.num_splits,
        pack_gqa: None,
        sm_margin: 0,
    });
    let scheduler_metadata = match &metadata_args {
        // FA3's buffer for these arguments (its values are what `metadata_args` describe)
        Some(args) => {
            let [wl, wr] = args.window_size.unwrap_or([-1, -1]);
            let mask = resolve_mask(
                MaskShape {
                    seqlen_q: args.max_seqlen_q as i64,
                    seqlen_k: args.max_seqlen_k as i64,
                    head_size: HEADDIM as i64,
                    paged: args.page_size.is_some(),
                },
                args.causal,
                wl,
                wr,
                args.attention_chunk,
            );
            let layout = Fa3Layout::of_get_scheduler_metadata(
                BATCH,
                mask.is_causal,
                mask.is_local,
                p.num_splits,
                MODELLED_ARCH,
            );
            PyValue::Tensor(TensorArg::new(Dtype::Int32, &[layout.size()]))
        }
        None => PyValue::None,
    };

    let keywords: Vec<(&str, PyValue)> = vec![
        ("qv", PyValue::None),
        ("rotary_cos", optional(rotary.clone())),
        ("rotary_sin", optional(rotary)),
        ("cache_seqlens", seqlens_tensor(&cache_seqlens)),
        ("cache_batch_idx", optional_ints(&cache_batch_idx)),
        ("cache_leftpad", optional_ints(&cache_leftpad)),
        ("page_table", optional(page_table)),
        ("cu_seqlens_q", optional_ints(&cu_seqlens_q)),
        ("cu_seqlens_k_new", optional_ints(&cu_seqlens_k_new)),
        (
            "max_seqlen_q",
            max_seqlen_q.map_or(PyValue::None, |m| PyValue::Int(m as i64)),
        ),
        ("rotary_seqlens", seqlens_tensor(&cache_seqlens)),
        ("causal", PyValue::Bool(p.causal)),
        ("window_size", window_size),
        ("attention_chunk", PyValue::Int(attention_chunk)),
        ("rotary_interleaved", PyValue::Bool(p.rotary_interleaved)),
        ("scheduler_metadata", scheduler_metadata),
        ("num_splits", PyValue::Int(p.num_splits)),
        ("return_softmax_lse", PyValue::Bool(true)),
    ];
    let call = KvCacheCall {
        positional: vec![
            PyValue::Tensor(q),
            PyValue::Tensor(k_cache),
            PyValue::Tensor(v_cache),
            k,
            v,
        ],
        keywords: owned_keywords(keywords),
        metadata_args,
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

    #[test]
    fn the_grid_runs_what_the_test_runs() {
        // 829,440 calls: the product of the test's lists with its skips applied, counted by a
        // separate enumeration (itertools.product over the same lists in Python).
        let points = points();
        assert_eq!(points.len(), 829_440);
        let p = |i: usize| params(points[i]);
        assert!(points.iter().all(|&i| runs(&params(i))));
        // no point appends to a cache shorter than the query, or rotates without new keys
        assert!(
            (0..points.len()).all(|i| !(p(i).new_kv && p(i).seqlen_q > p(i).seqlen_k)
                && (p(i).new_kv || p(i).rotary_fraction == 0.0))
        );
        // a page of 128 never divides 339, 1024 does
        assert!((0..points.len()).all(|i| !(p(i).page_size == Some(128) && p(i).seqlen_k == 339)));
        assert!((0..points.len()).any(|i| p(i).page_size == Some(128) && p(i).seqlen_k == 1024));
    }
}
