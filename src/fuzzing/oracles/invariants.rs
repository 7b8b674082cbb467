//! The reference's metamorphic invariants: pairs of calls that must give the same result.
//!
//! Each [`Invariant`] takes a base call, builds a transformed call carrying the *same data* laid
//! out differently (explicit tensor values, so the materialiser reproduces them), evaluates both
//! and compares. They are library functions so that proptest (`tests/prop_reference.rs`) and the
//! `conform` suite `reference` run the same checks.

use crate::call::{Dtype, KvCacheCall, PyValue, TensorArg, TensorValues, signature};
use crate::reference::{Precision, RefOutput, Stack, run};
use crate::tensor::{DEFAULT_MEMORY_CAP, HostTensor, Tensors, materialise};
use ndarray::{Array2, Array3, ArrayD, Axis, Dimension, Ix2, Ix4, IxDyn, s};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// What checking an invariant on one base call found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Held,
    /// The base call lacks what the invariant transforms (e.g. no GQA to expand).
    NotApplicable,
    Violated(String),
}

/// A named invariant.
pub struct Invariant {
    pub name: &'static str,
    pub description: &'static str,
    check: fn(&Base, &mut ChaCha8Rng) -> Result<Verdict, String>,
}

impl Invariant {
    /// Checks the invariant on `call` under `stack`; randomness (page orders, paddings) from `rng`.
    pub fn check(&self, call: &KvCacheCall, stack: Stack, rng: &mut ChaCha8Rng) -> Verdict {
        let outcome = Base::new(call, stack).and_then(|base| (self.check)(&base, rng));
        outcome.unwrap_or_else(Verdict::Violated)
    }
}

/// Every invariant.
pub const ALL: [Invariant; 9] = [
    Invariant {
        name: "gqa-repeat",
        description: "GQA/MQA equals MHA over explicitly repeated KV heads",
        check: gqa_equals_repeated_heads,
    },
    Invariant {
        name: "paged-permutation",
        description: "paged KV equals contiguous KV, pages in any order",
        check: paged_equals_contiguous,
    },
    Invariant {
        name: "leftpad-shift",
        description: "left padding equals the same cache shifted right",
        check: leftpad_equals_shifted_cache,
    },
    Invariant {
        name: "batch-idx-gather",
        description: "cache_batch_idx equals gathering the cache rows",
        check: batch_idx_equals_gathering,
    },
    Invariant {
        name: "per-sequence",
        description: "a batch (fixed or varlen) equals its sequences evaluated one by one",
        check: batch_equals_sequences,
    },
    Invariant {
        name: "append-concat",
        description: "append-then-attend equals attending over the concatenated KV",
        check: append_equals_concatenated,
    },
    Invariant {
        name: "scheduling-knobs",
        description: "num_splits, pack_gqa and scheduler_metadata do not change the result",
        check: scheduling_knobs_do_not_matter,
    },
    Invariant {
        name: "softcap-infinity",
        description: "a softcap tending to infinity equals no softcap",
        check: huge_softcap_is_none,
    },
    Invariant {
        name: "sink-minus-inf",
        description: "a learnable sink of -inf equals no sink",
        check: minus_inf_sink_is_none,
    },
];

/// Looks an invariant up by name.
pub fn by_name(name: &str) -> Option<&'static Invariant> {
    ALL.iter().find(|i| i.name == name)
}

/// A base call in keyword form with its materialised tensors and reference result.
struct Base {
    call: KvCacheCall,
    tensors: Tensors,
    stack: Stack,
    result: RefOutput,
}

fn evaluate(call: &KvCacheCall, stack: Stack) -> Result<(Tensors, RefOutput), String> {
    let tensors = materialise(call, DEFAULT_MEMORY_CAP).map_err(|e| e.to_string())?;
    let result = run(call, &tensors, stack, Precision::Exact).map_err(|e| e.to_string())?;
    Ok((tensors, result))
}

