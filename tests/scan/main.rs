//! End-to-end tests of `fa3conform scan` through its library entry point and its binary.
//!
//! Fixtures (`tests/scan/fixtures/`, written for this project, modelled on how inference engines
//! call the function):
//! - `rules/<CODE>.py` (or a `<CODE>/` folder) triggers one rule, every rule selected;
//! - `imports/` and `patterns/` are annotated: a call site's first line ends with
//!   `# call: <stack>[, <stack>]`, and every line a default-selection diagnostic starts on ends with
//!   `# expect: <CODE> ...` (both: `# call: fa2; expect: FA3M019`). The annotations are the ground
//!   truth of the fixture figures in the README.
//!
//! Snapshots live in `snapshots/scan/`.

#[path = "../support/mod.rs"]
mod support;

use fa3conform::report::{self, Format, Report, Status};
use fa3conform::scan::emit::specs;
use fa3conform::scan::{
    EntryPoint, MAX_DIAGNOSTICS_PER_FILE, Rule, ScanOptions, ScanResult, Selection, Severity,
    scan_paths,
};
use fa3conform::tensor::DEFAULT_MEMORY_CAP;
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

fn every_rule() -> Vec<Rule> {
    Rule::ALL.to_vec()
}

/// The scan's status and its report in `format`.
fn run(options: &ScanOptions, format: Format) -> (Status, String) {
    let report = fa3conform::scan::scan(options).expect("scan runs");
    let mut out = Vec::new();
    report::write(&report, format, &mut out).expect("writes to memory");
    (
        report.status(),
        String::from_utf8(out).expect("UTF-8 output"),
    )
}

/// The call-spec skeletons `--emit-specs` writes.
fn emitted_specs(options: &ScanOptions) -> String {
    let report = fa3conform::scan::scan(options).expect("scan runs");
    let mut out = Vec::new();
    specs::render(&report.result.calls, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn scan(paths: &[PathBuf], selection: &Selection) -> ScanResult {
    scan_paths(paths, selection, DEFAULT_MEMORY_CAP).expect("fixture paths exist")
}

fn all_rules() -> Selection {
    Selection {
        select: every_rule(),
        ignore: vec![],
    }
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

/// The codes each rule fixture must produce with every rule selected, with counts (read off the
/// fixtures by hand).
fn expected_codes(rule: Rule) -> Vec<(&'static str, usize)> {
    match rule.code() {
        "FA3M001" => vec![("FA3M001", 4)],
        "FA3M002" => vec![("FA3M002", 2)],
        "FA3M003" => vec![("FA3M003", 6)],
        "FA3M004" => vec![("FA3M004", 2)],
        "FA3M005" => vec![("FA3M005", 2)],
        "FA3M006" => vec![("FA3M006", 3)],
        "FA3M007" => vec![("FA3M007", 1)],
        "FA3M008" => vec![("FA3M007", 1), ("FA3M008", 1)],
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
        "FA3M019" => vec![("FA3M007", 1), ("FA3M019", 2)],
        "FA3M020" => vec![("FA3M020", 3)],
        "FA3M021" => vec![("FA3M021", 2)],
        "FA3M022" => vec![("FA3M001", MAX_DIAGNOSTICS_PER_FILE), ("FA3M022", 1)],
        "FA3M023" => vec![("FA3M023", 1)],
        "FA3M024" => vec![("FA3M010", 1), ("FA3M011", 1), ("FA3M024", 1)],
        "FA3M900" => vec![("FA3M900", 3)],
        other => panic!("no expectation for {other}: add its fixture and counts"),
    }
}

fn code_counts(result: &ScanResult) -> Vec<(&'static str, usize)> {
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
        assert_eq!(
            code_counts(&scan(&paths, &all_rules())),
            expected_codes(rule),
            "{rule}"
        );
        let mut all = options(&paths);
        all.select = every_rule();
        let (_, human) = run(&all, Format::Human);
        support::snapshot_settings("scan").bind(|| {
            insta::assert_snapshot!(format!("{}__human", rule.code()), human);
        });
    }
}

/// Per fixture file: call sites (`line → stacks`) and expected diagnostics (`line → codes`).
#[derive(Default)]
struct Annotations {
    calls: BTreeMap<(String, usize), Vec<String>>,
    /// Every default diagnostic expected on a line: `expect:` (a hazard) and `noise:` codes.
    diagnostics: BTreeMap<(String, usize), Vec<String>>,
    /// `noise:` codes: default diagnostics the scan gives where nothing breaks (its known limits).
    noise: usize,
}

fn annotations(dir: &Path) -> Annotations {
    let mut found = Annotations::default();
    for path in walk(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = path.display().to_string();
        for (i, line) in text.lines().enumerate() {
            let Some((_, comment)) = line.rsplit_once("# ") else {
                continue;
            };
            for part in comment.split(';').map(str::trim) {
                if let Some(stacks) = part.strip_prefix("call: ") {
                    let mut stacks: Vec<String> = stacks.split(", ").map(str::to_string).collect();
                    stacks.sort();
                    for stack in &stacks {
                        assert!(
                            EntryPoint::ALL.iter().any(|s| s.name() == stack),
                            "{display}:{}: unknown stack {stack}",
                            i + 1
                        );
                    }
                    found.calls.insert((display.clone(), i + 1), stacks);
                } else if let Some((kind, codes)) = part.split_once(": ")
                    && (kind == "expect" || kind == "noise")
                {
                    let codes = codes.split_whitespace().map(str::to_string);
                    if kind == "noise" {
                        found.noise += codes.clone().count();
                    }
                    let line = found
                        .diagnostics
                        .entry((display.clone(), i + 1))
                        .or_default();
                    line.extend(codes);
                    line.sort();
                }
            }
        }
    }
    found
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "py") {
            files.push(path);
        }
    }
    files
}

