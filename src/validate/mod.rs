//! Validation profiles: each stack's checks, in source order, with exact exceptions and messages.
//!
//! A profile is data: an ordered list of layers, each an ordered list of [`Check`]s naming the
//! error site ([`registry`]) they can raise. One generic loop ([`engine::run_layers`]) runs them; the
//! first failing check decides the outcome, exactly as the Python and C++ layers run. A layer two
//! stacks share is one list both reference. Checks may also record [`Hazard`]s: what a layer silently
//! does to an accepted call (ignores, renames, changes a default) that a porter must know.

pub mod engine;
pub mod profiles;
pub mod py;
pub mod registry;

use crate::call::{Device, KvCacheCall, LseLayout};
use std::fmt;

/// The Python exception class a failing check raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Exception {
    ValueError,
    AssertionError,
    RuntimeError,
    TypeError,
    AttributeError,
    IndexError,
    KeyError,
    NotImplementedError,
    ZeroDivisionError,
    OverflowError,
}

impl Exception {
    pub const ALL: [Exception; 10] = [
        Exception::ValueError,
        Exception::AssertionError,
        Exception::RuntimeError,
        Exception::TypeError,
        Exception::AttributeError,
        Exception::IndexError,
        Exception::KeyError,
        Exception::NotImplementedError,
        Exception::ZeroDivisionError,
        Exception::OverflowError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Exception::ValueError => "ValueError",
            Exception::AssertionError => "AssertionError",
            Exception::RuntimeError => "RuntimeError",
            Exception::TypeError => "TypeError",
            Exception::AttributeError => "AttributeError",
            Exception::IndexError => "IndexError",
            Exception::KeyError => "KeyError",
            Exception::NotImplementedError => "NotImplementedError",
            Exception::ZeroDivisionError => "ZeroDivisionError",
            Exception::OverflowError => "OverflowError",
        }
    }
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A call a stack refuses: the site that fired and what Python sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Registry id of the error site.
    pub site: &'static str,
    pub exception: Exception,
    /// `str(exc)`, byte for byte (empty for a bare `assert`), as far as [`Self::message_match`]
    /// says.
    pub message: String,
}

impl Rejection {
    /// How [`Self::message`] stands for `str(exc)`: its site's declaration.
    pub fn message_match(&self) -> registry::MessageMatch {
        registry::site(self.site).message_match
    }
}

impl fmt::Display for Rejection {
    /// As Python prints the last line of a traceback: `ValueError: message` (or just the class name
    /// when the message is empty).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.exception)
        } else {
            write!(f, "{}: {}", self.exception, self.message)
        }
    }
}

/// How serious a hazard (or a `scan` finding) is for a porter; any error makes `certify` and
/// `scan` exit 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Behaviour differs in a way that is usually harmless but worth knowing.
    Info,
    /// The call means something else than on the stack it was written for.
    Warning,
    /// The call silently computes wrong results or drops a requested feature.
    Error,
}

impl Severity {
    /// The lower-case name reports print (as serialised).
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Something a layer silently does to an accepted (or not yet rejected) call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hazard {
    /// Stable code, e.g. `H-MUSA-SCORE-MOD-DROPPED` (registered in [`registry::HAZARDS`]).
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
}

impl Hazard {
    /// Hazard `def`, its template filled with `args`.
    pub fn new(def: &'static registry::HazardDef, args: &[String]) -> Hazard {
        Hazard {
            code: def.code,
            severity: def.severity,
            message: registry::fill(def.template, args),
        }
    }
}

/// A half-open range of indices as hazard messages write it: `a..b` holds a to b − 1 (as Rust's
/// and Python's ranges do), a range of one index is that index.
pub fn span(start: i64, end: i64) -> String {
    if end == start + 1 {
        start.to_string()
    } else {
        format!("{start}..{end}")
    }
}

/// The ranges ([`span`]) of a sorted set of indices, at most eight, then an ellipsis.
pub fn ranges(indices: impl IntoIterator<Item = usize>) -> String {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for i in indices {
        match spans.last_mut() {
            Some((_, end)) if *end == i => *end += 1,
            _ => spans.push((i, i + 1)),
        }
    }
    let mut text: Vec<String> = spans
        .iter()
        .take(8)
        .map(|&(a, b)| span(a as i64, b as i64))
        .collect();
    if spans.len() > 8 {
        text.push("…".into());
    }
    text.join(", ")
}

/// The outcome of validating one call against one profile.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Accepted(Box<Resolved>),
    Rejected(Rejection),
}

/// A profile's verdict: the outcome plus every hazard recorded on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub profile: &'static str,
    pub outcome: Outcome,
    pub hazards: Vec<Hazard>,
}

impl Verdict {
    pub fn rejection(&self) -> Option<&Rejection> {
        match &self.outcome {
            Outcome::Rejected(r) => Some(r),
            Outcome::Accepted(_) => None,
        }
    }

    pub fn resolved(&self) -> Option<&Resolved> {
        match &self.outcome {
            Outcome::Accepted(r) => Some(r),
            Outcome::Rejected(_) => None,
        }
    }
}

/// Everything later stages need about an accepted call, as the stack resolved it.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub batch_size: usize,
    /// Static query length (`q.shape[1]`, or `max_seqlen_q` with `cu_seqlens_q`).
    pub seqlen_q: usize,
    pub total_q: usize,
    /// Static key capacity.
    pub seqlen_k: usize,
    pub num_heads: usize,
    pub num_heads_k: usize,
    pub head_size: usize,
    pub head_size_v: usize,
    /// Head dims after the stack's rounding (the kernel template dims).
    pub head_size_rounded: usize,
    pub head_size_v_rounded: usize,
    pub paged: bool,
    pub page_size: usize,
    pub varlen_q: bool,
    pub is_causal: bool,
    pub is_local: bool,
    pub window_left: i64,
    pub window_right: i64,
    pub attention_chunk: i64,
    pub softcap: f64,
    pub softmax_scale: f64,
    /// Resolved split count: 1 when the stack forces it; 0 when it is chosen at run time per batch
    /// (MUSA with metadata and `num_splits <= 0`: metadata kernel and host heuristic).
    pub num_splits: i64,
    pub pack_gqa: bool,
    pub tile_m: usize,
    pub tile_n: usize,
    pub lse_layout: LseLayout,
    /// mate's MLA-decode branch (routed by shape).
    pub mla_decode: bool,
}

/// A versioned model of one stack's validation.
pub trait Profile: Sync {
    /// `musa`, `sgl-kernel`, `fa3`, `fa3-stable`.
    fn name(&self) -> &'static str;
    /// What it models: repository, release and commit.
    fn models(&self) -> &'static str;
    /// The device tensors are on when a spec leaves it open.
    fn native_device(&self) -> Device;
    fn validate(&self, call: &KvCacheCall) -> Verdict;
    /// Registry ids of every error site this profile can raise, in check order (computed once:
    /// the fuzz oracles ask on every rejection).
    fn sites(&self) -> &'static [&'static str];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_half_open_and_capped() {
        assert_eq!(ranges([0, 1, 2, 5, 7, 8]), "0..3, 5, 7..9");
        assert_eq!(ranges(Vec::<usize>::new()), "");
        let many = ranges((0..40).step_by(2));
        assert!(
            many.ends_with(", …") && many.starts_with("0, 2, 4"),
            "{many}"
        );
        assert_eq!(span(256, 300), "256..300");
    }
}
