//! Hand-computed expectations for every feature of the reference, on tiny calls.
//!
//! Values are chosen so that each expected number is worked out here from the definition
//! (softmax of a few scores, a mean of a few values), never produced by the reference itself.

use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg, TensorValues};
use fa3conform::reference::{
    ContextParallel, Precision, RefError, RefOutput, Stack, run, run_on_rank,
};
use fa3conform::tensor::materialise;

const BF16: Dtype = Dtype::Bfloat16;
const E: f64 = std::f64::consts::E;

fn floats(dtype: Dtype, shape: &[usize], values: &[f64]) -> PyValue {
    PyValue::Tensor(TensorArg {
        values: Some(TensorValues::Float(values.to_vec())),
        ..TensorArg::new(dtype, shape)
    })
}

fn ints(shape: &[usize], values: &[i64]) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, shape, values.to_vec()))
}

/// A call with `q` (b, sq, h, d) and a cache (rows, cap, hk, d) / (rows, cap, hk, dv).
fn call(q: PyValue, k_cache: PyValue, v_cache: PyValue) -> KvCacheCall {
    let mut call = KvCacheCall::default();
    call.set("q", q)
        .set("k_cache", k_cache)
        .set("v_cache", v_cache)
        .set("softmax_scale", PyValue::Float(1.0));
    call
}

fn eval(call: &KvCacheCall, stack: Stack) -> Result<RefOutput, RefError> {
    let tensors = materialise(call, 1 << 26).expect("materialises");
    run(call, &tensors, stack, Precision::Exact)
}

fn exact(call: &KvCacheCall) -> RefOutput {
    eval(call, Stack::Fa3).expect("evaluates")
}

fn assert_close(actual: impl IntoIterator<Item = f64>, expected: &[f64]) {
    let actual: Vec<f64> = actual.into_iter().collect();
    assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
    for (a, e) in actual.iter().zip(expected) {
        let same_inf = a.is_infinite() && a == e;
        assert!(
            same_inf || (a - e).abs() <= 1e-12,
            "{actual:?} vs {expected:?}"
        );
    }
}

/// Three keys with values 1, 2, 6 (d = dv = 1) and zero queries: every score is 0, so each row's
/// output is the mean of the values it attends to and its lse is ln(count).
fn uniform_rows(sq: usize) -> KvCacheCall {
    call(
        floats(BF16, &[1, sq, 1, 1], &vec![0.0; sq]),
        floats(BF16, &[1, 3, 1, 1], &[0.5, 1.0, -1.0]),
        floats(BF16, &[1, 3, 1, 1], &[1.0, 2.0, 6.0]),
    )
}

