//! What the MUSA device computes where mate's kernel departs from clean attention
//! (docs/musa-device.md D1-D6, issue #15 item 1): the kernel path shows each departure on a call
//! built to trigger it, `certify` names it, and the device expectation
//! ([`device::musa_references`]) agrees with the kernel path under the tolerance rule.

use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg, TensorValues};
use fa3conform::certify::{certify_call, numerics};
use fa3conform::device;
use fa3conform::explain::{Found, explain, render};
use fa3conform::kernel::{self, KernelOptions, KernelOutput, MetadataSource};
use fa3conform::musa::{InjectionCache, MusaOptions};
use fa3conform::reference::{self, Precision, RefOutput, Stack};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, Tensors, materialise};
use fa3conform::validate::Hazard;

fn floats(dtype: Dtype, shape: &[usize], values: Vec<f64>) -> PyValue {
    assert_eq!(values.len(), shape.iter().product::<usize>());
    PyValue::Tensor(TensorArg {
        values: Some(TensorValues::Float(values)),
        ..TensorArg::new(dtype, shape)
    })
}

fn filled(dtype: Dtype, shape: &[usize], value: f64) -> PyValue {
    floats(dtype, shape, vec![value; shape.iter().product()])
}

fn ints(values: &[i64]) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(
        Dtype::Int32,
        &[values.len()],
        values.to_vec(),
    ))
}

fn int_matrix(rows: usize, values: &[i64]) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(
        Dtype::Int32,
        &[rows, values.len() / rows],
        values.to_vec(),
    ))
}

struct Run {
    tensors: Tensors,
    kernel: KernelOutput,
}

fn run(call: &KvCacheCall) -> Run {
    let tensors = materialise(call, DEFAULT_MEMORY_CAP).expect("materialise");
    let kernel = kernel::run(call, &tensors, &KernelOptions::default()).expect("kernel path");
    Run { tensors, kernel }
}

fn clean(call: &KvCacheCall, tensors: &Tensors) -> RefOutput {
    reference::run(call, tensors, Stack::Musa, Precision::Exact).expect("reference")
}

/// The kernel path agrees with the device expectation under the tolerance rule.
fn agrees_with_device_expectation(call: &KvCacheCall, run: &Run) {
    let (ref64, lowprec) = device::musa_references(call, &run.tensors).expect("references");
    if let Err(e) = run.kernel.clone().judge(&ref64, &lowprec) {
        panic!("kernel path vs device expectation: {e}");
    }
}

fn hazards(call: &KvCacheCall) -> Vec<Hazard> {
    let report = certify_call(call, &[], &MusaOptions::default());
    assert!(
        report.gate.resolved().is_some(),
        "musa rejects {:?}",
        report.gate
    );
    report.gate.hazards
}

fn hazard<'a>(found: &'a [Hazard], code: &str) -> &'a Hazard {
    found
        .iter()
        .find(|h| h.code == code)
        .unwrap_or_else(|| panic!("no {code} among {found:#?}"))
}

/// One batch, `sq` queries and `sk` keys of one head of width 64, causal, every q entry `q`,
/// every k entry `k`, every v entry 1.
fn uniform_causal(dtype: Dtype, sq: usize, sk: usize, q: f64, k: f64, scale: f64) -> KvCacheCall {
    let mut call = KvCacheCall::default();
    call.set("q", filled(dtype, &[1, sq, 1, 64], q))
        .set("k_cache", filled(dtype, &[1, sk, 1, 64], k))
        .set("v_cache", filled(dtype, &[1, sk, 1, 64], 1.0))
        .set("causal", PyValue::Bool(true))
        .set("softmax_scale", PyValue::Float(scale))
        .set("return_softmax_lse", PyValue::Bool(true));
    call
}

