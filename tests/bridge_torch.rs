//! The device loop with real torch on CPU: the recorder in a multi-process server, export of slim
//! bundles, the runner against a torch stand-in that crashes on one case, `verify`, `--resume`.
//!
//! torch with its CUDA runtime wheels is 5.4 GB, so these tests are ignored by a plain
//! `cargo test`; `.ci/run` provisions torch and runs them (`cargo test --test bridge_torch --
//! --ignored` with `FA3CONFORM_TORCH_PYTHON`), and so can anyone: without that variable they
//! provision their own environment from `tests/python/requirements-torch.txt`.

mod bridge_support;

use bridge_support::{repo, torch_python_command};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn fa3conform(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fa3conform"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn run_cases(bundles: &Path, resume: bool) -> Output {
    let mut command = torch_python_command();
    command.args([
        "-m",
        "fa3conform.run",
        "--device",
        "cpu",
        "--target",
        "tests/python/with_torch/crashing_target.py:flash_attn_with_kvcache",
        "--bundles",
    ]);
    command.arg(bundles);
    if resume {
        command.arg("--resume");
    }
    command.output().unwrap()
}

fn verify(bundles: &Path) -> (Option<i32>, Value) {
    let output = fa3conform(&[
        "verify",
        bundles.to_str().unwrap(),
        "--profile",
        "musa",
        "--format",
        "json",
    ]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", stderr(&output)));
    (output.status.code(), report)
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let outcome = c["outcome"].as_str().unwrap();
            (c["name"].as_str().unwrap().to_string(), outcome.to_string())
        })
        .collect()
}

#[test]
#[ignore = "needs torch (5.4 GB): .ci/run runs it; cargo test --test bridge_torch -- --ignored"]
fn the_python_tests_with_torch_pass() {
    let output = torch_python_command()
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "tests/python/with_torch",
            "-v",
        ])
        .output()
        .unwrap();
    let log = stderr(&output);
    assert!(output.status.success(), "{log}");
    assert!(log.contains("Ran 9 tests"), "a test went missing:\n{log}");
}

/// A porter's SGLang-style loop: a server with two tensor-parallel schedulers started with
/// `spawn`, a 1.5M-token KV pool, fp8 with expanded descales, and a target that segfaults on one
/// case; every case is accounted for.
#[test]
#[ignore = "needs torch (5.4 GB): .ci/run runs it; cargo test --test bridge_torch -- --ignored"]
fn a_porters_server_loop_accounts_for_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls");
    let port = (29600 + std::process::id() % 300).to_string();
    let server = torch_python_command()
        .env("PYTHONPATH", {
            let mut paths = vec![repo().join("python")];
            paths.push(repo().join("tests/python/with_torch/fake_sglang"));
            std::env::join_paths(paths).unwrap()
        })
        .args(["-m", "fa3conform.record", "--out"])
        .arg(&calls)
        .arg("--")
        .arg(bridge_support::torch_python())
        .args(["tests/python/with_torch/sglang_server.py", &port])
        .output()
        .unwrap();
    assert!(server.status.success(), "{}", stderr(&server));
    assert!(
        stderr(&server).contains("8 distinct calls in 2 files"),
        "{}",
        stderr(&server)
    );

    // The ranks recorded the same four calls; the recording ran on CPU and meta tensors.
    let certify = fa3conform(&[
        "certify",
        calls.to_str().unwrap(),
        "--device-as",
        "musa",
        "--profile",
        "musa",
        "--format",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&certify.stdout).unwrap();
    assert_eq!(report["calls"].as_array().unwrap().len(), 4, "{report:#}");

    let bundles = dir.path().join("bundles");
    let export = fa3conform(&[
        "export",
        "--spec",
        calls.to_str().unwrap(),
        "--device-as",
        "musa",
        "--out",
        bundles.to_str().unwrap(),
    ]);
    let summary = String::from_utf8_lossy(&export.stdout).into_owned();
    assert_eq!(
        export.status.code(),
        Some(0),
        "{summary}{}",
        stderr(&export)
    );
    assert!(summary.contains("0 skipped; 4 slim;"), "{summary}");
    let bytes: u64 = walk_bytes(&bundles);
    assert!(bytes < 100_000_000, "{bytes} bytes of bundles");

    let run = run_cases(&bundles, false);
    let log = stderr(&run);
    assert!(run.status.success(), "{log}");
    assert!(log.contains("crashed (SIGSEGV)"), "{log}");
    let (status, report) = verify(&bundles);
    assert_eq!(status, Some(1), "{report:#}");
    let outcomes = outcomes(&report);
    assert_eq!(outcomes.len(), 4);
    let crashed: Vec<&(String, String)> =
        outcomes.iter().filter(|(_, o)| o == "mismatch").collect();
    assert_eq!(crashed.len(), 1, "{report:#}");
    assert_eq!(report["matched"], 3, "{report:#}");
    let message = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["outcome"] == "mismatch")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("the process running the call died (killed by SIGSEGV)"),
        "{message}"
    );

    // --resume runs only what has no result.
    let redo = &outcomes.iter().find(|(_, o)| o == "matched").unwrap().0;
    std::fs::remove_file(bundles.join(redo).join("result.json")).unwrap();
    let resumed = run_cases(&bundles, true);
    let log = stderr(&resumed);
    assert!(resumed.status.success(), "{log}");
    assert_eq!(
        log.matches("kept: it has a result (--resume)").count(),
        3,
        "{log}"
    );
    let (_, again) = verify(&bundles);
    assert_eq!(again["matched"], 3, "{again:#}");
}

fn walk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk_bytes(&path)
            } else {
                path.metadata().unwrap().len()
            }
        })
        .sum()
}

/// Every call of the reference, kernel and metadata suites that `musa` accepts verifies on the
/// torch stand-in: numbers, caches and the return convention (the stand-in models the wrapper's
/// first checks only, so rejections are the NumPy loop's business, `tests/bridge_loop.rs`).
#[test]
#[ignore = "needs torch (5.4 GB): .ci/run runs it; cargo test --test bridge_torch -- --ignored"]
fn the_suites_accepted_cases_verify_on_torch() {
    let dir = tempfile::tempdir().unwrap();
    for suite in ["reference", "kernel", "metadata"] {
        let bundles = dir.path().join(suite);
        let export = fa3conform(&[
            "export",
            "--suite",
            suite,
            "--cases",
            "16",
            "--out",
            bundles.to_str().unwrap(),
        ]);
        assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));
        let run = torch_python_command()
            .args(["-m", "fa3conform.run", "--device", "cpu", "--target"])
            .arg("tests/python/with_torch/torch_target.py:flash_attn_with_kvcache")
            .arg("--bundles")
            .arg(&bundles)
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", stderr(&run));
        let (_, report) = verify(&bundles);
        let mut accepted = 0;
        for (name, outcome) in outcomes(&report) {
            let expected: Value = serde_json::from_str(
                &std::fs::read_to_string(bundles.join(&name).join("expected.json")).unwrap(),
            )
            .unwrap();
            if expected["numerics"].is_object() {
                accepted += 1;
                assert_eq!(outcome, "matched", "{suite} {name}: {report:#}");
            }
        }
        assert!(accepted >= 8, "{suite}: only {accepted} accepted cases");
    }
}