#[test]
fn two_keys_softmax() {
    // q = (1, 0), keys (0, 0) and (1, 0): scores 0 and 1.
    let c = call(
        floats(BF16, &[1, 1, 1, 2], &[1.0, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[0.0, 0.0, 1.0, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[1.0, 0.0, 0.0, 4.0]),
    );
    let r = exact(&c);
    let p1 = E / (1.0 + E);
    assert_eq!(r.out.shape(), &[1, 1, 1, 2]);
    assert_close(r.out.iter().copied(), &[1.0 - p1, 4.0 * p1]);
    assert_eq!(r.lse.shape(), &[1, 1, 1]);
    assert_close(r.lse.iter().copied(), &[(1.0 + E).ln()]);
    assert_eq!(r.k_cache, None);
}

#[test]
fn causal_is_bottom_right_aligned() {
    let mut c = uniform_rows(2);
    c.set("causal", PyValue::Bool(true));
    // sk − sq = 1: row 0 sees keys 0..=1, row 1 all three.
    let r = exact(&c);
    assert_close(r.out.iter().copied(), &[1.5, 3.0]);
    assert_close(r.lse.iter().copied(), &[2f64.ln(), 3f64.ln()]);
}

#[test]
fn fully_masked_rows_give_zero_and_minus_inf() {
    // Four queries, three keys, causal: row 0 (t = −1) sees nothing.
    let mut c = uniform_rows(4);
    c.set("causal", PyValue::Bool(true));
    let r = exact(&c);
    assert_close(r.out.iter().copied(), &[0.0, 1.0, 1.5, 3.0]);
    assert_close(
        r.lse.iter().copied(),
        &[f64::NEG_INFINITY, 0.0, 2f64.ln(), 3f64.ln()],
    );
}

#[test]
fn local_window() {
    let mut c = uniform_rows(2);
    c.set(
        "window_size",
        PyValue::Tuple(vec![PyValue::Int(1), PyValue::Int(0)]),
    );
    // Row 0 (t = 1) sees keys 0..=1, row 1 (t = 2) keys 1..=2.
    assert_close(exact(&c).out.iter().copied(), &[1.5, 4.0]);
}

/// mate's `_resolve_mask` reads a `None` side as no window; the CUDA stacks' int conversion
/// refuses it, so the reference gives it no meaning there.
#[test]
fn none_window_sides_on_musa() {
    let mut c = uniform_rows(2);
    let pair = |l: PyValue, r: PyValue| PyValue::Tuple(vec![l, r]);
    c.set("window_size", pair(PyValue::None, PyValue::None));
    let musa = |c: &KvCacheCall| eval(c, Stack::Musa).expect("evaluates").out;
    // No window: every row (t = 1, 2) attends all three keys.
    assert_close(musa(&c).iter().copied(), &[3.0, 3.0]);
    // A left window of 1 with no right window: row t = 1 sees keys 0..=2, t = 2 keys 1..=2.
    c.set("window_size", pair(PyValue::Int(1), PyValue::None));
    assert_close(musa(&c).iter().copied(), &[3.0, 4.0]);
    c.set("window_size", pair(PyValue::None, PyValue::None));
    assert!(matches!(
        eval(&c, Stack::Fa3),
        Err(RefError::Unevaluable(_))
    ));
}

#[test]
fn attention_chunk() {
    // One query at t = 2, chunk 2: keys [2, 4) ∩ [0, 3) = {2}.
    let mut c = uniform_rows(1);
    c.set("attention_chunk", PyValue::Int(2));
    assert_close(exact(&c).out.iter().copied(), &[6.0]);
    // Chunk 3 covers all keys.
    c.set("attention_chunk", PyValue::Int(3));
    assert_close(exact(&c).out.iter().copied(), &[3.0]);
}

#[test]
fn softcap_per_stack() {
    // Scores 0 and 2 (scale 1); softcap 1 turns 2 into tanh(2).
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[2.0]),
        floats(BF16, &[1, 2, 1, 1], &[0.0, 1.0]),
        floats(BF16, &[1, 2, 1, 1], &[0.0, 1.0]),
    );
    c.set("softcap", PyValue::Float(1.0));
    let capped = 2f64.tanh().exp() / (1.0 + 2f64.tanh().exp());
    let plain = 2f64.exp() / (1.0 + 2f64.exp());
    for stack in Stack::ALL {
        assert_close(eval(&c, stack).unwrap().out.iter().copied(), &[capped]);
    }
    // A negative softcap enables capping only on MUSA (c·tanh(s/c) is even in c).
    c.set("softcap", PyValue::Float(-1.0));
    assert_close(
        eval(&c, Stack::Musa).unwrap().out.iter().copied(),
        &[capped],
    );
    assert_close(eval(&c, Stack::Fa3).unwrap().out.iter().copied(), &[plain]);
    assert_close(
        eval(&c, Stack::SglKernel).unwrap().out.iter().copied(),
        &[plain],
    );
}

#[test]
fn learnable_sinks_join_the_denominator() {
    // Two zero scores and a sink of 0: each key gets 1/3, lse = ln 3. FA3 has no sinks.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[0.0]),
        floats(BF16, &[1, 2, 1, 1], &[1.0, 1.0]),
        floats(BF16, &[1, 2, 1, 1], &[3.0, 6.0]),
    );
    c.set("sinks", floats(BF16, &[1], &[0.0]));
    for stack in [Stack::Musa, Stack::SglKernel] {
        let r = eval(&c, stack).unwrap();
        assert_close(r.out.iter().copied(), &[3.0]);
        assert_close(r.lse.iter().copied(), &[3f64.ln()]);
    }
    let r = eval(&c, Stack::Fa3).unwrap();
    assert_close(r.out.iter().copied(), &[4.5]);
    // The sink is not multiplied by softmax_scale: with scale 2 the scores stay 0 and so does it.
    c.set("softmax_scale", PyValue::Float(2.0));
    c.set("sinks", floats(BF16, &[1], &[2.0]));
    let r = eval(&c, Stack::SglKernel).unwrap();
    let p = 1.0 / (2.0 + 2f64.exp());
    assert_close(r.out.iter().copied(), &[9.0 * p]);
    assert_close(r.lse.iter().copied(), &[(2.0 + 2f64.exp()).ln()]);
}