impl Base {
    fn new(call: &KvCacheCall, stack: Stack) -> Result<Base, String> {
        let mut call = keywords_only(call);
        let (tensors, _) = evaluate(&call, stack)?;
        // Carry every tensor's values explicitly, and an int cache_seqlens as the tensor it
        // expands to, so transformations can change shapes without changing data.
        for (name, t) in &tensors {
            put(&mut call, name, t.dtype, t.data.clone());
        }
        if let Some(n) = call.passed("cache_seqlens").and_then(PyValue::as_int) {
            let b = batch_size(&call)?;
            put_ints(&mut call, "cache_seqlens", &[b], vec![n; b]);
        }
        let (tensors, result) = evaluate(&call, stack)?;
        Ok(Base {
            call,
            tensors,
            stack,
            result,
        })
    }

    fn tensor(&self, name: &str) -> Option<&HostTensor> {
        self.call.passed(name).and_then(PyValue::as_tensor)?;
        self.tensors.get(name)
    }

    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.tensor(name).map(HostTensor::ints)
    }

    fn is_mla(&self) -> bool {
        self.stack == Stack::Musa
            && self
                .tensor("qv")
                .is_some_and(|t| t.shape().last() == Some(&512))
            && self
                .tensor("q")
                .is_some_and(|t| t.shape().last() == Some(&64))
    }

    /// Evaluates `call` and compares it with the base result, after mapping the transformed
    /// caches back to the base layout with `caches(name, cache)`.
    fn expect_same(
        &self,
        call: &KvCacheCall,
        caches: impl Fn(&str, &ArrayD<f64>) -> ArrayD<f64>,
    ) -> Result<Verdict, String> {
        let (_, mut other) = evaluate(call, self.stack)?;
        other.k_cache = other.k_cache.as_ref().map(|c| caches("k_cache", c));
        other.v_cache = other.v_cache.as_ref().map(|c| caches("v_cache", c));
        Ok(match same(&self.result, &other) {
            Ok(()) => Verdict::Held,
            Err(e) => Verdict::Violated(e),
        })
    }
}

/// Rewrites positional arguments as keywords (canonical names), so calls can be edited by name.
fn keywords_only(call: &KvCacheCall) -> KvCacheCall {
    let mut out = KvCacheCall {
        positional: Vec::new(),
        keywords: Vec::new(),
        ..call.clone()
    };
    for (value, (param, _)) in call.positional.iter().zip(signature::SGLANG_MUSA.params) {
        out.set(param.name(), value.clone());
    }
    for (name, value) in &call.keywords {
        out.set(name, value.clone());
    }
    out
}

fn batch_size(call: &KvCacheCall) -> Result<usize, String> {
    let args = call.bind_canonical()?;
    crate::call::Dims::of(&args)
        .map(|d| d.batch_size)
        .map_err(|e| e.0)
}

fn put(call: &mut KvCacheCall, name: &str, dtype: Dtype, data: ArrayD<f64>) {
    let values = if dtype.is_floating_point() {
        TensorValues::Float(data.iter().copied().collect())
    } else {
        TensorValues::Int(data.iter().map(|&x| x as i64).collect())
    };
    call.set(
        name,
        PyValue::Tensor(TensorArg {
            values: Some(values),
            ..TensorArg::new(dtype, data.shape())
        }),
    );
}

fn put_ints(call: &mut KvCacheCall, name: &str, shape: &[usize], values: Vec<i64>) {
    call.set(
        name,
        PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, shape, values)),
    );
}

/// Element-wise equality up to f64 reassociation: `|a − b| ≤ 1e-9·(1 + |a|)`, non-finite exact.
fn close(name: &str, a: &ArrayD<f64>, b: &ArrayD<f64>) -> Result<(), String> {
    if a.shape() != b.shape() {
        return Err(format!(
            "{name}: shapes {:?} and {:?}",
            a.shape(),
            b.shape()
        ));
    }
    for ((index, &x), &y) in a.indexed_iter().zip(b.iter()) {
        let equal = if x.is_finite() && y.is_finite() {
            (x - y).abs() <= 1e-9 * (1.0 + x.abs())
        } else {
            x == y || (x.is_nan() && y.is_nan())
        };
        if !equal {
            return Err(format!("{name} differs at {:?}: {x} vs {y}", index.slice()));
        }
    }
    Ok(())
}

