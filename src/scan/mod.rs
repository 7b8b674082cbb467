//! `fa3conform scan`: finds `flash_attn_with_kvcache` call sites in Python code and reports what will
//! fail or silently change meaning on MUSA.
//!
//! Pipeline: walk the paths ([`ignore`], so `.gitignore` is respected) → read every `.py` file →
//! parse with tree-sitter those that mention the function name or an alias of it and analyse their
//! scopes ([`python`]) → resolve callees through imports, aliases, re-exports, attributes, wrappers
//! and partials ([`resolve`]) → expand each call as the entry point receives it ([`expand`]) →
//! apply the rules of [`rules`] ([`check`]) → locate as [`Diagnostic`]s. Rendering lives in
//! [`emit`].
//!
//! Files that never mention `flash_attn_with_kvcache` (or a name that the scanned tree binds to it)
//! cannot call it, so they are read and checked for UTF-8 but not parsed; this keeps large trees fast.
//! Time and memory are linear in the input: every per-call record holds spans and shortened texts,
//! never a copy of a line, and each file reports at most [`MAX_DIAGNOSTICS_PER_FILE`] diagnostics
//! and [`MAX_CALL_RECORDS_PER_FILE`] call records (counted in full in the summary).

mod check;
mod diagnostic;
pub mod emit;
mod entry_point;
mod expand;
mod python;
mod report;
mod resolve;
pub mod rules;
pub mod upstream;

pub use crate::validate::Severity;
pub use diagnostic::{Diagnostic, EXCERPT_CHARS, Excerpt, Location};
pub use entry_point::EntryPoint;
pub use python::{ArgKind, ModuleName};
pub use report::{ScanOptions, ScanReport, scan};
pub use rules::{Rule, Selection};

use crate::call::PyValue;
use crate::memory::Budget;
use diagnostic::LineIndex;
use entry_point::{EntryModule, FUNCTION};
use expand::{EffectiveCall, Expander};
use python::{FileAnalysis, Interest, PythonParser, Span};
use rayon::prelude::*;
use resolve::{InitCache, Resolver, ScannedFile};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Diagnostics reported per file; the rest are counted in one [`Rule::OutputTruncated`].
pub const MAX_DIAGNOSTICS_PER_FILE: usize = 200;

/// Call sites listed per file in `--format json` and `--emit-specs`; the summary counts them all.
pub const MAX_CALL_RECORDS_PER_FILE: usize = 1000;

/// Heap bytes parsing and analysing a file may take per token of its source ([`tokens`]): what
/// tree-sitter's tree and the analysis took at their peak, measured per token, was 156 on 16 MB of
/// ordinary model code, 257-279 on files of nothing but calls, 386 on the worst input measured
/// (8 MiB of one list of one-letter names); with a margin. A file is parsed only when this much
/// fits in the memory budget.
const PARSE_BYTES_PER_TOKEN: u128 = 512;

/// What a parsed file keeps per token until the scan ends (its source and analysis): 81 measured
/// on files of nothing but calls, with a margin.
const KEPT_BYTES_PER_TOKEN: u128 = 128;

/// At least the number of tokens tree-sitter makes of `source`: every run of word characters,
/// every other character that is not blank, and every line end.
fn tokens(source: &[u8]) -> u128 {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    let mut count = 0;
    let mut previous_was_word = false;
    for &b in source {
        let is_word = word(b);
        let starts_token = match is_word {
            true => !previous_was_word,
            false => !b.is_ascii_whitespace() || b == b'\n',
        };
        count += u128::from(starts_token);
        previous_was_word = is_word;
    }
    count
}

/// A path given to the scan that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("{path}: no such file or directory")]
pub struct ScanError {
    pub path: String,
}

/// One call site that resolved to an entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    pub path: String,
    pub location: Location,
    /// `module.flash_attn_with_kvcache` for every entry point the call may reach.
    pub entry_points: Vec<String>,
    /// The stacks it was written for (one per entry point).
    pub stacks: Vec<EntryPoint>,
    /// The partials and wrappers on the way to the first entry point.
    pub via: Vec<String>,
    /// The arguments as the first entry point receives them.
    pub args: Vec<RecordedArg>,
    /// `a, b, *rest = f(...)`: the names and whether one is starred.
    pub unpacked: Option<(usize, bool)>,
    /// In a branch that never runs: counted, not checked.
    pub dead: bool,
}

