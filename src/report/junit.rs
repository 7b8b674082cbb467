//! The one JUnit XML writer (nextest's `quick-junit`): `<testsuites>` → `<testsuite>` →
//! `<testcase>`, with `<failure>` or `<skipped>` for cases that did not pass.
//!
//! Text becomes XML 1.0 character data: escaped, and with what XML 1.0 forbids dropped (control
//! characters such as the ANSI colour codes a message may carry, `U+FFFE`, `U+FFFF`), so no
//! message or name can make the file ill-formed.

use quick_junit::{NonSuccessKind, TestCaseStatus, XmlString};
use std::io::{self, Write};
use std::time::Duration;

/// One run: the `<testsuites>` element.
#[derive(Clone, Debug, PartialEq)]
pub struct TestRun {
    pub name: String,
    pub suites: Vec<TestSuite>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TestSuite {
    pub name: String,
    /// How long the suite took, when measured.
    pub time: Option<Duration>,
    pub cases: Vec<TestCase>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TestCase {
    pub classname: String,
    pub name: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed,
    /// `message` is the `<failure message="...">`; `detail`, when given, its text.
    Failed {
        message: String,
        detail: Option<String>,
    },
    Skipped {
        message: String,
    },
}

/// Text as XML 1.0 allows it; [`XmlString`] drops ANSI escape sequences and the C0 controls,
/// this also the two non-characters XML 1.0 excludes (a Rust string holds no surrogates).
fn xml_text(text: &str) -> XmlString {
    XmlString::new(text.replace(['\u{FFFE}', '\u{FFFF}'], ""))
}

fn junit_report(run: &TestRun) -> quick_junit::Report {
    let mut report = quick_junit::Report::new(xml_text(&run.name));
    for suite in &run.suites {
        let mut junit_suite = quick_junit::TestSuite::new(xml_text(&suite.name));
        junit_suite.time = suite.time;
        for case in &suite.cases {
            let status = match &case.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Failed { message, detail } => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(xml_text(message));
                    if let Some(detail) = detail {
                        status.set_description(xml_text(detail));
                    }
                    status
                }
                Outcome::Skipped { message } => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(xml_text(message));
                    status
                }
            };
            let mut junit_case = quick_junit::TestCase::new(xml_text(&case.name), status);
            junit_case.set_classname(xml_text(&case.classname));
            junit_suite.add_test_case(junit_case);
        }
        report.add_test_suite(junit_suite);
    }
    report
}

/// Writes `run` as a JUnit XML document.
pub fn write(run: &TestRun, out: &mut dyn Write) -> io::Result<()> {
    let xml = junit_report(run)
        .to_string()
        .map_err(|e| io::Error::other(format!("serialising the JUnit report: {e}")))?;
    writeln!(out, "{}", xml.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, outcome: Outcome) -> TestCase {
        TestCase {
            classname: "demo".into(),
            name: name.into(),
            outcome,
        }
    }

    fn written(run: &TestRun) -> String {
        let mut out = Vec::new();
        write(run, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn forbidden_characters_leave_a_well_formed_file_with_the_rest_of_the_text() {
        let message = "\x1b[31mexpected\x1b[0m \"x\" & <y>\x00 at [0, 1]\u{FFFE}\nsecond line";
        let run = TestRun {
            name: "run\x07".into(),
            suites: vec![TestSuite {
                name: "suite\x1b[1m".into(),
                time: None,
                cases: vec![
                    case(
                        "id\x00<1>",
                        Outcome::Failed {
                            message: message.into(),
                            detail: Some(message.into()),
                        },
                    ),
                    case(
                        "skipped",
                        Outcome::Skipped {
                            message: "no \x0bstate".into(),
                        },
                    ),
                ],
            }],
        };
        let xml = written(&run);
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML 1.0");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        assert_eq!(root.attribute("name"), Some("run"));
        let suite = root.first_element_child().unwrap();
        assert_eq!(suite.attribute("name"), Some("suite"));
        let cases: Vec<_> = suite.children().filter(|n| n.is_element()).collect();
        assert_eq!(cases[0].attribute("name"), Some("id<1>"));
        let failure = cases[0].first_element_child().unwrap();
        assert_eq!(failure.tag_name().name(), "failure");
        // An attribute value's newline reads back as a space (XML attribute normalisation); the
        // element text keeps it.
        assert_eq!(
            failure.attribute("message"),
            Some("expected \"x\" & <y> at [0, 1] second line")
        );
        assert_eq!(
            failure.text(),
            Some("expected \"x\" & <y> at [0, 1]\nsecond line")
        );
        let skipped = cases[1].first_element_child().unwrap();
        assert_eq!(skipped.tag_name().name(), "skipped");
        assert_eq!(skipped.attribute("message"), Some("no state"));
    }

    #[test]
    fn counts_and_times_per_suite_and_in_total() {
        let run = TestRun {
            name: "fa3conform".into(),
            suites: vec![TestSuite {
                name: "demo".into(),
                time: Some(Duration::from_millis(1500)),
                cases: vec![
                    case("a", Outcome::Passed),
                    case(
                        "b",
                        Outcome::Failed {
                            message: "x".into(),
                            detail: None,
                        },
                    ),
                    case(
                        "c",
                        Outcome::Skipped {
                            message: "y".into(),
                        },
                    ),
                ],
            }],
        };
        let xml = written(&run);
        assert!(xml.ends_with("</testsuites>\n"), "{xml}");
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        let suite = root.first_element_child().unwrap();
        for element in [root, suite] {
            assert_eq!(element.attribute("tests"), Some("3"), "{xml}");
            assert_eq!(element.attribute("failures"), Some("1"), "{xml}");
            assert_eq!(element.attribute("skipped"), Some("1"), "{xml}");
        }
        assert_eq!(suite.attribute("time"), Some("1.500"), "{xml}");
        let passed = suite.first_element_child().unwrap();
        assert_eq!(passed.attribute("classname"), Some("demo"));
        assert!(!passed.has_children(), "{xml}");
    }
}