fn same(a: &RefOutput, b: &RefOutput) -> Result<(), String> {
    close("out", &a.out, &b.out)?;
    close("lse", &a.lse, &b.lse)?;
    for (name, x, y) in [
        ("k_cache", &a.k_cache, &b.k_cache),
        ("v_cache", &a.v_cache, &b.v_cache),
    ] {
        match (x, y) {
            (Some(x), Some(y)) => close(name, x, y)?,
            (None, None) => {}
            _ => return Err(format!("{name} returned by only one of the calls")),
        }
    }
    Ok(())
}

/// The KV rows of a cache as logical sequences `(capacity, hk, d)`, through the page table.
fn logical_rows(cache: &ArrayD<f64>, page_table: Option<&Array2<i64>>) -> Vec<Array3<f64>> {
    let cache = cache
        .view()
        .into_dimensionality::<Ix4>()
        .expect("4-D cache");
    match page_table {
        None => cache.outer_iter().map(|row| row.to_owned()).collect(),
        Some(table) => table
            .outer_iter()
            .map(|pages| {
                let views: Vec<_> = pages
                    .iter()
                    .map(|&p| cache.index_axis(Axis(0), p as usize))
                    .collect();
                ndarray::concatenate(Axis(0), &views).expect("pages of one shape")
            })
            .collect(),
    }
}

fn stack_rows(rows: &[Array3<f64>]) -> ArrayD<f64> {
    let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
    ndarray::stack(Axis(0), &views)
        .expect("rows of one shape")
        .into_dyn()
}

fn page_table(base: &Base) -> Option<Array2<i64>> {
    base.tensor("page_table").map(|t| {
        t.data
            .mapv(|x| x as i64)
            .into_dimensionality::<Ix2>()
            .expect("2-D page table")
    })
}

fn gqa_equals_repeated_heads(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let q = base.tensor("q").ok_or("no q")?;
    let h = q.shape()[q.shape().len() - 2];
    let k_cache = base.tensor("k_cache").ok_or("no k_cache")?;
    let hk = k_cache.shape()[2];
    if hk == h || base.is_mla() {
        return Ok(Verdict::NotApplicable);
    }
    let group = h / hk;
    let repeat = |a: &ArrayD<f64>, axis: usize| {
        let index: Vec<usize> = (0..h).map(|i| i / group).collect();
        a.select(Axis(axis), &index)
    };
    let mut call = base.call.clone();
    for name in [
        "k_cache",
        "v_cache",
        "k",
        "v",
        "q_descale",
        "k_descale",
        "v_descale",
    ] {
        if let Some(t) = base.tensor(name) {
            let axis = t.shape().len() - if name.ends_with("descale") { 1 } else { 2 };
            put(&mut call, name, t.dtype, repeat(&t.data, axis));
        }
    }
    base.expect_same(&call, |_, cache| {
        let index: Vec<usize> = (0..hk).map(|i| i * group).collect();
        cache.select(Axis(2), &index)
    })
}