/// An argument of a recorded call and how it binds.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedArg {
    pub kind: ArgKind,
    /// The parameter it binds to in the signature the call was written for.
    pub parameter: Option<&'static str>,
    /// The parameter it binds to on MUSA (`None`: none, a `TypeError`).
    pub musa_parameter: Option<&'static str>,
    pub literal: Option<PyValue>,
    /// The value's source text (shortened).
    pub text: String,
    /// Where it comes from when not written at the call (a `**` dict, a partial, a wrapper).
    pub origin: Option<String>,
    /// Passed on every path.
    pub certain: bool,
}

/// The result of a scan.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// The selected diagnostics, sorted by path, position and code.
    pub diagnostics: Vec<Diagnostic>,
    /// Sorted by path and position; at most [`MAX_CALL_RECORDS_PER_FILE`] per file.
    pub calls: Vec<CallRecord>,
    pub files_scanned: usize,
    pub bytes_scanned: u64,
    /// Every call site, also those not listed in `calls`.
    pub call_sites: usize,
    pub files_with_call_sites: usize,
    /// Calls of a name `flash_attn_with_kvcache` that lead to no entry point the scan knows.
    pub unresolved_calls: usize,
}

/// A file to scan.
pub struct Source {
    pub display: String,
    pub module: ModuleName,
    /// The entry point the file itself is (by module name or path).
    pub is_entry: Option<EntryModule>,
    content: Content,
}

enum Content {
    Path(PathBuf),
    Bytes(Vec<u8>),
}

impl Source {
    /// A file held in memory (tests, the fuzz target).
    pub fn in_memory(display: &str, module: ModuleName, bytes: Vec<u8>) -> Source {
        Source {
            display: display.to_string(),
            is_entry: EntryModule::of_module(&module.name)
                .or_else(|| EntryModule::of_path(Path::new(display))),
            module,
            content: Content::Bytes(bytes),
        }
    }

    /// The file's bytes, at most `cap` of them (whatever the file is: a size is no bound).
    fn read(&self, cap: usize) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        match &self.content {
            Content::Path(path) => crate::files::read(path, cap)
                .map(Into::into)
                .map_err(|e| e.to_string()),
            Content::Bytes(bytes) if bytes.len() > cap => Err(crate::files::FileError::OverCap {
                path: self.display.clone(),
                cap,
            }
            .to_string()),
            Content::Bytes(bytes) => Ok(bytes.as_slice().into()),
        }
    }

    fn size(&self) -> u64 {
        match &self.content {
            Content::Path(path) => path.metadata().map_or(0, |m| m.len()),
            Content::Bytes(bytes) => bytes.len() as u64,
        }
    }
}

/// What reading a file gave.
enum Loaded {
    /// Parsed, with its source kept for locating findings.
    Parsed {
        source: String,
        analysis: FileAnalysis,
    },
    /// Valid UTF-8 that mentions none of the names searched so far.
    NotMentioned,
    Invalid(Diagnostic),
}

/// Scans files and directories, reporting the rules `selection` picks, parsing no file whose
/// analysis would not fit in `memory_cap` bytes with the files parsed before it.
pub fn scan_paths(
    paths: &[PathBuf],
    selection: &Selection,
    memory_cap: usize,
) -> Result<ScanResult, ScanError> {
    let (sources, walk_errors) = walk(paths)?;
    let mut result = scan_sources(&sources, selection, memory_cap);
    result.diagnostics.extend(
        walk_errors
            .into_iter()
            .filter(|d| selection.reports(d.rule)),
    );
    sort(&mut result);
    Ok(result)
}

