//! The kernel path on tiny calls whose results are worked out by hand in each test.

use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg, TensorValues};
use fa3conform::kernel::{self, KernelError, KernelOptions, KernelOutput};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, materialise};

const D: usize = 64;

fn values(dtype: Dtype, shape: &[usize], values: Vec<f64>) -> PyValue {
    assert_eq!(values.len(), shape.iter().product::<usize>());
    PyValue::Tensor(TensorArg {
        values: Some(TensorValues::Float(values)),
        ..TensorArg::new(dtype, shape)
    })
}

fn ints(shape: &[usize], values: Vec<i64>) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, shape, values))
}

/// `rows` vectors of width D, each `first` in dimension 0 (or all dims when `fill`) and 0 elsewhere.
fn rows(first: &[f64], fill: bool) -> Vec<f64> {
    first
        .iter()
        .flat_map(|&x| (0..D).map(move |c| if fill || c == 0 { x } else { 0.0 }))
        .collect()
}

/// One batch, one head: q (sq rows), k/v (sk rows) given as per-row values.
fn single_head(dtype: Dtype, q: &[f64], k: &[f64], v: &[f64]) -> KvCacheCall {
    let (sq, sk) = (q.len(), k.len());
    let mut call = KvCacheCall::default();
    call.set("q", values(dtype, &[1, sq, 1, D], rows(q, false)))
        .set("k_cache", values(dtype, &[1, sk, 1, D], rows(k, false)))
        .set("v_cache", values(dtype, &[1, sk, 1, D], rows(v, true)));
    call
}

fn run(call: &KvCacheCall) -> Result<KernelOutput, KernelError> {
    let tensors = materialise(call, DEFAULT_MEMORY_CAP).expect("materialise");
    kernel::run(call, &tensors, &KernelOptions::default())
}

fn assert_close(actual: f64, expected: f64, tol: f64) {
    assert!(
        (actual - expected).abs() <= tol,
        "{actual} differs from {expected} by more than {tol}"
    );
}

/// out[0, row, 0, :] is a constant vector (every test's V rows are constant).
fn out_row(out: &KernelOutput, row: usize) -> f64 {
    let first = out.out.data[[0, row, 0, 0]];
    assert!(
        (0..D).all(|c| out.out.data[[0, row, 0, c]] == first),
        "row {row} not constant"
    );
    first
}

#[test]
fn two_keys_weigh_by_exp_of_scores() {
    // Scores 0 and ln 3 (scale 1): weights 1/4 and 3/4, out = 1/4·1 + 3/4·5 = 4, lse = ln 4.
    let mut call = single_head(Dtype::Float32, &[1.0], &[0.0, 3f64.ln()], &[1.0, 5.0]);
    call.set("softmax_scale", PyValue::Float(1.0));
    let out = run(&call).unwrap();
    assert_close(out_row(&out, 0), 4.0, 2e-6);
    assert_close(out.lse.data[[0, 0, 0]], 4f64.ln(), 1e-6);
}

#[test]
fn default_scale_is_inverse_sqrt_head_dim() {
    // One key: out = v, lse = score = (q·k)/sqrt(64) = 2·4/8 = 1.
    let out = run(&single_head(Dtype::Bfloat16, &[2.0], &[4.0], &[3.0])).unwrap();
    assert_eq!(out_row(&out, 0), 3.0);
    assert_close(out.lse.data[[0, 0, 0]], 1.0, 1e-6);
}

#[test]
fn causal_mask_is_bottom_right_aligned() {
    // sq = 2, sk = 3, zero scores: row 0 sees keys 0..=1, row 1 sees 0..=2.
    let mut call = single_head(Dtype::Bfloat16, &[0.0, 0.0], &[0.0; 3], &[1.0, 2.0, 3.0]);
    call.set("causal", PyValue::Bool(true));
    let out = run(&call).unwrap();
    assert_eq!(out_row(&out, 0), 1.5);
    assert_eq!(out_row(&out, 1), 2.0);
    assert_close(out.lse.data[[0, 0, 0]], 2f64.ln(), 1e-6);
    assert_close(out.lse.data[[0, 0, 1]], 3f64.ln(), 1e-6);
}

