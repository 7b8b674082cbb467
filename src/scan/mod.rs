//! `fa3conform scan`: finds `flash_attn_with_kvcache` call sites in Python code and reports what will
//! fail or silently change meaning on MUSA.
//!
//! Pipeline: walk the paths ([`ignore`], so `.gitignore` is respected) → read every `.py` file →
//! parse with tree-sitter those that mention the function name or an alias of it ([`python`]) →
//! resolve callees through imports, aliases and re-exports ([`resolve`]) → apply the rules of
//! [`rules`] per call and stack ([`check`]) → locate as [`Diagnostic`]s. Rendering lives in [`emit`].
//!
//! Files that never mention `flash_attn_with_kvcache` (or a name that the scanned tree binds to it)
//! cannot call it, so they are read and checked for UTF-8 but not parsed; this keeps large trees fast.

mod check;
mod diagnostic;
pub mod emit;
mod entry_point;
mod python;
mod report;
mod resolve;
pub mod rules;
pub mod upstream;

pub use crate::validate::Severity;
pub use diagnostic::{Diagnostic, Location};
pub use entry_point::EntryPoint;
pub use python::ArgKind;
pub use report::{ScanOptions, ScanReport, scan};
pub use rules::Rule;

use crate::call::PyValue;
use diagnostic::LineIndex;
use python::{ModuleName, ParsedFile, PythonParser, Span};
use rayon::prelude::*;
use resolve::{InitCache, Resolver};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// A path given to the scan that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("{path}: no such file or directory")]
pub struct ScanError {
    pub path: String,
}

/// One call site that resolved to a stack, for `--emit-specs`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    pub path: String,
    pub location: Location,
    pub stacks: Vec<EntryPoint>,
    pub args: Vec<RecordedArg>,
}

/// An argument of a recorded call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedArg {
    pub kind: ArgKind,
    pub literal: Option<PyValue>,
    /// The value expression's source text.
    pub text: String,
}

/// The result of a scan.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// Sorted by path, position and code.
    pub diagnostics: Vec<Diagnostic>,
    pub calls: Vec<CallRecord>,
    pub files_scanned: usize,
    pub bytes_scanned: u64,
}

/// A file found by the walk.
struct Input {
    path: PathBuf,
    display: String,
    module: ModuleName,
}

/// What reading a file gave.
enum Loaded {
    /// Parsed, with its source kept for locating findings.
    Parsed {
        source: String,
        file: ParsedFile,
    },
    /// Valid UTF-8 that mentions none of the names searched so far.
    NotMentioned,
    Invalid(Diagnostic),
}

/// Scans files and directories.
pub fn scan_paths(paths: &[PathBuf]) -> Result<ScanResult, ScanError> {
    let (inputs, walk_errors) = walk(paths)?;
    let bytes_scanned = inputs
        .iter()
        .map(|i| i.path.metadata().map_or(0, |m| m.len()))
        .sum();
    let mut searched: HashSet<String> = HashSet::from([entry_point::FUNCTION.to_string()]);
    let mut loaded: Vec<Loaded> = inputs
        .par_iter()
        .map_init(PythonParser::new, |parser, input| {
            load(parser, input, &[entry_point::FUNCTION])
        })
        .collect();
    // Follow aliases: a file that imports a name another file binds to the function mentions that
    // name, not the function's.
    loop {
        let parsed = parsed_files(&inputs, &loaded);
        let resolver = Resolver::new(&parsed.files);
        let new_names: BTreeSet<&str> = (0..parsed.files.len())
            .flat_map(|i| resolver.function_aliases(i))
            .filter(|name| !searched.contains(*name))
            .collect();
        if new_names.is_empty() {
            break;
        }
        let names: Vec<String> = new_names.into_iter().map(str::to_string).collect();
        searched.extend(names.iter().cloned());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let reloaded: Vec<(usize, Loaded)> = loaded
            .par_iter()
            .enumerate()
            .filter(|(_, l)| matches!(l, Loaded::NotMentioned))
            .map_init(PythonParser::new, |parser, (i, _)| {
                (i, load(parser, &inputs[i], &names))
            })
            .collect();
        for (i, l) in reloaded {
            loaded[i] = l;
        }
    }
    let mut result = ScanResult {
        diagnostics: walk_errors,
        files_scanned: inputs.len(),
        bytes_scanned,
        ..ScanResult::default()
    };
    let parsed = parsed_files(&inputs, &loaded);
    let resolver = Resolver::new(&parsed.files);
    for (i, (_, file)) in parsed.files.iter().enumerate() {
        let input = &inputs[parsed.input_of[i]];
        let source = parsed.sources[i];
        check_file(&resolver, i, file, source, &input.display, &mut result);
    }
    for l in loaded {
        if let Loaded::Invalid(d) = l {
            result.diagnostics.push(d);
        }
    }
    result
        .diagnostics
        .sort_by(|a, b| (&a.path, a.start, a.rule).cmp(&(&b.path, b.start, b.rule)));
    result
        .calls
        .sort_by(|a, b| (&a.path, a.location).cmp(&(&b.path, b.location)));
    Ok(result)
}

