//! The text format: one block per diagnostic with the source line and carets, as ruff and rustc
//! print them, then a summary.

use super::summary;
use crate::report::documents::scan::Summary;
use crate::scan::{Diagnostic, EntryPoint, ScanResult};
use std::io::{self, Write};

pub fn render(result: &ScanResult, out: &mut dyn Write) -> io::Result<()> {
    for d in &result.diagnostics {
        render_one(d, out)?;
    }
    writeln!(out, "{}", summary_line(&summary(result)))
}

fn render_one(d: &Diagnostic, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{}:{}:{}: {} {}",
        d.path,
        d.start.line,
        d.start.column,
        d.rule.code(),
        d.message
    )?;
    let line_number = d.start.line.to_string();
    let pad = " ".repeat(line_number.len());
    if let Some(text) = &d.source_line {
        // One column per character: tabs are shown as one space so carets stay aligned.
        let shown: String = text
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let width = shown.chars().count();
        let end_column = if d.end.line == d.start.line {
            d.end.column
        } else {
            width + 1
        };
        let carets = end_column.saturating_sub(d.start.column).max(1);
        writeln!(out, "{pad} |")?;
        writeln!(out, "{line_number} | {shown}")?;
        writeln!(
            out,
            "{pad} | {}{} {}",
            " ".repeat(d.start.column - 1),
            "^".repeat(carets),
            d.severity().name()
        )?;
        writeln!(out, "{pad} |")?;
    }
    if !d.stacks.is_empty() {
        let names: Vec<&str> = d.stacks.iter().map(|s: &EntryPoint| s.name()).collect();
        writeln!(
            out,
            "{pad} = note: call written against {}",
            names.join(", ")
        )?;
    }
    if let Some(help) = &d.help {
        writeln!(out, "{pad} = help: {help}")?;
    }
    writeln!(out)
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn summary_line(s: &Summary) -> String {
    let scanned = format!(
        "{} scanned, {}",
        plural(s.files_scanned, "file"),
        plural(s.call_sites, "call site")
    );
    if s.errors + s.warnings == 0 {
        format!("No findings ({scanned}).")
    } else {
        format!(
            "Found {} and {} ({scanned}).",
            plural(s.errors, "error"),
            plural(s.warnings, "warning")
        )
    }
}