#[test]
fn rows_without_keys_give_zero_and_minus_infinity() {
    // sq = 3, sk = 1, causal: offset −2, rows 0 and 1 see nothing, row 2 sees key 0.
    let mut call = single_head(Dtype::Bfloat16, &[0.0; 3], &[0.0], &[7.0]);
    call.set("causal", PyValue::Bool(true));
    let out = run(&call).unwrap();
    assert_eq!(
        [out_row(&out, 0), out_row(&out, 1), out_row(&out, 2)],
        [0.0, 0.0, 7.0]
    );
    assert_eq!(out.lse.data[[0, 0, 0]], f64::NEG_INFINITY);
    assert_eq!(out.lse.data[[0, 0, 1]], f64::NEG_INFINITY);
    assert_eq!(out.lse.data[[0, 0, 2]], 0.0);
}

#[test]
fn local_window_and_chunk_limit_the_keys() {
    // sq = 1, sk = 6 (offset 5): window (2, 0) sees keys 3..=5 → mean of 4, 5, 6 = 5.
    let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut call = single_head(Dtype::Bfloat16, &[0.0], &[0.0; 6], &v);
    call.set(
        "window_size",
        PyValue::Tuple(vec![PyValue::Int(2), PyValue::Int(0)]),
    );
    assert_eq!(out_row(&run(&call).unwrap(), 0), 5.0);
    // Chunk 4 (with cache_seqlens, so no reset): the row at key position 5 sees chunk [4, 8) →
    // keys 4, 5 → mean of 5, 6 = 5.5.
    call.unset("window_size")
        .set("attention_chunk", PyValue::Int(4))
        .set("cache_seqlens", ints(&[1], vec![6]));
    assert_eq!(out_row(&run(&call).unwrap(), 0), 5.5);
}

#[test]
fn sink_joins_the_denominator_and_the_lse() {
    // One key with score 0 and a sink of 0: denominator 1 + e^0 = 2 → out = v/2, lse = ln 2.
    // A sink of 1: denominator 1 + e → out = 4/(1 + e), lse = ln(1 + e).
    for (sink, expected_out, expected_lse) in [
        (0.0, 2.0, 2f64.ln()),
        (1.0, 4.0 / (1.0 + 1f64.exp()), (1.0 + 1f64.exp()).ln()),
    ] {
        let mut call = single_head(Dtype::Float32, &[0.0], &[0.0], &[4.0]);
        call.set("sinks", values(Dtype::Bfloat16, &[1], vec![sink]));
        let out = run(&call).unwrap();
        assert_close(out_row(&out, 0), expected_out, 1e-6);
        assert_close(out.lse.data[[0, 0, 0]], expected_lse, 1e-6);
    }
}

#[test]
fn softcap_squashes_scores_with_tanh() {
    // Scores 0 and 2 (scale 1) with softcap 2: s1 = 2·tanh(1); out = (1 + e^s1·3)/(1 + e^s1).
    let mut call = single_head(Dtype::Float32, &[1.0], &[0.0, 2.0], &[1.0, 3.0]);
    call.set("softmax_scale", PyValue::Float(1.0))
        .set("softcap", PyValue::Float(2.0));
    let out = run(&call).unwrap();
    let s1 = 2.0 * 1f64.tanh();
    assert_close(
        out_row(&out, 0),
        (1.0 + s1.exp() * 3.0) / (1.0 + s1.exp()),
        2e-6,
    );
    assert_close(out.lse.data[[0, 0, 0]], (1.0 + s1.exp()).ln(), 1e-6);
}

