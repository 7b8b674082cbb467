//! Rendering of campaign results: a human summary table, JSON, and JUnit XML for CI.

use super::SuiteReport;
use serde_json::json;
use std::fmt::Write;

/// Output formats of `conform`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
    Junit,
}

/// Renders the reports of a campaign run with `seed`.
pub fn render(reports: &[SuiteReport], seed: u64, format: Format) -> String {
    match format {
        Format::Human => human(reports, seed),
        Format::Json => json_report(reports, seed),
        Format::Junit => junit(reports),
    }
}

fn human(reports: &[SuiteReport], seed: u64) -> String {
    let mut out = String::new();
    for report in reports {
        for failure in report.failures() {
            let message = failure.result.as_ref().err().map_or("", String::as_str);
            writeln!(
                out,
                "FAIL {}::{}\n  {}\n",
                report.suite,
                failure.name,
                message.replace('\n', "\n  ")
            )
            .unwrap();
        }
    }
    writeln!(
        out,
        "{:<12} {:>7} {:>7} {:>7} {:>9}",
        "suite", "cases", "passed", "failed", "time"
    )
    .unwrap();
    for report in reports {
        let failed = report.failures().count();
        writeln!(
            out,
            "{:<12} {:>7} {:>7} {:>7} {:>8.1}s",
            report.suite,
            report.cases.len(),
            report.cases.len() - failed,
            failed,
            report.elapsed.as_secs_f64()
        )
        .unwrap();
    }
    let total: usize = reports.iter().map(|r| r.cases.len()).sum();
    let failed: usize = reports.iter().map(|r| r.failures().count()).sum();
    writeln!(
        out,
        "seed {seed}: {} passed, {failed} failed",
        total - failed
    )
    .unwrap();
    out
}

fn json_report(reports: &[SuiteReport], seed: u64) -> String {
    let suites: Vec<_> = reports
        .iter()
        .map(|r| {
            let cases: Vec<_> = r
                .cases
                .iter()
                .map(|c| match &c.result {
                    Ok(()) => json!({"name": c.name, "outcome": "passed"}),
                    Err(e) => json!({"name": c.name, "outcome": "failed", "message": e}),
                })
                .collect();
            json!({"suite": r.suite, "description": r.description,
                   "seconds": r.elapsed.as_secs_f64(), "cases": cases})
        })
        .collect();
    let doc = json!({"schema_version": 1, "seed": seed, "suites": suites});
    serde_json::to_string_pretty(&doc).expect("JSON values serialise")
}

/// Escapes text for XML attribute values and content.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn junit(reports: &[SuiteReport]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"fa3conform\">\n",
    );
    for r in reports {
        writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">",
            xml_escape(r.suite),
            r.cases.len(),
            r.failures().count(),
            r.elapsed.as_secs_f64()
        )
        .unwrap();
        for c in &r.cases {
            let name = xml_escape(&c.name);
            match &c.result {
                Ok(()) => writeln!(out, "    <testcase classname=\"{}\" name=\"{name}\"/>", r.suite).unwrap(),
                Err(e) => writeln!(
                    out,
                    "    <testcase classname=\"{}\" name=\"{name}\">\n      <failure message=\"{}\"/>\n    </testcase>",
                    r.suite,
                    xml_escape(e)
                )
                .unwrap(),
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::CaseOutcome;
    use std::time::Duration;

    fn report() -> SuiteReport {
        SuiteReport {
            suite: "demo",
            description: "d",
            cases: vec![
                CaseOutcome {
                    name: "a".into(),
                    result: Ok(()),
                },
                CaseOutcome {
                    name: "b<1>".into(),
                    result: Err("x & y".into()),
                },
            ],
            elapsed: Duration::from_millis(1500),
        }
    }

    #[test]
    fn junit_escapes_and_counts() {
        let xml = render(&[report()], 1, Format::Junit);
        assert!(xml.contains("tests=\"2\" failures=\"1\""));
        assert!(xml.contains("name=\"b&lt;1&gt;\""));
        assert!(xml.contains("message=\"x &amp; y\""));
    }

    #[test]
    fn human_summary_counts() {
        let text = render(&[report()], 9, Format::Human);
        assert!(text.starts_with("FAIL demo::b<1>\n  x & y"));
        assert!(text.ends_with("seed 9: 1 passed, 1 failed\n"));
        let json: serde_json::Value =
            serde_json::from_str(&render(&[report()], 9, Format::Json)).unwrap();
        assert_eq!(json["suites"][0]["cases"][1]["outcome"], "failed");
    }
}
