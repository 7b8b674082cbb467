//! The SGLang scheduler state that call specs and forward passes express (issue 18 item 7): the
//! contents of cached metadata buffers, `can_run_tbo` per call, several backend instances,
//! `max_seqlen_k`'s default, the device's multiprocessor count on `certify`, and the findings that
//! judge a reused buffer.

use fa3conform::certify::{CertifyOptions, certify};
use fa3conform::forward::{ForwardReport, emulate, parse_forward};
use fa3conform::mate::DEFAULT_MP;
use fa3conform::report::{Report, Status};
use fa3conform::scheduler::stale_metadata_findings;
use fa3conform::spec::parse_specs;
use fa3conform::tensor::DEFAULT_MEMORY_CAP;
use fa3conform::validate::{Hazard, Severity};
use serde_json::{Value, json};
use std::io::Write;

fn tensor(shape: &[usize], dtype: &str) -> Value {
    json!({"tensor": {"shape": shape, "dtype": dtype}})
}

fn ints(values: &[i64]) -> Value {
    json!({"tensor": {"shape": [values.len()], "dtype": "int32", "values": values}})
}

/// A paged decode call of `b` sequences (8 query heads over 2 KV heads, head dim 64).
fn decode(id: &str, b: usize) -> Value {
    let lengths: Vec<i64> = (0..b as i64).map(|i| 20 + 13 * i).collect();
    let cu: Vec<i64> = (0..=b as i64).collect();
    let pages: Vec<i64> = (0..3 * b as i64).collect();
    json!({"id": id, "args": {
        "q": tensor(&[b, 8, 64], "bfloat16"),
        "cu_seqlens_q": ints(&cu),
        "max_seqlen_q": 1,
        "k_cache": tensor(&[3 * b, 16, 2, 64], "bfloat16"),
        "v_cache": tensor(&[3 * b, 16, 2, 64], "bfloat16"),
        "page_table": {"tensor": {"shape": [b, 3], "dtype": "int32", "values": pages}},
        "cache_seqlens": ints(&lengths),
        "causal": true,
        "return_softmax_lse": true}})
}

fn layer(layer_id: u32) -> Value {
    json!({"layer_id": layer_id, "tp_q_head_num": 8, "tp_k_head_num": 2,
           "qk_head_dim": 64, "v_head_dim": 64})
}

fn run(pass: Value) -> ForwardReport {
    emulate(
        &parse_forward(&pass.to_string()).unwrap(),
        DEFAULT_MP,
        DEFAULT_MEMORY_CAP,
    )
}

fn codes(report: &ForwardReport, call: usize) -> Vec<&'static str> {
    report.calls[call].findings.iter().map(|f| f.code).collect()
}

/// The codes of the findings that are warnings or errors.
fn serious(findings: &[Hazard]) -> Vec<&'static str> {
    findings
        .iter()
        .filter(|h| h.severity >= Severity::Warning)
        .map(|h| h.code)
        .collect()
}

const TOO_SMALL: &str = "raises AssertionError: metadata buffer is too small";

#[test]
fn a_reused_buffer_shorter_than_4b_raises_in_forward() {
    // A TBO micro-batch of 3 after one of 2: layer 1 reuses the 8-element buffer layer 0 computed.
    let report = run(
        json!({"id": "tbo", "backend": {"num_hidden_layers": 2, "max_seqlen_k": 64},
        "calls": [
            {"layer": layer(0), "call": decode("mb0-layer0", 2)},
            {"layer": layer(1), "call": decode("mb1-layer1", 3)}]}),
    );
    assert_eq!(report.calls[0].outcome, "accepted");
    assert_eq!(report.calls[1].outcome, TOO_SMALL);
    assert!(report.calls[1].flagged);
    assert_eq!(report.status(), Status::Findings);
}

/// A call spec file of `calls` for `certify`, and certify's report on it.
fn certify_calls(calls: &[Value], numerics: bool, mp: usize) -> fa3conform::certify::CertifyReport {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(Value::Array(calls.to_vec()).to_string().as_bytes())
        .unwrap();
    certify(&CertifyOptions {
        files: vec![file.path().to_path_buf()],
        profiles: vec!["musa".into()],
        numerics,
        memory_cap: DEFAULT_MEMORY_CAP,
        mp,
        device_as: None,
    })
    .unwrap()
}

fn with_backend(mut call: Value, backend: Value) -> Value {
    call["context"] = json!({"sglang_backend": backend});
    call
}

