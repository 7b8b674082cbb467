//! A campaign's results as a [`Report`]: a summary table, the JSON document
//! ([`documents::conform`]) and JUnit XML for CI.

use super::{CaseResult, SuiteReport};
use crate::partition::Partition;
use crate::report::documents::conform as doc;
use crate::report::junit::{self, TestRun};
use crate::report::{Format, Report, Status, human};
use std::io::{self, Write};

/// The results of a campaign run with `seed`.
#[derive(Clone, Debug)]
pub struct CampaignReport {
    pub seed: u64,
    /// The shard this report holds; `None` for a whole campaign.
    pub partition: Option<Partition>,
    pub suites: Vec<SuiteReport>,
}

impl Report for CampaignReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json, Format::Junit];
    type Document = doc::Campaign;

    /// Findings when any case failed.
    fn status(&self) -> Status {
        Status::findings_if(self.suites.iter().any(|r| r.failures().next().is_some()))
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for report in &self.suites {
            for failure in report.failures() {
                let message = failure.result.failure().unwrap_or_default();
                let name = format!("{}::{}", report.suite, failure.name);
                human::failure_block(out, "FAIL", &name, message)?;
            }
        }
        writeln!(
            out,
            "{:<12} {:>7} {:>7} {:>7} {:>7} {:>9}",
            "suite", "cases", "passed", "failed", "skipped", "time"
        )?;
        for report in &self.suites {
            let (failed, skipped) = (report.failures().count(), report.skipped());
            writeln!(
                out,
                "{:<12} {:>7} {:>7} {:>7} {:>7} {:>8.1}s",
                report.suite,
                report.cases.len(),
                report.cases.len() - failed - skipped,
                failed,
                skipped,
                report.elapsed.as_secs_f64()
            )?;
        }
        let total: usize = self.suites.iter().map(|r| r.cases.len()).sum();
        let failed: usize = self.suites.iter().map(|r| r.failures().count()).sum();
        let shard = self
            .partition
            .map_or_else(String::new, |p| format!(", shard {p}"));
        let skipped: usize = self.suites.iter().map(SuiteReport::skipped).sum();
        let skipped_text = match skipped {
            0 => String::new(),
            n => format!(", {n} skipped"),
        };
        writeln!(
            out,
            "seed {}{shard}: {} passed, {failed} failed{skipped_text}",
            self.seed,
            total - failed - skipped
        )
    }

    fn document(&self) -> doc::Campaign {
        let suites = self
            .suites
            .iter()
            .map(|r| doc::Suite {
                suite: r.suite.to_string(),
                description: r.description.to_string(),
                seconds: r.elapsed.as_secs_f64(),
                cases: r
                    .cases
                    .iter()
                    .map(|c| {
                        let (outcome, message) = match &c.result {
                            CaseResult::Passed(note) => (doc::CaseOutcome::Passed, note.clone()),
                            CaseResult::Failed(why) => {
                                (doc::CaseOutcome::Failed, Some(why.clone()))
                            }
                            CaseResult::Skipped(why) => {
                                (doc::CaseOutcome::Skipped, Some(why.clone()))
                            }
                        };
                        doc::Case {
                            index: c.index,
                            name: c.name.clone(),
                            outcome,
                            message,
                        }
                    })
                    .collect(),
            })
            .collect();
        doc::Campaign {
            seed: self.seed,
            partition: self.partition.map(|p| p.to_string()),
            suites,
        }
    }

    fn test_run(&self) -> Option<TestRun> {
        let suites = self
            .suites
            .iter()
            .map(|r| junit::TestSuite {
                name: r.suite.to_string(),
                time: Some(r.elapsed),
                cases: r
                    .cases
                    .iter()
                    .map(|c| junit::TestCase {
                        classname: r.suite.to_string(),
                        name: c.name.clone(),
                        outcome: match &c.result {
                            CaseResult::Passed(_) => junit::Outcome::Passed,
                            CaseResult::Failed(message) => junit::Outcome::Failed {
                                message: message.clone(),
                                detail: None,
                            },
                            CaseResult::Skipped(message) => junit::Outcome::Skipped {
                                message: message.clone(),
                            },
                        },
                    })
                    .collect(),
            })
            .collect();
        Some(TestRun {
            name: "fa3conform".into(),
            suites,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::CaseOutcome;
    use crate::report::testing::written_in_every_format;
    use std::time::Duration;

    fn campaign() -> CampaignReport {
        CampaignReport {
            seed: 9,
            partition: None,
            suites: vec![SuiteReport {
                suite: "demo",
                description: "d",
                cases: vec![
                    CaseOutcome {
                        index: 0,
                        name: "a".into(),
                        result: CaseResult::Passed(None),
                    },
                    CaseOutcome {
                        index: 1,
                        name: "b<1>".into(),
                        result: CaseResult::Failed("x & y".into()),
                    },
                    CaseOutcome {
                        index: 2,
                        name: "c".into(),
                        result: CaseResult::Skipped("not modelled".into()),
                    },
                ],
                elapsed: Duration::from_millis(1500),
            }],
        }
    }

    #[test]
    fn every_format_counts_the_failed_case() {
        let campaign = campaign();
        assert_eq!(campaign.status(), Status::Findings);
        for (format, text) in written_in_every_format(&campaign) {
            match format {
                Format::Human => {
                    assert!(text.starts_with("FAIL demo::b<1>\n  x & y\n\n"), "{text}");
                    assert!(
                        text.ends_with("seed 9: 1 passed, 1 failed, 1 skipped\n"),
                        "{text}"
                    );
                }
                Format::Json => {
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(json["suites"][0]["cases"][1]["outcome"], "failed");
                    assert_eq!(json["suites"][0]["cases"][1]["message"], "x & y");
                    assert!(json["suites"][0]["cases"][0].get("message").is_none());
                    assert_eq!(json["suites"][0]["cases"][2]["outcome"], "skipped");
                    assert_eq!(json["suites"][0]["cases"][2]["message"], "not modelled");
                }
                Format::Junit => {
                    assert!(text.contains("name=\"b&lt;1&gt;\""), "{text}");
                    assert!(text.contains("message=\"x &amp; y\""), "{text}");
                    assert!(text.contains("time=\"1.500\""), "{text}");
                    assert!(
                        text.contains("<skipped message=\"not modelled\"/>"),
                        "{text}"
                    );
                }
                Format::Sarif => unreachable!("not offered"),
            }
        }
    }
}
