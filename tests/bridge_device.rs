//! `export` writes what a MUSA device computes (the device model, docs/musa-device.md) and
//! `verify` never compares the elements the device leaves undefined: the modelled device's own
//! results (the kernel path) verify, whatever the undefined rows hold.

use fa3conform::bridge::bundle::{RESULT_JSON, RESULT_TENSORS, names, read_bundle};
use fa3conform::bridge::tensors::{StoredTensor, TensorFile, write_tensor_file};
use fa3conform::bridge::{ExportOptions, Pools, VerifyOptions, export, verify};
use fa3conform::call::Dtype;
use fa3conform::kernel::{self, KernelOptions};
use fa3conform::memory::Budget;
use fa3conform::musa::{self, InjectionCache, MusaOptions};
use fa3conform::report::{Report, Status};
use fa3conform::spec::parse_specs;
use fa3conform::tensor::Tensors;
use serde_json::json;
use std::path::Path;

/// Exports `spec` as one musa bundle under `dir` and returns the bundle's folder.
fn export_one(spec: serde_json::Value, dir: &Path) -> std::path::PathBuf {
    export_as("musa", spec, dir)
}

/// Exports `spec` as one bundle of `profile` under `dir` and returns the bundle's folder.
fn export_as(profile: &str, spec: serde_json::Value, dir: &Path) -> std::path::PathBuf {
    let report = export(&ExportOptions {
        calls: parse_specs(&spec.to_string()).unwrap(),
        out: dir.to_path_buf(),
        force: false,
        pools: Pools::Whole,
        profile: profile.into(),
        memory_cap: 1 << 30,
        partition: None,
    })
    .unwrap();
    assert_eq!(report.status(), Status::Success);
    dir.join(spec["id"].as_str().unwrap())
}

/// Runs the bundle's call on the modelled MUSA stack with the bundle's inputs and writes what it
/// returns as the runner would, `garbage` in every row `overwrite` names (rows of q).
fn run_modelled_device(bundle_dir: &Path, overwrite: &[usize], garbage: f64) {
    let bundle = read_bundle(bundle_dir, &mut Budget::new(1 << 30)).unwrap();
    let tensors: Tensors = bundle
        .inputs
        .iter()
        .map(|(name, t)| (name.clone(), t.to_host()))
        .collect();
    let output = musa::flash_attn_with_kvcache_on(
        &bundle.call,
        &tensors,
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    )
    .unwrap();
    let mut out = output.returned.out().data.clone();
    let mut lse = output.returned.lse().unwrap().data.clone();
    for &row in overwrite {
        out.index_axis_mut(ndarray::Axis(0), row).fill(garbage);
        lse.index_axis_mut(ndarray::Axis(1), row).fill(garbage);
    }
    write_device_result(bundle_dir, &out, &lse);
}

/// Writes `out` and `lse` as the runner writes what a call returned (the 4-tuple).
fn write_device_result(bundle_dir: &Path, out: &ndarray::ArrayD<f64>, lse: &ndarray::ArrayD<f64>) {
    let values = |a: &ndarray::ArrayD<f64>| a.iter().copied().collect::<Vec<_>>();
    let result = TensorFile::from([
        (
            names::OUT.to_string(),
            StoredTensor::from_values(Dtype::Bfloat16, out.shape(), &values(out)),
        ),
        (
            names::LSE.to_string(),
            StoredTensor::from_values(Dtype::Float32, lse.shape(), &values(lse)),
        ),
    ]);
    write_tensor_file(&bundle_dir.join(RESULT_TENSORS), &result).unwrap();
    std::fs::write(
        bundle_dir.join(RESULT_JSON),
        json!({"schema_version": 1, "outcome": "returned",
               "returned": {"tuple": true, "types": ["Tensor", "Tensor", "Tensor", "Tensor"]}})
        .to_string(),
    )
    .unwrap();
}

fn verified(dir: &Path) -> (Status, String) {
    verified_as("musa", dir)
}

fn verified_as(profile: &str, dir: &Path) -> (Status, String) {
    let report = verify(&VerifyOptions {
        dir: dir.to_path_buf(),
        profile: profile.into(),
        memory_cap: 1 << 30,
    })
    .unwrap();
    let mut text = Vec::new();
    fa3conform::report::write(&report, fa3conform::report::Format::Human, &mut text).unwrap();
    (report.status(), String::from_utf8(text).unwrap())
}

fn tensor(shape: &[usize]) -> serde_json::Value {
    json!({"tensor": {"shape": shape, "dtype": "bfloat16"}})
}

fn ints(values: &[i64]) -> serde_json::Value {
    json!({"tensor": {"shape": [values.len()], "dtype": "int32", "values": values}})
}

