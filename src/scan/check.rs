//! The rules, applied to one call site resolved to one stack.
//!
//! Arguments are bound by name to the signature the call reaches on MUSA (positional slots by that
//! signature's order); each rule reads the bound arguments. A call that does not bind raises
//! `TypeError` before anything else runs, so it gets only that finding.

use super::entry_point::EntryPoint;
use super::python::{ArgKind, Argument, CallSite, Span};
use super::rules::Rule;
use super::upstream;
use crate::call::signature::{self, Signature};
use crate::call::{KvCacheCall, PyValue};
use std::collections::HashMap;

/// One rule violation at one place in a call.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub rule: Rule,
    pub span: Span,
    pub message: String,
    pub help: String,
}

/// Accepted and never read by the SGLang MUSA wrapper (musa-fa3.md §2.1).
const DROPPED_BY_SGLANG_WRAPPER: [&str; 2] = ["score_mod", "aux_tensors"];

const DESCALES: [&str; 3] = ["q_descale", "k_descale", "v_descale"];

/// Not passed on by mate's MLA branch (musa-fa3.md §6.12); the descales are FA3M006's.
const IGNORED_BY_MLA_BRANCH: [&str; 19] = [
    "k",
    "v",
    "rotary_cos",
    "rotary_sin",
    "rotary_seqlens",
    "cache_batch_idx",
    "cache_leftpad",
    "cu_seqlens_k_new",
    "window_size",
    "attention_chunk",
    "softcap",
    "sinks",
    "learnable_sink",
    "num_splits",
    "pack_gqa",
    "sm_margin",
    "cp_world_size",
    "cp_rank",
    "cp_tot_seqused_k",
];

/// mate's combine kernel handles at most this many splits (B-5).
const MAX_SPLITS: i64 = 128;

/// The arguments of a call bound by name to the MUSA-side signature.
struct Bound<'c> {
    call: &'c CallSite,
    source: &'c str,
    signature: &'static Signature,
    by_name: HashMap<&'c str, &'c Argument>,
}

impl<'c> Bound<'c> {
    fn new(call: &'c CallSite, source: &'c str, signature: &'static Signature) -> Bound<'c> {
        let mut by_name = HashMap::new();
        let positional = call
            .args
            .iter()
            .take_while(|a| a.kind == ArgKind::Positional);
        for ((param, _), arg) in signature.params.iter().zip(positional) {
            by_name.insert(param.name(), arg);
        }
        for arg in &call.args {
            if let ArgKind::Keyword(name) = &arg.kind {
                by_name.insert(name.as_str(), arg);
            }
        }
        Bound {
            call,
            source,
            signature,
            by_name,
        }
    }

    /// The argument for `name`, unless it is absent or a literal `None`.
    fn given(&self, name: &str) -> Option<&'c Argument> {
        self.by_name
            .get(name)
            .copied()
            .filter(|a| a.literal != Some(PyValue::None))
    }

    fn literal(&self, name: &str) -> Option<&'c PyValue> {
        self.given(name).and_then(|a| a.literal.as_ref())
    }

    /// Known not to be passed (or passed as `None`); unknowable when the call unpacks arguments.
    fn absent(&self, name: &str) -> bool {
        !self.call.unpacks() && self.given(name).is_none()
    }

    /// Passed with a value that is not known to be the parameter's default.
    fn differs_from_default(&self, name: &str) -> Option<&'c Argument> {
        let arg = self.given(name)?;
        let default = self
            .signature
            .params
            .iter()
            .find(|(p, _)| p.name() == name)
            .and_then(|(_, d)| d.value());
        match (&arg.literal, default) {
            (Some(value), Some(default)) if python_eq(value, &default) => None,
            _ => Some(arg),
        }
    }

    fn text(&self, arg: &Argument) -> &'c str {
        &self.source[arg.value_span.start..arg.value_span.end]
    }
}

