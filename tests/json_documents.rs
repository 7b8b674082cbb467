//! Every JSON document a command writes, as a snapshot (`snapshots/json/`; scan's are with its
//! rule fixtures in `snapshots/scan/`): the shapes README.md lists under "JSON documents", each
//! opening with its `schema_version`. Inputs are examples or fixed values, so the snapshots hold no
//! times, paths or platform-dependent numbers.

mod support;

use fa3conform::bridge::{ExportOptions, Pools, VerifyOptions, export, verify};
use fa3conform::call::Dtype;
use fa3conform::certify::{CertifyOptions, certify};
use fa3conform::conform::{CampaignReport, CaseOutcome, SuiteReport};
use fa3conform::explain::list;
use fa3conform::forward::{ForwardOptions, forward};
use fa3conform::mate::DEFAULT_MP;
use fa3conform::reference::{RefOutput, Stack};
use fa3conform::report::json::Document;
use fa3conform::report::{self, Format, Report};
use fa3conform::run::RunReport;
use fa3conform::spec::parse_specs;
use ndarray::ArrayD;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The report's JSON document, checked to open with its `schema_version` (the snapshot says
/// which).
fn json<R: Report>(report: &R) -> String {
    let mut out = Vec::new();
    report::write(report, Format::Json, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let version = report.document().schema_version();
    assert!(
        text.starts_with(&format!("{{\n  \"schema_version\": {version},\n")),
        "{text}"
    );
    text
}

fn snapshot(name: &str, document: &str) {
    support::snapshot_settings("json").bind(|| insta::assert_snapshot!(name, document));
}

#[test]
fn conform() {
    let case = |index: usize, name: &str, result: Result<(), String>| CaseOutcome {
        index,
        name: name.into(),
        result: result.into(),
    };
    let campaign = CampaignReport {
        seed: 20261130,
        partition: Some("count:1/4".parse().unwrap()),
        suites: vec![SuiteReport {
            suite: "validation",
            description: "catalogue and generated calls against every profile",
            cases: vec![
                case(0, "catalog/decode-ver2", Ok(())),
                case(
                    16,
                    "generated/16",
                    Err("musa: expected musa.W-1, got accepted".into()),
                ),
            ],
            elapsed: Duration::from_millis(250),
        }],
    };
    snapshot("conform", &json(&campaign));
}

#[test]
fn certify_examples() {
    let report = certify(&CertifyOptions {
        files: vec![
            repo("examples/decode-paged.json"),
            repo("examples/decode-ver2.json"),
        ],
        profiles: vec!["musa".into(), "sgl-kernel".into()],
        numerics: false,
        memory_cap: fa3conform::tensor::DEFAULT_MEMORY_CAP,
        mp: fa3conform::mate::DEFAULT_MP,
        device_as: None,
    })
    .unwrap();
    snapshot("certify", &json(&report));
}

#[test]
fn forward_mla() {
    let report = forward(&ForwardOptions {
        file: repo("examples/forward-mla.json"),
        mp: DEFAULT_MP,
        memory_cap: fa3conform::tensor::DEFAULT_MEMORY_CAP,
    })
    .unwrap();
    snapshot("forward", &json(&report));
}

/// Two sites of the listing: one whose message is exact, one that is a prefix of `str(exc)`.
#[test]
fn explain_list() {
    let mut listing = list();
    listing
        .sites
        .retain(|s| ["musa.W-1", "musa.J-1"].contains(&s.id));
    assert_eq!(listing.sites.len(), 2);
    snapshot("explain-list", &json(&listing));
}

#[test]
fn run_summary() {
    let array = |shape: &[usize], values: &[f64]| {
        ArrayD::from_shape_vec(shape.to_vec(), values.to_vec()).unwrap()
    };
    let report = RunReport {
        id: "decode".into(),
        stack: Stack::Musa,
        result: RefOutput {
            out: array(&[1, 1, 1, 2], &[0.5, -0.25]),
            lse: array(&[1, 1, 1], &[f64::NEG_INFINITY]),
            k_cache: Some(array(&[1, 2, 1, 1], &[1.0, 2.0])),
            v_cache: Some(array(&[1, 2, 1, 1], &[3.0, f64::NAN])),
            dtype: Dtype::Bfloat16,
            softcap: false,
            rotated_keys: false,
            unspecified: None,
            max_logit: None,
        },
    };
    snapshot("run", &json(&report));
}

/// `export` of the two example calls, then `verify` with one case raising what the profile
/// expects and the other without a result.
#[test]
fn export_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for example in ["examples/decode-ver2.json", "examples/decode-paged.json"] {
        calls.extend(parse_specs(&std::fs::read_to_string(repo(example)).unwrap()).unwrap());
    }
    let exported = export(&ExportOptions {
        calls,
        partition: None,
        out: dir.path().to_path_buf(),
        force: false,
        pools: Pools::Slim,
        profile: "musa".into(),
        memory_cap: 1 << 30,
    })
    .unwrap();
    let mut summary: Value = serde_json::from_str(&json(&exported)).unwrap();
    assert_eq!(summary["out"], dir.path().display().to_string());
    summary["out"] = "<the --out folder>".into();
    snapshot("export", &serde_json::to_string_pretty(&summary).unwrap());

    std::fs::write(
        dir.path().join("decode-ver2/result.json"),
        r#"{"schema_version": 1, "outcome": "raised", "exception": "ValueError",
            "message": "Only ver=3 is supported for MUSA FA3."}"#,
    )
    .unwrap();
    let verified = verify(&VerifyOptions {
        dir: dir.path().to_path_buf(),
        profile: "musa".into(),
        memory_cap: 1 << 30,
    })
    .unwrap();
    snapshot("verify", &json(&verified));
}
