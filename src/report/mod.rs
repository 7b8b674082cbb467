//! The one report layer. Every command hands back a report value; this module writes it in the
//! format asked for — human text, a versioned JSON document ([`documents`]), JUnit XML
//! ([`junit`]) or scan's SARIF log — and ranks how runs end ([`Status`]). Which formats a command
//! offers and which exit code a status gets is the command line's business (`crate::cli`).

pub mod documents;
pub mod human;
pub mod json;
pub mod junit;
pub mod merge;

use indicatif::{ProgressBar, ProgressStyle};
use std::fmt;
use std::io::{self, Write};

/// An output format. A report offers some of them ([`Report::FORMATS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Junit,
    Sarif,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Human, Format::Json, Format::Junit, Format::Sarif];

    /// The name on the command line (`--format json`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Human => "human",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Sarif => "sarif",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// One line for `--help`.
    pub fn description(self) -> &'static str {
        match self {
            Format::Human => "text for people",
            Format::Json => "one JSON document, versioned by `schema_version`",
            Format::Junit => "JUnit XML, for CI test reports",
            Format::Sarif => "SARIF 2.1.0, for code-scanning UIs",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a run ends, in order of precedence: when one run has several (a finding in one case, bad
/// input in another), the greatest wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Conformant: every case passed, every call accepted without error hazards.
    Success,
    /// What the command looks for was found: a failed case, a rejected call, a mismatch.
    Findings,
    /// The input could not be used: bad arguments, an unreadable or malformed file.
    InputError,
    /// A bug in fa3conform.
    Internal,
}

impl Status {
    /// [`Status::Findings`] when `found`, else [`Status::Success`].
    pub fn findings_if(found: bool) -> Status {
        if found {
            Status::Findings
        } else {
            Status::Success
        }
    }

    /// The status of a run made of parts: the one with the highest precedence (success for none).
    pub fn combined(parts: impl IntoIterator<Item = Status>) -> Status {
        parts.into_iter().max().unwrap_or(Status::Success)
    }
}

/// What a command hands back: its findings, writable in each of its formats, and its status.
pub trait Report {
    /// The formats this report is written in, the default first; the command line offers these.
    const FORMATS: &'static [Format];

    /// The JSON document this report is written as (one of [`documents`]).
    type Document: json::Document;

    fn status(&self) -> Status;

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()>;

    fn document(&self) -> Self::Document;

    /// The report as JUnit test suites: reports whose entries are test cases offer
    /// [`Format::Junit`].
    fn test_run(&self) -> Option<junit::TestRun> {
        None
    }

    /// A SARIF 2.1.0 log: scan's findings, for code-scanning UIs.
    fn sarif_log(&self) -> Option<serde_json::Value> {
        None
    }
}

/// Writes `report` in `format`.
///
/// # Panics
/// When `format` is not one of the report's [`Report::FORMATS`] or has no writer: the command
/// line offers only those, so either is a bug (and exits as an internal error).
pub fn write<R: Report>(report: &R, format: Format, out: &mut dyn Write) -> io::Result<()> {
    assert!(
        R::FORMATS.contains(&format),
        "{format} is not one of this report's formats {:?}",
        R::FORMATS
    );
    match format {
        Format::Human => report.write_human(out),
        Format::Json => json::write(&report.document(), out),
        Format::Junit => {
            let run = report
                .test_run()
                .expect("a report offering junit has a test run");
            junit::write(&run, out)
        }
        Format::Sarif => {
            let log = report
                .sarif_log()
                .expect("a report offering sarif has a log");
            json::write_value(&log, out)
        }
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:>12} [{bar:40}] {pos}/{len} cases ({eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

#[cfg(test)]
pub(crate) mod testing {
    use super::{Format, Report, write};

    /// Writes `report` in every format it offers; each must produce output.
    pub fn written_in_every_format<R: Report>(report: &R) -> Vec<(Format, String)> {
        R::FORMATS
            .iter()
            .map(|&format| {
                let mut out = Vec::new();
                write(report, format, &mut out).expect("writes to memory");
                assert!(!out.is_empty(), "{format} wrote nothing");
                (format, String::from_utf8(out).expect("UTF-8"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_internal_over_input_error_over_findings_over_success() {
        use Status::*;
        assert_eq!(Status::combined([]), Success);
        assert_eq!(Status::combined([Success, Findings, Success]), Findings);
        assert_eq!(
            Status::combined([Findings, InputError, Success]),
            InputError
        );
        assert_eq!(Status::combined([InputError, Internal, Findings]), Internal);
        assert_eq!(Status::findings_if(true), Findings);
        assert_eq!(Status::findings_if(false), Success);
    }

    #[test]
    fn format_names_round_trip() {
        for format in Format::ALL {
            assert_eq!(Format::from_name(format.name()), Some(format));
            assert_eq!(format.to_string(), format.name());
        }
        assert_eq!(Format::from_name("xml"), None);
    }
}
