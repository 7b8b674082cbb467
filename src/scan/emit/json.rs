//! `--format json`: one object with a schema version, the diagnostics and the summary. Wire types are
//! kept apart from the internal ones so the format changes only on purpose.

use super::Summary;
use crate::scan::{Diagnostic, Location};
use serde::Serialize;
use std::io::{self, Write};

/// Bumped on any incompatible change of the wire format.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Report<'a> {
    schema_version: u32,
    diagnostics: Vec<WireDiagnostic<'a>>,
    summary: WireSummary,
}

#[derive(Serialize)]
struct WireDiagnostic<'a> {
    code: &'static str,
    name: &'static str,
    severity: &'static str,
    message: &'a str,
    help: Option<&'a str>,
    path: &'a str,
    location: WireLocation,
    end_location: WireLocation,
    /// The stacks the call was written against.
    stacks: Vec<&'static str>,
}

#[derive(Serialize)]
struct WireLocation {
    line: usize,
    column: usize,
}

impl From<Location> for WireLocation {
    fn from(l: Location) -> Self {
        WireLocation {
            line: l.line,
            column: l.column,
        }
    }
}

#[derive(Serialize)]
struct WireSummary {
    errors: usize,
    warnings: usize,
    files_scanned: usize,
    bytes_scanned: u64,
    call_sites: usize,
}

pub fn render(
    diagnostics: &[&Diagnostic],
    summary: &Summary,
    out: &mut dyn Write,
) -> io::Result<()> {
    let report = Report {
        schema_version: SCHEMA_VERSION,
        diagnostics: diagnostics
            .iter()
            .map(|d| WireDiagnostic {
                code: d.rule.code(),
                name: d.rule.info().name,
                severity: d.severity().name(),
                message: &d.message,
                help: d.help.as_deref(),
                path: &d.path,
                location: d.start.into(),
                end_location: d.end.into(),
                stacks: d.stacks.iter().map(|s| s.name()).collect(),
            })
            .collect(),
        summary: WireSummary {
            errors: summary.errors,
            warnings: summary.warnings,
            files_scanned: summary.files_scanned,
            bytes_scanned: summary.bytes_scanned,
            call_sites: summary.call_sites,
        },
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}
