//! `certify` and `explain` as library functions: formats, summary line, status, bad input.

use fa3conform::call::Device;
use fa3conform::certify::{CertifyOptions, Error, certify, summary};
use fa3conform::explain::{explain, list, render};
use fa3conform::report::{self, Format, Report, Status};
use fa3conform::spec::SourceError;
use fa3conform::validate::profiles;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

const VER_2: &str = r#"{"id": "ported", "args": {"q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
  "k_cache": {"tensor": {"shape": [2, 256, 2, 128], "dtype": "bfloat16"}},
  "v_cache": {"tensor": {"shape": [2, 256, 2, 128], "dtype": "bfloat16"}},
  "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32"}}, "ver": 2}}"#;

fn spec_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn options(files: Vec<PathBuf>, profiles: &[&str]) -> CertifyOptions {
    CertifyOptions {
        files,
        profiles: profiles.iter().map(|s| s.to_string()).collect(),
        numerics: false,
        memory_cap: fa3conform::tensor::DEFAULT_MEMORY_CAP,
        mp: fa3conform::mate::DEFAULT_MP,
        device_as: None,
    }
}

/// The status and the report in `format`, or the error.
fn certify_text(text: &str, format: Format, profiles: &[&str]) -> Result<(Status, String), Error> {
    let file = spec_file(text);
    let report = certify(&options(vec![file.path().to_path_buf()], profiles))?;
    let mut out = Vec::new();
    report::write(&report, format, &mut out).unwrap();
    Ok((report.status(), String::from_utf8(out).unwrap()))
}

#[test]
fn json_report_names_the_site_and_exit_status_is_1() {
    let (status, out) = certify_text(VER_2, Format::Json, &["musa"]).unwrap();
    assert_eq!(status, Status::Findings);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["schema_version"], 1);
    let call = &report["calls"][0];
    assert_eq!(call["id"], "ported");
    let musa = &call["profiles"]["musa"];
    assert_eq!(musa["outcome"], "rejected");
    assert_eq!(musa["exception"], "ValueError");
    assert_eq!(musa["message"], "Only ver=3 is supported for MUSA FA3.");
    assert_eq!(musa["site"], "musa.W-1");
    assert_eq!(musa["message_match"], "exact");
    assert_eq!(
        call["summary"],
        "rejected on musa: ValueError: Only ver=3 is supported for MUSA FA3."
    );
    assert_eq!(call["hazards"], Value::Array(vec![]));
}

/// A float window entry: torch's schema error on the CUDA stacks (determined but for its cast
/// error details), tvm-ffi's argument conversion on MUSA (determined but for the signature and
/// type names), each verdict saying how its message stands for `str(exc)`.
#[test]
fn each_verdict_says_how_its_message_stands_for_str_exc() {
    let call = r#"{"id": "window-float", "args": {"q": {"tensor": {"shape": [2, 1, 8, 128], "dtype": "bfloat16"}},
      "k_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
      "v_cache": {"tensor": {"shape": [2, 64, 2, 128], "dtype": "bfloat16"}},
      "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32", "values": [10, 20]}},
      "window_size": [1.5, -1]}}"#;
    let (_, out) = certify_text(call, Format::Json, &["musa", "fa3", "sgl-kernel"]).unwrap();
    let report: Value = serde_json::from_str(&out).unwrap();
    let profiles = &report["calls"][0]["profiles"];
    assert_eq!(profiles["fa3"]["message_match"], "pattern");
    let fa3 = profiles["fa3"]["message"].as_str().unwrap();
    assert!(
        fa3.starts_with(
            "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument \
             'window_size_left' but instead found type 'float'.\nPosition: 25\nValue: 1.5\n\
             Declaration: flash_attn_3::_flash_attn_forward(Tensor q, Tensor k, Tensor v, "
        ) && fa3.ends_with(
            "SymInt sm_margin=0) -> (Tensor, Tensor, Tensor, Tensor)\nCast error details: {*}"
        ),
        "{fa3}"
    );
    assert_eq!(profiles["sgl-kernel"]["message_match"], "pattern");
    assert!(
        profiles["sgl-kernel"]["message"]
            .as_str()
            .unwrap()
            .starts_with("sgl_kernel::fwd() Expected a value of type 'int'")
    );
    assert_eq!(profiles["musa"]["message_match"], "pattern");
    assert_eq!(
        profiles["musa"]["message"],
        "Mismatched type on argument #24 when calling: `{*}`. Expected `{*}` but got `{*}`"
    );
    // An accepted verdict has no message and no match kind.
    let (_, out) = certify_text(VER_2, Format::Json, &["fa3"]).unwrap();
    let report: Value = serde_json::from_str(&out).unwrap();
    let fa3 = &report["calls"][0]["profiles"]["fa3"];
    assert_eq!(fa3["outcome"], "rejected", "fa3 has no ver parameter");
    let (_, out) =
        certify_text(&VER_2.replace(", \"ver\": 2", ""), Format::Json, &["fa3"]).unwrap();
    let report: Value = serde_json::from_str(&out).unwrap();
    let fa3 = &report["calls"][0]["profiles"]["fa3"];
    assert_eq!(fa3["outcome"], "accepted");
    assert_eq!(fa3["message_match"], Value::Null);
}

