//! SGLang's metadata auto-injection over the example forward passes (`examples/forward-*.json`):
//! the findings per call are snapshots (snapshots/scheduler/), and the calls each example exists
//! to show are asserted here as well.

mod support;

use fa3conform::forward::{ForwardReport, emulate, parse_forward};
use fa3conform::mate::DEFAULT_MP;
use fa3conform::report::{self, Format, Report, Status};
use fa3conform::tensor::DEFAULT_MEMORY_CAP;

fn report(name: &str) -> ForwardReport {
    let path = format!(
        "{}/examples/forward-{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let pass = parse_forward(&std::fs::read_to_string(&path).unwrap()).unwrap();
    emulate(&pass, DEFAULT_MP, DEFAULT_MEMORY_CAP)
}

fn render_human(report: &ForwardReport) -> String {
    let mut out = Vec::new();
    report::write(report, Format::Human, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn codes(report: &ForwardReport, call: &str) -> Vec<&'static str> {
    let r = report.calls.iter().find(|r| r.call == call).unwrap();
    r.findings.iter().map(|f| f.code).collect()
}

fn flagged(report: &ForwardReport) -> Vec<&str> {
    report
        .calls
        .iter()
        .filter(|r| r.flagged)
        .map(|r| r.call.as_str())
        .collect()
}

#[test]
fn plain_model_reuses_metadata_that_describes_every_layer() {
    let report = report("plain");
    support::snapshot_settings("scheduler")
        .bind(|| insta::assert_snapshot!("plain", render_human(&report)));
    assert_eq!(flagged(&report), Vec::<&str>::new());
    let sources: Vec<&str> = report.calls.iter().map(|r| r.metadata.as_str()).collect();
    assert_eq!(
        sources,
        [
            "recomputed and stored under forward_decode",
            "reused from forward_decode, computed for call layer0",
            "reused from forward_decode, computed for call layer0",
        ]
    );
}

#[test]
fn hybrid_sliding_window_model_flags_the_layers_the_metadata_does_not_describe() {
    let report = report("hybrid-swa");
    support::snapshot_settings("scheduler")
        .bind(|| insta::assert_snapshot!("hybrid-swa", render_human(&report)));
    // Full-attention layers get the sliding-window layer's metadata.
    assert!(codes(&report, "layer1-full").contains(&"H-SCHED-ARGS-DIFFER"));
    // A layer with 32/8 heads and 128-dim heads gets metadata for 4 sequences of the 16/2-head layer.
    assert!(codes(&report, "layer4-other-heads").contains(&"H-SCHED-ARGS-DIFFER"));
    let fixed = report
        .calls
        .iter()
        .find(|r| r.call == "layer5-fixed-length")
        .unwrap();
    assert_eq!(
        fixed.outcome,
        "raises AttributeError: 'NoneType' object has no attribute 'shape'"
    );
}

#[test]
fn mla_cascade_base_call_reuses_the_expand_calls_workspace() {
    let report = report("mla");
    support::snapshot_settings("scheduler")
        .bind(|| insta::assert_snapshot!("mla", render_human(&report)));
    assert_eq!(flagged(&report), ["layer1-base"]);
    assert_eq!(
        codes(&report, "layer1-base"),
        ["H-SCHED-MLA-WORKSPACE-STALE"]
    );
}

#[test]
fn json_report_and_status() {
    use fa3conform::forward::{ForwardOptions, forward};
    let run = |name: &str| {
        let options = ForwardOptions {
            file: format!(
                "{}/examples/forward-{name}.json",
                env!("CARGO_MANIFEST_DIR")
            )
            .into(),
            mp: DEFAULT_MP,
            memory_cap: DEFAULT_MEMORY_CAP,
        };
        let report = forward(&options).unwrap();
        let mut out = Vec::new();
        report::write(&report, Format::Json, &mut out).unwrap();
        (
            report.status(),
            serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
        )
    };
    let (status, json) = run("plain");
    assert_eq!(status, Status::Success);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["flagged"], 0);
    let (status, json) = run("mla");
    assert_eq!(status, Status::Findings);
    assert_eq!(json["calls"][2]["findings"][0]["severity"], "error");
}

#[test]
fn malformed_passes_name_the_json_path() {
    let text = r#"{"id": "x", "backend": {}, "calls": [{"layer": {"layer_id": 0, "tp_q_head_num": 1,
        "tp_k_head_num": 1, "qk_head_dim": 64, "v_head_dim": 64}, "call": {"args": {"q": {"tensor": {"shape": [1], "dtype": "bf17"}}}}}]}"#;
    let message = parse_forward(text).unwrap_err().to_string();
    assert!(
        message.starts_with("calls[0].call.args.q.tensor.dtype: unknown dtype"),
        "{message}"
    );
    let layer = r#"{"layer_id": 4, "tp_q_head_num": 1, "tp_k_head_num": 1, "qk_head_dim": 64, "v_head_dim": 64}"#;
    let pass = |backend: &str, step: &str| {
        parse_forward(&format!(
            r#"{{"id": "x", "backend": {backend}, "calls": [{{"layer": {layer}, {step} "call": {{}}}}]}}"#
        ))
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    // serde's own errors carry the path too, not only the call specs' (they had none).
    assert_eq!(
        pass(r#"{"num_hidden_layers": 8, "use_mla": 1}"#, ""),
        Err("backend.use_mla: invalid type: integer `1`, expected a boolean".into())
    );
    assert_eq!(
        pass(r#"{"num_hidden_layers": 8}"#, r#""max_seqlen_k": -1,"#),
        Err("calls[0].max_seqlen_k: must not be negative: SGLang sets it to the batch's longest KV length".into())
    );
    assert_eq!(
        pass(r#"{"num_hidden_layers": 8, "max_seqlen_k": -1}"#, ""),
        Err("backend.max_seqlen_k: must not be negative: SGLang sets it to the batch's longest KV length".into())
    );
    assert_eq!(
        pass(r#"{"num_hidden_layers": 4}"#, ""),
        Err("calls[0].layer.layer_id: layer 4 is past the model's layers 0..4 (backend.num_hidden_layers)".into())
    );
    assert_eq!(pass(r#"{"num_hidden_layers": 5}"#, ""), Ok(()));
    // Read as call specs are: a repeated key is an error at its line.
    assert_eq!(
        pass(r#"{"num_hidden_layers": 5, "num_hidden_layers": 6}"#, ""),
        Err("invalid JSON at line 1 column 67: duplicate key \"num_hidden_layers\"".into())
    );
}

#[test]
fn context_parallel_extend_reuses_the_last_invocations_metadata() {
    let report = report("cp-extend");
    support::snapshot_settings("scheduler")
        .bind(|| insta::assert_snapshot!("cp-extend", render_human(&report)));
    // Layer 1's first invocation (300 and 40 query rows) gets the metadata of layer 0's second one
    // (20 and 10 rows): one m-block of 256 rows where sequence 0 needs two.
    assert_eq!(flagged(&report), ["layer1-prev"]);
    let prev = &report.calls[2];
    let m_blocks = prev
        .findings
        .iter()
        .find(|f| f.code == "H-SCHED-M-BLOCKS")
        .unwrap();
    assert_eq!(
        m_blocks.message,
        "num_m_blocks computed for max_seqlen_q=20, call has 300; cu_seqlens_q=[0, 20, 30], call has \
         [0, 300, 340]: rows 256..300 of sequence 0 are never computed"
    );
}

#[test]
fn a_draft_backend_constructed_last_injects_into_the_targets_calls() {
    let report = report("draft");
    support::snapshot_settings("scheduler")
        .bind(|| insta::assert_snapshot!("draft", render_human(&report)));
    assert_eq!(flagged(&report), ["target-layer0", "target-layer1"]);
}
