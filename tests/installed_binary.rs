//! The binary needs no source tree: copied into an empty folder and run from there, with no
//! `CARGO_MANIFEST_DIR`, `conform` runs every suite, the validation catalogue included.

use std::path::Path;
use std::process::Command;

/// Runs `conform ARGS --format json` with the binary copied into a fresh temporary folder, that
/// folder as the working directory and no cargo variables; returns the JSON report.
fn conform_installed(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("fa3conform");
    std::fs::copy(env!("CARGO_BIN_EXE_fa3conform"), &binary).unwrap();
    let run = || {
        Command::new(&binary)
            .arg("conform")
            .args(args)
            .args(["--format", "json"])
            .current_dir(dir.path())
            .env_remove("CARGO_MANIFEST_DIR")
            .env_remove("CARGO_TARGET_DIR")
            .output()
    };
    // Another test thread forking while the copy's write handle was open hands that handle to
    // its child until the child execs: the copy is "busy" for that moment (ETXTBSY, seen in CI).
    let mut output = run();
    for _ in 0..50 {
        match &output {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                output = run();
            }
            _ => break,
        }
    }
    let output = output.expect("the copied binary runs");
    let report = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    report
}

#[test]
fn the_validation_suite_runs_the_catalogue_anywhere() {
    let calls = fa3conform::conform::catalogue::calls().len();
    let report = conform_installed(&["--suite", "validation"]);
    // Case names say where a case comes from: `catalogue/<id>` or `random/<seed>/<index>`.
    assert_eq!(report.matches("\"catalogue/").count(), calls, "{report}");
    assert!(report.contains("\"random/"), "{report}");
}

#[test]
fn every_suite_runs_anywhere() {
    let report = conform_installed(&["--cases", "3"]);
    for suite in fa3conform::conform::suites() {
        assert!(
            report.contains(&format!("\"{}\"", suite.name())),
            "{} did not run: {report}",
            suite.name()
        );
    }
}

/// The product reads nothing through the build's paths at run time (the helper binaries in
/// `src/bin/`, which work on the repository's fuzz corpora, may).
#[test]
fn the_product_names_no_build_path() {
    fn visit(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    visit(&path, found);
                }
            } else if path.extension().is_some_and(|x| x == "rs")
                && std::fs::read_to_string(&path)
                    .unwrap()
                    .contains("CARGO_MANIFEST_DIR")
            {
                found.push(path.display().to_string());
            }
        }
    }
    let mut found = Vec::new();
    visit(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    assert!(
        found.is_empty(),
        "read through CARGO_MANIFEST_DIR: {found:?}"
    );
}