#[test]
fn explain_finds_the_site_of_a_whole_multi_line_message() {
    let device_message = "RuntimeError: flash_attn_3::_flash_attn_forward() Expected a value of type 'int' \
         for argument 'window_size_left' but instead found type 'float'.\nPosition: 25\nValue: 1.5\n\
         Declaration: flash_attn_3::_flash_attn_forward(Tensor q, Tensor k, Tensor v) -> (Tensor, Tensor)\n\
         Cast error details: Unable to cast Python instance of type <class 'float'> to C++ type 'int64_t'";
    let text = render(&explain(device_message));
    assert!(text.starts_with("torch.op-arg-type"), "{text}");
    let ninja = "RuntimeError: Ninja build failed. Ninja output:\n[1/2] mcc -c fwd.mu\nerror: static assertion failed";
    let text = render(&explain(ninja));
    assert!(text.starts_with("musa.J-1"), "{text}");
}

#[test]
fn accepted_calls_pass_unless_an_error_hazard_applies() {
    let fixed = VER_2.replace(", \"ver\": 2", "");
    let (status, out) = certify_text(&fixed, Format::Human, &[]).unwrap();
    assert_eq!(status, Status::Success);
    assert!(out.contains("ported: accepted on musa"), "{out}");
    assert!(out.ends_with("1 of 1 calls certified for musa\n"));
    // score_mod is silently dropped: accepted, but an error-severity hazard fails certification.
    let dropped = VER_2.replace("\"ver\": 2", "\"score_mod\": {\"object\": \"callable\"}");
    let (status, out) = certify_text(&dropped, Format::Junit, &[]).unwrap();
    assert_eq!(status, Status::Findings);
    let xml = roxmltree::Document::parse(&out).unwrap();
    let suite = xml.root_element().first_element_child().unwrap();
    assert_eq!(suite.attribute("name"), Some("certify"), "{out}");
    assert_eq!(
        (suite.attribute("tests"), suite.attribute("failures")),
        (Some("1"), Some("1")),
        "{out}"
    );
    let failure = suite
        .first_element_child()
        .unwrap()
        .first_element_child()
        .unwrap();
    assert_eq!(failure.tag_name().name(), "failure");
    assert!(
        failure
            .text()
            .unwrap()
            .starts_with("H-MUSA-SCORE-MOD-DROPPED: "),
        "{out}"
    );
}

#[test]
fn calls_recorded_on_cpu_are_certified_as_the_device_calls_they_stand_for() {
    let on_cpu = VER_2
        .replace("\"bfloat16\"}", "\"bfloat16\", \"device\": \"cpu\"}")
        .replace(", \"ver\": 2", "");
    let file = spec_file(&on_cpu);
    let mut options = options(vec![file.path().to_path_buf()], &["musa"]);
    let report = certify(&options).unwrap();
    assert_eq!(report.status(), Status::Findings);
    let rejection = report.reports[0].gate.rejection().unwrap().to_string();
    assert!(rejection.contains("must be on MUSA device"), "{rejection}");
    options.device_as = Some(Device::Musa);
    assert_eq!(certify(&options).unwrap().status(), Status::Success);
}

