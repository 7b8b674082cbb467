//! Renderers of scan results, one file per output format; detection never formats output.

pub mod human;
pub mod json;
pub mod sarif;
pub mod specs;

use super::{ScanResult, Severity};
use crate::report::documents::scan::Summary;

/// Counts for the summary lines of every format, over the diagnostics that are reported.
pub fn summary(result: &ScanResult) -> Summary {
    let errors = result
        .diagnostics
        .iter()
        .filter(|d| d.severity() == Severity::Error)
        .count();
    Summary {
        errors,
        warnings: result.diagnostics.len() - errors,
        files_scanned: result.files_scanned,
        bytes_scanned: result.bytes_scanned,
        call_sites: result.calls.len(),
    }
}