/// Scans files given as [`Source`]s within `memory_cap` bytes (see [`scan_paths`]).
pub fn scan_sources(sources: &[Source], selection: &Selection, memory_cap: usize) -> ScanResult {
    let mut interest = Interest {
        names: HashSet::from([FUNCTION.to_string()]),
        modules: sources.iter().map(|s| s.module.name.clone()).collect(),
    };
    let budget = Mutex::new(Budget::new(memory_cap));
    let mut loaded: Vec<Loaded> = sources
        .par_iter()
        .map_init(PythonParser::new, |parser, source| {
            load(parser, source, &interest, &budget)
        })
        .collect();
    // Follow aliases: a file that imports a name another file binds to the function mentions that
    // name, not the function's.
    loop {
        let new_names: BTreeSet<String> = {
            let files = scanned_files(sources, &loaded);
            let resolver = Resolver::new(&files.files);
            (0..files.files.len())
                .flat_map(|i| resolver.aliases(i))
                .filter(|name| !interest.names.contains(*name))
                .map(str::to_string)
                .collect()
        };
        if new_names.is_empty() {
            break;
        }
        interest.names.extend(new_names);
        let reloaded: Vec<(usize, Loaded)> = loaded
            .par_iter()
            .enumerate()
            .filter(|(_, l)| matches!(l, Loaded::NotMentioned))
            .map_init(PythonParser::new, |parser, (i, _)| {
                (i, load(parser, &sources[i], &interest, &budget))
            })
            .collect();
        for (i, l) in reloaded {
            loaded[i] = l;
        }
    }
    let mut result = ScanResult {
        files_scanned: sources.len(),
        bytes_scanned: sources.iter().map(Source::size).sum(),
        ..ScanResult::default()
    };
    {
        let files = scanned_files(sources, &loaded);
        let resolver = Resolver::new(&files.files);
        let lines: Vec<LineIndex> = files
            .files
            .iter()
            .map(|f| LineIndex::new(f.source))
            .collect();
        let displays: Vec<String> = files
            .source_of
            .iter()
            .map(|&i| sources[i].display.clone())
            .collect();
        let expander = Expander {
            resolver: &resolver,
            lines: &lines,
            displays: &displays,
        };
        for index in 0..files.files.len() {
            check_file(&expander, index, selection, &mut result);
        }
    }
    for l in loaded {
        if let Loaded::Invalid(d) = l
            && selection.reports(d.rule)
        {
            result.diagnostics.push(d);
        }
    }
    sort(&mut result);
    result
}

fn sort(result: &mut ScanResult) {
    result
        .diagnostics
        .sort_by(|a, b| (&a.path, a.start, a.rule).cmp(&(&b.path, b.start, b.rule)));
    result
        .calls
        .sort_by(|a, b| (&a.path, a.location).cmp(&(&b.path, b.location)));
}

/// The parsed files of a round, with the source each came from.
struct ScannedFiles<'a> {
    files: Vec<ScannedFile<'a>>,
    source_of: Vec<usize>,
}

fn scanned_files<'a>(sources: &'a [Source], loaded: &'a [Loaded]) -> ScannedFiles<'a> {
    let mut scanned = ScannedFiles {
        files: Vec::new(),
        source_of: Vec::new(),
    };
    for (i, l) in loaded.iter().enumerate() {
        if let Loaded::Parsed { source, analysis } = l {
            scanned.files.push(ScannedFile {
                module: &sources[i].module,
                analysis,
                source,
                is_entry: sources[i].is_entry,
            });
            scanned.source_of.push(i);
        }
    }
    scanned
}