/// What the scan found, in the shape of [`Annotations`].
fn found(result: &ScanResult) -> Annotations {
    let mut found = Annotations::default();
    for call in &result.calls {
        let mut stacks: Vec<String> = call.stacks.iter().map(|s| s.name().to_string()).collect();
        stacks.sort();
        stacks.dedup();
        found
            .calls
            .insert((call.path.clone(), call.location.line), stacks);
    }
    for d in &result.diagnostics {
        found
            .diagnostics
            .entry((d.path.clone(), d.start.line))
            .or_default()
            .push(d.rule.code().to_string());
    }
    for codes in found.diagnostics.values_mut() {
        codes.sort();
    }
    found
}

#[test]
fn annotated_fixtures_are_found_exactly_with_the_default_rules() {
    for dir in ["imports", "patterns"] {
        let dir = Path::new(FIXTURES).join(dir);
        let expected = annotations(&dir);
        let result = scan(std::slice::from_ref(&dir), &Selection::default());
        let actual = found(&result);
        assert_eq!(
            actual.calls,
            expected.calls,
            "call sites of {}",
            dir.display()
        );
        assert_eq!(
            actual.diagnostics,
            expected.diagnostics,
            "diagnostics of {}",
            dir.display()
        );
        assert_eq!(result.call_sites, expected.calls.len());
    }
}

/// The fixture figures of the README: call sites found, must-warn hazards warned, and the share
/// of default warnings and errors on an annotated hazard (the rest are annotated noise).
#[test]
fn fixture_figures() {
    let dirs = ["imports", "patterns"].map(|d| Path::new(FIXTURES).join(d));
    let expected: Vec<Annotations> = dirs.iter().map(|d| annotations(d)).collect();
    let calls: usize = expected.iter().map(|a| a.calls.len()).sum();
    let noise: usize = expected.iter().map(|a| a.noise).sum();
    let hazards = expected
        .iter()
        .flat_map(|a| a.diagnostics.values())
        .flatten()
        .filter(|code| Rule::from_code(code).is_some_and(|r| r.severity() != Severity::Info))
        .count()
        - noise;
    let result = scan(&dirs, &Selection::default());
    let warnings_and_errors = result
        .diagnostics
        .iter()
        .filter(|d| d.severity() != Severity::Info)
        .count();
    eprintln!(
        "fixtures: {} of {calls} call sites found, {warnings_and_errors} warnings and errors \
         on {hazards} annotated hazards and {noise} annotated noise",
        result.call_sites
    );
    assert_eq!(
        (result.call_sites, warnings_and_errors),
        (calls, hazards + noise)
    );
    assert_eq!(
        (calls, hazards, noise),
        (56, 30, 0),
        "update the README's fixture figures"
    );
}

#[test]
fn no_fixture_with_a_call_site_is_silent() {
    // A file that calls the function and names flash attention itself (a file that only calls a
    // name another module of its tree binds says nothing when scanned without that module).
    let everything = scan(&[PathBuf::from(FIXTURES)], &Selection::default());
    for path in walk(Path::new(FIXTURES)) {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if !everything.calls.iter().any(|c| c.path == display) || !text.contains("flash_attn") {
            continue;
        }
        let (_, json) = run(&options(std::slice::from_ref(&path)), Format::Json);
        let report: Value = serde_json::from_str(&json).unwrap();
        let said = report["call_sites"].as_array().unwrap().len()
            + report["diagnostics"].as_array().unwrap().len()
            + report["summary"]["unresolved_calls"].as_u64().unwrap() as usize;
        assert!(
            said > 0,
            "{}: scanned alone, the scan says nothing",
            path.display()
        );
    }
}