#[test]
fn gqa_heads_share_their_kv_head() {
    // h = 2 query heads on 1 KV head; head 1 has q = 1 (scores 0 and 1), head 0 q = 0.
    let c = call(
        floats(BF16, &[1, 1, 2, 1], &[0.0, 1.0]),
        floats(BF16, &[1, 2, 1, 1], &[0.0, 1.0]),
        floats(BF16, &[1, 2, 1, 1], &[2.0, 4.0]),
    );
    let p1 = E / (1.0 + E);
    assert_close(exact(&c).out.iter().copied(), &[3.0, 2.0 + 2.0 * p1]);
}

#[test]
fn qv_adds_a_product_with_the_values_and_the_default_scale() {
    // d = dv = 2, no softmax_scale: scale = (2 + 2)^-0.5 = 1/2. q·k = (0, 0), qv·v = (0, 2).
    let mut c = call(
        floats(BF16, &[1, 1, 1, 2], &[0.0, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[1.0, 1.0, 1.0, 1.0]),
        floats(BF16, &[1, 2, 1, 2], &[1.0, 0.0, 0.0, 1.0]),
    );
    c.unset("softmax_scale");
    c.set("qv", floats(BF16, &[1, 1, 1, 2], &[0.0, 2.0]));
    let p1 = E / (1.0 + E);
    let r = exact(&c);
    assert_close(r.out.iter().copied(), &[1.0 - p1, p1]);
    assert_close(r.lse.iter().copied(), &[(1.0 + E).ln()]);
}

#[test]
fn default_scale_without_qv() {
    // d = 4: scale 1/2; q·k = 2 for key 1.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 4], &[2.0, 0.0, 0.0, 0.0]),
        floats(
            BF16,
            &[1, 2, 1, 4],
            &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        ),
        floats(BF16, &[1, 2, 1, 1], &[0.0, 1.0]),
    );
    c.unset("softmax_scale");
    assert_close(exact(&c).out.iter().copied(), &[E / (1.0 + E)]);
}

/// One batch reading three keys (values 1, 2, 6 at logical positions 0..3) from a paged cache of
/// page size 1 whose pages are stored in the order 2, 0, 1 (page p holds position page_order[p]).
#[test]
fn paged_cache_follows_the_page_table() {
    let mut c = call(
        floats(BF16, &[1, 2, 1, 1], &[0.0, 0.0]),
        floats(BF16, &[3, 1, 1, 1], &[0.0; 3]),
        // Page 0 holds position 1 (value 2), page 1 position 2 (value 6), page 2 position 0.
        floats(BF16, &[3, 1, 1, 1], &[2.0, 6.0, 1.0]),
    );
    c.set("page_table", ints(&[1, 3], &[2, 0, 1]))
        .set("cache_seqlens", ints(&[1], &[3]))
        .set("causal", PyValue::Bool(true));
    assert_close(exact(&c).out.iter().copied(), &[1.5, 3.0]);
    // Page size 3 (not a power of two), one page, cache_seqlens 2.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[0.0]),
        floats(BF16, &[2, 3, 1, 1], &[0.0; 6]),
        floats(BF16, &[2, 3, 1, 1], &[9.0, 9.0, 9.0, 1.0, 2.0, 6.0]),
    );
    c.set("page_table", ints(&[1, 1], &[1]))
        .set("cache_seqlens", ints(&[1], &[2]));
    assert_close(exact(&c).out.iter().copied(), &[1.5]);
}

#[test]
fn leftpad_and_batch_idx_select_the_keys() {
    // Cache rows: row 0 = (9, 9, 9, 9), row 1 = (1, 2, 6, 9). Batch 0 reads row 1 from position 1
    // (leftpad 1) to cache_seqlens 3: values 2 and 6.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[0.0]),
        floats(BF16, &[2, 4, 1, 1], &[0.0; 8]),
        floats(
            BF16,
            &[2, 4, 1, 1],
            &[9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 6.0, 9.0],
        ),
    );
    c.set("cache_batch_idx", ints(&[1], &[1]))
        .set("cache_leftpad", ints(&[1], &[1]))
        .set("cache_seqlens", ints(&[1], &[3]));
    assert_close(exact(&c).out.iter().copied(), &[4.0]);
}

