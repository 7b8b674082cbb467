//! Renderers of scan results, one file per output format; detection never formats output.

pub mod human;
pub mod json;
pub mod sarif;
pub mod specs;

use super::{ScanResult, Severity};
use crate::report::documents::scan::Summary;

/// Counts for the summary lines of every format, over the reported diagnostics (selected, and
/// within the per-file limit).
pub fn summary(result: &ScanResult) -> Summary {
    let count = |severity: Severity| {
        result
            .diagnostics
            .iter()
            .filter(|d| d.severity() == severity)
            .count()
    };
    Summary {
        errors: count(Severity::Error),
        warnings: count(Severity::Warning),
        infos: count(Severity::Info),
        files_scanned: result.files_scanned,
        bytes_scanned: result.bytes_scanned,
        call_sites: result.call_sites,
        files_with_call_sites: result.files_with_call_sites,
        unresolved_calls: result.unresolved_calls,
    }
}