/// D1: rows 0..63 of a 128-row causal prefill see no key in their first key block (keys
/// 64..127); with every scaled logit −19.2 their fp16 probabilities round to 0.
#[test]
fn fp16_rows_masked_in_their_first_block_lose_their_output() {
    let call = uniform_causal(Dtype::Float16, 128, 128, 1.0, -1.0, 0.3);
    let r = run(&call);
    let reference = clean(&call, &r.tensors);
    for row in 0..128 {
        let out = r.kernel.out.data[[0, row, 0, 0]];
        assert!((reference.out[[0, row, 0, 0]] - 1.0).abs() < 1e-12);
        assert_eq!(out, if row < 64 { 0.0 } else { 1.0 }, "row {row}");
        // The lse stays right: −19.2 + ln(row + 1).
        let lse = r.kernel.lse.data[[0, 0, row]];
        assert!(
            (lse - (-19.2 + ((row + 1) as f64).ln())).abs() < 1e-3,
            "row {row}: {lse}"
        );
    }
    agrees_with_device_expectation(&call, &r);
    let found = hazards(&call);
    assert!(
        hazard(&found, "H-DEV-ROW-MAX-CLAMPED")
            .message
            .starts_with("fp16 rows 0..64 ")
    );
    // bf16 keeps f32's exponent range: no departure, no hazard.
    let bf16 = uniform_causal(Dtype::Bfloat16, 128, 128, 1.0, -1.0, 0.3);
    assert!((run(&bf16).kernel.out.data[[0, 0, 0, 0]] - 1.0).abs() < 1e-2);
    assert!(
        hazards(&bf16)
            .iter()
            .all(|h| h.code != "H-DEV-ROW-MAX-CLAMPED")
    );
}

/// D1 with split-KV: the clamp hits the split holding a row's last key only where that split
/// goes on past the key's block. Two splits of the 128-key call above give block 0 and block 1
/// their own tiles: rows 0..63 see their keys in the first (only) block of split 0 and keep
/// their output; split 1 sees none of their keys (lse −inf, weight 0 in the combine). So the
/// device's numbers for these rows depend on the metadata's split count, and the device
/// expectation leaves them unspecified.
#[test]
fn fp16_clamp_depends_on_the_split_holding_the_last_key() {
    let mut call = uniform_causal(Dtype::Float16, 128, 128, 1.0, -1.0, 0.3);
    call.set("num_splits", PyValue::Int(2));
    let tensors = materialise(&call, DEFAULT_MEMORY_CAP).expect("materialise");
    let options = KernelOptions {
        metadata: MetadataSource::Computed,
        ..KernelOptions::default()
    };
    let split = kernel::run(&call, &tensors, &options).expect("kernel path");
    assert_eq!(split.num_splits, 2);
    for row in 0..128 {
        let out = split.out.data[[0, row, 0, 0]];
        assert!((out - 1.0).abs() < 1e-3, "row {row}: {out}");
    }
    let (ref64, lowprec) = device::musa_references(&call, &tensors).expect("references");
    let unspecified = ref64
        .unspecified
        .as_ref()
        .expect("clamped rows are unspecified");
    assert!((0..64).all(|row| unspecified.out[[0, row, 0, 0]]));
    assert!((64..128).all(|row| !unspecified.out[[0, row, 0, 0]]));
    if let Err(e) = split.judge(&ref64, &lowprec) {
        panic!("split kernel path vs device expectation: {e}");
    }
    // One split (no metadata): the clamp zeroes the same rows, which the expectation allows.
    agrees_with_device_expectation(&call, &run(&call));
}

/// D1 between the thresholds: logits of −15 give fp16 subnormal probabilities (5 · 2⁻²⁴ for
/// 5.14 · 2⁻²⁴), and row 0's output (one key: P16 / P32) is off by 2.7 %.
#[test]
fn fp16_clamped_rows_lose_precision_above_the_zero_threshold() {
    let call = uniform_causal(Dtype::Float16, 128, 128, 1.0, -1.0, 15.0 / 64.0);
    let r = run(&call);
    let row0 = r.kernel.out.data[[0, 0, 0, 0]];
    assert!((row0 - 0.973).abs() < 2e-3, "row 0: {row0}");
    assert_eq!(r.kernel.out.data[[0, 64, 0, 0]], 1.0);
    agrees_with_device_expectation(&call, &r);
}