#[test]
fn append_writes_the_cache_and_is_attended() {
    // Cache of capacity 4 holding (1, 2) in positions 0..2; append values 6 and 7 at 2..4.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[0.0]),
        floats(BF16, &[1, 4, 1, 1], &[1.0, 1.0, 0.0, 0.0]),
        floats(BF16, &[1, 4, 1, 1], &[1.0, 2.0, 0.0, 5.0]),
    );
    c.set("cache_seqlens", ints(&[1], &[1]))
        .set("k", floats(BF16, &[1, 2, 1, 1], &[3.0, 4.0]))
        .set("v", floats(BF16, &[1, 2, 1, 1], &[6.0, 7.0]));
    let r = exact(&c);
    // Keys now: position 0 (old), 1..3 (new); position 3 untouched.
    assert_close(r.k_cache.unwrap().iter().copied(), &[1.0, 3.0, 4.0, 0.0]);
    assert_close(r.v_cache.unwrap().iter().copied(), &[1.0, 6.0, 7.0, 5.0]);
    // Zero query: uniform over the three keys 1, 6, 7.
    assert_close(r.out.iter().copied(), &[14.0 / 3.0]);
}

#[test]
fn varlen_append_and_queries() {
    // Two batches, q packed as (3, 1, 1): batch 0 has 1 query, batch 1 has 2 (causal).
    // Batch 0 appends one token, batch 1 two tokens (cu_seqlens_k_new = 0, 1, 3).
    let mut c = call(
        floats(BF16, &[3, 1, 1], &[0.0, 0.0, 0.0]),
        floats(BF16, &[2, 3, 1, 1], &[0.0; 6]),
        floats(BF16, &[2, 3, 1, 1], &[1.0, 0.0, 0.0, 2.0, 0.0, 0.0]),
    );
    c.set("cu_seqlens_q", ints(&[3], &[0, 1, 3]))
        .set("max_seqlen_q", PyValue::Int(2))
        .set("cache_seqlens", ints(&[2], &[1, 1]))
        .set("k", floats(BF16, &[3, 1, 1], &[0.0, 0.0, 0.0]))
        .set("v", floats(BF16, &[3, 1, 1], &[3.0, 4.0, 8.0]))
        .set("cu_seqlens_k_new", ints(&[3], &[0, 1, 3]))
        .set("causal", PyValue::Bool(true));
    let r = exact(&c);
    assert_eq!(r.out.shape(), &[3, 1, 1]);
    assert_eq!(r.lse.shape(), &[1, 3]);
    // Batch 0 keys (1, 3): mean 2. Batch 1 keys (2, 4, 8), o = 1: row 0 sees 2, 4; row 1 all.
    assert_close(r.out.iter().copied(), &[2.0, 3.0, 14.0 / 3.0]);
    assert_close(r.lse.iter().copied(), &[2f64.ln(), 2f64.ln(), 3f64.ln()]);
    assert_close(
        r.v_cache.unwrap().iter().copied(),
        &[1.0, 3.0, 0.0, 2.0, 4.0, 8.0],
    );
}

/// cos/sin of 0 and 90 degrees per position: position 0 is the identity, position 1 a quarter turn.
fn quarter_turn_tables(half: usize) -> (PyValue, PyValue) {
    let cos: Vec<f64> = [1.0, 0.0].iter().flat_map(|&c| vec![c; half]).collect();
    let sin: Vec<f64> = [0.0, 1.0].iter().flat_map(|&s| vec![s; half]).collect();
    (
        floats(BF16, &[2, half], &cos),
        floats(BF16, &[2, half], &sin),
    )
}

fn rotary_append(interleaved: bool, half: usize) -> KvCacheCall {
    let (cos, sin) = quarter_turn_tables(half);
    let mut c = call(
        floats(BF16, &[1, 1, 1, 4], &[0.0; 4]),
        floats(BF16, &[1, 2, 1, 4], &[0.0; 8]),
        floats(BF16, &[1, 2, 1, 1], &[0.0; 2]),
    );
    // cache_seqlens 1: the new token lands at position 1 and is rotated by row 1 (a quarter turn).
    c.set("cache_seqlens", ints(&[1], &[1]))
        .set("k", floats(BF16, &[1, 1, 1, 4], &[1.0, 2.0, 3.0, 4.0]))
        .set("v", floats(BF16, &[1, 1, 1, 1], &[5.0]))
        .set("rotary_cos", cos)
        .set("rotary_sin", sin)
        .set("rotary_interleaved", PyValue::Bool(interleaved));
    c
}