#[test]
fn rows_no_segment_covers_are_not_compared() {
    // cu_seqlens_q covers rows 2..5 of 8: the device never writes rows 0, 1, 5, 6, 7.
    let spec = json!({"id": "uncovered", "seed": 4, "args": {
        "q": tensor(&[8, 1, 64]), "k_cache": tensor(&[1, 16, 1, 64]),
        "v_cache": tensor(&[1, 16, 1, 64]), "cache_seqlens": ints(&[10]),
        "cu_seqlens_q": ints(&[2, 5]), "max_seqlen_q": 3, "return_softmax_lse": true}});
    let dir = tempfile::tempdir().unwrap();
    let bundle_dir = export_one(spec, dir.path());
    let bundle = read_bundle(&bundle_dir, &mut Budget::new(1 << 30)).unwrap();
    let expected = bundle.expected.unwrap();
    let mask = expected.tensors[&names::unspecified(names::OUT)]
        .to_host()
        .data;
    let marked: Vec<bool> = (0..8).map(|row| mask[[row, 0, 0]] != 0.0).collect();
    assert_eq!(marked, [true, true, false, false, false, true, true, true]);
    run_modelled_device(&bundle_dir, &[0, 1, 5, 6, 7], 12345.0);
    let (status, text) = verified(dir.path());
    assert_eq!(status, Status::Success, "{text}");
    // A wrong value in a row the device writes is still caught.
    run_modelled_device(&bundle_dir, &[3], 12345.0);
    let (status, text) = verified(dir.path());
    assert_eq!(status, Status::Findings, "{text}");
}

#[test]
fn a_negative_scale_verifies_against_the_devices_nan() {
    // Causal prefill with softmax_scale < 0: rows with a masked score in a processed key block
    // are NaN on the device (D6), which the bundle expects.
    let spec = json!({"id": "negative-scale", "seed": 2, "args": {
        "q": tensor(&[1, 64, 1, 64]), "k_cache": tensor(&[1, 64, 1, 64]),
        "v_cache": tensor(&[1, 64, 1, 64]), "cache_seqlens": ints(&[64]),
        "causal": true, "softmax_scale": -0.1, "return_softmax_lse": true}});
    let dir = tempfile::tempdir().unwrap();
    let bundle_dir = export_one(spec, dir.path());
    let expected = read_bundle(&bundle_dir, &mut Budget::new(1 << 30))
        .unwrap()
        .expected
        .unwrap();
    let out = expected.tensors[names::OUT].to_host().data;
    assert!(
        out[[0, 0, 0, 0]].is_nan(),
        "the bundle expects the device's NaN"
    );
    run_modelled_device(&bundle_dir, &[], 0.0);
    let (status, text) = verified(dir.path());
    assert_eq!(status, Status::Success, "{text}");
}

/// `export --profile mate` for calls to mate's FA3-compatible wrapper: a decode whose sink is
/// passed as `s_aux`, and rank 1 of a context-parallel causal prefill (16 queries over 128 keys in
/// all, 64 of them on this rank). The modelled device — the kernel path running the rank's call
/// with the bundle's inputs, the `s_aux` tensor as the sink — verifies; a wrong row does not.
#[test]
fn mate_bundles_verify_against_the_ranks_kernel_path() {
    let decode = json!({"id": "mate-s-aux", "seed": 3, "args": {
        "q": tensor(&[4, 8, 128]), "k_cache": tensor(&[8, 16, 2, 128]),
        "v_cache": tensor(&[8, 16, 2, 128]), "cache_seqlens": ints(&[17, 30, 1, 9]),
        "page_table": {"tensor": {"shape": [4, 2], "dtype": "int32",
                                  "values": [0, 1, 2, 3, 4, 5, 6, 7]}},
        "cu_seqlens_q": ints(&[0, 1, 2, 3, 4]), "max_seqlen_q": 1, "causal": true,
        "s_aux": tensor(&[8]), "return_softmax_lse": true}});
    let rank = json!({"id": "mate-cp-rank-1", "seed": 5, "args": {
        "q": tensor(&[1, 16, 8, 128]), "k_cache": tensor(&[1, 64, 2, 128]),
        "v_cache": tensor(&[1, 64, 2, 128]), "cache_seqlens": ints(&[64]), "causal": true,
        "cp_world_size": 2, "cp_rank": 1, "cp_tot_seqused_k": ints(&[128]),
        "return_softmax_lse": true}});
    for spec in [decode, rank] {
        let dir = tempfile::tempdir().unwrap();
        let bundle_dir = export_as("mate", spec.clone(), dir.path());
        let bundle = read_bundle(&bundle_dir, &mut Budget::new(1 << 30)).unwrap();
        assert!(bundle.expected.is_some(), "{spec}");
        let (rank_call, cp) = musa::mate_rank(&bundle.call).unwrap();
        let tensors = musa::rank_tensors(
            bundle
                .inputs
                .iter()
                .map(|(name, t)| (name.clone(), t.to_host()))
                .collect(),
        );
        let kernel_options = KernelOptions {
            context_parallel: Some(cp),
            ..KernelOptions::default()
        };
        let output = kernel::run(&rank_call, &tensors, &kernel_options).unwrap();
        let (out, lse) = (output.out.data, output.lse.data);
        write_device_result(&bundle_dir, &out, &lse);
        let (status, text) = verified_as("mate", dir.path());
        assert_eq!(status, Status::Success, "{text}");
        let mut wrong = out.clone();
        wrong.index_axis_mut(ndarray::Axis(0), 0).fill(12345.0);
        write_device_result(&bundle_dir, &wrong, &lse);
        let (status, text) = verified_as("mate", dir.path());
        assert_eq!(status, Status::Findings, "{text}");
    }
}