#[test]
fn appended_keys_are_rotated_and_written_at_cache_seqlens() {
    // Capacity 3, cache_seqlens [1]: the new token goes to position 1, rotated with row 1 of
    // cos/sin (cos 0, sin 1, i.e. a quarter turn) over rotary_dim 16.
    // Interleaved pairs (2i, 2i+1) → (−x1, x0); NeoX pairs (i, i+8) → (−x_{i+8}, x_i).
    let k_new: Vec<f64> = (0..D).map(|c| c as f64 + 1.0).collect();
    let cos = [vec![1.0; 8], vec![0.0; 8], vec![1.0; 8]].concat();
    let sin = [vec![0.0; 8], vec![1.0; 8], vec![0.0; 8]].concat();
    for interleaved in [true, false] {
        let mut call = KvCacheCall::default();
        call.set("q", values(Dtype::Bfloat16, &[1, 1, 1, D], vec![0.0; D]))
            .set(
                "k_cache",
                values(Dtype::Bfloat16, &[1, 3, 1, D], vec![-1.0; 3 * D]),
            )
            .set(
                "v_cache",
                values(Dtype::Bfloat16, &[1, 3, 1, D], vec![-1.0; 3 * D]),
            )
            .set("k", values(Dtype::Bfloat16, &[1, 1, 1, D], k_new.clone()))
            .set("v", values(Dtype::Bfloat16, &[1, 1, 1, D], vec![9.0; D]))
            .set("rotary_cos", values(Dtype::Bfloat16, &[3, 8], cos.clone()))
            .set("rotary_sin", values(Dtype::Bfloat16, &[3, 8], sin.clone()))
            .set("cache_seqlens", ints(&[1], vec![1]))
            .set("rotary_interleaved", PyValue::Bool(interleaved));
        let out = run(&call).unwrap();
        let (k_cache, v_cache) = (
            &out.k_cache.as_ref().expect("appended").data,
            &out.v_cache.as_ref().expect("appended").data,
        );
        let written: Vec<f64> = (0..D).map(|c| k_cache[[0, 1, 0, c]]).collect();
        let mut expected = k_new.clone();
        for i in 0..8 {
            let (a, b) = if interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + 8)
            };
            expected[a] = -k_new[b];
            expected[b] = k_new[a];
        }
        assert_eq!(written, expected, "interleaved = {interleaved}");
        assert!((0..D).all(|c| v_cache[[0, 1, 0, c]] == 9.0));
        // Untouched: position 0 (old key) and 2 (beyond the new token).
        assert!((0..D).all(|c| k_cache[[0, 0, 0, c]] == -1.0));
        assert!((0..D).all(|c| k_cache[[0, 2, 0, c]] == -1.0));
        // q is 0, so the two visible keys weigh equally: out = (−1 + 9)/2 = 4.
        assert_eq!(out.out.data[[0, 0, 0, 0]], 4.0);
    }
}

#[test]
fn fp8_scores_and_values_are_descaled() {
    // q·k = 1·2 = 2 against a zero key, scale 1, q_descale 0.5, k_descale 0.5: score 0.5.
    // v_descale 2 doubles out: 2·(1 + e^0.5·3)/(1 + e^0.5). Output dtype bf16.
    let mut call = single_head(Dtype::Float8E4m3fn, &[1.0], &[0.0, 2.0], &[1.0, 3.0]);
    call.set("softmax_scale", PyValue::Float(1.0))
        .set("q_descale", values(Dtype::Float32, &[1, 1], vec![0.5]))
        .set("k_descale", values(Dtype::Float32, &[1, 1], vec![0.5]))
        .set("v_descale", values(Dtype::Float32, &[1, 1], vec![2.0]));
    let out = run(&call).unwrap();
    assert_eq!(out.out.dtype, Dtype::Bfloat16);
    let e = 0.5f64.exp();
    assert_close(out_row(&out, 0), 2.0 * (1.0 + e * 3.0) / (1.0 + e), 2e-2);
    assert_close(out.lse.data[[0, 0, 0]], (1.0 + e).ln(), 1e-6);
}

#[test]
fn qv_adds_its_product_with_the_values() {
    // q·k = 0 for both keys, qv·v: qv = e0, v rows 0 and ln 3 → scores 0 and ln 3 (scale 1).
    let mut call = single_head(Dtype::Float32, &[0.0], &[0.0, 0.0], &[0.0, 3f64.ln()]);
    call.set(
        "qv",
        values(Dtype::Float32, &[1, 1, 1, D], rows(&[1.0], false)),
    )
    .set("softmax_scale", PyValue::Float(1.0));
    let out = run(&call).unwrap();
    assert_close(out_row(&out, 0), 0.75 * 3f64.ln(), 2e-6);
    assert_close(out.lse.data[[0, 0, 0]], 4f64.ln(), 1e-6);
}