#[test]
fn rotary_styles_rotate_the_stored_keys() {
    let key = |c: &KvCacheCall| {
        let r = exact(c);
        assert!(r.rotated_keys);
        r.k_cache
            .unwrap()
            .iter()
            .skip(4)
            .copied()
            .collect::<Vec<_>>()
    };
    // Interleaved pairs (0,1), (2,3): (x0, x1) → (−x1, x0).
    assert_eq!(key(&rotary_append(true, 2)), [-2.0, 1.0, -4.0, 3.0]);
    // NeoX pairs (0,2), (1,3).
    assert_eq!(key(&rotary_append(false, 2)), [-3.0, -4.0, 1.0, 2.0]);
    // rotary_dim 2 < d = 4: only (0, 1) turns.
    assert_eq!(key(&rotary_append(false, 1)), [-2.0, 1.0, 3.0, 4.0]);
}

#[test]
fn rotary_query_positions_advance_only_for_causal_or_local() {
    // Two queries q = (1, 0), rotary_start 0 (rotary_seqlens), keys at positions 0 and 1:
    // key 0 = (1, 0) cached, key 1 = new (0, 1) rotated by position 0 (identity).
    // Non-causal: both query rows use position 0 → q = (1, 0): scores 1 and 0.
    // Causal: row 1 uses position 1 → q = (0, 1): scores 0 and 1.
    let (cos, sin) = quarter_turn_tables(1);
    let mut c = call(
        floats(BF16, &[1, 2, 1, 2], &[1.0, 0.0, 1.0, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[1.0, 0.0, 0.0, 0.0]),
        floats(BF16, &[1, 2, 1, 1], &[0.0, 0.0]),
    );
    c.set("cache_seqlens", ints(&[1], &[1]))
        .set("k", floats(BF16, &[1, 1, 1, 2], &[0.0, 1.0]))
        .set("v", floats(BF16, &[1, 1, 1, 1], &[1.0]))
        .set("rotary_cos", cos)
        .set("rotary_sin", sin)
        .set("rotary_seqlens", ints(&[1], &[0]));
    let p_hi = E / (1.0 + E);
    // Output = probability of key 1 (values 0, 1).
    assert_close(exact(&c).out.iter().copied(), &[1.0 - p_hi, 1.0 - p_hi]);
    c.set("causal", PyValue::Bool(true));
    // Row 0 (o = 0) sees key 0 only; row 1 sees both with q rotated to (0, 1).
    assert_close(exact(&c).out.iter().copied(), &[0.0, p_hi]);
}

#[test]
fn fp8_descales() {
    let f8 = Dtype::Float8E4m3fn;
    let mut c = call(
        floats(f8, &[1, 1, 1, 1], &[1.0]),
        floats(f8, &[1, 2, 1, 1], &[0.0, 0.5]),
        floats(f8, &[1, 2, 1, 1], &[0.0, 4.0]),
    );
    // Scores (0, 0.5) · 2 · 1 = (0, 1); output × 0.5.
    c.set("q_descale", floats(Dtype::Float32, &[1, 1], &[2.0]))
        .set("k_descale", floats(Dtype::Float32, &[1, 1], &[1.0]))
        .set("v_descale", floats(Dtype::Float32, &[1, 1], &[0.5]));
    let p1 = E / (1.0 + E);
    assert_close(exact(&c).out.iter().copied(), &[2.0 * p1]);
}

#[test]
fn empty_kv_lse_per_stack() {
    let c = call(
        floats(BF16, &[1, 1, 1, 1], &[1.0]),
        floats(BF16, &[1, 0, 1, 1], &[]),
        floats(BF16, &[1, 0, 1, 1], &[]),
    );
    for (stack, lse) in [
        (Stack::Fa3, f64::INFINITY),
        (Stack::SglKernel, f64::INFINITY),
        (Stack::Musa, f64::NEG_INFINITY),
    ] {
        let r = eval(&c, stack).unwrap();
        assert_close(r.out.iter().copied(), &[0.0]);
        assert_close(r.lse.iter().copied(), &[lse]);
    }
}

#[test]
fn int_cache_seqlens_expands_per_stack() {
    // Paged cache with 3 pages and batch 1: mate and sgl-kernel expand an int to 3 entries.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 1], &[0.0]),
        floats(BF16, &[3, 1, 1, 1], &[0.0; 3]),
        floats(BF16, &[3, 1, 1, 1], &[1.0, 2.0, 6.0]),
    );
    c.set("page_table", ints(&[1, 3], &[0, 1, 2]))
        .set("cache_seqlens", PyValue::Int(2));
    assert_close(exact(&c).out.iter().copied(), &[1.5]);
    for stack in [Stack::Musa, Stack::SglKernel] {
        assert!(matches!(eval(&c, stack), Err(RefError::Unevaluable(_))));
    }
}

