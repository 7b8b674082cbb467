//! What every scan of any Python tree must satisfy: locations inside the files, the per-file limits
//! kept, every output format rendered and well-formed, and the output within a fixed size per
//! diagnostic and call record (so that a fuzzer with an RSS limit catches output or memory that
//! grows faster than the input).

use crate::scan::emit;
use crate::scan::{
    EXCERPT_CHARS, MAX_CALL_RECORDS_PER_FILE, MAX_DIAGNOSTICS_PER_FILE, Rule, ScanResult,
    Selection, Source,
};

/// Every rule, the opt-in ones included: the fuzzer should reach them all.
pub fn every_rule() -> Selection {
    Selection {
        select: Rule::ALL.to_vec(),
        ignore: Vec::new(),
    }
}

/// Bytes of human output allowed per diagnostic (a message, a help text, an excerpt of at most
/// [`EXCERPT_CHARS`] characters) and per call record (its arguments' shortened texts), plus SARIF's
/// one description of every rule.
const PER_DIAGNOSTIC: usize = 4096;
const PER_CALL_RECORD: usize = 16384;
const RULE_DESCRIPTIONS: usize = 64 * 1024;

/// The first property `result` (the scan of `sources`) breaks, if any.
pub fn scan_output(sources: &[Source], result: &ScanResult) -> Result<(), String> {
    for source in sources {
        let in_file = |path: &str| path == source.display;
        let diagnostics = result
            .diagnostics
            .iter()
            .filter(|d| in_file(&d.path))
            .count();
        if diagnostics > MAX_DIAGNOSTICS_PER_FILE + 1 {
            return Err(format!("{}: {diagnostics} diagnostics", source.display));
        }
        let calls = result.calls.iter().filter(|c| in_file(&c.path)).count();
        if calls > MAX_CALL_RECORDS_PER_FILE {
            return Err(format!("{}: {calls} call records", source.display));
        }
    }
    for d in &result.diagnostics {
        if !sources.iter().any(|s| s.display == d.path) {
            return Err(format!("a diagnostic for an unknown file: {d:?}"));
        }
        if d.start.line == 0 || d.start.column == 0 || d.start > d.end {
            return Err(format!("a bad location: {d:?}"));
        }
        if d.excerpt
            .as_ref()
            .is_some_and(|e| e.text.chars().count() > EXCERPT_CHARS)
        {
            return Err(format!("an excerpt over {EXCERPT_CHARS} characters: {d:?}"));
        }
    }
    if result.calls.len() > result.call_sites {
        return Err("more call records than call sites".into());
    }
    let budget =
        PER_DIAGNOSTIC * (result.diagnostics.len() + 1) + PER_CALL_RECORD * result.calls.len();
    let mut human = Vec::new();
    emit::human::render(result, &mut human).map_err(|e| format!("human output: {e}"))?;
    if human.len() > budget {
        return Err(format!("{} bytes of human output", human.len()));
    }
    let document = serde_json::to_vec_pretty(&emit::json::document(result))
        .map_err(|e| format!("JSON output: {e}"))?;
    let sarif = serde_json::to_vec_pretty(&emit::sarif::log(&result.diagnostics))
        .map_err(|e| format!("SARIF output: {e}"))?;
    for (name, out) in [("JSON", document), ("SARIF", sarif)] {
        if out.len() > RULE_DESCRIPTIONS + 4 * budget {
            return Err(format!("{} bytes of {name} output", out.len()));
        }
        serde_json::from_slice::<serde_json::Value>(&out)
            .map_err(|e| format!("{name} output does not parse: {e}"))?;
    }
    Ok(())
}
