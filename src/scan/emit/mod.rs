//! Renderers of scan results, one file per output format; detection never formats output.

pub mod human;
pub mod json;
pub mod sarif;
pub mod specs;

use super::{Diagnostic, ScanResult, Severity};

/// Counts for the summary lines of every format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub files_scanned: usize,
    pub bytes_scanned: u64,
    pub call_sites: usize,
}

impl Summary {
    /// Counts over the diagnostics that are reported (after `--select`/`--ignore`).
    pub fn of(result: &ScanResult, reported: &[&Diagnostic]) -> Summary {
        let errors = reported
            .iter()
            .filter(|d| d.severity() == Severity::Error)
            .count();
        Summary {
            errors,
            warnings: reported.len() - errors,
            files_scanned: result.files_scanned,
            bytes_scanned: result.bytes_scanned,
            call_sites: result.calls.len(),
        }
    }
}
