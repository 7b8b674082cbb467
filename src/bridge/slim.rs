//! Slim bundles: a call on a large KV pool, rewritten to hold only the pool rows (pages, or cache
//! rows) it can read or write, so that the bundle of a server's call takes megabytes where the
//! pool takes gigabytes.
//!
//! What the call touches, as the MUSA device reads it (docs/musa-device.md D3, D5): sequence `b`'s
//! keys are cache positions `P_b .. L_b`, `P_b` its `cache_leftpad` (0 without), `L_b` its
//! `cache_seqlens` (the capacity without it) plus the keys it appends; the device loads whole key
//! blocks of the call's `tile_n` from `P_b`, so it reads positions up to
//! `P_b + ceil((L_b − P_b) / tile_n) · tile_n`, and writes the appended keys inside that range. With
//! a page table the positions live in pages `page_table[r_b][0 .. ceil(end / page_size)]`, and a
//! block that runs past the row's capacity reads on into the following rows' entries (robust loads:
//! entry 0 past the table); without one in cache row `r_b`, and past its capacity in row `r_b + 1`
//! where the load path is the LSU one (`cache_leftpad` given; TME zero-fills instead). `r_b` is
//! `cache_batch_idx[b]`, or `b`. For a call `musa` rejects no tile is known and [`MAX_KEY_BLOCK`], the
//! largest of any stack, is taken. A cache without a page table is slimmed only with
//! `cache_batch_idx` (without it the stacks require one cache row per sequence).
//!
//! The slim call holds those rows in ascending order of their pool index: `k_cache`/`v_cache` get
//! that many rows, `page_table` (or `cache_batch_idx`) is rewritten to the new positions (a page
//! entry the call never reads points at row 0), every integer tensor carries its values, and the
//! rows' data is the pool's ([`RowOrigins`]). The call means the same: the property test below
//! checks that whole and slim calls give identical verdicts and identical reference outputs
//! (`export` also keeps the whole call when any profile would judge the slim one differently).

use crate::call::{Dims, KvCacheCall, Param, PyValue, TensorArg, TensorValues};
use crate::tensor::RowOrigins;
use crate::validate::Profile;
use crate::validate::profiles::MUSA;
use std::collections::BTreeSet;

/// A call rewritten to hold some rows of its pool.
#[derive(Clone, Debug, PartialEq)]
pub struct SlimCall {
    pub call: KvCacheCall,
    /// For `k_cache` and `v_cache`: the pool row each of their rows is.
    pub rows: RowOrigins,
    /// Rows of the whole pool.
    pub pool_rows: usize,
}

/// The largest key block (`kBlockN`) of FA3's forward tiles (`tile_size_fwd_sm90`, fp8 with head
/// dimension 128: 224); mate's tiles are no larger.
pub const MAX_KEY_BLOCK: usize = 224;

/// The key block the MUSA device loads `call`'s keys in.
fn key_block(call: &KvCacheCall) -> usize {
    MUSA.validate(call)
        .resolved()
        .map_or(MAX_KEY_BLOCK, |r| r.tile_n.max(1))
}

fn int_values(call: &KvCacheCall, name: &str) -> Option<Vec<i64>> {
    call.tensors()
        .find(|(n, _)| n == name)
        .and_then(|(_, t)| t.int_values())
}

fn tensor_mut<'a>(call: &'a mut KvCacheCall, name: &str) -> Option<&'a mut TensorArg> {
    call.tensors_mut().find(|(n, _)| n == name).map(|(_, t)| t)
}

/// Keys appended to each sequence.
fn appended(call: &KvCacheCall, dims: &Dims) -> Option<Vec<usize>> {
    if !dims.new_kv {
        return Some(vec![0; dims.batch_size]);
    }
    if !dims.varlen_new {
        return Some(vec![dims.seqlen_new; dims.batch_size]);
    }
    let cu = int_values(call, "cu_seqlens_k_new")?;
    cu.windows(2)
        .map(|w| usize::try_from(w[1] - w[0]).ok())
        .collect()
}

