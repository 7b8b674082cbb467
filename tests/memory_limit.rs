//! Every command under an operating-system memory limit: `--memory-cap` of 64 MiB and a data
//! limit (RLIMIT_DATA, which counts the heap and every private writable mapping) of the cap plus
//! [`FIXED_OVERHEAD`], with inputs just under the cap. Each command answers, with exit 0, 1 or 2
//! and a message when it refuses; none is killed by the allocator's abort (134) or a signal
//! (issue 16). glibc's per-thread arenas reserve address space the limit would count, so the
//! children run with `MALLOC_ARENA_MAX=2`.
#![cfg(target_os = "linux")]

use fa3conform::memory::FIXED_OVERHEAD;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CAP: usize = 64 << 20;

/// fa3conform with `args` (and `--memory-cap CAP` where `capped`) under the data limit.
fn limited(args: &[&str], dir: &Path) -> Output {
    let limit_kib = (CAP + FIXED_OVERHEAD) / 1024;
    Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -d "$0" && exec "$@""#)
        .arg(limit_kib.to_string())
        .arg(env!("CARGO_BIN_EXE_fa3conform"))
        .args(args)
        .current_dir(dir)
        .env("MALLOC_ARENA_MAX", "2")
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("sh runs")
}

/// Runs `args` with the cap under the limit; asserts it answered (exit 0, 1 or 2) and returns
/// its stdout and stderr together.
fn answers(args: &[&str], dir: &Path) -> String {
    let cap = CAP.to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--memory-cap", &cap]);
    let output = limited(&all, dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let tail: String = text
        .chars()
        .rev()
        .take(2000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        matches!(output.status.code(), Some(0..=2)),
        "fa3conform {all:?} under a data limit of the cap + {FIXED_OVERHEAD} bytes: {:?}\n{tail}",
        output.status
    );
    text
}

/// A paged decode whose tensors take `pages` × 256 KiB once materialised (two bf16 caches of
/// 64-token pages, 2 KV heads of width 128, in f64), reading `pages` − 10 of them; with
/// `append`, one new token per sequence.
fn paged_decode(pages: usize, append: bool) -> serde_json::Value {
    let per_sequence = pages / 2;
    let mut args = json!({
        "q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [pages, 64, 2, 128], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [pages, 64, 2, 128], "dtype": "bfloat16"}},
        "page_table": {"tensor": {"shape": [2, per_sequence], "dtype": "int32",
                                  "values": (0..2 * per_sequence).collect::<Vec<_>>()}},
        "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32",
                                     "values": [64 * (per_sequence - 10), 64 * per_sequence - 1 - append as usize]}},
        "causal": true,
        "return_softmax_lse": true
    });
    if append {
        args["k"] = json!({"tensor": {"shape": [2, 1, 2, 128], "dtype": "bfloat16"}});
        args["v"] = json!({"tensor": {"shape": [2, 1, 2, 128], "dtype": "bfloat16"}});
    }
    json!({"id": format!("decode-{pages}-pages"), "seed": 1, "args": args})
}

/// Pages whose materialised caches come within a MiB of the cap.
const PAGES_UNDER_THE_CAP: usize = (CAP >> 18) - 4;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A spec whose page table is given value by value (every entry page 0), the file just under the
/// cap.
fn spec_text_under_the_cap() -> String {
    let mut call = paged_decode(24, false);
    let entries = (CAP - 1024) / 2 / 2;
    call["args"]["page_table"] =
        json!({"tensor": {"shape": [2, entries], "dtype": "int32", "values": "VALUES"}});
    let values = "0,".repeat(2 * entries);
    let text = call.to_string().replacen(
        r#""VALUES""#,
        &format!("[{}]", values.trim_end_matches(',')),
        1,
    );
    assert!(text.len() < CAP && text.len() > CAP - 2048);
    text
}

