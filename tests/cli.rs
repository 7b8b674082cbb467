//! The command line end to end: exit codes and what a person or a script reads.

use std::process::{Command, Output};

fn fa3conform(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fa3conform"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

#[test]
fn run_summarises_the_reference_outputs() {
    let output = fa3conform(&["run", "examples/decode-paged.json", "--format", "json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["out"]["shape"], serde_json::json!([2, 1, 8, 128]));
    assert_eq!(doc["softmax_lse"]["shape"], serde_json::json!([2, 8, 1]));
    assert_eq!(doc["out"]["non_finite"], 0);
    assert!(
        doc["k_cache"].is_null(),
        "nothing is appended in a decode call"
    );
}

#[test]
fn run_reports_caches_after_an_append() {
    let spec = r#"{"id": "append", "args": {
        "q": {"tensor": {"shape": [1, 2, 2, 64], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [1, 8, 1, 64], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [1, 8, 1, 64], "dtype": "bfloat16"}},
        "k": {"tensor": {"shape": [1, 2, 1, 64], "dtype": "bfloat16"}},
        "v": {"tensor": {"shape": [1, 2, 1, 64], "dtype": "bfloat16"}},
        "cache_seqlens": {"tensor": {"shape": [1], "dtype": "int32", "values": [3]}}}}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("append.json");
    std::fs::write(&path, spec).unwrap();
    let output = fa3conform(&["run", path.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("k_cache      shape [1, 8, 1, 64]"), "{text}");
}

#[test]
fn bad_input_is_exit_code_2_with_the_json_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"{"args": {"q": {"tensor": {"shape": [1, -2], "dtype": "bfloat16"}}}}"#,
    )
    .unwrap();
    let output = fa3conform(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("args.q.tensor.shape[1]: expected a non-negative integer"),
        "{stderr}"
    );
}