/// D2: rows before the first and after the last segment are never written.
#[test]
fn rows_no_segment_covers_are_unspecified() {
    let mut call = KvCacheCall::default();
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[8, 1, 64]))
        .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 64]))
        .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 64]))
        .set("cache_seqlens", ints(&[10]))
        .set("cu_seqlens_q", ints(&[2, 5]))
        .set("max_seqlen_q", PyValue::Int(3))
        .set("return_softmax_lse", PyValue::Bool(true));
    let r = run(&call);
    for row in [0, 1, 5, 6, 7] {
        assert!(r.kernel.out.data[[row, 0, 0]].is_nan(), "row {row}");
    }
    let reference = clean(&call, &r.tensors);
    let unspecified = reference
        .unspecified
        .as_ref()
        .expect("rows are unspecified");
    let marked: Vec<bool> = (0..8).map(|row| unspecified.lse[[0, row]]).collect();
    assert_eq!(marked, [true, true, false, false, false, true, true, true]);
    agrees_with_device_expectation(&call, &r);
    let found = hazards(&call);
    assert!(
        hazard(&found, "H-DEV-ROWS-UNCOVERED")
            .message
            .starts_with("rows 0..2, 5..8 of q")
    );
    let numbers = numerics::check(
        &call,
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    );
    assert_eq!(
        numbers.status(),
        "within-tolerance",
        "{}",
        numbers.describe()
    );
}

/// D3: an infinite V value after the last key, inside the last key block, makes the output NaN;
/// one past the block does not.
#[test]
fn non_finite_values_after_the_last_key_poison_their_block() {
    let poisoned = |capacity: usize, slot: usize| {
        let mut v = vec![0.5; capacity * 64];
        v[slot * 64 + 3] = f64::INFINITY;
        v[slot * 64 + 9] = f64::NEG_INFINITY;
        let mut call = KvCacheCall::default();
        call.set("q", filled(Dtype::Bfloat16, &[1, 1, 2, 64], 0.25))
            .set(
                "k_cache",
                filled(Dtype::Bfloat16, &[1, capacity, 1, 64], 0.5),
            )
            .set("v_cache", floats(Dtype::Bfloat16, &[1, capacity, 1, 64], v))
            .set("cache_seqlens", ints(&[10]))
            .set("return_softmax_lse", PyValue::Bool(true));
        call
    };
    let call = poisoned(64, 20);
    let r = run(&call);
    // Both heads, in the two columns that hold the infinities.
    for head in 0..2 {
        for c in 0..64 {
            let x = r.kernel.out.data[[0, 0, head, c]];
            assert_eq!(x.is_nan(), c == 3 || c == 9, "head {head} column {c}: {x}");
        }
    }
    assert!(r.kernel.lse.data.iter().all(|x| x.is_finite()));
    assert!(clean(&call, &r.tensors).out.iter().all(|x| x.is_finite()));
    agrees_with_device_expectation(&call, &r);
    let found = hazards(&call);
    assert_eq!(
        hazard(&found, "H-DEV-NONFINITE-PAST-LAST-KEY").message,
        "v_cache holds inf after the last key of batch 0 inside its last key block (cache \
         position 20): the device multiplies it by P = 0, so out is NaN for every row that \
         processes that block (the lse stays finite)"
    );
    let beyond = poisoned(128, 70);
    assert!(run(&beyond).kernel.out.data.iter().all(|x| *x == 0.5));
    assert!(
        hazards(&beyond)
            .iter()
            .all(|h| h.code != "H-DEV-NONFINITE-PAST-LAST-KEY")
    );
}

/// D4: a paged append with head dim 96 stores 128 columns per new row; the 32 past the head land
/// in the next slot's first dims (the slot after the last appended one keeps the zeros).
#[test]
fn paged_append_with_head_dim_96_writes_past_each_row() {
    let mut call = KvCacheCall::default();
    call.set("q", filled(Dtype::Bfloat16, &[1, 1, 1, 96], 0.25))
        .set("k_cache", filled(Dtype::Bfloat16, &[2, 16, 1, 96], 1.0))
        .set("v_cache", filled(Dtype::Bfloat16, &[2, 16, 1, 96], 1.0))
        .set("k", filled(Dtype::Bfloat16, &[1, 3, 1, 96], 2.0))
        .set("v", filled(Dtype::Bfloat16, &[1, 3, 1, 96], 3.0))
        .set("page_table", int_matrix(1, &[1, 0]))
        .set("cache_seqlens", ints(&[5]));
    let r = run(&call);
    for cache in [&r.kernel.k_cache, &r.kernel.v_cache] {
        let cache = &cache.as_ref().expect("appended").data;
        let slot8: Vec<f64> = (0..96).map(|c| cache[[1, 8, 0, c]]).collect();
        assert!(slot8[..32].iter().all(|&x| x == 0.0), "{slot8:?}");
        assert!(slot8[32..].iter().all(|&x| x == 1.0));
        assert!((0..96).all(|c| cache[[1, 9, 0, c]] == 1.0));
        assert!((0..96).all(|c| cache[[1, 7, 0, c]] > 1.0));
    }
    agrees_with_device_expectation(&call, &r);
    let found = hazards(&call);
    assert!(
        hazard(&found, "H-DEV-PAGED-APPEND-OVERRUN")
            .message
            .contains("k columns 96..128 and v columns 96..128 past each row")
    );
}