#[test]
fn musa_mla_branch_layout_and_ignored_arguments() {
    // q width 64, qv width 512: MUSA's MLA kernel. lse is (b, s, h); softcap and window are ignored.
    let (h, sq) = (2, 1);
    let mut q = vec![0.0; sq * h * 64];
    q[64] = 1.0; // head 1 has q·k = 1 for key 1
    let mut kpe = vec![0.0; 2 * 64];
    kpe[64] = 1.0;
    let mut ckv = vec![0.0; 2 * 512];
    ckv[0] = 2.0; // key 0 value (2, 0, ...)
    ckv[512] = 4.0; // key 1 value (4, 0, ...)
    let mut c = call(
        floats(BF16, &[1, sq, h, 64], &q),
        floats(BF16, &[1, 2, 1, 64], &kpe),
        floats(BF16, &[1, 2, 1, 512], &ckv),
    );
    c.set(
        "qv",
        floats(BF16, &[1, sq, h, 512], &vec![0.0; sq * h * 512]),
    )
    .set("page_table", ints(&[1, 1], &[0]))
    .set("cache_seqlens", ints(&[1], &[2]))
    .set("softcap", PyValue::Float(0.5))
    .set(
        "window_size",
        PyValue::Tuple(vec![PyValue::Int(0), PyValue::Int(0)]),
    );
    let r = eval(&c, Stack::Musa).unwrap();
    assert_eq!(r.out.shape(), &[1, 1, 2, 512]);
    assert_eq!(r.lse.shape(), &[1, 1, 2]);
    let p1 = E / (1.0 + E);
    assert_close(
        [r.out[[0, 0, 0, 0]], r.out[[0, 0, 1, 0]]],
        &[3.0, 2.0 + 2.0 * p1],
    );
    assert_close(r.lse.iter().copied(), &[2f64.ln(), (1.0 + E).ln()]);
    // FA3 semantics for the same call: (b, h, s) lse, window (0, 0) leaves only the last key.
    let r = eval(&c, Stack::Fa3).unwrap();
    assert_eq!(r.lse.shape(), &[1, 2, 1]);
    assert_close([r.out[[0, 0, 0, 0]], r.out[[0, 0, 1, 0]]], &[4.0, 4.0]);
}

#[test]
fn low_precision_rounds_the_scaled_keys_and_scores() {
    // One key: lse = the score itself. Exact: 1/3; low precision: bf16(1 · bf16(1/3)) = 0.333984375.
    let mut c = uniform_rows(1);
    c.set("q", floats(BF16, &[1, 1, 1, 1], &[1.0]))
        .set("k_cache", floats(BF16, &[1, 1, 1, 1], &[1.0]))
        .set("v_cache", floats(BF16, &[1, 1, 1, 1], &[3.0]))
        .set("softmax_scale", PyValue::Float(1.0 / 3.0));
    let tensors = materialise(&c, 1 << 20).unwrap();
    let exact = run(&c, &tensors, Stack::Fa3, Precision::Exact).unwrap();
    let low = run(&c, &tensors, Stack::Fa3, Precision::LowPrecision).unwrap();
    assert_close(exact.lse.iter().copied(), &[1.0 / 3.0]);
    assert_close(low.lse.iter().copied(), &[0.333984375]);
    assert_close(low.out.iter().copied(), &[3.0]);
}

#[test]
fn inconsistent_calls_are_errors_not_panics() {
    // cache_seqlens beyond the capacity; a page index out of range; leftpad beyond seqlens.
    let base = || {
        call(
            floats(BF16, &[1, 1, 1, 1], &[0.0]),
            floats(BF16, &[2, 2, 1, 1], &[0.0; 4]),
            floats(BF16, &[2, 2, 1, 1], &[0.0; 4]),
        )
    };
    let mut c = base();
    c.set("cache_seqlens", ints(&[1], &[3]));
    assert!(matches!(
        eval(&c, Stack::Fa3),
        Err(RefError::Unevaluable(_))
    ));
    let mut c = base();
    c.set("page_table", ints(&[1, 1], &[5]));
    assert!(matches!(
        eval(&c, Stack::Fa3),
        Err(RefError::Unevaluable(_))
    ));
    let mut c = base();
    c.set("cache_seqlens", ints(&[1], &[1]))
        .set("cache_leftpad", ints(&[1], &[2]));
    assert!(matches!(
        eval(&c, Stack::Fa3),
        Err(RefError::Unevaluable(_))
    ));
    let mut c = base();
    c.set("q", floats(BF16, &[1, 1, 3, 1], &[0.0; 3]));
    c.set("k_cache", floats(BF16, &[2, 2, 2, 1], &[0.0; 8]));
    assert!(eval(&c, Stack::Fa3).is_err());
}