fn paged_equals_contiguous(base: &Base, rng: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let table = page_table(base);
    let k_rows = logical_rows(
        &base.tensor("k_cache").ok_or("no k_cache")?.data,
        table.as_ref(),
    );
    let v_rows = logical_rows(
        &base.tensor("v_cache").ok_or("no v_cache")?.data,
        table.as_ref(),
    );
    let (rows, capacity) = (k_rows.len(), k_rows.first().map_or(0, |r| r.dim().0));
    // Contiguous → paged with a random page size dividing the capacity; paged → new page order
    // and page size 1... capacity, again dividing it.
    let divisors: Vec<usize> = (1..=capacity).filter(|p| capacity % p == 0).collect();
    let Some(&page) = divisors.choose(rng) else {
        return Ok(Verdict::NotApplicable);
    };
    if base.is_mla() && page != 64 {
        return Ok(Verdict::NotApplicable);
    }
    let per_seq = capacity / page;
    let spare = rng.gen_range(0..=2);
    let num_pages = rows * per_seq + spare;
    let mut order: Vec<usize> = (0..num_pages).collect();
    order.shuffle(rng);
    let mut call = base.call.clone();
    let mut new_table = Vec::with_capacity(rows * per_seq);
    for (name, logical) in [("k_cache", &k_rows), ("v_cache", &v_rows)] {
        let t = base.tensor(name).ok_or("no cache")?;
        let (hk, d) = (t.shape()[2], t.shape()[3]);
        let mut paged = ArrayD::<f64>::from_elem(IxDyn(&[num_pages, page, hk, d]), 1e4);
        new_table.clear();
        for (r, row) in logical.iter().enumerate() {
            for i in 0..per_seq {
                let p = order[r * per_seq + i];
                new_table.push(p as i64);
                paged.slice_mut(s![p, .., .., ..]).assign(&row.slice(s![
                    i * page..(i + 1) * page,
                    ..,
                    ..
                ]));
            }
        }
        put(&mut call, name, t.dtype, paged);
    }
    put_ints(&mut call, "page_table", &[rows, per_seq], new_table.clone());
    let new_table =
        Array2::from_shape_vec((rows, per_seq), new_table).map_err(|e| e.to_string())?;
    base.expect_same(&call, |name, cache| {
        // Back to the base layout: logical rows, then through the base's own page table.
        let logical = logical_rows(cache, Some(&new_table));
        match (&table, base.tensor(name)) {
            (Some(table), Some(original)) => repage(&logical, table, &original.data),
            _ => stack_rows(&logical),
        }
    })
}

fn leftpad_equals_shifted_cache(base: &Base, rng: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let Some(seqused) = base.ints("cache_seqlens") else {
        return Ok(Verdict::NotApplicable);
    };
    if base.is_mla() {
        return Ok(Verdict::NotApplicable);
    }
    let b = seqused.len();
    let table = page_table(base);
    let mut k_rows = logical_rows(
        &base.tensor("k_cache").ok_or("no k_cache")?.data,
        table.as_ref(),
    );
    let mut v_rows = logical_rows(
        &base.tensor("v_cache").ok_or("no v_cache")?.data,
        table.as_ref(),
    );
    let capacity = k_rows.first().map_or(0, |r| r.dim().0);
    let kv_row: Vec<usize> = base.ints("cache_batch_idx").map_or_else(
        || (0..b).collect(),
        |v| v.iter().map(|&x| x as usize).collect(),
    );
    let mut distinct = kv_row.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != b {
        return Ok(Verdict::NotApplicable);
    }
    let new_lens = new_token_counts(base, b);
    let leftpad = base.ints("cache_leftpad").unwrap_or_else(|| vec![0; b]);
    let shifts: Vec<usize> = (0..b)
        .map(|i| {
            let room = capacity.saturating_sub(seqused[i] as usize + new_lens[i]);
            rng.gen_range(0..=room)
        })
        .collect();
    if shifts.iter().all(|&s| s == 0) {
        return Ok(Verdict::NotApplicable);
    }
    for rows in [&mut k_rows, &mut v_rows] {
        for i in 0..b {
            let row = &mut rows[kv_row[i]];
            let shifted = shift_right(row, shifts[i]);
            *row = shifted;
        }
    }
    let mut call = base.call.clone();
    for (name, rows) in [("k_cache", &k_rows), ("v_cache", &v_rows)] {
        let t = base.tensor(name).ok_or("no cache")?;
        let physical = match &table {
            None => stack_rows(rows),
            Some(table) => repage(rows, table, &t.data),
        };
        put(&mut call, name, t.dtype, physical);
    }
    let shifted =
        |v: &[i64]| -> Vec<i64> { v.iter().zip(&shifts).map(|(&x, &s)| x + s as i64).collect() };
    put_ints(&mut call, "cache_seqlens", &[b], shifted(&seqused));
    put_ints(&mut call, "cache_leftpad", &[b], shifted(&leftpad));
    // Rotary positions start at cache_seqlens unless rotary_seqlens says otherwise: pin them.
    if base.tensor("rotary_cos").is_some() && base.tensor("rotary_seqlens").is_none() {
        put_ints(&mut call, "rotary_seqlens", &[b], seqused.clone());
    }
    let original_rows = |name: &str| {
        base.tensor(name)
            .map(|t| logical_rows(&t.data, table.as_ref()))
            .unwrap_or_default()
    };
    let (k_input, v_input) = (original_rows("k_cache"), original_rows("v_cache"));
    base.expect_same(&call, |name, cache| {
        let input = if name == "k_cache" {
            &k_input
        } else {
            &v_input
        };
        let mut rows = logical_rows(cache, table.as_ref());
        for i in 0..b {
            rows[kv_row[i]] = shift_left(&rows[kv_row[i]], shifts[i], &input[kv_row[i]]);
        }
        match (&table, base.tensor(name)) {
            (Some(table), Some(original)) => repage(&rows, table, &original.data),
            _ => stack_rows(&rows),
        }
    })
}