/// D4: the (192, 128) contiguous append reads its K predicate past a two-entry array; rotary K
/// stores use their own.
#[test]
fn the_192_128_contiguous_append_is_undefined_without_rotary() {
    let mut call = KvCacheCall::default();
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 1, 1, 192]))
        .set(
            "k_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 192]),
        )
        .set(
            "v_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 128]),
        )
        .set("k", PyValue::tensor(Dtype::Bfloat16, &[1, 1, 1, 192]))
        .set("v", PyValue::tensor(Dtype::Bfloat16, &[1, 1, 1, 128]))
        .set("cache_seqlens", ints(&[4]));
    assert!(
        hazard(&hazards(&call), "H-DEV-APPEND-PREDICATE-UB")
            .message
            .starts_with("a contiguous append with head dims 192-128")
    );
    call.set("rotary_cos", PyValue::tensor(Dtype::Bfloat16, &[16, 32]))
        .set("rotary_sin", PyValue::tensor(Dtype::Bfloat16, &[16, 32]));
    assert!(
        hazards(&call)
            .iter()
            .all(|h| h.code != "H-DEV-APPEND-PREDICATE-UB")
    );
}

fn varlen_segment(len: i64, max_seqlen_q: i64) -> KvCacheCall {
    let mut call = KvCacheCall::default();
    call.set(
        "q",
        PyValue::tensor(Dtype::Bfloat16, &[len as usize, 1, 64]),
    )
    .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 64, 1, 64]))
    .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 64, 1, 64]))
    .set("cache_seqlens", ints(&[50]))
    .set("cu_seqlens_q", ints(&[0, len]))
    .set("max_seqlen_q", PyValue::Int(max_seqlen_q))
    .set("causal", PyValue::Bool(true))
    .set("return_softmax_lse", PyValue::Bool(true));
    call
}

/// D5: a segment longer than max_seqlen_q runs over the grid's m-blocks (tile_m 32 for 8 rows):
/// rows 0..32 are computed, 32..40 never written.
#[test]
fn a_segment_longer_than_max_seqlen_q_runs_over_the_grid() {
    let call = varlen_segment(40, 8);
    let r = run(&call);
    assert!((0..32).all(|row| r.kernel.out.data[[row, 0, 0]].is_finite()));
    assert!((32..40).all(|row| r.kernel.out.data[[row, 0, 0]].is_nan()));
    agrees_with_device_expectation(&call, &r);
    assert_eq!(
        hazard(&hazards(&call), "H-DEV-SEGMENT-OVER-MAX-SEQLEN-Q").message,
        "cu_seqlens_q segment 0 has 40 rows, more than max_seqlen_q = 8: rows 32..40 of q are \
         never written"
    );
    let covered = varlen_segment(31, 30);
    agrees_with_device_expectation(&covered, &run(&covered));
    assert!(
        hazard(&hazards(&covered), "H-DEV-SEGMENT-OVER-MAX-SEQLEN-Q")
            .message
            .ends_with("the grid's 1 m-block(s) of 32 rows still cover it")
    );
}