#[test]
fn low_precision_fp8_rounds_probabilities_through_fp8() {
    // Three equal scores: P = 1/3 → bf16 0.333984375 → e4m3 0.34375 (neighbours 0.3125, 0.34375).
    // Output 0.34375 · (1 + 2 + 4) = 2.40625, exactly representable in bf16; exact: 7/3.
    let f8 = Dtype::Float8E4m3fn;
    let c = call(
        floats(f8, &[1, 1, 1, 1], &[0.0]),
        floats(f8, &[1, 3, 1, 1], &[1.0, 1.0, 1.0]),
        floats(f8, &[1, 3, 1, 1], &[1.0, 2.0, 4.0]),
    );
    let tensors = materialise(&c, 1 << 20).unwrap();
    let low = run(&c, &tensors, Stack::Fa3, Precision::LowPrecision).unwrap();
    assert_close(low.out.iter().copied(), &[2.40625]);
    assert_close(exact(&c).out.iter().copied(), &[7.0 / 3.0]);
}

#[test]
fn rotated_keys_and_queries_are_rounded_to_bf16() {
    // Position 1 scales-and-turns by cos 0.75, sin 0.5. x = (1 + 2^-7, 0) becomes
    // (0.755859375, 0.50390625); bf16 keeps 8 significant bits, and 0.755859375 = 1.10000011b·2^-1
    // lies halfway between 0.75390625 and 0.7578125: ties to even → 0.7578125.
    let x = 1.0 + 2f64.powi(-7);
    let rotary = |c: &mut KvCacheCall| {
        c.set("rotary_cos", floats(BF16, &[2, 1], &[1.0, 0.75]))
            .set("rotary_sin", floats(BF16, &[2, 1], &[0.0, 0.5]));
    };
    // The new key lands at position 1 (cache_seqlens 1) and is stored rotated and rounded.
    let mut c = call(
        floats(BF16, &[1, 1, 1, 2], &[0.0, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[0.0; 4]),
        floats(BF16, &[1, 2, 1, 1], &[0.0; 2]),
    );
    c.set("cache_seqlens", ints(&[1], &[1]))
        .set("k", floats(BF16, &[1, 1, 1, 2], &[x, 0.0]))
        .set("v", floats(BF16, &[1, 1, 1, 1], &[1.0]));
    rotary(&mut c);
    let stored: Vec<f64> = exact(&c).k_cache.unwrap().iter().skip(2).copied().collect();
    assert_eq!(stored, [0.7578125, 0.50390625]);
    // Causal, two queries, one new key (1, 0) at position 0 (identity): row 0 sees nothing
    // (o = −1), row 1 is rotated at position 1 and its lse is its score q'·k = 0.7578125.
    let mut c = call(
        floats(BF16, &[1, 2, 1, 2], &[x, 0.0, x, 0.0]),
        floats(BF16, &[1, 2, 1, 2], &[0.0; 4]),
        floats(BF16, &[1, 2, 1, 1], &[0.0; 2]),
    );
    c.set("cache_seqlens", ints(&[1], &[0]))
        .set("k", floats(BF16, &[1, 1, 1, 2], &[1.0, 0.0]))
        .set("v", floats(BF16, &[1, 1, 1, 1], &[1.0]))
        .set("causal", PyValue::Bool(true));
    rotary(&mut c);
    assert_close(
        exact(&c).lse.iter().copied(),
        &[f64::NEG_INFINITY, 0.7578125],
    );
}

/// Context parallelism, worked by hand: five keys with values 1, 2, 6, 3, 5 at global positions
/// 0..5 over two ranks (rank 0 holds 0, 2, 4; rank 1 holds 1, 3), zero queries, two causal rows
/// at global positions 3 and 4. Each rank averages the values it may attend; combining the two
/// by their lse gives the average over the whole sequence.
#[test]
fn a_context_parallel_rank_attends_its_keys_at_their_global_positions() {
    let rank_call = |values: &[f64]| {
        let n = values.len();
        let mut c = call(
            floats(BF16, &[1, 2, 1, 1], &[0.0, 0.0]),
            floats(BF16, &[1, n, 1, 1], &vec![0.25; n]),
            floats(BF16, &[1, n, 1, 1], values),
        );
        c.set("cache_seqlens", ints(&[1], &[n as i64]))
            .set("causal", PyValue::Bool(true));
        c
    };
    let rank = |rank, values: &[f64]| {
        let c = rank_call(values);
        let tensors = materialise(&c, 1 << 20).expect("materialises");
        let cp = ContextParallel {
            world_size: 2,
            rank,
            tot_seqused_k: vec![5],
        };
        run_on_rank(&c, &tensors, &cp, Precision::Exact).expect("evaluates")
    };
    let (r0, r1) = (rank(0, &[1.0, 6.0, 5.0]), rank(1, &[2.0, 3.0]));
    // row 0 (global 3): rank 0 sees 1, 6; rank 1 sees 2, 3. Row 1 (global 4): 1, 6, 5 and 2, 3.
    assert_close(r0.out.iter().copied(), &[3.5, 4.0]);
    assert_close(r0.lse.iter().copied(), &[2f64.ln(), 3f64.ln()]);
    assert_close(r1.out.iter().copied(), &[2.5, 2.5]);
    assert_close(r1.lse.iter().copied(), &[2f64.ln(), 2f64.ln()]);
    // combined: (2·3.5 + 2·2.5) / 4 = 3 = mean(1, 2, 6, 3); (3·4 + 2·2.5) / 5 = 17/5
    let combined = |a: f64, la: f64, b: f64, lb: f64| {
        let l = (la.exp() + lb.exp()).ln();
        (a * (la - l).exp() + b * (lb - l).exp(), l)
    };
    let row0 = combined(3.5, 2f64.ln(), 2.5, 2f64.ln());
    let row1 = combined(4.0, 3f64.ln(), 2.5, 2f64.ln());
    assert_close(
        [row0.0, row0.1, row1.0, row1.1],
        &[3.0, 4f64.ln(), 3.4, 5f64.ln()],
    );
    // the whole sequence in one call agrees
    let whole = exact(&rank_call(&[1.0, 2.0, 6.0, 3.0, 5.0]));
    assert_close(whole.out.iter().copied(), &[3.0, 3.4]);
}

/// A sink on a context-parallel rank whose rows include one without keys: a causal prefill of
/// 1000 queries over 1000 keys split over two ranks (rank 1 holds global keys 1, 3, …, 999 as its
/// 500 local keys). Row 0 may attend global key 0 only, which rank 1 lacks. Its m-block has key
/// blocks by the global limit (mate's block_info.hpp L40-L56: tile_m + 1000 − 1000 − 1 local key
/// positions, rounded up over 2 ranks, > 0), so mate keeps the row's maximum at 0 and its lse is
/// the sink (by the local lengths, tile_m + 500 − 1000 < 0 for every tile, it would be −inf).
/// Row 1 (global 1) attends local key 0 only: one zero score beside the sink. The kernel path
/// agrees with the reference on every row.
#[test]
fn a_sink_gives_the_lse_of_a_context_parallel_rows_without_keys() {
    let (sq, local) = (1000, 500);
    let mut c = call(
        floats(BF16, &[1, sq, 1, 128], &vec![0.0; sq * 128]),
        floats(BF16, &[1, local, 1, 128], &vec![0.0; local * 128]),
        floats(BF16, &[1, local, 1, 128], &vec![1.0; local * 128]),
    );
    c.set("cache_seqlens", ints(&[1], &[local as i64]))
        .set("causal", PyValue::Bool(true))
        .set("sinks", floats(BF16, &[1], &[0.5]))
        .set("return_softmax_lse", PyValue::Bool(true));
    let cp = ContextParallel {
        world_size: 2,
        rank: 1,
        tot_seqused_k: vec![sq],
    };
    let tensors = materialise(&c, 1 << 26).expect("materialises");
    let rank = run_on_rank(&c, &tensors, &cp, Precision::Exact).expect("evaluates");
    let lse: Vec<f64> = rank.lse.iter().copied().take(2).collect();
    assert_close(lse, &[0.5, (1.0 + 0.5f64.exp()).ln()]);
    let row = |i: usize| rank.out.slice(ndarray::s![0, i, 0, ..]).to_vec();
    assert!(row(0).iter().all(|&o| o == 0.0));
    let one_key = 1.0 / (1.0 + 0.5f64.exp());
    assert_close(row(1), &vec![one_key; 128]);
    let options = fa3conform::musa::MusaOptions::default();
    let kernel = fa3conform::certify::numerics::check_rank(&c, &cp, &options);
    assert!(
        matches!(kernel, fa3conform::certify::numerics::Numerics::Within(_)),
        "{kernel:?}"
    );
}
