//! End-to-end tests of `fa3conform scan` through its library entry point.
//!
//! Fixtures: `tests/scan/fixtures/rules/<CODE>.py` (or a `<CODE>/` folder) triggers one rule each;
//! `tests/scan/fixtures/imports/` exercises every import form, with the expected stacks of each call
//! written as a trailing comment on its line. Snapshots live in `snapshots/scan/`.

#[path = "../support/mod.rs"]
mod support;

use fa3conform::report::{self, Format, Report, Status};
use fa3conform::scan::emit::specs;
use fa3conform::scan::{EntryPoint, Rule, ScanOptions, ScanReport, scan, scan_paths};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FIXTURES: &str = "tests/scan/fixtures";

fn options(paths: &[PathBuf]) -> ScanOptions {
    ScanOptions {
        paths: paths.to_vec(),
        ..ScanOptions::default()
    }
}

fn scanned(options: &ScanOptions) -> ScanReport {
    scan(options).expect("scan runs")
}

/// The scan's status and its report in `format`.
fn run(options: &ScanOptions, format: Format) -> (Status, String) {
    let report = scanned(options);
    let mut out = Vec::new();
    report::write(&report, format, &mut out).expect("writes to memory");
    (
        report.status(),
        String::from_utf8(out).expect("UTF-8 output"),
    )
}