/// D5: batch 0 appends 4 keys at 14..18 of a 16-slot cache: the last two land in cache row 1's
/// first slots; batch 0 reads them back as zero keys.
#[test]
fn appends_past_the_capacity_land_in_the_next_cache_row() {
    let mut call = KvCacheCall::default();
    call.set("q", filled(Dtype::Bfloat16, &[2, 1, 1, 64], 0.25))
        .set("k_cache", filled(Dtype::Bfloat16, &[2, 16, 1, 64], 1.0))
        .set("v_cache", filled(Dtype::Bfloat16, &[2, 16, 1, 64], 1.0))
        .set(
            "k",
            floats(
                Dtype::Bfloat16,
                &[2, 4, 1, 64],
                (0..512).map(|i| (i / 64) as f64).collect(),
            ),
        )
        .set("v", filled(Dtype::Bfloat16, &[2, 4, 1, 64], 3.0))
        .set("cache_seqlens", ints(&[14, 8]))
        .set("return_softmax_lse", PyValue::Bool(true));
    let r = run(&call);
    let k = &r.kernel.k_cache.as_ref().expect("appended").data;
    assert_eq!((k[[1, 0, 0, 0]], k[[1, 1, 0, 0]]), (2.0, 3.0));
    assert_eq!((k[[0, 14, 0, 0]], k[[0, 15, 0, 0]]), (0.0, 1.0));
    let found = hazards(&call);
    assert_eq!(
        hazard(&found, "H-DEV-APPEND-PAST-CAPACITY").message,
        "batch 0 appends at cache positions 16..18, past its capacity 16: they land in the first \
         slots of cache row 1 (dropped past the cache), racing with that row's own use"
    );
    assert!(
        hazard(&found, "H-DEV-READ-PAST-CAPACITY")
            .message
            .starts_with("batch 0 attends 18 keys")
    );
    // The clean reference has no meaning for it: the numbers are shown, not judged.
    let numbers = numerics::check(
        &call,
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    );
    assert_eq!(numbers.status(), "not-run", "{}", numbers.describe());
}

/// D5: reading 20 keys of a 16-slot contiguous cache sees keys and values 16..19 as zero: clean
/// attention over the cache extended by zeros.
#[test]
fn reads_past_the_capacity_see_zero_keys() {
    let mut call = KvCacheCall {
        seed: 5,
        ..KvCacheCall::default()
    };
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 1, 2, 64]))
        .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 64]))
        .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 16, 1, 64]))
        .set("cache_seqlens", ints(&[20]))
        .set("return_softmax_lse", PyValue::Bool(true));
    let r = run(&call);
    // The same attention over a 20-slot cache whose slots 16..19 hold zeros.
    let mut extended = call.clone();
    let widen = |t: &fa3conform::tensor::HostTensor| {
        let mut values: Vec<f64> = t.data.iter().copied().collect();
        values.extend(std::iter::repeat_n(0.0, 4 * 64));
        floats(Dtype::Bfloat16, &[1, 20, 1, 64], values)
    };
    extended
        .set(
            "q",
            floats(
                Dtype::Bfloat16,
                &[1, 1, 2, 64],
                r.tensors["q"].data.iter().copied().collect(),
            ),
        )
        .set("k_cache", widen(&r.tensors["k_cache"]))
        .set("v_cache", widen(&r.tensors["v_cache"]));
    let tensors = materialise(&extended, DEFAULT_MEMORY_CAP).unwrap();
    let exact = reference::run(&extended, &tensors, Stack::Musa, Precision::Exact).unwrap();
    let low = reference::run(&extended, &tensors, Stack::Musa, Precision::LowPrecision).unwrap();
    r.kernel
        .clone()
        .judge(&exact, &low)
        .expect("zero-extended attention");
    assert!(
        hazard(&hazards(&call), "H-DEV-READ-PAST-CAPACITY")
            .message
            .ends_with(
                "keys and values past it read as zero, so those positions take part with score 0"
            )
    );
}

/// D5: rotary positions at or past the capacity read cos = sin = 0: the rotated part is 0.
#[test]
fn rotary_positions_past_the_capacity_rotate_to_zero() {
    let mut call = KvCacheCall {
        seed: 9,
        ..KvCacheCall::default()
    };
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 1, 1, 64]))
        .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 32, 1, 64]))
        .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 32, 1, 64]))
        .set("k", filled(Dtype::Bfloat16, &[1, 4, 1, 64], 1.0))
        .set("v", PyValue::tensor(Dtype::Bfloat16, &[1, 4, 1, 64]))
        .set("rotary_cos", filled(Dtype::Bfloat16, &[40, 16], 1.0))
        .set("rotary_sin", filled(Dtype::Bfloat16, &[40, 16], 0.0))
        .set("rotary_seqlens", ints(&[30]))
        .set("cache_seqlens", ints(&[14]));
    let r = run(&call);
    let k = &r.kernel.k_cache.as_ref().expect("appended").data;
    // Positions 30, 31 rotate by the identity; 32, 33 (slots 16, 17) lose their first 32 dims.
    assert!((0..64).all(|c| k[[0, 14, 0, c]] == 1.0 && k[[0, 15, 0, c]] == 1.0));
    for slot in [16, 17] {
        assert!((0..32).all(|c| k[[0, slot, 0, c]] == 0.0));
        assert!((32..64).all(|c| k[[0, slot, 0, c]] == 1.0));
    }
    agrees_with_device_expectation(&call, &r);
    assert_eq!(
        hazard(&hazards(&call), "H-DEV-ROTARY-PAST-TABLE").message,
        "batch 0 rotates positions up to 33, but the device reads cos/sin only below 32: the \
         rotated dims of those keys and queries become 0"
    );
}