fn new_token_counts(base: &Base, b: usize) -> Vec<usize> {
    match (base.tensor("k"), base.ints("cu_seqlens_k_new")) {
        (Some(_), Some(cu)) => cu.windows(2).map(|w| (w[1] - w[0]) as usize).collect(),
        (Some(k), None) if k.shape().len() == 4 => vec![k.shape()[1]; b],
        _ => vec![0; b],
    }
}

/// `row` moved `by` positions later; the vacated front holds values that must never be read.
fn shift_right(row: &Array3<f64>, by: usize) -> Array3<f64> {
    let n = row.dim().0;
    let mut out = Array3::from_elem(row.dim(), 1e4);
    out.slice_mut(s![by.., .., ..])
        .assign(&row.slice(s![..n - by, .., ..]));
    out
}

/// Inverse of [`shift_right`]: positions `by..` moved back to the front, the last `by` positions
/// taken from the unshifted `input` (an append of the base call never reaches them).
fn shift_left(row: &Array3<f64>, by: usize, input: &Array3<f64>) -> Array3<f64> {
    let n = row.dim().0;
    let mut out = input.clone();
    out.slice_mut(s![..n - by, .., ..])
        .assign(&row.slice(s![by.., .., ..]));
    out
}

/// Writes logical rows into a copy of `physical` through `table` (unused pages keep their values).
fn repage(rows: &[Array3<f64>], table: &Array2<i64>, physical: &ArrayD<f64>) -> ArrayD<f64> {
    let mut out = physical.clone();
    let page = physical.shape()[1];
    for (r, pages) in table.outer_iter().enumerate() {
        for (i, &p) in pages.iter().enumerate() {
            out.slice_mut(s![p as usize, .., .., ..])
                .assign(&rows[r].slice(s![i * page..(i + 1) * page, .., ..]));
        }
    }
    out
}

fn batch_idx_equals_gathering(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let Some(idx) = base.ints("cache_batch_idx") else {
        return Ok(Verdict::NotApplicable);
    };
    let idx: Vec<usize> = idx.iter().map(|&i| i as usize).collect();
    let mut call = base.call.clone();
    call.unset("cache_batch_idx");
    match page_table(base) {
        Some(table) => {
            let gathered = table.select(Axis(0), &idx);
            put(
                &mut call,
                "page_table",
                Dtype::Int32,
                gathered.mapv(|p| p as f64).into_dyn(),
            );
            // The pages are shared: the caches are directly comparable.
            base.expect_same(&call, |_, cache| cache.clone())
        }
        None => {
            for name in ["k_cache", "v_cache"] {
                let t = base.tensor(name).ok_or("no cache")?;
                put(&mut call, name, t.dtype, t.data.select(Axis(0), &idx));
            }
            // Rows nobody uses keep the base's values; used rows come from the gathered call.
            base.expect_same(&call, |name, cache| {
                let base_cache = if name == "k_cache" {
                    &base.result.k_cache
                } else {
                    &base.result.v_cache
                };
                let mut out = base_cache.clone().unwrap_or_else(|| cache.clone());
                for (i, &row) in idx.iter().enumerate() {
                    out.index_axis_mut(Axis(0), row)
                        .assign(&cache.index_axis(Axis(0), i));
                }
                out
            })
        }
    }
}