#[test]
fn bad_input_is_an_error() {
    // A call that cannot be read is reported as such, an input error, in the report.
    let (status, text) = certify_text("{\"args\": 3}", Format::Human, &[]).unwrap();
    assert_eq!(status, Status::InputError);
    assert!(
        text.contains("args: expected an object, got a number: not certified (input error)"),
        "{text}"
    );
    let status = certify_text("[]", Format::Human, &[]);
    assert!(matches!(
        status,
        Err(Error::Source(SourceError::Spec { .. }))
    ));
    let status = certify_text(VER_2, Format::Human, &["no-such-stack"]);
    assert!(matches!(status, Err(Error::UnknownProfile { .. })));
    let missing = options(vec![PathBuf::from("/nonexistent/specs.json")], &[]);
    let err = certify(&missing).unwrap_err();
    assert!(matches!(err, Error::Source(SourceError::File(_))));
    // Said once, with nothing under it (the command line prints the error chain).
    assert_eq!(
        err.to_string(),
        "reading /nonexistent/specs.json: No such file or directory (os error 2)"
    );
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn summary_groups_accepted_and_rejected_profiles() {
    let call = fa3conform::spec::parse_specs(VER_2).unwrap().remove(0);
    let musa = profiles::by_name("musa").unwrap();
    let rejected = musa.validate(&call);
    let mut fixed = call.clone();
    fixed.unset("ver");
    let mut accepted = musa.validate(&fixed);
    // Stand-in for another stack's verdict on the same call.
    accepted.profile = "sgl-kernel";
    assert_eq!(
        summary(&[rejected, accepted]),
        "accepted on sgl-kernel, rejected on musa: ValueError: Only ver=3 is supported for MUSA FA3."
    );
}

#[test]
fn explain_prints_the_fixes_for_the_ver_gate() {
    let found = explain("ValueError: Only ver=3 is supported for MUSA FA3.");
    assert_eq!(found.status(), Status::Success);
    let text = render(&found);
    assert!(text.starts_with("musa.W-1  [musa]\n"), "{text}");
    for needle in [
        "pass ver=3 or omit it",
        "non-FA3 MUSA attention path",
        "hard-coded ver=2",
        "sgl-project/sglang@082898472f",
    ] {
        assert!(text.contains(needle), "missing {needle}: {text}");
    }
    assert_eq!(
        explain("nothing like any message").status(),
        Status::Findings
    );
}

#[test]
fn explain_lists_every_site_with_its_message_match() {
    let listing = list();
    assert_eq!(listing.status(), Status::Success);
    let mut out = Vec::new();
    report::write(&listing, Format::Json, &mut out).unwrap();
    let document: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(document["schema_version"], 1);
    let listed = document["sites"].as_array().unwrap();
    assert_eq!(
        listed.len(),
        fa3conform::validate::registry::sites().count()
    );
    let by_id = |id: &str| listed.iter().find(|s| s["id"] == id).unwrap().clone();
    let ver = by_id("musa.W-1");
    assert_eq!(ver["message_match"], "exact");
    assert_eq!(ver["exception"], "ValueError");
    assert_eq!(ver["template"], "Only ver=3 is supported for MUSA FA3.");
    assert_eq!(ver["profiles"], serde_json::json!(["musa"]));
    // The build log after mate's "Ninja build failed." is the compiler's.
    assert_eq!(by_id("musa.J-1")["message_match"], "prefix");
    // torch's schema error is determined but for the schema and pybind11's cast details.
    assert_eq!(by_id("torch.op-arg-type")["message_match"], "pattern");
    let mut text = Vec::new();
    report::write(&listing, Format::Human, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert_eq!(text.lines().count(), listed.len());
    assert!(
        text.contains("musa.W-1  [musa]  ValueError: Only ver=3 is supported for MUSA FA3.\n"),
        "{text}"
    );
}
