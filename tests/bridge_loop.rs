//! The device bridge end to end on CPU: `export` → `python -m fa3conform.run --backend numpy`
//! with targets written in plain NumPy (tests/python/) → `verify`.
//!
//! The NumPy attention target computes independently of fa3conform's reference, and the
//! wrapper target raises the SGLang MUSA wrapper's first errors by its own logic, so a match is
//! a real cross-implementation check of verdicts, numbers and caches.

mod bridge_support;

use bridge_support::{python_command, repo};
use fa3conform::bridge::tensors::{read_tensor_file, write_tensor_file};
use fa3conform::bridge::{ExportOptions, Pools, VerifyOptions, export, verify};
use fa3conform::call::Dtype;
use fa3conform::report::{self, Format, Report, Status};
use fa3conform::spec::parse_specs;
use serde_json::Value;
use std::path::Path;

const WRAPPER_TARGET: &str = "tests/python/musa_wrapper_target.py:flash_attn_with_kvcache";
const ATTENTION_ONLY_TARGET: &str = "tests/python/numpy_target.py:flash_attn_with_kvcache";

fn export_calls(out: &Path) {
    let specs = std::fs::read_to_string(repo().join("tests/bridge_loop/calls.json")).unwrap();
    let options = ExportOptions {
        calls: parse_specs(&specs).unwrap(),
        partition: None,
        out: out.to_path_buf(),
        force: false,
        pools: Pools::Slim,
        profile: "musa".into(),
        memory_cap: 1 << 30,
    };
    let exported = export(&options).unwrap();
    assert_eq!(exported.status(), Status::Success);
    let mut log = Vec::new();
    report::write(&exported, Format::Human, &mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    assert!(
        log.starts_with(&format!(
            "exported 10 bundles to {} (7 accepted by musa, 3 rejected, 0 skipped; ",
            out.display()
        )),
        "{log}"
    );
}

fn run_target(target: &str, bundles: &Path) {
    let output = python_command()
        .args([
            "-m",
            "fa3conform.run",
            "--backend",
            "numpy",
            "--device",
            "cpu",
            "--target",
            target,
            "--bundles",
        ])
        .arg(bundles)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "runner failed:\n{log}");
    assert!(log.contains("[10/10]"), "{log}");
}

/// `verify` in JSON: (status, report).
fn verify_bundles(bundles: &Path) -> (Status, Value) {
    let options = VerifyOptions {
        dir: bundles.to_path_buf(),
        profile: "musa".into(),
        memory_cap: 1 << 30,
    };
    let verified = verify(&options).unwrap();
    let mut out = Vec::new();
    report::write(&verified, Format::Json, &mut out).unwrap();
    (verified.status(), serde_json::from_slice(&out).unwrap())
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn message<'a>(report: &'a Value, case: &str) -> &'a str {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == case)
        .and_then(|c| c["message"].as_str())
        .unwrap()
}

#[test]
fn numpy_stack_matches_verdicts_numbers_and_caches() {
    let dir = tempfile::tempdir().unwrap();
    export_calls(dir.path());
    run_target(WRAPPER_TARGET, dir.path());
    let (status, report) = verify_bundles(dir.path());
    assert_eq!(status, Status::Success, "{report:#}");
    assert_eq!(
        (report["matched"].as_u64(), report["mismatched"].as_u64()),
        (Some(10), Some(0))
    );
    assert!(message(&report, "paged-gqa-decode").starts_with("out max "));
    assert!(message(&report, "paged-gqa-decode").contains("; lse max "));
    assert!(message(&report, "append-batch-idx").ends_with("; caches equal"));
    assert!(
        message(&report, "append-rotary-interleaved-fixed-position").ends_with("; caches equal")
    );
    assert!(message(&report, "sinks-local-f16").contains("; lse max "));
    assert_eq!(
        message(&report, "ver-2"),
        "raised ValueError: Only ver=3 is supported for MUSA FA3."
    );
    assert_eq!(
        message(&report, "unknown-keyword"),
        "raised TypeError: flash_attn_with_kvcache() got an unexpected keyword argument 'fa_version'"
    );

    // A wrong number is caught by the tolerance rule.
    let result = dir.path().join("varlen-causal/result.safetensors");
    let mut tensors =
        read_tensor_file(&result, &mut fa3conform::memory::Budget::new(1 << 30)).unwrap();
    let out = tensors.get_mut("out").unwrap();
    assert_eq!(out.dtype, Dtype::Bfloat16);
    out.bytes[0..2].copy_from_slice(&half::bf16::from_f32(3.0).to_le_bytes());
    write_tensor_file(&result, &tensors).unwrap();
    let (status, report) = verify_bundles(dir.path());
    assert_eq!(status, Status::Findings);
    assert_eq!(report["mismatched"], 1);
    assert!(
        message(&report, "varlen-causal").starts_with("out: max "),
        "{report:#}"
    );
}

#[test]
fn a_target_without_the_wrapper_checks_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    export_calls(dir.path());
    run_target(ATTENTION_ONLY_TARGET, dir.path());
    let (status, report) = verify_bundles(dir.path());
    assert_eq!(status, Status::Findings);
    let mismatched: Vec<String> = outcomes(&report)
        .into_iter()
        .filter(|(_, outcome)| outcome == "mismatch")
        .map(|(name, _)| name)
        .collect();
    assert_eq!(mismatched, ["k-cache-last-dim-strided", "ver-2"]);
    assert_eq!(
        message(&report, "ver-2"),
        "expected ValueError: Only ver=3 is supported for MUSA FA3., but the call returned"
    );
    // A missing result is a mismatch too (the runner crashed before the case).
    std::fs::remove_file(dir.path().join("unknown-keyword/result.json")).unwrap();
    let (_, report) = verify_bundles(dir.path());
    assert_eq!(
        message(&report, "unknown-keyword"),
        "no result.json: the runner did not reach this case"
    );
}

#[test]
fn bundles_open_with_python_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    export_calls(dir.path());
    let script = "import sys; from safetensors import safe_open\n\
                  f = safe_open(sys.argv[1] + '/inputs.safetensors', framework='numpy')\n\
                  print(sorted(f.keys()), f.get_tensor('cache_seqlens').tolist(), f.get_tensor('page_table').shape)\n\
                  g = safe_open(sys.argv[1] + '/expected.safetensors', framework='numpy')\n\
                  print(sorted(g.keys()), g.get_tensor('softmax_lse').shape)";
    let output = python_command()
        .args(["-c", script])
        .arg(dir.path().join("paged-gqa-decode"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "['cache_seqlens', 'k_cache', 'page_table', 'q', 'v_cache'] [20, 37] (2, 4)\n\
         ['out', 'out_lowprec', 'softmax_lse', 'softmax_lse_lowprec'] (2, 4, 1)\n"
    );
}
