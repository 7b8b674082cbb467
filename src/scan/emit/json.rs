//! `--format json`: the document of [`documents::scan`](crate::report::documents::scan), from the
//! scan's own types.

use super::summary;
use crate::report::documents::scan as doc;
use crate::scan::{Location, ScanResult};

impl From<Location> for doc::Location {
    fn from(l: Location) -> Self {
        doc::Location {
            line: l.line,
            column: l.column,
        }
    }
}

pub fn document(result: &ScanResult) -> doc::Scan {
    doc::Scan {
        diagnostics: result
            .diagnostics
            .iter()
            .map(|d| doc::Diagnostic {
                code: d.rule.code().to_string(),
                name: d.rule.info().name.to_string(),
                severity: d.severity().name().to_string(),
                message: d.message.clone(),
                help: d.help.clone(),
                path: d.path.clone(),
                location: d.start.into(),
                end_location: d.end.into(),
                stacks: d.stacks.iter().map(|s| s.name().to_string()).collect(),
            })
            .collect(),
        summary: summary(result),
    }
}