/// Checks every call of file `index`, adding its (selected, capped) diagnostics and call records.
fn check_file(expander: &Expander, index: usize, selection: &Selection, result: &mut ScanResult) {
    let resolver = expander.resolver;
    let file = resolver.file(index);
    let lines = &expander.lines[index];
    let display = &expander.displays[index];
    let in_sglang_musa_backend = file
        .is_entry
        .is_some_and(|e| e.candidates == [EntryPoint::SglangMusa]);
    let is_fp8 = |values_file: usize, values: &python::value::Values| {
        resolver.is_fp8_dtype(values_file, values)
    };
    let place = |file: usize, span: Span| {
        let source = resolver.file(file).source;
        let text = expand::shorten(source.get(span.start..span.end).unwrap_or(""), 60);
        let line = expander.lines[file].location(span.start).line;
        match file == index {
            true => format!("`{text}` at line {line}"),
            false => format!("`{text}` at {}:{line}", expander.displays[file]),
        }
    };
    let locate =
        |rule: Rule, span: Span, message: String, help: Option<String>, stacks: Vec<EntryPoint>| {
            Diagnostic {
                rule,
                path: display.clone(),
                start: lines.location(span.start),
                end: lines.location(span.end),
                message,
                help,
                stacks,
                excerpt: Some(lines.excerpt(span.start)),
            }
        };
    // Findings are located lazily: only the reported ones cost a line excerpt.
    let mut findings: Vec<(check::Finding, Vec<EntryPoint>)> = Vec::new();
    let mut records = 0;
    let mut call_sites = 0;
    let mut not_followed: Vec<Span> = Vec::new();
    for call in &file.analysis.calls {
        let reached = expander.expand(index, call);
        if reached.incomplete {
            not_followed.push(call.callee_span);
        }
        let effective = reached.calls;
        if effective.is_empty() {
            // Named `flash_attn_with_kvcache` (or imported under that name), not a local `def`.
            use python::value::Value;
            let named = call.callee_name.as_deref() == Some(FUNCTION)
                || call.callee.iter().any(
                    |v| matches!(v, Value::Path(p) if p.last().is_some_and(|l| l == FUNCTION)),
                );
            let local_def = call.callee.iter().any(|v| matches!(v, Value::Function(_)));
            if named && !local_def {
                result.unresolved_calls += 1;
            }
            continue;
        }
        call_sites += 1;
        let stacks: Vec<EntryPoint> = effective.iter().map(written_for).collect();
        if !call.dead {
            let mut call_findings: Vec<(check::Finding, Vec<EntryPoint>)> = Vec::new();
            for (e, &stack) in effective.iter().zip(&stacks) {
                let ctx = check::CallContext {
                    call: e,
                    stack,
                    callee_span: call.callee_span,
                    unpacked: call.unpacked,
                    in_sglang_musa_backend,
                    is_fp8: &is_fp8,
                    place: &place,
                };
                for finding in check::check_call(&ctx) {
                    if !selection.reports(finding.rule) {
                        continue;
                    }
                    // A call that reaches several stacks (an import per platform) reports each
                    // distinct finding once, naming every stack that has it.
                    match call_findings.iter_mut().find(|(f, _)| *f == finding) {
                        Some((_, with)) if !with.contains(&stack) => with.push(stack),
                        Some(_) => {}
                        None => call_findings.push((finding, vec![stack])),
                    }
                }
            }
            findings.extend(call_findings);
        }
        if records < MAX_CALL_RECORDS_PER_FILE {
            records += 1;
            result
                .calls
                .push(record(display, lines, call, &effective, &stacks));
        }
    }
    result.call_sites += call_sites;
    result.files_with_call_sites += usize::from(call_sites > 0);
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for import in &file.analysis.imports {
        let known = EntryModule::of_module(&import.module).is_some()
            || resolver.is_scanned_module(&import.module);
        if !known && selection.reports(Rule::UnresolvedImport) {
            diagnostics.push(locate(
                Rule::UnresolvedImport,
                import.span,
                format!(
                    "`{FUNCTION}` is imported from `{}`, which the scan does not know: \
                     its calls were not checked",
                    import.module
                ),
                Some("scan the tree that defines it too, or check its calls by hand".into()),
                vec![],
            ));
        }
    }
    if selection.reports(Rule::NotFollowed) {
        for span in not_followed {
            diagnostics.push(locate(
                Rule::NotFollowed,
                span,
                format!(
                    "the scan stopped following this call through its partials and wrappers \
                     (more than {} deep, or {} steps): the paths past them were not checked",
                    expand::MAX_DEPTH,
                    expand::MAX_STEPS
                ),
                Some(
                    "check the call as the entry point receives it by hand, or simplify the \
                     partials and wrappers"
                        .into(),
                ),
                vec![],
            ));
        }
    }
    if let Some(span) = file.analysis.too_deep
        && selection.reports(Rule::NotAnalysed)
    {
        diagnostics.push(locate(
            Rule::NotAnalysed,
            span,
            "expression nested more than 200 levels deep: calls inside it were not checked".into(),
            Some("split the expression, or check its calls by hand".into()),
            vec![],
        ));
    }
    findings.sort_by_key(|(f, _)| (f.span.start, f.rule));
    let total = findings.len() + diagnostics.len();
    let room = MAX_DIAGNOSTICS_PER_FILE.saturating_sub(diagnostics.len());
    for (finding, stacks) in findings.into_iter().take(room) {
        diagnostics.push(locate(
            finding.rule,
            finding.span,
            finding.message,
            Some(finding.help),
            stacks,
        ));
    }
    if total > diagnostics.len() && selection.reports(Rule::OutputTruncated) {
        diagnostics.push(locate(
            Rule::OutputTruncated,
            Span::default(),
            format!(
                "{} more diagnostics in this file were not reported (at most {MAX_DIAGNOSTICS_PER_FILE} per file)",
                total - diagnostics.len()
            ),
            Some("fix the reported ones and scan again, or narrow the codes with `--select`".into()),
            vec![],
        ));
    }
    result.diagnostics.extend(diagnostics);
}

