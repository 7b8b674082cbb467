//! A scan as a [`Report`]: ruff-style text, the JSON document ([`documents::scan`]) or a SARIF log.

use super::emit;
use super::rules::{Rule, Selection};
use super::{ScanError, ScanResult, scan_paths};
use crate::report::documents::scan as doc;
use crate::report::{Format, Report, Status};
use crate::validate::Severity;
use std::io::{self, Write};
use std::path::PathBuf;

/// What `scan` looks at and which codes it reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanOptions {
    /// Files or directories (directories respect .gitignore).
    pub paths: Vec<PathBuf>,
    /// Report only these codes (also those off by default); empty for the default ones.
    pub select: Vec<Rule>,
    /// Do not report these codes.
    pub ignore: Vec<Rule>,
    /// Bytes the scan may take for the files' sources and analyses.
    pub memory_cap: usize,
}

/// A scan whose diagnostics are those reported (after `select` and `ignore`).
#[derive(Debug)]
pub struct ScanReport {
    pub result: ScanResult,
}

/// Scans `options.paths`; a path that does not exist is an error.
impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            paths: Vec::new(),
            select: Vec::new(),
            ignore: Vec::new(),
            memory_cap: crate::memory::DEFAULT_MEMORY_CAP,
        }
    }
}

pub fn scan(options: &ScanOptions) -> Result<ScanReport, ScanError> {
    let selection = Selection {
        select: options.select.clone(),
        ignore: options.ignore.clone(),
    };
    let result = scan_paths(&options.paths, &selection, options.memory_cap)?;
    Ok(ScanReport { result })
}

impl Report for ScanReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json, Format::Sarif];
    type Document = doc::Scan;

    /// Findings when an error-level diagnostic is reported (warnings alone are a success).
    fn status(&self) -> Status {
        Status::findings_if(
            self.result
                .diagnostics
                .iter()
                .any(|d| d.severity() == Severity::Error),
        )
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        emit::human::render(&self.result, out)
    }

    fn document(&self) -> doc::Scan {
        emit::json::document(&self.result)
    }

    fn sarif_log(&self) -> Option<serde_json::Value> {
        Some(emit::sarif::log(&self.result.diagnostics))
    }
}