/// The call-spec skeletons `--emit-specs` writes.
fn emitted_specs(options: &ScanOptions) -> String {
    let mut out = Vec::new();
    specs::render(&scanned(options).result.calls, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn rule_fixture(rule: Rule) -> PathBuf {
    let dir = Path::new(FIXTURES).join("rules");
    let file = dir.join(format!("{}.py", rule.code()));
    if file.exists() {
        file
    } else {
        dir.join(rule.code())
    }
}

/// The codes each rule fixture must produce, with counts (read off the fixtures by hand).
fn expected_codes(rule: Rule) -> Vec<(&'static str, usize)> {
    match rule.code() {
        "FA3M001" => vec![("FA3M001", 4)],
        "FA3M002" => vec![("FA3M002", 2)],
        "FA3M003" => vec![("FA3M003", 6)],
        "FA3M004" => vec![("FA3M004", 2)],
        "FA3M005" => vec![("FA3M005", 2)],
        "FA3M006" => vec![("FA3M006", 3)],
        "FA3M007" => vec![("FA3M007", 1)],
        "FA3M008" => vec![("FA3M007", 1), ("FA3M008", 4)],
        "FA3M009" => vec![("FA3M009", 2)],
        "FA3M010" => vec![("FA3M010", 2)],
        "FA3M011" => vec![("FA3M010", 1), ("FA3M011", 1)],
        "FA3M012" => vec![("FA3M010", 1), ("FA3M012", 1)],
        "FA3M013" => vec![("FA3M013", 2)],
        "FA3M014" => vec![("FA3M014", 2)],
        "FA3M015" => vec![("FA3M015", 2)],
        "FA3M016" => vec![("FA3M016", 1)],
        "FA3M017" => vec![("FA3M017", 2)],
        "FA3M018" => vec![("FA3M001", 1), ("FA3M018", 2)],
        "FA3M900" => vec![("FA3M900", 2)],
        other => panic!("no expectation for {other}: add its fixture and counts"),
    }
}

fn code_counts(paths: &[PathBuf]) -> Vec<(&'static str, usize)> {
    let result = scan_paths(paths).expect("fixture paths exist");
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for d in &result.diagnostics {
        *counts.entry(d.rule.code()).or_default() += 1;
    }
    counts.into_iter().collect()
}

#[test]
fn every_rule_has_a_fixture_with_exactly_its_findings_and_snapshots() {
    for rule in Rule::ALL {
        let fixture = rule_fixture(rule);
        assert!(
            fixture.exists(),
            "{rule}: no fixture at {}",
            fixture.display()
        );
        let paths = [fixture];
        assert_eq!(code_counts(&paths), expected_codes(rule), "{rule}");
        let (_, human) = run(&options(&paths), Format::Human);
        let (_, json) = run(&options(&paths), Format::Json);
        support::snapshot_settings("scan").bind(|| {
            insta::assert_snapshot!(format!("{}__human", rule.code()), human);
            insta::assert_snapshot!(format!("{}__json", rule.code()), json);
        });
    }
}

#[test]
fn every_snapshot_belongs_to_a_fixture() {
    let known: Vec<String> = Rule::ALL
        .iter()
        .flat_map(|r| ["human", "json"].map(|f| format!("{}__{f}.snap", r.code())))
        .chain(
            [
                "imports__specs.snap",
                "positional__human.snap",
                "FA3M001__sarif.snap",
            ]
            .map(String::from),
        )
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/scan");
    for entry in std::fs::read_dir(dir).expect("snapshots/scan exists") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(known.contains(&name), "stale snapshot {name}");
    }
}

#[test]
fn positional_arguments_bind_by_the_musa_signature() {
    let paths = [Path::new(FIXTURES).join("positional.py")];
    assert_eq!(
        code_counts(&paths),
        [("FA3M001", 1), ("FA3M004", 8), ("FA3M018", 1)]
    );
    let (_, human) = run(&options(&paths), Format::Human);
    support::snapshot_settings("scan").bind(|| insta::assert_snapshot!("positional__human", human));
}

/// `(file name, line)` → the stacks written in the trailing `# ...` comment of that line.
fn annotated_calls(dir: &Path) -> BTreeMap<(String, usize), Vec<String>> {
    let mut expected = BTreeMap::new();
    for entry in walk(dir) {
        let text = std::fs::read_to_string(&entry).unwrap();
        for (i, line) in text.lines().enumerate() {
            if !line.contains("ver=4") {
                continue;
            }
            let Some((_, comment)) = line.rsplit_once("  # ") else {
                continue;
            };
            let stacks: Vec<String> = comment
                .split(" (")
                .next()
                .unwrap()
                .split(", ")
                .map(str::to_string)
                .collect();
            if stacks
                .iter()
                .all(|s| EntryPoint::ALL.iter().any(|k| k.name() == s))
            {
                expected.insert((entry.display().to_string(), i + 1), stacks);
            }
        }
    }
    expected
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn import_forms_resolve_to_the_stack_they_were_written_for() {
    let dir = Path::new(FIXTURES).join("imports");
    let expected = annotated_calls(&dir);
    assert_eq!(expected.len(), 17, "every annotated call is counted");
    let result = scan_paths(std::slice::from_ref(&dir)).unwrap();
    let found: BTreeMap<(String, usize), Vec<String>> = result
        .calls
        .iter()
        .map(|c| {
            (
                (c.path.clone(), c.location.line),
                c.stacks.iter().map(|s| s.name().to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(found, expected);

    let text = emitted_specs(&options(&[dir]));
    support::snapshot_settings("scan").bind(|| insta::assert_snapshot!("imports__specs", text));
}

#[test]
fn spec_skeletons_parse_once_unknowns_are_filled_in() {
    let text = emitted_specs(&options(&[rule_fixture(Rule::NegativeSoftcap)]));
    let err = fa3conform::spec::parse_specs(&text).unwrap_err();
    assert_eq!(err.path, "[0].args.cache_seqlens", "{err}");

    fn fill(v: &mut Value) {
        match v {
            Value::Object(map) if map.contains_key("unknown") => {
                *v = serde_json::json!({"tensor": {"shape": [1, 1, 1, 64], "dtype": "bfloat16"}});
            }
            Value::Object(map) => map.values_mut().for_each(fill),
            Value::Array(items) => items.iter_mut().for_each(fill),
            _ => {}
        }
    }
    let mut skeletons: Value = serde_json::from_str(&text).unwrap();
    fill(&mut skeletons);
    let calls = fa3conform::spec::parse_specs(&skeletons.to_string()).unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0].passed("softcap"),
        Some(&fa3conform::call::PyValue::Float(-1.0))
    );
    assert_eq!(
        calls[1].passed("softcap"),
        Some(&fa3conform::call::PyValue::Int(-2))
    );
    assert!(
        calls[0].id.ends_with("FA3M013.py:6:5 (fa3)"),
        "{}",
        calls[0].id
    );
}

#[test]
fn status_follows_error_findings_and_selection() {
    let errors = [rule_fixture(Rule::VerNotThree)];
    let warnings = [rule_fixture(Rule::NegativeSoftcap)];
    assert_eq!(run(&options(&errors), Format::Human).0, Status::Findings);
    assert_eq!(run(&options(&warnings), Format::Human).0, Status::Success);

    let mut ignored = options(&errors);
    ignored.ignore = vec![Rule::VerNotThree];
    let (exit, out) = run(&ignored, Format::Json);
    assert_eq!(exit, Status::Success);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["diagnostics"], serde_json::json!([]));

    let mut selected = options(&[rule_fixture(Rule::IntCacheSeqlensUnderInjection)]);
    selected.select = vec![Rule::IntCacheSeqlensUnderInjection];
    let (exit, out) = run(&selected, Format::Json);
    assert_eq!(exit, Status::Success, "FA3M012 is a warning");
    let report: Value = serde_json::from_str(&out).unwrap();
    let codes: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["FA3M012"]);
    assert_eq!(report["summary"]["warnings"], 1);
}

#[test]
fn explain_prints_the_registry_text() {
    let out = fa3conform::scan::rules::explain(Rule::VerNotThree);
    assert!(out.starts_with("FA3M001 (ver-not-3) [error]\n"), "{out}");
    assert!(out.contains("`ValueError: Only ver=3 is supported for MUSA FA3.`"));
}

#[test]
fn missing_paths_are_an_error_not_a_finding() {
    let err = scan_paths(&[PathBuf::from("tests/scan/no-such-dir")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tests/scan/no-such-dir: no such file or directory"
    );
}

/// Structural SARIF 2.1.0 check: the properties the specification requires (§3.13 sarifLog,
/// §3.14 run, §3.18–3.19 tool/driver, §3.27 result, §3.28 location, §3.30 region, §3.49 rules).
fn assert_valid_sarif(log: &Value) {
    assert_eq!(log["version"], "2.1.0");
    assert!(log["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let runs = log["runs"].as_array().expect("runs is an array");
    for run in runs {
        let driver = &run["tool"]["driver"];
        assert!(driver["name"].is_string(), "driver.name is required");
        let rules = driver["rules"].as_array().unwrap();
        for rule in rules {
            assert!(rule["id"].is_string());
            assert!(rule["shortDescription"]["text"].is_string());
            let level = rule["defaultConfiguration"]["level"].as_str().unwrap();
            assert!(["none", "note", "warning", "error"].contains(&level));
        }
        for result in run["results"].as_array().unwrap() {
            assert!(result["message"]["text"].is_string(), "result.message.text");
            let index = result["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(
                rules[index]["id"], result["ruleId"],
                "ruleIndex points at ruleId"
            );
            let level = result["level"].as_str().unwrap();
            assert!(["none", "note", "warning", "error"].contains(&level));
            for location in result["locations"].as_array().unwrap() {
                let physical = &location["physicalLocation"];
                let uri = physical["artifactLocation"]["uri"].as_str().unwrap();
                assert!(!uri.contains(' ') && !uri.contains('\\'), "{uri}");
                let region = &physical["region"];
                let start_line = region["startLine"].as_u64().unwrap();
                let start_column = region["startColumn"].as_u64().unwrap();
                let end_line = region["endLine"].as_u64().unwrap();
                let end_column = region["endColumn"].as_u64().unwrap();
                assert!(start_line >= 1 && start_column >= 1);
                assert!((end_line, end_column) >= (start_line, start_column));
            }
        }
    }
}

#[test]
fn sarif_is_structurally_valid_for_every_fixture() {
    let all = [Path::new(FIXTURES).to_path_buf()];
    let (_, out) = run(&options(&all), Format::Sarif);
    let log: Value = serde_json::from_str(&out).unwrap();
    assert_valid_sarif(&log);
    let results = log["runs"][0]["results"].as_array().unwrap();
    for rule in Rule::ALL {
        assert!(
            results.iter().any(|r| r["ruleId"] == rule.code()),
            "{rule} missing from the SARIF of all fixtures"
        );
    }
    let (_, one) = run(&options(&[rule_fixture(Rule::VerNotThree)]), Format::Sarif);
    support::snapshot_settings("scan").bind(|| insta::assert_snapshot!("FA3M001__sarif", one));
}

#[test]
fn a_large_tree_with_broken_files_reports_each_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = 3000;
    let with_calls = (0..files).filter(|i| i % 50 == 0).count();
    for i in 0..files {
        let sub = dir.path().join(format!("pkg{}", i % 30));
        std::fs::create_dir_all(&sub).unwrap();
        let body = if i % 50 == 0 {
            "from sgl_kernel.flash_attn import flash_attn_with_kvcache\n\n\
             def f(q, k, v, cu, md):\n    \
             return flash_attn_with_kvcache(q, k, v, cu_seqlens_q=cu, scheduler_metadata=md, ver=4)\n"
                .to_string()
        } else {
            format!("import torch\n\n\ndef layer_{i}(x):\n    return torch.relu(x) * {i}\n")
        };
        std::fs::write(sub.join(format!("m{i}.py")), body).unwrap();
    }
    std::fs::write(
        dir.path().join("broken.py"),
        "from sgl_kernel.flash_attn import flash_attn_with_kvcache\nflash_attn_with_kvcache(\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("binary.py"),
        [0x7f, b'E', b'L', b'F', 0xff, 0x00],
    )
    .unwrap();
    // Ignored by .gitignore rules, as ripgrep does (the walker needs a repository for .gitignore,
    // so use .ignore, which it honours everywhere).
    std::fs::write(dir.path().join(".ignore"), "skipped/\n").unwrap();
    std::fs::create_dir(dir.path().join("skipped")).unwrap();
    std::fs::write(dir.path().join("skipped/x.py"), [0xff, 0xfe]).unwrap();

    let result = scan_paths(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(result.files_scanned, files + 2);
    assert_eq!(result.calls.len(), with_calls);
    let count = |rule: Rule| result.diagnostics.iter().filter(|d| d.rule == rule).count();
    assert_eq!(count(Rule::VerNotThree), with_calls);
    assert_eq!(count(Rule::InvalidFile), 2);
    assert_eq!(result.diagnostics.len(), with_calls + 2);
}
