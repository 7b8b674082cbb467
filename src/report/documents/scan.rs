//! `scan --format json`: the diagnostics reported (after `--select`/`--ignore`), every call site
//! (where it is, what it resolves to, how each argument binds) and the counts.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scan {
    pub diagnostics: Vec<Diagnostic>,
    /// At most 1,000 per file; [`Summary::call_sites`] counts them all.
    pub call_sites: Vec<CallSite>,
    pub summary: Summary,
}

impl Document for Scan {
    /// 2: `call_sites`, the `info` severity, the summary's `infos`, `files_with_call_sites` and
    /// `unresolved_calls`.
    const SCHEMA_VERSION: u32 = 2;
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub code: String,
    pub name: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    pub message: String,
    pub help: Option<String>,
    pub path: String,
    pub location: Location,
    pub end_location: Location,
    /// The stacks the call was written against.
    pub stacks: Vec<String>,
}

/// 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallSite {
    pub path: String,
    pub location: Location,
    /// `module.flash_attn_with_kvcache` of each entry point the call may reach.
    pub entry_points: Vec<String>,
    /// The stack (one per entry point) and release the call was written for.
    pub written_for: Vec<Stack>,
    /// The function the call reaches on MUSA (of the first entry point).
    pub on_musa: String,
    /// The partials and wrappers on the way, outermost first.
    pub via: Vec<String>,
    pub arguments: Vec<Argument>,
    /// `[names, starred]` of `a, b, *rest = f(...)`.
    pub unpacked: Option<(usize, bool)>,
    /// In a branch that never runs.
    pub dead: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stack {
    pub stack: String,
    pub release: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Argument {
    /// `positional`, `keyword`, `*` or `**` (an unpacking the scan cannot list).
    pub passed: String,
    pub keyword: Option<String>,
    /// The parameter it binds to in the signature the call was written for.
    pub parameter: Option<String>,
    /// The parameter it binds to on MUSA.
    pub musa_parameter: Option<String>,
    /// The literal value, when the scan knows it.
    pub value: Option<serde_json::Value>,
    /// The argument's source text (shortened).
    pub source: String,
    /// Where it comes from when not written at the call (a `**` dict key, a partial, a wrapper).
    pub origin: Option<String>,
    /// Passed on every path.
    pub certain: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub files_scanned: usize,
    pub bytes_scanned: u64,
    /// Every call site, also those not listed in `call_sites`.
    pub call_sites: usize,
    pub files_with_call_sites: usize,
    /// Calls of a name `flash_attn_with_kvcache` that lead to no entry point the scan knows.
    pub unresolved_calls: usize,
}