/// Python's `==` on literals: numbers compare by value across bool/int/float (`False == 0`).
fn python_eq(a: &PyValue, b: &PyValue) -> bool {
    match (a, b) {
        (PyValue::Tuple(x), PyValue::Tuple(y)) | (PyValue::List(x), PyValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| python_eq(a, b))
        }
        _ => match (a.as_number(), b.as_number()) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

/// Every finding for `call`, read as a call of `stack`'s `flash_attn_with_kvcache`.
pub fn check_call(call: &CallSite, stack: EntryPoint, source: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let (target_name, target) = stack.on_musa();
    if let Some(splat) = call
        .args
        .iter()
        .find(|a| matches!(a.kind, ArgKind::Unpack | ArgKind::UnpackMapping))
    {
        out.push(Finding {
            rule: Rule::ArgumentUnpacking,
            span: splat.span,
            message: "argument unpacking hides which parameters this call passes; \
                      signature and absence checks were skipped"
                .into(),
            help: "review this call by hand, or pass its arguments explicitly".into(),
        });
    } else if let Err(message) = signature::bind(target, &placeholder_call(call)) {
        out.push(signature_mismatch(call, target_name, target, message));
        return out;
    }
    let bound = Bound::new(call, source, target);
    positional_rebinds(&bound, stack, target_name, &mut out);
    ver_gate(&bound, &mut out);
    ignored_arguments(&bound, stack, &mut out);
    fp8_descales(&bound, &mut out);
    qv(&bound, &mut out);
    cache_seqlens(&bound, stack, &mut out);
    metadata_injection(&bound, stack, &mut out);
    scalar_hazards(&bound, stack, &mut out);
    append_without_cache_seqlens(&bound, &mut out);
    out
}

/// The call with every value replaced by `None`: binding depends only on the argument layout.
fn placeholder_call(call: &CallSite) -> KvCacheCall {
    let mut placeholder = KvCacheCall::default();
    for arg in &call.args {
        match &arg.kind {
            ArgKind::Positional => placeholder.positional.push(PyValue::None),
            ArgKind::Keyword(name) => placeholder.keywords.push((name.clone(), PyValue::None)),
            ArgKind::Unpack | ArgKind::UnpackMapping => {}
        }
    }
    placeholder
}

fn has_param(signature: &Signature, name: &str) -> bool {
    signature.params.iter().any(|(p, _)| p.name() == name)
}

/// FA3M003, pointing at the argument CPython complains about.
fn signature_mismatch(
    call: &CallSite,
    target_name: &str,
    target: &'static Signature,
    message: String,
) -> Finding {
    let positional = call
        .args
        .iter()
        .filter(|a| a.kind == ArgKind::Positional)
        .count();
    let bad_keyword = call.args.iter().find_map(|a| match &a.kind {
        ArgKind::Keyword(name) => {
            let slot = target.params.iter().position(|(p, _)| p.name() == name);
            match slot {
                None => Some((a, name, false)),
                Some(i) if i < positional => Some((a, name, true)),
                Some(_) => None,
            }
        }
        _ => None,
    });
    let (span, help) = match bad_keyword {
        Some((arg, name, true)) => (
            arg.span,
            format!("`{name}` is already passed by position; pass it once"),
        ),
        Some((arg, name, false)) => {
            let renamed = (name == "sinks" && has_param(target, "learnable_sink"))
                .then_some("learnable_sink");
            let help = match renamed {
                Some(new) => format!("{target_name} calls this parameter `{new}`: rename it"),
                None => format!("{target_name} has no parameter `{name}`: remove it"),
            };
            (arg.span, help)
        }
        None if positional > target.params.len() => {
            let extra = call
                .args
                .iter()
                .filter(|a| a.kind == ArgKind::Positional)
                .nth(target.params.len())
                .expect("more positionals than parameters");
            (
                extra.span,
                format!(
                    "{target_name} takes {} parameters: pass the extra arguments by keyword or drop them",
                    target.params.len()
                ),
            )
        }
        None => (
            call.callee_span,
            "pass `q`, `k_cache` and `v_cache`".to_string(),
        ),
    };
    Finding {
        rule: Rule::SignatureMismatch,
        span,
        message: format!("{target_name} raises `TypeError: {message}`"),
        help,
    }
}

/// FA3M004.
fn positional_rebinds(bound: &Bound, stack: EntryPoint, target_name: &str, out: &mut Vec<Finding>) {
    let (expected_name, expected) = stack.expected_order();
    let positional = bound
        .call
        .args
        .iter()
        .take_while(|a| a.kind == ArgKind::Positional);
    for (i, arg) in positional.enumerate() {
        let (Some((actual, _)), Some((meant, _))) =
            (bound.signature.params.get(i), expected.params.get(i))
        else {
            continue;
        };
        if actual != meant {
            out.push(Finding {
                rule: Rule::PositionalRebinds,
                span: arg.span,
                message: format!(
                    "positional argument {} binds to `{actual}` in {target_name}, \
                     not to `{meant}` as in {expected_name}'s order",
                    i + 1
                ),
                help: format!("pass it by keyword: `{meant}={}`", bound.text(arg)),
            });
        }
    }
}

/// FA3M001, FA3M002.
fn ver_gate(bound: &Bound, out: &mut Vec<Finding>) {
    if !has_param(bound.signature, "ver") {
        return;
    }
    let Some(arg) = bound.by_name.get("ver").copied() else {
        return;
    };
    let raises = upstream::VER_GATE.quoted();
    match &arg.literal {
        Some(value) if value.eq_int(3) => {}
        Some(value) => out.push(Finding {
            rule: Rule::VerNotThree,
            span: arg.span,
            message: format!("`ver={value}` makes the SGLang MUSA wrapper raise `{raises}`"),
            help: "drop `ver` (MUSA runs FA3 only) or pass `ver=3`".into(),
        }),
        None => out.push(Finding {
            rule: Rule::VerNotLiteral,
            span: arg.span,
            message: format!(
                "`ver={}` is not a literal: the SGLang MUSA wrapper raises `{raises}` unless it equals 3",
                bound.text(arg)
            ),
            help: "make sure it is 3 on MUSA, or drop `ver` there".into(),
        }),
    }
}

/// FA3M005.
fn ignored_arguments(bound: &Bound, stack: EntryPoint, out: &mut Vec<Finding>) {
    if !stack.via_sglang_wrapper() {
        return;
    }
    for name in DROPPED_BY_SGLANG_WRAPPER {
        if let Some(arg) = bound.given(name) {
            out.push(Finding {
                rule: Rule::IgnoredArgument,
                span: arg.span,
                message: format!(
                    "`{name}` is accepted and silently ignored by the SGLang MUSA wrapper"
                ),
                help: "attention runs without it on MUSA: apply it another way or drop it".into(),
            });
        }
    }
}

/// FA3M006.
fn fp8_descales(bound: &Bound, out: &mut Vec<Finding>) {
    let raises = upstream::FP16_BF16_ONLY.quoted();
    for name in DESCALES {
        if let Some(arg) = bound.given(name) {
            out.push(Finding {
                rule: Rule::Fp8Descale,
                span: arg.span,
                message: format!(
                    "`{name}` is ignored on MUSA, and fp8 inputs fail with `{raises}`"
                ),
                help: "keep q and the KV cache in float16/bfloat16 on MUSA and drop the descale"
                    .into(),
            });
        }
    }
}

/// FA3M007, FA3M008.
fn qv(bound: &Bound, out: &mut Vec<Finding>) {
    let Some(qv) = bound.given("qv") else {
        return;
    };
    out.push(Finding {
        rule: Rule::QvOutsideMla,
        span: qv.span,
        message: format!(
            "`qv` works on MUSA only in the MLA decode shape (q head dim 64, qv head dim 512); \
             any other `qv` raises `{}`",
            upstream::QV_NOT_SUPPORTED.quoted()
        ),
        help: "check the head dims; outside MLA decode fold qv into q and k before the call".into(),
    });
    for name in IGNORED_BY_MLA_BRANCH {
        if let Some(arg) = bound.differs_from_default(name) {
            out.push(Finding {
                rule: Rule::IgnoredByMlaBranch,
                span: arg.span,
                message: format!(
                    "`{name}` is ignored when `qv` routes the call to mate's MLA decode kernel"
                ),
                help: "the MLA kernel does not honour it: handle it before the call or drop it"
                    .into(),
            });
        }
    }
}

fn int_literal(value: Option<&PyValue>) -> Option<&PyValue> {
    value.filter(|v| matches!(v, PyValue::Int(_) | PyValue::Bool(_)))
}

/// FA3M009, FA3M012.
fn cache_seqlens(bound: &Bound, stack: EntryPoint, out: &mut Vec<Finding>) {
    let Some(value) = int_literal(bound.literal("cache_seqlens")) else {
        return;
    };
    let arg = bound.given("cache_seqlens").expect("a literal is given");
    if bound.given("page_table").is_some() {
        out.push(Finding {
            rule: Rule::IntCacheSeqlensPaged,
            span: arg.span,
            message: format!(
                "int `cache_seqlens={value}` with `page_table`: mate expands it to `k_cache.shape[0]` \
                 (the page count) entries and raises `{}` unless that equals the batch size",
                upstream::SEQUSED_K_SHAPE.quoted()
            ),
            help: "pass an int32 tensor of shape (batch,): \
                   `torch.full((batch,), n, dtype=torch.int32, device=q.device)`"
                .into(),
        });
    }
    if stack.via_sglang_wrapper() && bound.absent("scheduler_metadata") {
        out.push(Finding {
            rule: Rule::IntCacheSeqlensUnderInjection,
            span: arg.span,
            message: format!(
                "int `cache_seqlens={value}` reaches mate's `get_scheduler_metadata` when metadata \
                 injection recomputes, which raises `{}`",
                upstream::INT_CACHE_SEQLENS_IN_METADATA.quoted()
            ),
            help: "pass `cache_seqlens` as an int32 tensor of shape (batch,)".into(),
        });
    }
}

/// FA3M010, FA3M011.
fn metadata_injection(bound: &Bound, stack: EntryPoint, out: &mut Vec<Finding>) {
    if !stack.via_sglang_wrapper() || !bound.absent("scheduler_metadata") {
        return;
    }
    let span = bound.call.callee_span;
    out.push(Finding {
        rule: Rule::InjectedMetadata,
        span,
        message: "no `scheduler_metadata`: once a MUSA attention backend has run, the SGLang MUSA \
                  wrapper injects metadata cached from another call, which may describe another \
                  layer or batch"
            .into(),
        help: "compute metadata for this call with `get_scheduler_metadata` and pass it".into(),
    });
    if bound.absent("cu_seqlens_q") {
        out.push(Finding {
            rule: Rule::FixedLengthUnderInjection,
            span,
            message: format!(
                "no `cu_seqlens_q` and no `scheduler_metadata`: metadata injection raises `{}` \
                 once a MUSA attention layer has run",
                upstream::NO_CU_SEQLENS_Q_IN_METADATA.quoted()
            ),
            help: "pass `cu_seqlens_q` and `max_seqlen_q`, or pass `scheduler_metadata`".into(),
        });
    }
}

/// FA3M013, FA3M014, FA3M015, FA3M016.
fn scalar_hazards(bound: &Bound, stack: EntryPoint, out: &mut Vec<Finding>) {
    if let Some(arg) = bound.given("softcap")
        && let Some(value) = arg
            .literal
            .as_ref()
            .filter(|v| v.as_number().is_some_and(|x| x < 0.0))
    {
        out.push(Finding {
            rule: Rule::NegativeSoftcap,
            span: arg.span,
            message: format!(
                "`softcap={value}` enables soft-capping on MUSA (mate tests `softcap != 0.0`); \
                 upstream FA3 ignores values <= 0"
            ),
            help: "pass `softcap=0.0` where no capping is intended".into(),
        });
    }
    let metadata_possible = stack.via_sglang_wrapper() || !bound.absent("scheduler_metadata");
    if let Some(arg) = bound.given("num_splits") {
        match arg.literal.as_ref().and_then(PyValue::as_int) {
            Some(n) if n > MAX_SPLITS && metadata_possible => out.push(Finding {
                rule: Rule::NumSplitsOver128,
                span: arg.span,
                message: format!(
                    "`num_splits={n}` is over mate's limit of {MAX_SPLITS}: with scheduler metadata \
                     the call raises `{}` after the forward kernel ran",
                    upstream::NUM_SPLITS_OVER_128.quoted()
                ),
                help: "use `num_splits` <= 128 (0 lets the heuristic choose)".into(),
            }),
            Some(0 | 1) => {}
            _ if !metadata_possible => out.push(Finding {
                rule: Rule::NumSplitsIgnored,
                span: arg.span,
                message: "`num_splits` is ignored: without `scheduler_metadata` mate runs a single split"
                    .into(),
                help: "pass metadata from `get_scheduler_metadata(..., num_splits=...)`".into(),
            }),
            _ => {}
        }
    }
    if let Some(arg) = bound.differs_from_default("sm_margin") {
        out.push(Finding {
            rule: Rule::SmMarginNotReserved,
            span: arg.span,
            message:
                "`sm_margin` does not reserve multiprocessors on MUSA: mate's persistent grid \
                      still launches one CTA per multiprocessor"
                    .into(),
            help: "do not rely on `sm_margin` for overlap with communication kernels on MUSA"
                .into(),
        });
    }
}

/// FA3M017.
fn append_without_cache_seqlens(bound: &Bound, out: &mut Vec<Finding>) {
    let Some(arg) = bound.given("k").or_else(|| bound.given("v")) else {
        return;
    };
    if !bound.absent("cache_seqlens") {
        return;
    }
    let message = if bound.absent("cu_seqlens_q") && bound.absent("cache_leftpad") {
        format!(
            "new `k`/`v` without `cache_seqlens`, `cu_seqlens_q` or `cache_leftpad`: mate's kernel \
             build fails with `{}`",
            upstream::NINJA_BUILD_FAILED.quoted()
        )
    } else {
        "new `k`/`v` without `cache_seqlens`: mate does not check this (upstream FA3 raises) and \
         writes the new keys at offsets computed without the cache lengths"
            .to_string()
    };
    out.push(Finding {
        rule: Rule::AppendWithoutCacheSeqlens,
        span: arg.span,
        message,
        help: "pass `cache_seqlens` (int32, shape (batch,)) whenever `k`/`v` are given".into(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::python::{ModuleName, PythonParser};

    /// The codes `check_call` gives the single call in `call`, read as a call of `stack`.
    fn codes(stack: EntryPoint, call: &str) -> Vec<&'static str> {
        let source = format!("import m\n{call}\n");
        let module = ModuleName {
            name: "t".into(),
            is_package: false,
        };
        let file = PythonParser::new().parse(&source, &module).unwrap();
        check_call(&file.calls[0], stack, &source)
            .iter()
            .map(|f| f.rule.code())
            .collect()
    }

    #[test]
    fn splits_over_the_limit_without_metadata_are_only_ignored() {
        assert_eq!(
            codes(
                EntryPoint::Fa3,
                "m.f(q, k, v, cache_seqlens=s, num_splits=200)"
            ),
            ["FA3M015"]
        );
        assert_eq!(
            codes(
                EntryPoint::Fa3,
                "m.f(q, k, v, cache_seqlens=s, scheduler_metadata=md, num_splits=200)"
            ),
            ["FA3M014"]
        );
    }

    #[test]
    fn defaults_passed_explicitly_are_not_reported_under_mla() {
        assert_eq!(
            codes(
                EntryPoint::Fa3,
                "m.f(q, k, v, qv=x, cache_seqlens=s, window_size=(-1, -1), softcap=0, \
                 attention_chunk=None, sm_margin=False, num_splits=0)"
            ),
            ["FA3M007"]
        );
        assert_eq!(
            codes(
                EntryPoint::Fa3,
                "m.f(q, k, v, qv=x, cache_seqlens=s, window_size=[-1, -1])"
            ),
            ["FA3M007", "FA3M008"]
        );
    }

    #[test]
    fn append_is_checked_for_v_alone_and_skipped_when_unpacking() {
        assert_eq!(codes(EntryPoint::Fa3, "m.f(q, k, v, v=new_v)"), ["FA3M017"]);
        assert_eq!(
            codes(EntryPoint::Fa3, "m.f(q, k, v, v=new_v, **extra)"),
            ["FA3M018"]
        );
    }

    #[test]
    fn type_errors_stop_the_other_rules() {
        assert_eq!(
            codes(
                EntryPoint::SglKernel,
                "m.f(q, k, v, out=o, ver=4, softcap=-1.0)"
            ),
            ["FA3M003"]
        );
    }
}