/// The slim form of `call` (its integer tensors carrying their values, see
/// [`super::export::with_int_values`]); `None` when it holds no row it does not touch, or when its
/// meaning depends on the pool's size or it touches rows outside the pool (left to the whole call,
/// where validation and the reference say what happens).
pub fn slim(call: &KvCacheCall) -> Option<SlimCall> {
    let bound = call.bind_canonical().ok()?;
    let dims = Dims::of(&bound).ok()?;
    let (k_cache, v_cache) = (bound.tensor(Param::KCache)?, bound.tensor(Param::VCache)?);
    let pool_rows = k_cache.shape[0];
    if v_cache.shape[0] != pool_rows || k_cache.aliases() || v_cache.aliases() {
        return None;
    }
    // An int `cache_seqlens` becomes a tensor of the pool's length on MUSA (musa-fa3.md §8.3).
    let seqlens = match bound.get(Param::CacheSeqlens) {
        PyValue::None => vec![dims.seqlen_k as i64; dims.batch_size],
        PyValue::Tensor(_) => int_values(call, "cache_seqlens")?,
        _ => return None,
    };
    let new = appended(call, &dims)?;
    // Without a page table, only `cache_batch_idx` lets a call hold other rows than its batch's
    // (mate requires as many cache rows as sequences otherwise, musa-fa3.md F-17).
    let kv_rows: Vec<i64> = match int_values(call, "cache_batch_idx") {
        Some(rows) => rows,
        None if bound.tensor(Param::CacheBatchIdx).is_some() || !dims.paged => return None,
        None => (0..dims.batch_size as i64).collect(),
    };
    if seqlens.len() < dims.batch_size
        || kv_rows.len() < dims.batch_size
        || new.len() < dims.batch_size
    {
        return None;
    }
    let table = if dims.paged {
        Some(int_values(call, "page_table")?)
    } else {
        None
    };
    let leftpad = match bound.tensor(Param::CacheLeftpad) {
        Some(_) => Some(int_values(call, "cache_leftpad")?),
        None => None,
    };
    let block = key_block(call);
    let mut touched = BTreeSet::new();
    for b in 0..dims.batch_size {
        let last = usize::try_from(seqlens[b]).ok()?.checked_add(new[b])?;
        if last > dims.seqlen_k {
            return None;
        }
        let first = match &leftpad {
            Some(p) => usize::try_from(*p.get(b)?).ok()?,
            None => 0,
        };
        let end = match last.checked_sub(first) {
            None | Some(0) => 0,
            Some(keys) => first.checked_add(keys.div_ceil(block) * block)?,
        };
        let row = usize::try_from(kv_rows[b]).ok()?;
        match &table {
            Some(table) => {
                let start = row.checked_mul(dims.pages_per_seq)?;
                for entry in start..start.checked_add(end.div_ceil(dims.page_size))? {
                    let page = table.get(entry).copied().unwrap_or(0);
                    touched.insert(usize::try_from(page).ok().filter(|&p| p < pool_rows)?);
                }
            }
            None if row < pool_rows => {
                touched.insert(row);
                if end > dims.seqlen_k && leftpad.is_some() && row + 1 < pool_rows {
                    touched.insert(row + 1);
                }
            }
            None => return None,
        }
    }
    if touched.len() == pool_rows {
        return None;
    }
    let kept: Vec<usize> = touched.into_iter().collect();
    let position = |row: i64| -> i64 {
        usize::try_from(row)
            .ok()
            .and_then(|r| kept.binary_search(&r).ok())
            .map_or(0, |p| p as i64)
    };
    let mut slim = call.clone();
    for name in ["k_cache", "v_cache"] {
        tensor_mut(&mut slim, name)?.shape[0] = kept.len();
    }
    let (index_name, index) = match table {
        Some(table) => ("page_table", table),
        None => ("cache_batch_idx", kv_rows),
    };
    if let Some(t) = tensor_mut(&mut slim, index_name) {
        t.values = Some(TensorValues::Int(index.into_iter().map(position).collect()));
    }
    Some(SlimCall {
        call: slim,
        rows: RowOrigins::from([
            ("k_cache".to_string(), kept.clone()),
            ("v_cache".to_string(), kept),
        ]),
        pool_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::CaseBundle;
    use crate::bridge::bundle::names;
    use crate::bridge::export::{Pools, bundle_for, verdict_records, with_int_values};
    use crate::call::Dtype;
    use crate::tensor::materialise_index_tensors;
    use crate::validate::profiles;
    use proptest::prelude::*;

    /// The memory cap of every bundle these tests write.
    const CAP: usize = 1 << 30;

    /// An int32 tensor argument holding `values`.
    fn ints(shape: &[usize], values: Vec<i64>) -> PyValue {
        PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, shape, values))
    }

    /// A decode or append call on a pool with pages (or cache rows) it never touches.
    #[derive(Debug, Clone)]
    struct PoolCall {
        paged: bool,
        page_size: usize,
        pages_per_seq: usize,
        spare_rows: usize,
        lengths: Vec<usize>,
        /// `cache_leftpad` of each sequence (only without a page table, as the stacks require).
        leftpad: Option<Vec<usize>>,
        appended: usize,
        seqlen_q: usize,
        causal: bool,
        seed: u64,
    }

    fn pool_call() -> impl Strategy<Value = PoolCall> {
        (
            any::<bool>(),
            prop::sample::select(vec![16usize, 64]),
            1usize..=6,
            0usize..=6,
            prop::collection::vec((0.0f64..=1.0, 0.0f64..=1.0), 1..=3),
            any::<bool>(),
            0usize..=2,
            1usize..=2,
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(
                |(
                    paged,
                    page_size,
                    pages_per_seq,
                    spare_rows,
                    fill,
                    padded,
                    appended,
                    seqlen_q,
                    causal,
                    seed,
                )| {
                    let capacity = page_size * pages_per_seq;
                    let lengths: Vec<usize> = fill
                        .iter()
                        .map(|(f, _)| ((capacity - appended) as f64 * f) as usize)
                        .collect();
                    let leftpad = (padded && !paged).then(|| {
                        fill.iter()
                            .zip(&lengths)
                            .map(|((_, p), &l)| (l as f64 * p) as usize)
                            .collect()
                    });
                    PoolCall {
                        paged,
                        page_size,
                        pages_per_seq,
                        spare_rows,
                        lengths,
                        leftpad,
                        appended,
                        seqlen_q,
                        causal,
                        seed,
                    }
                },
            )
    }

    impl PoolCall {
        fn call(&self) -> KvCacheCall {
            let (b, hk, d) = (self.lengths.len(), 2, 64);
            let t = |shape: &[usize]| PyValue::tensor(Dtype::Bfloat16, shape);
            let mut call = KvCacheCall {
                id: "pool".into(),
                seed: self.seed,
                ..KvCacheCall::default()
            };
            let capacity = self.page_size * self.pages_per_seq;
            call.set("q", t(&[b, self.seqlen_q, 2 * hk, d]));
            if self.paged {
                let pages = b * self.pages_per_seq + self.spare_rows;
                call.set("k_cache", t(&[pages, self.page_size, hk, d]))
                    .set("v_cache", t(&[pages, self.page_size, hk, d]))
                    .set(
                        "page_table",
                        PyValue::tensor(Dtype::Int32, &[b, self.pages_per_seq]),
                    );
            } else {
                let rows = b + self.spare_rows;
                // The batch's rows, spread over the pool from its end.
                let idx = (0..b).map(|i| (rows - 1 - 2 * i % rows) as i64).collect();
                call.set("k_cache", t(&[rows, capacity, hk, d]))
                    .set("v_cache", t(&[rows, capacity, hk, d]))
                    .set("cache_batch_idx", ints(&[b], idx));
            }
            let lengths = self.lengths.iter().map(|&l| l as i64).collect();
            call.set("cache_seqlens", ints(&[b], lengths))
                .set("causal", PyValue::Bool(self.causal))
                .set("return_softmax_lse", PyValue::Bool(true));
            if let Some(leftpad) = &self.leftpad {
                let leftpad = leftpad.iter().map(|&p| p as i64).collect();
                call.set("cache_leftpad", ints(&[b], leftpad));
            }
            if self.appended > 0 {
                call.set("k", t(&[b, self.appended, hk, d]))
                    .set("v", t(&[b, self.appended, hk, d]));
            }
            call
        }
    }

    /// The slim bundle's caches after the call are the whole bundle's at the rows it holds.
    fn caches_agree(whole: &CaseBundle, slim: &CaseBundle, rows: &[usize]) {
        let (whole, slim) = (
            whole.expected.as_ref().unwrap(),
            slim.expected.as_ref().unwrap(),
        );
        for name in [names::K_CACHE, names::V_CACHE] {
            let (w, s) = (
                whole.tensors[name].to_host().data,
                slim.tensors[name].to_host().data,
            );
            for (i, &row) in rows.iter().enumerate() {
                assert_eq!(
                    s.index_axis(ndarray::Axis(0), i),
                    w.index_axis(ndarray::Axis(0), row),
                    "{name} row {i} (pool row {row})"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn slim_and_whole_bundles_mean_the_same(case in pool_call()) {
            let call = case.call();
            let indices = materialise_index_tensors(&call, CAP).unwrap();
            let inlined = with_int_values(&call, &indices);
            let slimmed = slim(&inlined);
            prop_assume!(slimmed.is_some());
            let slimmed = slimmed.unwrap();
            prop_assert!(slimmed.call.passed("k_cache").unwrap().as_tensor().unwrap().shape[0] < slimmed.pool_rows);
            // Every profile judges the slim call as it judges the whole one.
            let musa = profiles::by_name("musa").unwrap();
            prop_assert_eq!(verdict_records(&slimmed.call, musa, CAP), verdict_records(&inlined, musa, CAP));

            let whole = bundle_for(&call, musa, CAP, Pools::Whole);
            let slim = bundle_for(&call, musa, CAP, Pools::Slim);
            prop_assert_eq!(&whole.skipped, &None);
            prop_assert_eq!(&slim.verdicts, &whole.verdicts);
            prop_assert_eq!(slim.pool.as_ref().map(|p| &p.rows), Some(&slimmed.rows["k_cache"]));
            prop_assert_eq!(whole.expected.is_some(), slim.expected.is_some());
            if let (Some(w), Some(s)) = (&whole.expected, &slim.expected) {
                for name in [names::OUT, names::LSE, names::OUT_LOWPREC, names::LSE_LOWPREC] {
                    prop_assert_eq!(&w.tensors[name], &s.tensors[name], "{}", name);
                }
                prop_assert_eq!(w.appends_kv, case.appended > 0);
                if w.appends_kv {
                    caches_agree(&whole, &slim, &slimmed.rows["k_cache"]);
                }
            }
            // The stored pool rows are the whole pool's.
            for name in ["k_cache", "v_cache"] {
                let (w, s) = (whole.inputs[name].to_host().data, slim.inputs[name].to_host().data);
                for (i, &row) in slimmed.rows[name].iter().enumerate() {
                    prop_assert_eq!(s.index_axis(ndarray::Axis(0), i), w.index_axis(ndarray::Axis(0), row));
                }
            }
        }
    }

    #[test]
    fn a_pool_of_a_million_tokens_is_slimmed_to_the_pages_a_decode_reads() {
        let pages = 1_500_000 / 64;
        let mut call = KvCacheCall {
            seed: 1,
            ..KvCacheCall::default()
        };
        let mut table = vec![0i64; 64];
        table[..11].copy_from_slice(&[9000, 5, 17, 23000, 4, 8, 15, 16, 42, 108, 7]);
        call.set("q", PyValue::tensor(Dtype::Bfloat16, &[2, 1, 8, 128]))
            .set(
                "k_cache",
                PyValue::tensor(Dtype::Bfloat16, &[pages, 64, 4, 128]),
            )
            .set(
                "v_cache",
                PyValue::tensor(Dtype::Bfloat16, &[pages, 64, 4, 128]),
            )
            .set("cache_seqlens", ints(&[2], vec![100, 3]))
            .set("page_table", ints(&[2, 32], table));
        let musa = profiles::by_name("musa").unwrap();
        let s = slim(&call).expect("slims");
        assert_eq!(
            verdict_records(&s.call, musa, CAP),
            verdict_records(&call, musa, CAP)
        );
        let bundle = bundle_for(&call, musa, CAP, Pools::Slim);
        assert_eq!(bundle.skipped, None);
        // mate loads this call's keys in blocks of 64 (bf16, head dim 128): 100 keys are 2 blocks,
        // pages 9000 and 5 of table row 0; 3 keys are one block, page 0 of row 1. Pages the call
        // never reads point at row 0.
        let resolved = musa.validate(&call);
        assert_eq!(resolved.resolved().map(|r| r.tile_n), Some(64));
        let pool = bundle.pool.as_ref().unwrap();
        assert_eq!(pool.pool_rows, pages);
        assert_eq!(pool.rows, [0, 5, 9000]);
        let table = bundle
            .call
            .passed("page_table")
            .unwrap()
            .as_tensor()
            .unwrap();
        let mut expected = vec![0i64; 64];
        expected[..2].copy_from_slice(&[2, 1]);
        assert_eq!(table.int_values(), Some(expected));
        assert_eq!(bundle.inputs["k_cache"].shape, [3, 64, 4, 128]);
        assert!(bundle.expected.is_some(), "musa accepts the call");
        let whole = bundle_for(&call, musa, CAP, Pools::Whole);
        assert!(
            whole.skipped.unwrap().contains("left of the memory cap"),
            "the whole pool is over the cap"
        );
    }

    #[test]
    fn a_key_block_past_the_capacity_reads_the_following_entries_of_the_table() {
        let mut call = KvCacheCall::default();
        call.set("q", PyValue::tensor(Dtype::Bfloat16, &[2, 1, 8, 128]))
            .set(
                "k_cache",
                PyValue::tensor(Dtype::Bfloat16, &[40, 16, 4, 128]),
            )
            .set(
                "v_cache",
                PyValue::tensor(Dtype::Bfloat16, &[40, 16, 4, 128]),
            )
            .set("cache_seqlens", ints(&[2], vec![40, 5]))
            .set("page_table", ints(&[2, 3], vec![7, 3, 30, 12, 20, 21]));
        let musa = profiles::by_name("musa").unwrap();
        assert_eq!(musa.validate(&call).resolved().map(|r| r.tile_n), Some(64));
        // Capacity 48 (3 pages of 16). Sequence 0's one block of 64 reads positions 0..64: its
        // own 3 pages and the next row's first entry (12); sequence 1's reads row 1's 3 pages and
        // one entry past the table, which the device's robust load gives as page 0.
        let s = slim(&call).expect("slims");
        assert_eq!(s.rows["k_cache"], [0, 3, 7, 12, 20, 21, 30]);
        let table = s.call.passed("page_table").unwrap().as_tensor().unwrap();
        assert_eq!(table.int_values(), Some(vec![2, 1, 6, 3, 4, 5]));
        assert_eq!(
            verdict_records(&s.call, musa, CAP),
            verdict_records(&call, musa, CAP)
        );
    }
}