#[test]
fn certify_numerics_rejects_a_call_whose_reused_buffer_is_too_small() {
    // One process: the first call recomputes for 2 sequences, the second (layer 1) reuses it.
    let backend = |layer_id| {
        json!({"prefix": "forward_decode", "layer": layer(layer_id), "num_hidden_layers": 2,
               "max_seqlen_k": 64})
    };
    let calls = [
        with_backend(decode("layer0", 2), backend(0)),
        with_backend(decode("layer1", 3), backend(1)),
    ];
    let report = certify_calls(&calls, true, DEFAULT_MP);
    assert!(
        report.reports[0].passes(),
        "{}",
        report.reports[0].summary()
    );
    let second = &report.reports[1];
    assert_eq!(
        second.summary(),
        "rejected on musa: AssertionError: metadata buffer is too small"
    );
    assert!(!second.passes());
}

#[test]
fn a_cached_buffer_in_the_context_is_checked_against_the_call() {
    let backend = |cached: Value| {
        json!({"prefix": "forward_decode", "layer": layer(1), "num_hidden_layers": 2,
               "max_seqlen_k": 64, "cached_metadata": {"forward_decode": cached}})
    };
    // Too short for 3 sequences: mate's assertion.
    let short = with_backend(
        decode("short", 3),
        backend(json!({"values": [1, 1, 0, 1, 1, 1, 1, 1]})),
    );
    let report = certify_calls(&[short], false, DEFAULT_MP);
    assert_eq!(
        report.reports[0].summary(),
        "rejected on musa: AssertionError: metadata buffer is too small"
    );
    // Long enough, but computed for another batch: batch 1 is never computed.
    let stale = with_backend(
        decode("stale", 2),
        backend(json!({"values": [1, 1, 0, 0, 1, 1, 1, 1]})),
    );
    let call = &parse_specs(&stale.to_string()).unwrap()[0];
    let codes: Vec<&str> = stale_metadata_findings(call)
        .iter()
        .map(|h| h.code)
        .collect();
    assert_eq!(codes, ["H-SCHED-BATCH-TABLE"]);
    // Given by its arguments: the buffer they give is the one checked.
    let mut args = json!({"batch_size": 2, "max_seqlen_q": 1, "max_seqlen_k": 64,
        "num_heads_q": 8, "num_heads_kv": 2, "headdim": 64, "cache_seqlens": [20, 33],
        "cu_seqlens_q": [0, 1, 2], "causal": true});
    let described = with_backend(
        decode("described", 2),
        backend(json!({"metadata_args": args.clone()})),
    );
    let call = &parse_specs(&described.to_string()).unwrap()[0];
    assert_eq!(serious(&stale_metadata_findings(call)), Vec::<&str>::new());
    args["max_seqlen_q"] = json!(7);
    let other = with_backend(decode("other", 2), backend(json!({"metadata_args": args})));
    let call = &parse_specs(&other.to_string()).unwrap()[0];
    let findings = stale_metadata_findings(call);
    let differ = findings
        .iter()
        .find(|h| h.code == "H-SCHED-ARGS-DIFFER")
        .unwrap();
    assert!(
        differ.message.contains("max_seqlen_q=7, call has 1"),
        "{}",
        differ.message
    );
    // Neither values nor arguments: a clear error.
    let empty = with_backend(decode("empty", 2), backend(json!({})));
    let message = parse_specs(&empty.to_string()).unwrap_err().to_string();
    assert!(
        message.contains("a cached buffer gives its values, its metadata_args, or both"),
        "{message}"
    );
}

#[test]
fn a_forward_pass_starts_with_the_buffers_its_backend_caches() {
    let report = run(json!({"id": "stale-pass",
        "backend": {"num_hidden_layers": 2, "max_seqlen_k": 64,
                    "cached_metadata": {"forward_decode": {"values": [1, 1, 1, 0, 1, 1, 1, 1]}}},
        "calls": [
            {"layer": layer(1), "call": decode("layer1", 2)},
            {"layer": layer(1), "call": decode("layer1-bigger", 3)}]}));
    assert_eq!(
        report.calls[0].metadata,
        "reused from forward_decode, cached before this pass"
    );
    // Checked: only its batch order differs from the call's own.
    assert_eq!(codes(&report, 0), ["H-SCHED-PERF-ONLY"]);
    assert!(!report.calls[0].flagged);
    assert_eq!(report.calls[1].outcome, TOO_SMALL);
}