#[test]
fn over_the_memory_cap_is_refused_before_materialising() {
    // decode-paged.json's tensors: q 2·1·8·128, each cache 16·64·2·128, page_table 16 and
    // cache_seqlens 2 elements, 526,354 f64 values.
    let output = fa3conform(&[
        "run",
        "examples/decode-paged.json",
        "--memory-cap",
        "1000000",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the call's tensors need 4210832 bytes once materialised, over the ")
            && stderr.contains(" bytes left of the memory cap (raise it with --memory-cap)"),
        "{stderr}"
    );
    // A cap the file itself does not fit: refused before it is parsed.
    let output = fa3conform(&["run", "examples/decode-paged.json", "--memory-cap", "1000"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: reading examples/decode-paged.json: its parsed form needs ")
            && stderr.contains("over the memory cap of 1000 bytes (raise it with --memory-cap)"),
        "{stderr}"
    );
}

/// Without `--numerics` only the scheduler-metadata checks read tensor values (the integer
/// ones); they too stay within `--memory-cap`.
#[test]
fn certify_reads_index_tensors_within_the_memory_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long-page-table.json");
    let page_table = r#"{"tensor": {"shape": [1, 1000000], "dtype": "int32"}}"#;
    std::fs::write(
        &path,
        format!(
            r#"{{"args": {{"q": {{"tensor": {{"shape": [1, 1, 8, 128], "dtype": "bfloat16"}}}},
                "k_cache": {{"tensor": {{"shape": [64, 64, 8, 128], "dtype": "bfloat16"}}}},
                "v_cache": {{"tensor": {{"shape": [64, 64, 8, 128], "dtype": "bfloat16"}}}},
                "cache_seqlens": {{"tensor": {{"shape": [1], "dtype": "int32", "values": [100]}}}},
                "page_table": {page_table},
                "cu_seqlens_q": {{"tensor": {{"shape": [2], "dtype": "int32", "values": [0, 1]}}}},
                "max_seqlen_q": 1}}}}"#
        ),
    )
    .unwrap();
    let certify = |cap: &str| {
        let output = fa3conform(&[
            "certify",
            "--profile",
            "musa",
            path.to_str().unwrap(),
            "--memory-cap",
            cap,
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let capped = certify("1000000");
    assert!(
        capped.contains(
            "H-SCHED-UNCHECKED (musa): the metadata could not be checked against the call: "
        ) && capped.contains("bytes left of the memory cap (raise it with --memory-cap)"),
        "{capped}"
    );
    let default = certify(&fa3conform::tensor::DEFAULT_MEMORY_CAP.to_string());
    assert!(!default.contains("H-SCHED-UNCHECKED"), "{default}");
}

#[test]
fn export_writes_one_bundle_per_suite_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundles");
    let output = fa3conform(&[
        "export",
        "--suite",
        "validation",
        "--cases",
        "2",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut bundles: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    bundles.sort();
    assert_eq!(bundles.len(), 2);
    for bundle in bundles {
        for file in ["call.json", "inputs.safetensors", "expected.json"] {
            assert!(
                out.join(&bundle).join(file).exists(),
                "{bundle:?} lacks {file}"
            );
        }
    }
}

#[test]
fn certify_flags_metadata_computed_for_other_arguments() {
    // musa-fa3.md §6.11 example 1: metadata computed with pack_gqa=None (200 x 8 rows > 256: no
    // packing, one m-block of 256) used by a call with pack_gqa=True (1600 rows: 7 m-blocks).
    let output = fa3conform(&[
        "certify",
        "examples/stale-metadata-pack-gqa.json",
        "--format",
        "json",
    ]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("H-SCHED-M-BLOCKS"), "{text}");
    assert!(
        text.contains("rows 32..200 of sequence 0 are never computed"),
        "{text}"
    );
}

#[test]
fn certify_numerics_show_the_rows_stale_metadata_never_computes() {
    // The same call with --numerics: the buffer its metadata_args describe leaves rows 32..200
    // unwritten, and the modelled stack returns NaN there while the reference has values.
    let output = fa3conform(&[
        "certify",
        "examples/stale-metadata-pack-gqa.json",
        "--numerics",
        "--format",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let numerics = &doc["calls"][0]["numerics"];
    assert_eq!(numerics["status"], "differs", "{numerics}");
    let detail = numerics["detail"].as_str().unwrap();
    assert!(
        detail.contains("out: at [32, 0, 0]: implementation NaN"),
        "{detail}"
    );
}

#[test]
fn certify_numerics_pass_for_a_sound_call_and_skip_rejected_ones() {
    let output = fa3conform(&[
        "certify",
        "examples/decode-paged.json",
        "examples/decode-ver2.json",
        "--numerics",
        "--format",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let calls = &doc["calls"];
    assert_eq!(calls[0]["numerics"]["status"], "within-tolerance", "{doc}");
    assert_eq!(calls[0]["certified"], true);
    // ver=2 is rejected by the wrapper: nothing to compute.
    assert!(calls[1]["numerics"].is_null(), "{doc}");
    assert_eq!(calls[1]["certified"], false);
    // Without --numerics the key is null for every call.
    let plain = fa3conform(&["certify", "examples/decode-paged.json", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(doc["calls"][0]["numerics"].is_null());
    assert_eq!(plain.status.code(), Some(0));
}

#[test]
fn explain_refuses_an_empty_query() {
    let output = fa3conform(&["explain", ""]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "no site is listed for an empty query"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("a value is required for '[MESSAGE]'"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The JSON document a command printed, and its exit code.
fn json_document(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let output = fa3conform(args);
    let doc = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), doc)
}

#[test]
fn every_json_document_carries_its_schema_version_and_the_documented_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let bundles = dir.path().join("bundles");
    let bundles = bundles.to_str().unwrap();
    // (arguments, exit code, schema version)
    let cases: [(&[&str], i32, u32); 7] = [
        (&["conform", "--suite", "validation", "--cases", "2"], 0, 2),
        (&["certify", "examples/decode-ver2.json"], 1, 1),
        (&["forward", "examples/forward-plain.json"], 0, 1),
        (&["scan", "tests/scan/fixtures/rules/FA3M001.py"], 1, 2),
        (&["run", "examples/decode-paged.json"], 0, 1),
        (
            &[
                "export",
                "--spec",
                "examples/decode-ver2.json",
                "--out",
                bundles,
            ],
            0,
            1,
        ),
        // The runner never ran: a bundle without a result is a mismatch.
        (&["verify", bundles], 1, 1),
    ];
    for (args, code, version) in cases {
        let args = [args, &["--format", "json"]].concat();
        let (exit, doc) = json_document(&args);
        assert_eq!(exit, Some(code), "{args:?}: {doc}");
        assert_eq!(doc["schema_version"], version, "{args:?}: {doc}");
    }
}

#[test]
fn bad_input_outranks_findings_and_formats_are_offered_per_command() {
    // A missing file: input error (2), whatever the other files would have found.
    let output = fa3conform(&["certify", "examples/decode-ver2.json", "no/such.json"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("error: reading no/such.json: "),
        "{stderr}"
    );
    let output = fa3conform(&[
        "forward",
        "examples/forward-plain.json",
        "--format",
        "junit",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("[possible values: human, json]"),
        "{stderr}"
    );
}

#[test]
fn conform_shards_merge_and_an_incomplete_set_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shard = |i: u32| dir.path().join(format!("shard-{i}.json"));
    for i in 1..=2 {
        let output = fa3conform(&[
            "conform",
            "--suite",
            "validation",
            "--cases",
            "5",
            "--partition",
            &format!("count:{i}/2"),
            "--format",
            "json",
            "-o",
            shard(i).to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }
    let output = fa3conform(&[
        "merge-reports",
        shard(2).to_str().unwrap(),
        shard(1).to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let merged: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let indices: Vec<u64> = merged["suites"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2, 3, 4]);
    assert!(merged.get("partition").is_none(), "{merged}");

    let output = fa3conform(&["merge-reports", shard(1).to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: shard count:2/2 missing: the merged report would not cover the campaign\n"
    );
}

/// The first example's call on one line, with `id`.
fn one_line_call(id: &str) -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/decode-paged.json"),
    )
    .unwrap();
    let mut call: serde_json::Value = serde_json::from_str(&text).unwrap();
    call["id"] = id.into();
    call.to_string()
}

#[test]
fn certify_reports_an_unreadable_call_and_certifies_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("calls.jsonl");
    std::fs::write(
        &lines,
        format!(
            "{}\n{{\"id\": \"broken\",}}\n{}\n",
            one_line_call("a"),
            one_line_call("c")
        ),
    )
    .unwrap();
    let array = dir.path().join("calls.json");
    std::fs::write(
        &array,
        format!(
            "[{}, {{\"args\": {{\"q\": {{\"tensor\": {{\"shape\": [1, -2], \"dtype\": \"bfloat16\"}}}}}}}}]",
            one_line_call("d")
        ),
    )
    .unwrap();
    let (lines, array) = (lines.to_str().unwrap(), array.to_str().unwrap());

    let (code, doc) = json_document(&["certify", lines, array, "--format", "json"]);
    assert_eq!(code, Some(2), "{doc}");
    let ids: Vec<&str> = doc["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "c", "d"]);
    assert!(
        doc["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["certified"] == true)
    );
    assert_eq!(
        doc["invalid"],
        serde_json::json!([
            {"file": lines, "path": "line 2", "message": "invalid JSON at column 17: trailing comma"},
            {"file": array, "path": "[1].args.q.tensor.shape[1]", "message": "expected a non-negative integer"},
        ])
    );

    let output = fa3conform(&["certify", lines]);
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "{lines}: line 2: invalid JSON at column 17: trailing comma: not certified (input error)\n"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("2 of 3 calls certified for musa (1 could not be read)\n"),
        "{text}"
    );
    let junit =
        String::from_utf8(fa3conform(&["certify", lines, "--format", "junit"]).stdout).unwrap();
    assert!(
        junit.contains("message=\"input error: invalid JSON at column 17: trailing comma\""),
        "{junit}"
    );
}

#[test]
fn export_reads_its_spec_from_standard_input() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundles");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fa3conform"))
        .args(["export", "--spec", "-", "--out", out.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(one_line_call("from-stdin").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.join("from-stdin/call.json").is_file());
}

/// Every command that reads a user-named file reads at most the cap (issue 16 item 4): a spec
/// that is a link to `/dev/zero` was read until memory ran out.
#[test]
fn endless_input_files_are_refused_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("calls.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let zero = zero.to_str().unwrap();
    let out = dir.path().join("bundles");
    let commands: [&[&str]; 4] = [
        &["certify", zero],
        &["run", zero],
        &["forward", zero],
        &["export", "--spec", zero, "--out", out.to_str().unwrap()],
    ];
    for args in commands {
        let output = fa3conform(&[args, &["--memory-cap", "1000000"]].concat());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains(
                "calls.json: more than 1000000 bytes, over the memory cap (raise it with --memory-cap)"
            ),
            "{args:?}: {stderr}"
        );
    }
}

/// Calls written for mate's FA3-compatible wrapper, certified with `--profile mate`: `mate` is the
/// gate, and `--numerics` runs each as one rank's call on the kernel path (a decode whose sink is
/// `s_aux`; rank 1 of a context-parallel causal prefill).
#[test]
fn certify_with_profile_mate_gates_on_mate_and_computes_its_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mate-calls.jsonl");
    let calls = [
        r#"{"id": "s-aux", "args": {"q": {"tensor": {"shape": [4, 8, 128], "dtype": "bfloat16"}},
            "k_cache": {"tensor": {"shape": [8, 16, 2, 128], "dtype": "bfloat16"}},
            "v_cache": {"tensor": {"shape": [8, 16, 2, 128], "dtype": "bfloat16"}},
            "cache_seqlens": {"tensor": {"shape": [4], "dtype": "int32", "values": [17, 30, 1, 9]}},
            "page_table": {"tensor": {"shape": [4, 2], "dtype": "int32", "values": [0, 1, 2, 3, 4, 5, 6, 7]}},
            "cu_seqlens_q": {"tensor": {"shape": [5], "dtype": "int32", "values": [0, 1, 2, 3, 4]}},
            "max_seqlen_q": 1, "causal": true,
            "s_aux": {"tensor": {"shape": [8], "dtype": "bfloat16"}}}}"#,
        r#"{"id": "cp-rank-1", "args": {"q": {"tensor": {"shape": [1, 16, 8, 128], "dtype": "bfloat16"}},
            "k_cache": {"tensor": {"shape": [1, 64, 2, 128], "dtype": "bfloat16"}},
            "v_cache": {"tensor": {"shape": [1, 64, 2, 128], "dtype": "bfloat16"}},
            "cache_seqlens": {"tensor": {"shape": [1], "dtype": "int32", "values": [64]}},
            "causal": true, "cp_world_size": 2, "cp_rank": 1,
            "cp_tot_seqused_k": {"tensor": {"shape": [1], "dtype": "int32", "values": [128]}}}}"#,
    ];
    let lines: Vec<String> = calls.iter().map(|c| c.replace('\n', " ")).collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let path = path.to_str().unwrap();
    let output = fa3conform(&[
        "certify",
        "--profile",
        "mate",
        path,
        "--numerics",
        "--format",
        "json",
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for call in doc["calls"].as_array().unwrap() {
        assert_eq!(call["certified"], true, "{call}");
        assert_eq!(call["numerics"]["status"], "within-tolerance", "{call}");
    }
    // the same calls for SGLang's wrapper: musa is the gate and refuses mate's own keywords
    let output = fa3conform(&["certify", "--profile", "musa", "--profile", "mate", path]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("0 of 2 calls certified for musa"), "{text}");
    let output = fa3conform(&["certify", "--profile", "mate", path]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("2 of 2 calls certified for mate"), "{text}");
}

/// `--numerics` under a cap the call's tensors fit but not with the kernel path's buffers on top:
/// the numbers are "not run" with the kernel's own figure, and the call stays certified. The
/// example's tensors take 4,210,832 bytes materialised (526,354 f64 values).
/// `certify --numerics` holds the call's tensors, then the two references, then the kernel path's
/// buffers in one budget, and says which did not fit.
#[test]
fn certify_numerics_over_the_memory_cap_are_not_run() {
    let detail = |cap: &str| {
        let output = fa3conform(&[
            "certify",
            "examples/decode-paged.json",
            "--numerics",
            "--format",
            "json",
            "--memory-cap",
            cap,
        ]);
        assert_eq!(output.status.code(), Some(0));
        let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let numerics = &doc["calls"][0]["numerics"];
        assert_eq!(numerics["status"], "not-run", "{numerics}");
        numerics["detail"].as_str().unwrap().to_string()
    };
    // The parsed call and the tensors (4,210,832 bytes, see
    // over_the_memory_cap_is_refused_before_materialising) fit the first cap, the references do
    // not; a cap just large enough for them leaves the kernel path too little.
    let references = detail("4250000");
    let number_after = |text: &str, marker: &str| -> u64 {
        text.split(marker)
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number after {marker:?} in {text}"))
    };
    let held = number_after(&references, " bytes besides the ");
    let needed = number_after(&references, " precision) needs ");
    assert!(
        references.starts_with("not run: the reference (in f64 and in low precision) needs ")
            && references.ends_with(
                " bytes already held, over the memory cap of 4250000 bytes (raise it with \
                 --memory-cap)"
            )
            && (4210832..4250000).contains(&held),
        "{references}"
    );
    let enough_for_the_references = (held + needed).to_string();
    let kernel = detail(&enough_for_the_references);
    assert!(
        kernel.starts_with("not run: the kernel path needs ")
            && kernel.ends_with(&format!(
                " bytes besides the {} bytes already held, over the memory cap of {} bytes \
                 (raise it with --memory-cap)",
                held + needed,
                enough_for_the_references
            )),
        "{kernel}"
    );
}