/// The stack an effective call was written for: decided by the signature its arguments fit where
/// the module name is shared.
fn written_for(call: &EffectiveCall) -> EntryPoint {
    entry_point::choose(&call.entry, |signature| {
        call.args.iter().all(|a| match &a.kind {
            python::ArgKind::Keyword(name) => {
                signature.var_keyword || signature.params.iter().any(|(p, _)| p.name() == name)
            }
            _ => true,
        }) && call
            .args
            .iter()
            .filter(|a| a.kind == python::ArgKind::Positional)
            .count()
            <= signature.positional_params().len()
    })
}

fn record(
    display: &str,
    lines: &LineIndex,
    call: &python::CallSite,
    effective: &[EffectiveCall],
    stacks: &[EntryPoint],
) -> CallRecord {
    let first = &effective[0];
    let written = stacks[0].written_for();
    let (_, musa) = stacks[0].on_musa();
    let parameter =
        |signature: &'static crate::call::Signature, position: Option<usize>, kind: &ArgKind| {
            match kind {
                ArgKind::Positional => position
                    .and_then(|i| signature.positional_params().get(i))
                    .map(|(p, _)| p.name()),
                ArgKind::Keyword(name) => signature
                    .params
                    .iter()
                    .find(|(p, _)| p.name() == name)
                    .map(|(p, _)| p.name()),
                ArgKind::Unpack | ArgKind::UnpackMapping => None,
            }
        };
    let mut position = 0;
    let args = first
        .args
        .iter()
        .map(|a| {
            let at = (a.kind == ArgKind::Positional).then(|| {
                position += 1;
                position - 1
            });
            RecordedArg {
                kind: a.kind.clone(),
                parameter: parameter(written, at, &a.kind),
                musa_parameter: parameter(musa, at, &a.kind),
                literal: a.values.as_literal().cloned(),
                text: a.text.clone(),
                origin: a.origin.note(),
                certain: a.certain,
            }
        })
        .collect();
    CallRecord {
        path: display.to_string(),
        location: lines.location(call.callee_span.start),
        entry_points: effective.iter().map(|e| e.entry.qualified_name()).collect(),
        stacks: stacks.to_vec(),
        via: first.via.clone(),
        args,
        unpacked: call.unpacked.map(|u| (u.targets, u.starred)),
        dead: call.dead,
    }
}

/// Reads a file, and parses it when it mentions one of the names of `interest`.
/// The file `input` reported as one fa3conform could not check, and why.
fn invalid_file(
    input: &Source,
    message: String,
    start: Location,
    excerpt: Option<Excerpt>,
) -> Loaded {
    Loaded::Invalid(Diagnostic {
        rule: Rule::InvalidFile,
        path: input.display.clone(),
        start,
        end: start,
        message,
        help: Some("fix the file or exclude it; its call sites were not checked".into()),
        stacks: vec![],
        excerpt,
    })
}