#[test]
fn pattern_snapshots() {
    let dir = Path::new(FIXTURES).join("patterns");
    let (_, human) = run(&options(std::slice::from_ref(&dir)), Format::Human);
    let wrappers = [dir.join("wrappers.py")];
    let (_, json) = run(&options(&wrappers), Format::Json);
    support::snapshot_settings("scan").bind(|| {
        insta::assert_snapshot!("patterns__human", human);
        insta::assert_snapshot!("wrappers__json", json);
    });
}

#[test]
fn every_snapshot_belongs_to_a_fixture() {
    let known: Vec<String> = Rule::ALL
        .iter()
        .map(|r| format!("{}__human.snap", r.code()))
        .chain(
            [
                "imports__specs.snap",
                "positional__human.snap",
                "FA3M001__sarif.snap",
                "patterns__human.snap",
                "wrappers__json.snap",
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
        code_counts(&scan(&paths, &all_rules())),
        [("FA3M001", 1), ("FA3M004", 8), ("FA3M018", 1)]
    );
    let (_, human) = run(&options(&paths), Format::Human);
    support::snapshot_settings("scan").bind(|| insta::assert_snapshot!("positional__human", human));
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
fn spec_skeletons_of_every_import_form() {
    let text = emitted_specs(&options(&[Path::new(FIXTURES).join("imports")]));
    support::snapshot_settings("scan").bind(|| insta::assert_snapshot!("imports__specs", text));
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
    assert_eq!(report["summary"]["call_sites"], 6);

    // Off by default: the injection rules are reported only when selected.
    let fixture = [rule_fixture(Rule::IntCacheSeqlensUnderInjection)];
    let codes = |options: &ScanOptions| -> Vec<String> {
        let (_, out) = run(options, Format::Json);
        let report: Value = serde_json::from_str(&out).unwrap();
        report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(codes(&options(&fixture)).is_empty());
    let mut selected = options(&fixture);
    selected.select = vec![Rule::InjectedMetadata, Rule::IntCacheSeqlensUnderInjection];
    assert_eq!(codes(&selected), ["FA3M010", "FA3M012"]);
    assert_eq!(
        run(&selected, Format::Json).0,
        Status::Success,
        "warnings only"
    );
}

#[test]
fn the_rule_table_keeps_opt_in_rules_off_by_default() {
    let off: Vec<&str> = Rule::ALL
        .iter()
        .filter(|r| !r.enabled_by_default())
        .map(|r| r.code())
        .collect();
    assert_eq!(
        off,
        [
            "FA3M007", "FA3M010", "FA3M011", "FA3M012", "FA3M015", "FA3M016", "FA3M018"
        ]
    );
    let selection = Selection::default();
    assert!(!selection.reports(Rule::InjectedMetadata));
    assert!(selection.reports(Rule::UnresolvedImport));
}

#[test]
fn explain_prints_the_registry_text() {
    let explain = fa3conform::scan::rules::explain;
    for rule in Rule::ALL {
        let out = explain(rule);
        assert!(out.starts_with(&format!("{} (", rule.code())), "{out}");
        let found = fa3conform::explain::explain(&rule.code().to_lowercase());
        assert_eq!(
            fa3conform::explain::render(&found),
            out,
            "{rule}: `explain` differs"
        );
    }
    let out = explain(Rule::VerNotThree);
    assert!(out.starts_with("FA3M001 (ver-not-3) [error]\n"), "{out}");
    assert!(out.contains("`ValueError: Only ver=3 is supported for MUSA FA3.`"));
    let out = explain(Rule::InjectedMetadata);
    assert!(
        out.starts_with("FA3M010 (injected-metadata) [warning, off by default]\n"),
        "{out}"
    );
}

#[test]
fn missing_paths_are_an_error_not_a_finding() {
    let err = scan_paths(
        &[PathBuf::from("tests/scan/no-such-dir")],
        &Selection::default(),
        DEFAULT_MEMORY_CAP,
    )
    .unwrap_err();
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
            let configuration = &rule["defaultConfiguration"];
            let level = configuration["level"].as_str().unwrap();
            assert!(["none", "note", "warning", "error"].contains(&level));
            assert!(configuration["enabled"].is_boolean());
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
    let mut all = options(&[Path::new(FIXTURES).to_path_buf()]);
    all.select = every_rule();
    let (_, out) = run(&all, Format::Sarif);
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

    let result = scan(&[dir.path().to_path_buf()], &Selection::default());
    assert_eq!(result.files_scanned, files + 2);
    assert_eq!(result.calls.len(), with_calls);
    assert_eq!(result.files_with_call_sites, with_calls);
    let count = |rule: Rule| result.diagnostics.iter().filter(|d| d.rule == rule).count();
    assert_eq!(count(Rule::VerNotThree), with_calls);
    assert_eq!(count(Rule::InvalidFile), 2);
    assert_eq!(result.diagnostics.len(), with_calls + 2);
}

mod bounded;
