//! `scan --format json`: the diagnostics reported (after `--select`/`--ignore`) and the counts.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scan {
    pub diagnostics: Vec<Diagnostic>,
    pub summary: Summary,
}

impl Document for Scan {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub code: String,
    pub name: String,
    /// `error` or `warning`.
    pub severity: String,
    pub message: String,
    pub help: Option<String>,
    pub path: String,
    pub location: Location,
    pub end_location: Location,
    /// The stacks the call was written against.
    pub stacks: Vec<String>,
}

/// 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub files_scanned: usize,
    pub bytes_scanned: u64,
    pub call_sites: usize,
}