/// The parsed files of a round, with the input each came from.
struct ParsedFiles<'a> {
    files: Vec<(ModuleName, &'a ParsedFile)>,
    sources: Vec<&'a str>,
    input_of: Vec<usize>,
}

fn parsed_files<'a>(inputs: &[Input], loaded: &'a [Loaded]) -> ParsedFiles<'a> {
    let mut parsed = ParsedFiles {
        files: Vec::new(),
        sources: Vec::new(),
        input_of: Vec::new(),
    };
    for (i, l) in loaded.iter().enumerate() {
        if let Loaded::Parsed { source, file } = l {
            parsed.files.push((inputs[i].module.clone(), file));
            parsed.sources.push(source);
            parsed.input_of.push(i);
        }
    }
    parsed
}

fn check_file(
    resolver: &Resolver,
    index: usize,
    file: &ParsedFile,
    source: &str,
    display: &str,
    result: &mut ScanResult,
) {
    let lines = LineIndex::new(source);
    let locate =
        |rule: Rule, span: Span, message: String, help: String, stacks: Vec<EntryPoint>| {
            let start = lines.location(span.start);
            Diagnostic {
                rule,
                path: display.to_string(),
                start,
                end: lines.location(span.end),
                message,
                help: Some(help),
                stacks,
                source_line: Some(lines.line(start.line).to_string()),
            }
        };
    for call in &file.calls {
        let stacks = resolver.resolve(index, &call.function);
        if stacks.is_empty() {
            continue;
        }
        // A call resolved to several stacks (e.g. an import per platform) reports each distinct
        // finding once, naming every stack that has it.
        let mut findings: Vec<(check::Finding, Vec<EntryPoint>)> = Vec::new();
        for &stack in &stacks {
            for finding in check::check_call(call, stack, source) {
                match findings.iter_mut().find(|(f, _)| *f == finding) {
                    Some((_, with)) => with.push(stack),
                    None => findings.push((finding, vec![stack])),
                }
            }
        }
        for (f, with) in findings {
            result
                .diagnostics
                .push(locate(f.rule, f.span, f.message, f.help, with));
        }
        result.calls.push(CallRecord {
            path: display.to_string(),
            location: lines.location(call.callee_span.start),
            stacks: stacks.into_iter().collect(),
            args: call
                .args
                .iter()
                .map(|a| RecordedArg {
                    kind: a.kind.clone(),
                    literal: a.literal.clone(),
                    text: source[a.value_span.start..a.value_span.end].to_string(),
                })
                .collect(),
        });
    }
}

/// Reads a file, and parses it when it mentions one of `names`.
fn load(parser: &mut PythonParser, input: &Input, names: &[&str]) -> Loaded {
    let invalid = |message: String, start: Location, source_line: Option<String>| {
        Loaded::Invalid(Diagnostic {
            rule: Rule::InvalidFile,
            path: input.display.clone(),
            start,
            end: start,
            message,
            help: Some("fix the file or exclude it; its call sites were not checked".into()),
            stacks: vec![],
            source_line,
        })
    };
    let file_start = Location { line: 1, column: 1 };
    let bytes = match std::fs::read(&input.path) {
        Ok(bytes) => bytes,
        Err(e) => return invalid(format!("cannot read the file: {e}"), file_start, None),
    };
    let source = match String::from_utf8(bytes) {
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
    if !names
        .iter()
        .any(|n| memchr::memmem::find(source.as_bytes(), n.as_bytes()).is_some())
    {
        return Loaded::NotMentioned;
    }
    match parser.parse(&source, &input.module) {
        Ok(file) => Loaded::Parsed { source, file },
        Err(e) => {
            let lines = LineIndex::new(&source);
            let at = lines.location(e.span.start);
            invalid(e.message, at, Some(lines.line(at.line).to_string()))
        }
    }
}

/// The Python files under `paths`: directories are walked respecting ignore files (keeping `.py`
/// files), files named explicitly are always taken. Walk errors become per-file diagnostics.
fn walk(paths: &[PathBuf]) -> Result<(Vec<Input>, Vec<Diagnostic>), ScanError> {
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
    let inputs = files
        .into_iter()
        .map(|path| Input {
            display: path.display().to_string(),
            module: resolve::module_name(&path, &mut |d| init_cache.has_init(d)),
            path,
        })
        .collect();
    Ok((inputs, errors))
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
        source_line: None,
    }
}