/// D6: with a negative scale every exponent is ≥ 0; a masked score (causal) gives +inf.
#[test]
fn negative_scale_gives_nan_where_a_processed_block_holds_a_masked_score() {
    let mut call = uniform_causal(Dtype::Bfloat16, 64, 64, 0.5, 0.25, -0.1);
    call.seed = 2;
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 64, 1, 64]))
        .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[1, 64, 1, 64]));
    let r = run(&call);
    for row in 0..63 {
        assert!(r.kernel.out.data[[0, row, 0, 0]].is_nan(), "row {row}");
        assert_eq!(r.kernel.lse.data[[0, 0, row]], f64::INFINITY);
    }
    assert!(r.kernel.out.data[[0, 63, 0, 0]].is_finite());
    assert!(clean(&call, &r.tensors).out.iter().all(|x| x.is_finite()));
    agrees_with_device_expectation(&call, &r);
    assert!(
        hazard(&hazards(&call), "H-DEV-NEGATIVE-SCALE")
            .message
            .starts_with("softmax_scale = -0.1 < 0")
    );
    // Without a masked score (no mask, 64 keys) the result is clean attention.
    call.set("causal", PyValue::Bool(false));
    let r = run(&call);
    let (exact, low) = (
        clean(&call, &r.tensors),
        reference::run(&call, &r.tensors, Stack::Musa, Precision::LowPrecision).unwrap(),
    );
    r.kernel.judge(&exact, &low).expect("clean attention");
}

/// Issue #15 item 1: with a sink, a fully masked row returns lse = sink where its tile has a key
/// block, −inf where it has none. 600 causal queries over 100 keys, tile_m 256: rows 0..256 form an
/// m-block above the diagonal, rows 256..500 see no key in an m-block that has one.
#[test]
fn sinks_give_fully_masked_rows_the_sink_lse_when_their_tile_has_a_key_block() {
    let mut call = KvCacheCall {
        seed: 4,
        ..KvCacheCall::default()
    };
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 600, 1, 64]))
        .set(
            "k_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 100, 1, 64]),
        )
        .set(
            "v_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 100, 1, 64]),
        )
        .set("sinks", filled(Dtype::Bfloat16, &[1], 0.5))
        .set("causal", PyValue::Bool(true))
        .set("return_softmax_lse", PyValue::Bool(true));
    let r = run(&call);
    let reference = clean(&call, &r.tensors);
    for (name, lse) in [
        ("reference", &reference.lse),
        ("kernel", &r.kernel.lse.data),
    ] {
        for row in [0, 255] {
            assert_eq!(lse[[0, 0, row]], f64::NEG_INFINITY, "{name} row {row}");
        }
        for row in [256, 499] {
            assert!((lse[[0, 0, row]] - 0.5).abs() < 1e-6, "{name} row {row}");
        }
        assert!(lse[[0, 0, 500]].is_finite() && lse[[0, 0, 500]] != 0.5);
    }
    agrees_with_device_expectation(&call, &r);
    assert_eq!(
        hazard(&hazards(&call), "H-DEV-SINK-LSE").message,
        "rows 0..500 attend no key: mate returns lse = sink (out 0) for rows 256..500 (their tile \
         has a key block) and lse = −inf for rows 0..256"
    );
}

/// `explain CODE` names every device hazard with its cause (docs/musa-device.md) and the kernel
/// source it was read from.
#[test]
fn explain_names_every_device_hazard() {
    let codes: Vec<&str> = fa3conform::validate::registry::hazards()
        .map(|h| h.code)
        .filter(|code| code.starts_with("H-DEV-"))
        .collect();
    assert_eq!(codes.len(), 11);
    for code in codes {
        let found = explain(code);
        assert!(
            matches!(found, Found::Hazard(h) if h.code == code),
            "{code}"
        );
        let text = render(&found);
        for needle in [code, "docs/musa-device.md", "MooreThreads/mate@3f58cc3e"] {
            assert!(text.contains(needle), "{code}: missing {needle} in {text}");
        }
    }
}
