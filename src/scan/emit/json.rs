//! `--format json`: the document of [`documents::scan`](crate::report::documents::scan), from the
//! scan's own types.

use super::summary;
use crate::report::documents::scan as doc;
use crate::scan::{ArgKind, CallRecord, Diagnostic, Location, ScanResult};
use crate::spec::value_to_json;

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
        diagnostics: result.diagnostics.iter().map(diagnostic).collect(),
        call_sites: result.calls.iter().map(call_site).collect(),
        summary: summary(result),
    }
}

fn diagnostic(d: &Diagnostic) -> doc::Diagnostic {
    doc::Diagnostic {
        code: d.rule.code().to_string(),
        name: d.rule.info().name.to_string(),
        severity: d.severity().name().to_string(),
        message: d.message.clone(),
        help: d.help.clone(),
        path: d.path.clone(),
        location: d.start.into(),
        end_location: d.end.into(),
        stacks: d.stacks.iter().map(|s| s.name().to_string()).collect(),
    }
}

fn call_site(c: &CallRecord) -> doc::CallSite {
    doc::CallSite {
        path: c.path.clone(),
        location: c.location.into(),
        entry_points: c.entry_points.clone(),
        written_for: c
            .stacks
            .iter()
            .map(|s| doc::Stack {
                stack: s.name().to_string(),
                release: s.release().to_string(),
            })
            .collect(),
        on_musa: c.stacks[0].on_musa().0.to_string(),
        via: c.via.clone(),
        arguments: c
            .args
            .iter()
            .map(|a| doc::Argument {
                passed: match a.kind {
                    ArgKind::Positional => "positional",
                    ArgKind::Keyword(_) => "keyword",
                    ArgKind::Unpack => "*",
                    ArgKind::UnpackMapping => "**",
                }
                .to_string(),
                keyword: match &a.kind {
                    ArgKind::Keyword(k) => Some(k.clone()),
                    _ => None,
                },
                parameter: a.parameter.map(str::to_string),
                musa_parameter: a.musa_parameter.map(str::to_string),
                value: a.literal.as_ref().map(value_to_json),
                source: a.text.clone(),
                origin: a.origin.clone(),
                certain: a.certain,
            })
            .collect(),
        unpacked: c.unpacked,
        dead: c.dead,
    }
}