fn batch_equals_sequences(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let b = batch_size(&base.call)?;
    if b < 2 {
        return Ok(Verdict::NotApplicable);
    }
    let varlen = base.tensor("cu_seqlens_q").is_some();
    let q = base.tensor("q").ok_or("no q")?;
    let sq = if varlen { 0 } else { q.shape()[1] };
    let cu_q = base.ints("cu_seqlens_q");
    let q_span = |i: usize| match &cu_q {
        Some(cu) => (cu[i] as usize, cu[i + 1] as usize),
        None => (i * sq, (i + 1) * sq),
    };
    let new_lens = new_token_counts(base, b);
    let new_start: Vec<usize> = new_lens
        .iter()
        .scan(0, |acc, &n| {
            let start = *acc;
            *acc += n;
            Some(start)
        })
        .collect();
    let table = page_table(base);
    let kv_row: Vec<usize> = base.ints("cache_batch_idx").map_or_else(
        || (0..b).collect(),
        |v| v.iter().map(|&x| x as usize).collect(),
    );
    let mut k_after = base.tensor("k_cache").ok_or("no k_cache")?.data.clone();
    let mut v_after = base.tensor("v_cache").ok_or("no v_cache")?.data.clone();
    let mut outs = Vec::with_capacity(b);
    let mut lses = Vec::with_capacity(b);
    for i in 0..b {
        let mut call = base.call.clone();
        call.unset("cache_batch_idx");
        let (q0, q1) = q_span(i);
        for name in ["q", "qv"] {
            if let Some(t) = base.tensor(name) {
                let rows = token_rows(&t.data).slice(s![q0..q1, .., ..]).to_owned();
                let data = if varlen {
                    rows.into_dyn()
                } else {
                    rows.insert_axis(Axis(0)).into_dyn()
                };
                put(&mut call, name, t.dtype, data);
            }
        }
        if varlen {
            put_ints(&mut call, "cu_seqlens_q", &[2], vec![0, (q1 - q0) as i64]);
        }
        for name in ["k", "v"] {
            if let Some(t) = base.tensor(name) {
                let rows = token_rows(&t.data)
                    .slice(s![new_start[i]..new_start[i] + new_lens[i], .., ..])
                    .to_owned();
                let data = if base.tensor("cu_seqlens_k_new").is_some() {
                    rows.into_dyn()
                } else {
                    rows.insert_axis(Axis(0)).into_dyn()
                };
                put(&mut call, name, t.dtype, data);
            }
        }
        if base.tensor("cu_seqlens_k_new").is_some() && base.tensor("k").is_some() {
            put_ints(
                &mut call,
                "cu_seqlens_k_new",
                &[2],
                vec![0, new_lens[i] as i64],
            );
        }
        for name in ["cache_seqlens", "cache_leftpad", "rotary_seqlens"] {
            if let Some(v) = base.ints(name) {
                put_ints(&mut call, name, &[1], vec![v[i]]);
            }
        }
        for name in ["q_descale", "k_descale", "v_descale"] {
            if let Some(t) = base.tensor(name) {
                let row = t.data.slice(s![i..i + 1, ..]).to_owned().into_dyn();
                put(&mut call, name, t.dtype, row);
            }
        }
        match &table {
            Some(table) => {
                let row = table.slice(s![kv_row[i]..kv_row[i] + 1, ..]).to_owned();
                put(
                    &mut call,
                    "page_table",
                    Dtype::Int32,
                    row.mapv(|p| p as f64).into_dyn(),
                );
                // Caches shared with the other sequences: start from the result so far.
                for (name, after) in [("k_cache", &k_after), ("v_cache", &v_after)] {
                    let dtype = base.tensor(name).ok_or("no cache")?.dtype;
                    put(&mut call, name, dtype, after.clone());
                }
            }
            None => {
                for (name, after) in [("k_cache", &k_after), ("v_cache", &v_after)] {
                    let dtype = base.tensor(name).ok_or("no cache")?.dtype;
                    let row = after
                        .slice(s![kv_row[i]..kv_row[i] + 1, .., .., ..])
                        .to_owned();
                    put(&mut call, name, dtype, row.into_dyn());
                }
            }
        }
        let (_, result) = evaluate(&call, base.stack)?;
        for (after, cache) in [
            (&mut k_after, &result.k_cache),
            (&mut v_after, &result.v_cache),
        ] {
            if let Some(cache) = cache {
                match &table {
                    Some(_) => *after = cache.clone(),
                    None => after
                        .index_axis_mut(Axis(0), kv_row[i])
                        .assign(&cache.index_axis(Axis(0), 0)),
                }
            }
        }
        outs.push(token_rows(&result.out).to_owned());
        lses.push(result.lse);
    }
    let out_rows: Vec<_> = outs.iter().map(|o| o.view()).collect();
    let out = ndarray::concatenate(Axis(0), &out_rows).map_err(|e| e.to_string())?;
    let out = out
        .into_shape_with_order(IxDyn(base.result.out.shape()))
        .map_err(|e| e.to_string())?;
    // lse: varlen (h, total_q) concatenates columns; fixed (1, h, sq) or MLA (1, sq, h) rows.
    let lse_axis = if varlen { 1 } else { 0 };
    let lse_views: Vec<_> = lses.iter().map(|l| l.view()).collect();
    let lse = ndarray::concatenate(Axis(lse_axis), &lse_views).map_err(|e| e.to_string())?;
    let combined = RefOutput {
        out,
        lse,
        k_cache: base.result.k_cache.as_ref().map(|_| k_after),
        v_cache: base.result.v_cache.as_ref().map(|_| v_after),
        ..base.result.clone()
    };
    Ok(match same(&base.result, &combined) {
        Ok(()) => Verdict::Held,
        Err(e) => Verdict::Violated(format!("{e} (sequences evaluated one by one)")),
    })
}

