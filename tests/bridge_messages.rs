//! `verify` compares a device's `str(exc)` as the bundle's verdict says: byte for byte for an
//! exact site, by its start for a prefix site, as a pattern (`{*}` any text) for a pattern site.
//! The results are written by hand as the runner writes them, with the version- and
//! build-dependent parts a real device prints.

use fa3conform::bridge::{ExportOptions, Pools, VerifyOptions, export, verify};
use fa3conform::report::{self, Format, Report, Status};
use fa3conform::spec::parse_specs;
use serde_json::{Value, json};
use std::path::Path;

const CALLS: &str = r#"[
{"id": "window-float", "args": {"q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
  "k_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "v_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32", "values": [10, 20]}},
  "window_size": [1.5, -1]}},
{"id": "append-without-lengths", "args": {"q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
  "k_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "v_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "k": {"tensor": {"shape": [2, 1, 2, 128], "dtype": "bfloat16"}},
  "v": {"tensor": {"shape": [2, 1, 2, 128], "dtype": "bfloat16"}}}},
{"id": "ver-2", "args": {"q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
  "k_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "v_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
  "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32", "values": [10, 20]}}, "ver": 2}}
]"#;

fn export_calls(out: &Path) {
    let options = ExportOptions {
        calls: parse_specs(CALLS).unwrap(),
        out: out.to_path_buf(),
        force: false,
        pools: Pools::Slim,
        profile: "musa".into(),
        memory_cap: 1 << 30,
        partition: None,
    };
    assert_eq!(export(&options).unwrap().status(), Status::Success);
}

fn expected_json(bundles: &Path, case: &str) -> Value {
    let text = std::fs::read_to_string(bundles.join(case).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn verdict<'a>(expected: &'a Value, profile: &str) -> &'a Value {
    expected["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["profile"] == profile)
        .unwrap()
}

/// Writes the runner's `result.json` for a call that raised.
fn raised(bundles: &Path, case: &str, exception: &str, message: &str) {
    let result = json!({"schema_version": 1, "outcome": "raised", "exception": exception,
        "message": message, "traceback": "", "runner": {}});
    std::fs::write(
        bundles.join(case).join("result.json"),
        serde_json::to_string(&result).unwrap(),
    )
    .unwrap();
}

/// `verify --profile P` in JSON: (status, each case's outcome by name).
fn verify_as(bundles: &Path, profile: &str) -> (Status, Vec<(String, String)>) {
    let options = VerifyOptions {
        dir: bundles.to_path_buf(),
        profile: profile.into(),
        memory_cap: 1 << 30,
    };
    let verified = verify(&options).unwrap();
    let mut out = Vec::new();
    report::write(&verified, Format::Json, &mut out).unwrap();
    let report: Value = serde_json::from_slice(&out).unwrap();
    let cases = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_string();
            (name, c["outcome"].as_str().unwrap().to_string())
        })
        .collect();
    (verified.status(), cases)
}

fn outcome_of<'a>(cases: &'a [(String, String)], name: &str) -> &'a str {
    &cases.iter().find(|(n, _)| n == name).unwrap().1
}

/// A build log after "Ninja build failed.", a signature after tvm-ffi's "Mismatched type", a
/// schema and pybind11's details in torch's message: all the device's own, all matched.
#[test]
fn version_dependent_parts_of_a_message_match_what_the_device_prints() {
    let dir = tempfile::tempdir().unwrap();
    let bundles = dir.path().join("bundles");
    export_calls(&bundles);

    let append = expected_json(&bundles, "append-without-lengths");
    assert_eq!(append["schema_version"], 3);
    assert_eq!(verdict(&append, "musa")["message_match"], "prefix");
    assert_eq!(verdict(&append, "musa")["message"], "Ninja build failed.");
    assert_eq!(verdict(&append, "fa3")["message_match"], "exact");
    let window = expected_json(&bundles, "window-float");
    assert_eq!(verdict(&window, "fa3")["message_match"], "pattern");
    assert_eq!(verdict(&window, "musa")["message_match"], "pattern");
    assert_eq!(
        verdict(&expected_json(&bundles, "ver-2"), "musa")["message_match"],
        "exact"
    );

    raised(
        &bundles,
        "append-without-lengths",
        "RuntimeError",
        "Ninja build failed. Ninja output:\n[1/2] mcc -c fmha_fwd.mu\nseqlen.hpp:36: error: static assertion failed: AppendKV is only supported with Varlen",
    );
    raised(
        &bundles,
        "window-float",
        "TypeError",
        "Mismatched type on argument #24 when calling: `fmha_fwd(0: Tensor, 1: Tensor, 24: int) -> void`. Expected `int` but got `float`",
    );
    raised(
        &bundles,
        "ver-2",
        "ValueError",
        "Only ver=3 is supported for MUSA FA3.",
    );
    let (status, cases) = verify_as(&bundles, "musa");
    assert_eq!(outcome_of(&cases, "append-without-lengths"), "matched");
    assert_eq!(outcome_of(&cases, "window-float"), "matched");
    assert_eq!(outcome_of(&cases, "ver-2"), "matched");
    assert_eq!(status, Status::Success);

    // The same device messages as fa3 would print them, for `verify --profile fa3` (the schema
    // error as torch 2.15 printed it for an operator registered like upstream's).
    raised(
        &bundles,
        "window-float",
        "RuntimeError",
        &fa3_window_float(FA3_DECLARATION),
    );
    raised(
        &bundles,
        "append-without-lengths",
        "RuntimeError",
        "If k_new is supplied, seqlens_k must also be passed in",
    );
    raised(
        &bundles,
        "ver-2",
        "TypeError",
        "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'",
    );
    let (status, cases) = verify_as(&bundles, "fa3");
    assert_eq!(
        cases.iter().filter(|(_, o)| o == "matched").count(),
        3,
        "{cases:?}"
    );
    assert_eq!(status, Status::Success);
}

