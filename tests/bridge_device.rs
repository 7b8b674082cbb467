//! `export` writes what a MUSA device computes (the device model, docs/musa-device.md) and
//! `verify` never compares the elements the device leaves undefined: the modelled device's own
//! results (the kernel path) verify, whatever the undefined rows hold.

use fa3conform::bridge::bundle::{RESULT_JSON, RESULT_TENSORS, names, read_bundle};
use fa3conform::bridge::tensors::{StoredTensor, TensorFile, write_tensor_file};
use fa3conform::bridge::{ExportOptions, Pools, VerifyOptions, export, verify};
use fa3conform::call::Dtype;
use fa3conform::musa::{self, InjectionCache, MusaOptions};
use fa3conform::report::{Report, Status};
use fa3conform::spec::parse_specs;
use fa3conform::tensor::Tensors;
use serde_json::json;
use std::path::Path;

/// Exports `spec` as one musa bundle under `dir` and returns the bundle's folder.
fn export_one(spec: serde_json::Value, dir: &Path) -> std::path::PathBuf {
    let report = export(&ExportOptions {
        calls: parse_specs(&spec.to_string()).unwrap(),
        out: dir.to_path_buf(),
        force: false,
        pools: Pools::Whole,
        profile: "musa".into(),
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
    let bundle = read_bundle(bundle_dir, 1 << 30).unwrap();
    let tensors: Tensors = bundle
        .inputs
        .iter()
        .map(|(name, t)| (name.clone(), t.to_host()))
        .collect();
    let output = musa::flash_attn_with_kvcache_on(
        &bundle.call,
        tensors,
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
    let values = |a: &ndarray::ArrayD<f64>| a.iter().copied().collect::<Vec<_>>();
    let result = TensorFile::from([
        (
            names::OUT.to_string(),
            StoredTensor::from_values(Dtype::Bfloat16, out.shape(), &values(&out)),
        ),
        (
            names::LSE.to_string(),
            StoredTensor::from_values(Dtype::Float32, lse.shape(), &values(&lse)),
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
    let report = verify(&VerifyOptions {
        dir: dir.to_path_buf(),
        profile: "musa".into(),
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
    let bundle = read_bundle(&bundle_dir, 1 << 30).unwrap();
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
    let expected = read_bundle(&bundle_dir, 1 << 30).unwrap().expected.unwrap();
    let out = expected.tensors[names::OUT].to_host().data;
    assert!(
        out[[0, 0, 0, 0]].is_nan(),
        "the bundle expects the device's NaN"
    );
    run_modelled_device(&bundle_dir, &[], 0.0);
    let (status, text) = verified(dir.path());
    assert_eq!(status, Status::Success, "{text}");
}