/// A 3-D `(rows, heads, dim)` view of a token tensor given 3-D or as `(b, s, heads, dim)`.
fn token_rows(a: &ArrayD<f64>) -> ndarray::ArrayView3<'_, f64> {
    let shape = a.shape();
    let rows = shape[..shape.len() - 2].iter().product();
    a.view()
        .into_shape_with_order((rows, shape[shape.len() - 2], shape[shape.len() - 1]))
        .expect("standard layout token tensor")
}

fn append_equals_concatenated(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let (Some(k_after), Some(v_after)) = (&base.result.k_cache, &base.result.v_cache) else {
        return Ok(Verdict::NotApplicable);
    };
    // Rotary also turns the queries, which an append-free call cannot express.
    if base.tensor("rotary_cos").is_some() {
        return Ok(Verdict::NotApplicable);
    }
    let seqused = base
        .ints("cache_seqlens")
        .ok_or("append without cache_seqlens")?;
    let b = seqused.len();
    let new_lens = new_token_counts(base, b);
    let mut call = base.call.clone();
    for name in [
        "k",
        "v",
        "cu_seqlens_k_new",
        "rotary_cos",
        "rotary_sin",
        "rotary_seqlens",
    ] {
        call.unset(name);
    }
    let dtype = base.tensor("k_cache").ok_or("no k_cache")?.dtype;
    put(&mut call, "k_cache", dtype, k_after.clone());
    put(&mut call, "v_cache", dtype, v_after.clone());
    let total: Vec<i64> = seqused
        .iter()
        .zip(&new_lens)
        .map(|(&s, &n)| s + n as i64)
        .collect();
    put_ints(&mut call, "cache_seqlens", &[b], total);
    let (_, other) = evaluate(&call, base.stack)?;
    let check = close("out", &base.result.out, &other.out)
        .and_then(|()| close("lse", &base.result.lse, &other.lse));
    Ok(match check {
        Ok(()) => Verdict::Held,
        Err(e) => Verdict::Violated(format!("{e} (attending over the appended cache)")),
    })
}

