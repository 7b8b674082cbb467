//! `certify` and `explain` as library functions: formats, summary line, exit status, bad input.

use fa3conform::certify::{CertifyArgs, Error, Format, run_certify, summary};
use fa3conform::cli::args::TextOrJson;
use fa3conform::explain::{ExplainArgs, run_explain};
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

fn certify(text: &str, format: Format, profiles: &[&str]) -> (Result<u8, Error>, String) {
    let file = spec_file(text);
    let args = CertifyArgs {
        files: vec![file.path().to_path_buf()],
        profiles: profiles.iter().map(|s| s.to_string()).collect(),
        format,
        numerics: false,
        memory_cap: fa3conform::tensor::DEFAULT_MEMORY_CAP,
    };
    let mut out = Vec::new();
    let status = run_certify(&args, &mut out);
    (status, String::from_utf8(out).unwrap())
}

#[test]
fn json_report_names_the_site_and_exit_status_is_1() {
    let (status, out) = certify(VER_2, Format::Json, &["musa"]);
    assert_eq!(status.unwrap(), 1);
    let report: Value = serde_json::from_str(&out).unwrap();
    let call = &report[0];
    assert_eq!(call["id"], "ported");
    let musa = &call["profiles"]["musa"];
    assert_eq!(musa["outcome"], "rejected");
    assert_eq!(musa["exception"], "ValueError");
    assert_eq!(musa["message"], "Only ver=3 is supported for MUSA FA3.");
    assert_eq!(musa["site"], "musa.W-1");
    assert_eq!(
        call["summary"],
        "rejected on musa: ValueError: Only ver=3 is supported for MUSA FA3."
    );
    assert_eq!(call["hazards"], Value::Array(vec![]));
}

#[test]
fn accepted_calls_pass_unless_an_error_hazard_applies() {
    let fixed = VER_2.replace(", \"ver\": 2", "");
    let (status, out) = certify(&fixed, Format::Human, &[]);
    assert_eq!(status.unwrap(), 0);
    assert!(out.contains("ported: accepted on musa"), "{out}");
    assert!(out.ends_with("1 of 1 calls certified for musa\n"));
    // score_mod is silently dropped: accepted, but an error-severity hazard fails certification.
    let dropped = VER_2.replace("\"ver\": 2", "\"score_mod\": {\"object\": \"callable\"}");
    let (status, out) = certify(&dropped, Format::Junit, &[]);
    assert_eq!(status.unwrap(), 1);
    assert!(
        out.contains("<testsuite name=\"certify\" tests=\"1\" failures=\"1\">"),
        "{out}"
    );
    assert!(out.contains("H-MUSA-SCORE-MOD-DROPPED"));
}

#[test]
fn bad_input_is_an_error() {
    let (status, _) = certify("{\"args\": 3}", Format::Human, &[]);
    assert!(matches!(status, Err(Error::Spec { .. })));
    let (status, _) = certify(VER_2, Format::Human, &["no-such-stack"]);
    assert!(matches!(status, Err(Error::UnknownProfile { .. })));
    let args = CertifyArgs {
        files: vec![PathBuf::from("/nonexistent/specs.json")],
        profiles: Vec::new(),
        format: Format::Json,
        numerics: false,
        memory_cap: fa3conform::tensor::DEFAULT_MEMORY_CAP,
    };
    assert!(matches!(
        run_certify(&args, &mut Vec::new()),
        Err(Error::Read { .. })
    ));
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
    let mut out = Vec::new();
    let args = ExplainArgs {
        message: Some("ValueError: Only ver=3 is supported for MUSA FA3.".into()),
        list: false,
        format: TextOrJson::Human,
    };
    assert_eq!(run_explain(&args, &mut out).unwrap(), 0);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("musa.W-1  [musa]\n"), "{text}");
    for needle in [
        "pass ver=3 or omit it",
        "non-FA3 MUSA attention path",
        "hard-coded ver=2",
        "sgl-project/sglang@082898472f",
    ] {
        assert!(text.contains(needle), "missing {needle}: {text}");
    }
    let mut out = Vec::new();
    let args = ExplainArgs {
        message: Some("nothing like any message".into()),
        list: false,
        format: TextOrJson::Human,
    };
    assert_eq!(run_explain(&args, &mut out).unwrap(), 1);
}

#[test]
fn explain_lists_every_site_with_its_message_match() {
    let mut out = Vec::new();
    let args = ExplainArgs {
        message: None,
        list: true,
        format: TextOrJson::Json,
    };
    assert_eq!(run_explain(&args, &mut out).unwrap(), 0);
    let listed: Vec<Value> = serde_json::from_slice(&out).unwrap();
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
}

#[test]
fn command_line_arguments_parse_as_documented() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        certify: CertifyArgs,
    }
    let cli = Cli::try_parse_from([
        "certify",
        "--profile",
        "musa,sgl-kernel",
        "--profile",
        "fa3",
        "--format",
        "junit",
        "a.json",
        "-",
    ])
    .unwrap();
    assert_eq!(cli.certify.profiles, ["musa", "sgl-kernel", "fa3"]);
    assert_eq!(cli.certify.format, Format::Junit);
    assert_eq!(
        cli.certify.files,
        [PathBuf::from("a.json"), PathBuf::from("-")]
    );
    assert!(Cli::try_parse_from(["certify"]).is_err());
}