/// Reads and parses one file, holding in `budget` what parsing it may take and, once parsed, what
/// it keeps.
fn load(
    parser: &mut PythonParser,
    input: &Source,
    interest: &Interest,
    budget: &Mutex<Budget>,
) -> Loaded {
    let invalid = |message, start, excerpt| invalid_file(input, message, start, excerpt);
    let file_start = Location { line: 1, column: 1 };
    let lock = || {
        budget
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    // Read under the lock: what one file reads is held before the next reads.
    let (bytes, tokens, parsing) = {
        let mut budget = lock();
        let bytes = match input.read(budget.left()) {
            Ok(bytes) => bytes,
            Err(e) => return invalid(format!("cannot read the file: {e}"), file_start, None),
        };
        let tokens = tokens(&bytes);
        let parsing = bytes.len() as u128 + tokens * PARSE_BYTES_PER_TOKEN;
        if let Err(over) = budget.hold("parsing it", parsing) {
            return invalid(format!("too large to scan: {over}"), file_start, None);
        }
        (bytes, tokens, parsing)
    };
    let loaded = parse_loaded(parser, input, interest, bytes);
    let kept = match &loaded {
        Loaded::Parsed { .. } => tokens * KEPT_BYTES_PER_TOKEN,
        Loaded::NotMentioned | Loaded::Invalid(_) => 0,
    };
    lock().release(parsing.saturating_sub(kept));
    loaded
}

/// [`load`] once the file's bytes are read and their parse is in the budget.
fn parse_loaded(
    parser: &mut PythonParser,
    input: &Source,
    interest: &Interest,
    bytes: std::borrow::Cow<'_, [u8]>,
) -> Loaded {
    let invalid = |message, start, excerpt| invalid_file(input, message, start, excerpt);
    let mut source = match String::from_utf8(bytes.into_owned()) {
        Ok(source) => source,
        Err(e) => {
            let bytes = e.as_bytes();
            let valid = e.utf8_error().valid_up_to();
            let prefix = std::str::from_utf8(&bytes[..valid]).expect("valid up to here");
            let at = LineIndex::new(prefix).location(valid);
            return invalid(
                format!("not UTF-8 text (invalid byte 0x{:02x})", bytes[valid]),
                at,
                None,
            );
        }
    };
    let mentioned = interest
        .names
        .iter()
        .any(|n| memchr::memmem::find(source.as_bytes(), n.as_bytes()).is_some());
    if !mentioned {
        return Loaded::NotMentioned;
    }
    python::normalise_newlines(&mut source);
    match parser.parse(&source, &input.module, interest) {
        Ok(analysis) => Loaded::Parsed { source, analysis },
        Err(e) => {
            let lines = LineIndex::new(&source);
            invalid(
                e.message,
                lines.location(e.span.start),
                Some(lines.excerpt(e.span.start)),
            )
        }
    }
}

/// The Python files under `paths`: directories are walked respecting ignore files (keeping `.py`
/// files), files named explicitly are always taken. Walk errors become per-file diagnostics.
fn walk(paths: &[PathBuf]) -> Result<(Vec<Source>, Vec<Diagnostic>), ScanError> {
    let mut files = BTreeSet::new();
    let mut errors = Vec::new();
    for root in paths {
        if !root.exists() {
            return Err(ScanError {
                path: root.display().to_string(),
            });
        }
        for entry in ignore::WalkBuilder::new(root).build() {
            match entry {
                Ok(entry) => {
                    let explicit = entry.depth() == 0;
                    let is_file = entry.file_type().is_some_and(|t| t.is_file());
                    let is_python = entry.path().extension().is_some_and(|e| e == "py");
                    if is_file && (explicit || is_python) {
                        files.insert(entry.into_path());
                    }
                }
                Err(e) => errors.push(walk_error(root, &e)),
            }
        }
    }
    let mut init_cache = InitCache::default();
    let sources = files
        .into_iter()
        .map(|path| {
            let module = resolve::module_name(&path, &mut |d| init_cache.has_init(d));
            Source {
                display: path.display().to_string(),
                is_entry: EntryModule::of_module(&module.name)
                    .or_else(|| EntryModule::of_path(&path)),
                module,
                content: Content::Path(path),
            }
        })
        .collect();
    Ok((sources, errors))
}

fn walk_error(root: &Path, error: &ignore::Error) -> Diagnostic {
    fn path_of(error: &ignore::Error) -> Option<&Path> {
        match error {
            ignore::Error::WithPath { path, .. } => Some(path),
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                path_of(err)
            }
            _ => None,
        }
    }
    let start = Location { line: 1, column: 1 };
    Diagnostic {
        rule: Rule::InvalidFile,
        path: path_of(error).unwrap_or(root).display().to_string(),
        start,
        end: start,
        message: format!("cannot walk: {error}"),
        help: Some("fix the permissions or exclude the path".into()),
        stacks: vec![],
        excerpt: None,
    }
}

#[cfg(test)]
mod tests {
    use super::tokens;

    #[test]
    fn tokens_count_word_runs_other_characters_and_line_ends() {
        // x = f ( a , b ) and the line end
        assert_eq!(tokens(b"x = f(a, b)\n"), 9);
        // a . b_c2
        assert_eq!(tokens(b"a.b_c2"), 3);
        assert_eq!(tokens(b"  \t\r"), 0);
        // a non-ASCII name is one word: é is two bytes
        assert_eq!(tokens("é2 é".as_bytes()), 2);
    }
}