fn scheduling_knobs_do_not_matter(base: &Base, rng: &mut ChaCha8Rng) -> Result<Verdict, String> {
    let mut call = base.call.clone();
    call.set("num_splits", PyValue::Int(rng.gen_range(0..=8)));
    call.set(
        "pack_gqa",
        [PyValue::None, PyValue::Bool(true), PyValue::Bool(false)]
            .choose(rng)
            .cloned()
            .unwrap_or(PyValue::None),
    );
    let metadata: Vec<i64> = (0..16).map(|_| rng.gen_range(0..64)).collect();
    put_ints(&mut call, "scheduler_metadata", &[16], metadata);
    base.expect_same(&call, |_, cache| cache.clone())
}

fn huge_softcap_is_none(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    // Compare "no softcap" (the base without one) against a softcap of 1e12, whose effect
    // c·tanh(s/c) − s = O(s³/c²) is far below f64 resolution.
    if base.is_mla() {
        return Ok(Verdict::NotApplicable);
    }
    let mut plain = base.call.clone();
    plain.unset("softcap");
    let plain = Base::new(&plain, base.stack)?;
    let mut capped = plain.call.clone();
    capped.set("softcap", PyValue::Float(1e12));
    plain.expect_same(&capped, |_, cache| cache.clone())
}

fn minus_inf_sink_is_none(base: &Base, _: &mut ChaCha8Rng) -> Result<Verdict, String> {
    if !base.stack.has_sinks() || base.is_mla() {
        return Ok(Verdict::NotApplicable);
    }
    let q = base.tensor("q").ok_or("no q")?;
    let h = q.shape()[q.shape().len() - 2];
    let mut plain = base.call.clone();
    plain.unset("sinks");
    let plain = Base::new(&plain, base.stack)?;
    let mut sunk = plain.call.clone();
    put(
        &mut sunk,
        "sinks",
        Dtype::Bfloat16,
        ArrayD::from_elem(IxDyn(&[h]), f64::NEG_INFINITY),
    );
    plain.expect_same(&sunk, |_, cache| cache.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::{Options, random_call};
    use rand::SeedableRng;

    #[test]
    fn every_invariant_holds_and_applies_on_random_calls() {
        for stack in Stack::ALL {
            let options = Options::small(stack);
            let mut rng = ChaCha8Rng::seed_from_u64(11 + stack as u64);
            let mut applied = [0usize; ALL.len()];
            for _ in 0..40 {
                let call = random_call(&mut rng, &options);
                for (i, invariant) in ALL.iter().enumerate() {
                    match invariant.check(&call, stack, &mut rng) {
                        Verdict::Held => applied[i] += 1,
                        Verdict::NotApplicable => {}
                        Verdict::Violated(e) => panic!(
                            "{} on {}: {e}\nbase: {}",
                            invariant.name,
                            stack.name(),
                            crate::spec::call_to_json(&call)
                        ),
                    }
                }
            }
            for (i, invariant) in ALL.iter().enumerate() {
                let expected = !(stack == Stack::Fa3 && invariant.name == "sink-minus-inf");
                assert_eq!(
                    applied[i] > 0,
                    expected,
                    "{} on {}",
                    invariant.name,
                    stack.name()
                );
            }
        }
    }
}