/// What the sources determine is compared byte for byte: a differing tail fails an exact site,
/// a differing determined part fails a prefix or pattern site.
#[test]
fn determined_parts_of_a_message_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    let bundles = dir.path().join("bundles");
    export_calls(&bundles);
    // exact: a tail the sources do not print
    raised(
        &bundles,
        "ver-2",
        "ValueError",
        "Only ver=3 is supported for MUSA FA3. Ninja output:\n(build 2)",
    );
    // prefix: another start
    raised(
        &bundles,
        "append-without-lengths",
        "RuntimeError",
        "Ninja build stopped.",
    );
    // pattern: another argument index
    raised(
        &bundles,
        "window-float",
        "TypeError",
        "Mismatched type on argument #25 when calling: `fmha_fwd(0: Tensor) -> void`. Expected `int` but got `float`",
    );
    let (status, cases) = verify_as(&bundles, "musa");
    assert_eq!(status, Status::Findings);
    for case in ["ver-2", "append-without-lengths", "window-float"] {
        assert_eq!(outcome_of(&cases, case), "mismatch", "{case}");
    }

    // torch's Position line is determined: one off is a mismatch; so is the Declaration line.
    raised(
        &bundles,
        "window-float",
        "RuntimeError",
        &fa3_window_float(FA3_DECLARATION).replace("Position: 25", "Position: 24"),
    );
    let (_, cases) = verify_as(&bundles, "fa3");
    assert_eq!(outcome_of(&cases, "window-float"), "mismatch");
    raised(
        &bundles,
        "window-float",
        "RuntimeError",
        &fa3_window_float("flash_attn_3::_flash_attn_forward(Tensor q) -> Tensor"),
    );
    let (_, cases) = verify_as(&bundles, "fa3");
    assert_eq!(outcome_of(&cases, "window-float"), "mismatch");
}

/// The schema of upstream's custom op as torch 2.15 printed it (its inferred ints are `SymInt`).
const FA3_DECLARATION: &str = "flash_attn_3::_flash_attn_forward(Tensor q, Tensor k, Tensor v, Tensor? k_new=None, Tensor? v_new=None, Tensor? qv=None, Tensor? out_=None, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, Tensor? cu_seqlens_k_new=None, Tensor? seqused_q=None, Tensor? seqused_k=None, SymInt? max_seqlen_q=None, SymInt? max_seqlen_k=None, Tensor? page_table=None, Tensor? kv_batch_idx=None, Tensor? leftpad_k=None, Tensor? rotary_cos=None, Tensor? rotary_sin=None, Tensor? seqlens_rotary=None, Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None, float? softmax_scale=None, bool causal=False, SymInt window_size_left=-1, SymInt window_size_right=-1, SymInt attention_chunk=0, float softcap=0., bool rotary_interleaved=True, Tensor? scheduler_metadata=None, SymInt num_splits=1, bool? pack_gqa=None, SymInt sm_margin=0) -> (Tensor, Tensor, Tensor, Tensor)";

/// torch 2.15's error for `window_size=(1.5, -1)` on upstream's custom op, with `declaration`.
fn fa3_window_float(declaration: &str) -> String {
    format!(
        "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument \
         'window_size_left' but instead found type 'float'.\nPosition: 25\nValue: 1.5\n\
         Declaration: {declaration}\nCast error details: Unable to cast Python instance of type \
         <class 'float'> to C++ type '?' (#define PYBIND11_DETAILED_ERROR_MESSAGES or compile in \
         debug mode for details)"
    )
}
