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
    if let Some(excerpt) = &d.excerpt {
        // One column per character: tabs are shown as one space so carets stay aligned; a cut
        // line is marked with `…` at the cut.
        let lead = if excerpt.first_column > 1 { "…" } else { "" };
        let shown: String = excerpt
            .text
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let trail = if excerpt.cut_after { "…" } else { "" };
        let width = shown.chars().count();
        let start = d.start.column - excerpt.first_column;
        let end = if d.end.line == d.start.line {
            (d.end.column - excerpt.first_column).min(width)
        } else {
            width
        };
        let carets = end.saturating_sub(start).max(1);
        writeln!(out, "{pad} |")?;
        writeln!(out, "{line_number} | {lead}{shown}{trail}")?;
        writeln!(
            out,
            "{pad} | {}{}{} {}",
            " ".repeat(lead.chars().count()),
            " ".repeat(start),
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
    let mut scanned = format!(
        "{} scanned, {} in {}",
        plural(s.files_scanned, "file"),
        plural(s.call_sites, "call site"),
        plural(s.files_with_call_sites, "file")
    );
    if s.unresolved_calls > 0 {
        scanned.push_str(&format!(
            ", {} of `flash_attn_with_kvcache` not resolved",
            plural(s.unresolved_calls, "call")
        ));
    }
    let mut counts = vec![plural(s.errors, "error"), plural(s.warnings, "warning")];
    if s.infos > 0 {
        counts.push(plural(s.infos, "note"));
    }
    if s.errors + s.warnings + s.infos == 0 {
        format!("No findings ({scanned}).")
    } else {
        let last = counts.pop().expect("two counts at least");
        format!("Found {} and {last} ({scanned}).", counts.join(", "))
    }
}