#[test]
fn can_run_tbo_per_call_moves_the_layer_that_refreshes() {
    // With TBO on pipeline rank 0 the first refreshing layer moves by first_k_dense_replace (1).
    let report = run(
        json!({"id": "tbo", "backend": {"num_hidden_layers": 3, "max_seqlen_k": 64,
                                                    "first_k_dense_replace": 1},
        "calls": [
            {"layer": layer(0), "call": decode("no-tbo-layer0", 2)},
            {"layer": layer(1), "can_run_tbo": true, "call": decode("tbo-layer1", 2)},
            {"layer": layer(1), "can_run_tbo": false, "call": decode("no-tbo-layer1", 2)},
            {"layer": layer(1), "call": decode("still-no-tbo-layer1", 2)}]}),
    );
    let sources: Vec<&str> = report.calls.iter().map(|r| r.metadata.as_str()).collect();
    assert_eq!(
        sources,
        [
            "recomputed and stored under forward_decode",
            "recomputed and stored under forward_decode",
            "reused from forward_decode, computed for call tbo-layer1",
            "reused from forward_decode, computed for call tbo-layer1",
        ]
    );
}

#[test]
fn the_wrapper_injects_from_the_last_backend_constructed() {
    let path = format!("{}/examples/forward-draft.json", env!("CARGO_MANIFEST_DIR"));
    let report = emulate(
        &parse_forward(&std::fs::read_to_string(path).unwrap()).unwrap(),
        DEFAULT_MP,
        DEFAULT_MEMORY_CAP,
    );
    let backends: Vec<&str> = report.calls.iter().map(|r| r.backend.as_str()).collect();
    assert_eq!(backends, ["target", "draft", "target"]);
    // Before the draft model ran a layer, nothing is injected into the target's call.
    assert_eq!(report.calls[0].metadata, "none");
    assert_eq!(codes(&report, 0), ["H-SCHED-OTHER-BACKEND"]);
    assert!(
        report.calls[0].findings[0]
            .message
            .ends_with("(draft): it has run no layer, so nothing is injected"),
        "{}",
        report.calls[0].findings[0].message
    );
    assert!(!report.calls[1].flagged, "{:?}", report.calls[1]);
    // Afterwards the target's layer 1 gets metadata for the draft's layer 0 (8 KV heads, decode).
    assert_eq!(
        report.calls[2].metadata,
        "recomputed and stored under forward_decode"
    );
    assert_eq!(report.calls[2].prefix, "forward_extend");
    let third = codes(&report, 2);
    assert_eq!(third[0], "H-SCHED-OTHER-BACKEND");
    let differ = &report.calls[2].findings[1];
    assert_eq!(differ.code, "H-SCHED-ARGS-DIFFER");
    assert!(
        differ.message.contains("num_heads_kv=8, call has 2"),
        "{}",
        differ.message
    );
    // Names are checked.
    let unknown = json!({"id": "x", "backends": [{"name": "a", "backend": {}}],
        "calls": [{"backend": "b", "layer": layer(0), "call": decode("c", 2)}]});
    let message = parse_forward(&unknown.to_string()).unwrap_err().to_string();
    assert!(
        message.starts_with("calls[0].backend: no backend is named `b`"),
        "{message}"
    );
    let both = json!({"id": "x", "backend": {}, "backends": [{"name": "a", "backend": {}}],
        "calls": []});
    let message = parse_forward(&both.to_string()).unwrap_err().to_string();
    assert!(
        message.contains("exactly one of `backend` and `backends`"),
        "{message}"
    );
}

#[test]
fn an_omitted_max_seqlen_k_is_sglangs_initial_zero() {
    let report = run(json!({"id": "no-max", "backend": {"num_hidden_layers": 2},
        "calls": [{"layer": layer(0), "call": decode("layer0", 2)}]}));
    assert_eq!(report.calls[0].outcome, "accepted");
    // An explicit null is Python's None, which chain M cannot subtract from.
    let report = run(
        json!({"id": "null-max", "backend": {"num_hidden_layers": 2, "max_seqlen_k": null},
        "calls": [{"layer": layer(0), "call": decode("layer0", 2)}]}),
    );
    assert_eq!(
        report.calls[0].outcome,
        "raises TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'"
    );
}

#[test]
fn a_longer_buffer_that_reslices_cleanly_is_a_warning_only() {
    // b = 2 reads [0, 8) of a 12-element buffer at offsets 0, 2, 4, 6: the vectors it was written
    // with, so the call computes what it asks for.
    let mut call = decode("longer", 2);
    call["args"]["scheduler_metadata"] = ints(&[1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0]);
    let report = certify_calls(&[call], true, DEFAULT_MP);
    let gate = &report.reports[0].gate;
    let scheduler: Vec<Hazard> = gate
        .hazards
        .iter()
        .filter(|h| h.code.starts_with("H-SCHED-"))
        .cloned()
        .collect();
    assert_eq!(serious(&scheduler), ["H-SCHED-BUFFER-LONGER"]);
    assert!(scheduler.iter().all(|h| h.severity < Severity::Error));
    assert!(report.reports[0].passes(), "{:?}", report.reports[0]);
}