#[test]
fn inputs_that_would_index_out_of_bounds_are_rejected() {
    let mut call = KvCacheCall::default();
    let t = |shape: &[usize]| PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, shape));
    call.set("q", t(&[1, 1, 2, D]))
        .set("k_cache", t(&[4, 16, 2, D]))
        .set("v_cache", t(&[4, 16, 2, D]))
        .set("page_table", ints(&[1, 2], vec![0, 4]))
        .set("cache_seqlens", ints(&[1], vec![20]));
    let err = run(&call).unwrap_err();
    assert_eq!(
        err,
        KernelError::Rejected("page_table entries must lie in [0, 4)".into())
    );
    // mate reads past the capacity through the page table (docs/musa-device.md D5); the model
    // follows it for one cache pool (4 pages of 16) past the capacity.
    call.set("page_table", ints(&[1, 2], vec![0, 3]))
        .set("cache_seqlens", ints(&[1], vec![96]));
    assert!(run(&call).is_ok());
    call.set("cache_seqlens", ints(&[1], vec![97]));
    assert!(
        matches!(run(&call), Err(KernelError::Rejected(m)) if m.contains("96 positions modelled (cache capacity 32)"))
    );
    call.set("cache_seqlens", ints(&[1], vec![32]))
        .set("cache_batch_idx", ints(&[1], vec![1]));
    assert_eq!(
        run(&call).unwrap_err(),
        KernelError::Rejected("cache_batch_idx values must lie in [0, 1)".into())
    );
}

#[test]
fn unsupported_head_dims_fail_like_mate() {
    let mut call = KvCacheCall::default();
    let t = |shape: &[usize]| PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, shape));
    call.set("q", t(&[1, 1, 1, 64]))
        .set("k_cache", t(&[1, 8, 1, 64]))
        .set("v_cache", t(&[1, 8, 1, 128]));
    assert_eq!(
        run(&call).unwrap_err(),
        KernelError::Rejected("Add config for headdim 64-128".into())
    );
}

/// q of 300 rows (no pack-GQA: 300 > 256, so tile_m 256 and two m-blocks), 8 keys, with the
/// call's own scheduler_metadata.
fn two_m_blocks(metadata: Vec<i64>) -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: 3,
        ..KvCacheCall::default()
    };
    let t = |shape: &[usize]| PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, shape));
    call.set("q", t(&[1, 300, 1, D]))
        .set("k_cache", t(&[1, 8, 1, D]))
        .set("v_cache", t(&[1, 8, 1, D]))
        .set("scheduler_metadata", ints(&[metadata.len()], metadata));
    call
}

#[test]
fn metadata_without_an_m_block_leaves_its_rows_unwritten() {
    // §6.11 (iii): num_m_blocks = 1 where the call needs 2 → rows 256..300 are never written
    // (NaN here: uninitialised on the device); num_m_blocks = 2 writes all of them.
    let written = |row: usize, out: &KernelOutput| out.out.data[[0, row, 0, 0]].is_finite();
    let out = run(&two_m_blocks(vec![1, 0, 1, 1])).unwrap();
    assert!((0..256).all(|r| written(r, &out)));
    assert!((256..300).all(|r| !written(r, &out)));
    let out = run(&two_m_blocks(vec![1, 0, 2, 1])).unwrap();
    assert!((0..300).all(|r| written(r, &out)));
}

#[test]
fn metadata_that_would_race_or_read_beyond_the_partials_is_rejected() {
    // §6.11 (iv): nsd 3 with S_F = num_splits = 2 would read partial slots that do not exist.
    let mut call = two_m_blocks(vec![3, 0, 2, 1]);
    call.set("num_splits", PyValue::Int(2));
    assert_eq!(
        run(&call).unwrap_err(),
        KernelError::Rejected("num_splits_dynamic exceeds the 2 split slots".into())
    );
    // A batch_table entry out of range (stale metadata of another batch size).
    assert_eq!(
        run(&two_m_blocks(vec![1, 5, 2, 1])).unwrap_err(),
        KernelError::Rejected("batch_table is not a permutation of the batch indices".into())
    );
}