#[test]
fn run_and_certify_answer_for_tensors_just_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    for append in [false, true] {
        let spec = paged_decode(PAGES_UNDER_THE_CAP, append).to_string();
        write(dir.path(), "call.json", &spec);
        let text = answers(&["run", "call.json"], dir.path());
        assert!(text.contains("over the memory cap"), "{text}");
        let text = answers(&["certify", "--numerics", "call.json"], dir.path());
        assert!(text.contains("numerics (musa): not run:"), "{text}");
        answers(
            &["certify", "--numerics", "--profile", "mate", "call.json"],
            dir.path(),
        );
        answers(
            &["run", "call.json", "--out", "out.safetensors"],
            dir.path(),
        );
        answers(
            &[
                "export",
                "--spec",
                "call.json",
                "--out",
                "bundles",
                "--force",
            ],
            dir.path(),
        );
    }
}

#[test]
fn commands_answer_for_a_spec_file_just_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "call.json", &spec_text_under_the_cap());
    for command in [
        &["run", "call.json"][..],
        &["certify", "call.json"],
        &["certify", "--numerics", "call.json"],
        &["export", "--spec", "call.json", "--out", "bundles"],
    ] {
        let text = answers(command, dir.path());
        assert!(
            text.contains("its parsed form needs"),
            "{command:?}: {text}"
        );
    }
    // A forward pass of the same size.
    let call: serde_json::Value = serde_json::from_str(&spec_text_under_the_cap()).unwrap();
    let pass = json!({
        "id": "big", "backend": {"prefix": "forward_decode", "num_hidden_layers": 1,
                                 "max_seqlen_k": 4096},
        "calls": [{"layer": {"layer_id": 0, "tp_q_head_num": 8, "tp_k_head_num": 2,
                             "qk_head_dim": 128, "v_head_dim": 128}, "call": call}]
    });
    write(dir.path(), "pass.json", &pass.to_string());
    let text = answers(&["forward", "pass.json"], dir.path());
    assert!(text.contains("its parsed form needs"), "{text}");
}

#[test]
fn certify_answers_for_recorded_calls_just_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{}\n", paged_decode(24, false));
    write(
        dir.path(),
        "calls.jsonl",
        &line.repeat(CAP / line.len() - 1),
    );
    answers(&["certify", "calls.jsonl", "--format", "json"], dir.path());
}

#[test]
fn verify_answers_for_a_bundle_just_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "call.json",
        &paged_decode(PAGES_UNDER_THE_CAP, false).to_string(),
    );
    // Written without the limit and a larger cap, as a campaign's export would be.
    let export = Command::new(env!("CARGO_BIN_EXE_fa3conform"))
        .args([
            "export",
            "--spec",
            "call.json",
            "--out",
            "bundles",
            "--whole-pools",
        ])
        .args(["--memory-cap", &(16 * CAP).to_string()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(export.status.success(), "{export:?}");
    let case = std::fs::read_dir(dir.path().join("bundles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a case folder");
    // The device "returned" the expected tensors.
    std::fs::copy(
        case.join("expected.safetensors"),
        case.join("result.safetensors"),
    )
    .unwrap();
    write(
        &case,
        "result.json",
        r#"{"schema_version": 1, "outcome": "returned",
            "returned": {"tuple": true, "types": ["Tensor", "Tensor", "Tensor", "Tensor"]}}"#,
    );
    answers(&["verify", "bundles"], dir.path());
}

#[test]
fn scan_answers_for_python_just_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let line = "out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, ver=3)\n";
    write(dir.path(), "big.py", &line.repeat(CAP / line.len() - 1));
    // Deeply nested calls: the most tree for the least text.
    let nested = format!("x = {}q{}\n", "f(".repeat(1 << 16), ")".repeat(1 << 16));
    write(dir.path(), "nested.py", &nested);
    let text = answers(
        &["scan", "big.py", "nested.py", "--format", "json"],
        dir.path(),
    );
    assert!(text.contains("over the memory cap"), "{text}");
}