#[test]
fn m_blocks_names_only_rows_no_position_computes() {
    // Sequence 0 (300 rows: two 256-row blocks) sits at both positions; position 0 has one block,
    // position 1 two, so position 1 computes rows 256..300 (the batch table finding says that
    // sequence 0 is computed twice and sequence 1 never).
    let prefill = |table_splits: [i64; 2]| {
        json!({"id": "twice", "args": {
            "q": tensor(&[340, 16, 128], "bfloat16"),
            "cu_seqlens_q": ints(&[0, 300, 340]),
            "max_seqlen_q": 300,
            "k_cache": tensor(&[80, 16, 4, 128], "bfloat16"),
            "v_cache": tensor(&[80, 16, 4, 128], "bfloat16"),
            "page_table": {"tensor": {"shape": [2, 40], "dtype": "int32",
                                      "values": (0..80).collect::<Vec<i64>>()}},
            "cache_seqlens": ints(&[300, 40]),
            "causal": true,
            "scheduler_metadata": ints(&[table_splits[0], table_splits[1], 0, 0, 1, 2, 1, 1])}})
    };
    let findings = |splits| {
        let call = &parse_specs(&prefill(splits).to_string()).unwrap()[0];
        stale_metadata_findings(call)
    };
    let one_split = findings([1, 1]);
    let codes: Vec<&str> = one_split.iter().map(|h| h.code).collect();
    assert!(codes.contains(&"H-SCHED-BATCH-TABLE"), "{codes:?}");
    assert!(!codes.contains(&"H-SCHED-M-BLOCKS"), "{one_split:?}");
    // When the short position splits, its combine rewrites every row of the sequence from its own
    // split partials: the rows position 1 computes are lost again.
    let split = findings([2, 1]);
    let m_blocks = split.iter().find(|h| h.code == "H-SCHED-M-BLOCKS").unwrap();
    assert!(
        m_blocks.message.ends_with(
            "rows 256..300 of sequence 0 are computed by position 1 only, and position 0's combine \
             merges them from split partials it did not write"
        ),
        "{}",
        m_blocks.message
    );
}

#[test]
fn certify_takes_the_devices_multiprocessor_count() {
    // The metadata_args describe a buffer computed for this call on a 48-MP device; on a 16-MP
    // device the split heuristic differs and the buffer no longer matches what the args give.
    let mut call = decode("mp", 2);
    call["args"]["cache_seqlens"] = ints(&[4000, 4000]);
    call["args"]["k_cache"] = tensor(&[512, 16, 2, 64], "bfloat16");
    call["args"]["v_cache"] = tensor(&[512, 16, 2, 64], "bfloat16");
    call["args"]["page_table"] = json!({"tensor": {"shape": [2, 256], "dtype": "int32",
        "values": (0..512).collect::<Vec<i64>>()}});
    let args = json!({"batch_size": 2, "max_seqlen_q": 1, "max_seqlen_k": 4096,
        "num_heads_q": 8, "num_heads_kv": 2, "headdim": 64, "cache_seqlens": [4000, 4000],
        "cu_seqlens_q": [0, 1, 2], "causal": true});
    let buffer = fa3conform::scheduler::get_scheduler_metadata(
        &serde_json::from_value(args.clone()).unwrap(),
        DEFAULT_MP,
    )
    .unwrap()
    .to_tensor();
    let values: Vec<i64> = buffer.iter().map(|&v| i64::from(v)).collect();
    call["args"]["scheduler_metadata"] = ints(&values);
    call["metadata_args"] = args;
    let codes = |mp| {
        let report = certify_calls(std::slice::from_ref(&call), false, mp);
        let hazards = &report.reports[0].gate.hazards;
        let scheduler: Vec<Hazard> = hazards
            .iter()
            .filter(|h| h.code.starts_with("H-SCHED-"))
            .cloned()
            .collect();
        serious(&scheduler)
    };
    assert_eq!(codes(DEFAULT_MP), Vec::<&str>::new());
    assert!(
        codes(16).contains(&"H-SCHED-VALUES-NOT-FROM-ARGS"),
        "{:?}",
        codes(16)
    );
}
