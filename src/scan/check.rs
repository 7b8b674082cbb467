//! The rules, applied to one call as its entry point receives it ([`EffectiveCall`]), read as a
//! call of the stack it was written for.
//!
//! Arguments are bound by name to the signature the call reaches on MUSA (positional slots by that
//! signature's order); each rule reads the bound arguments. Explicit keywords bind even next to an
//! opaque `**kwargs`. A call whose arguments cannot be laid out (too many positionals, a value
//! given twice, a required argument missing) raises `TypeError` before anything else runs, so it
//! gets only that finding; unknown keywords are each reported and the other rules still run.

use super::entry_point::EntryPoint;
use super::expand::{EffectiveArg, EffectiveCall};
use super::python::value::Value;
use super::python::{ArgKind, Span, Unpacking};
use super::rules::Rule;
use super::upstream;
use crate::call::signature::{self, Signature};
use crate::call::{KvCacheCall, Param, PyValue};
use std::collections::HashMap;

/// One rule violation at one place in a call.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub rule: Rule,
    pub span: Span,
    pub message: String,
    pub help: String,
}

/// What a rule needs besides the call.
pub struct CallContext<'a> {
    pub call: &'a EffectiveCall,
    pub stack: EntryPoint,
    /// The callee expression, where findings about the whole call point.
    pub callee_span: Span,
    pub unpacked: Option<Unpacking>,
    /// The call is in SGLang's MUSA backend module, whose metadata injection is its design.
    pub in_sglang_musa_backend: bool,
    /// Whether a dtype expression (in the file whose analysis it refers to) is a torch fp8 dtype.
    pub is_fp8: &'a dyn Fn(usize, &super::python::value::Values) -> bool,
    /// A span of a file described for messages (`` `q.to(dtype)` at line 12 ``).
    pub place: &'a dyn Fn(usize, Span) -> String,
}

/// Accepted and never read by the SGLang MUSA wrapper (musa-fa3.md §2.1); FA4-only on CUDA.
const DROPPED_BY_SGLANG_WRAPPER: [&str; 2] = ["score_mod", "aux_tensors"];

const DESCALES: [&str; 3] = ["q_descale", "k_descale", "v_descale"];

/// The tensors whose dtype mate checks (F-9: q, the caches and new keys/values must be fp16/bf16).
const DTYPE_CHECKED: [&str; 5] = ["q", "k_cache", "v_cache", "k", "v"];

/// Tensors mate's MLA branch does not pass on (musa-fa3.md §6.12) whose loss changes the result
/// whenever one is given; the rotary ones and `cu_seqlens_k_new` only describe new keys.
const MLA_DROPPED_TENSORS: [&str; 5] = [
    "cache_batch_idx",
    "cache_leftpad",
    "sinks",
    "learnable_sink",
    "cp_tot_seqused_k",
];
const MLA_DROPPED_WITH_NEW_KEYS: [&str; 6] = [
    "k",
    "v",
    "rotary_cos",
    "rotary_sin",
    "rotary_seqlens",
    "cu_seqlens_k_new",
];

/// Scalars mate's MLA branch does not pass on that change the result unless they keep their default
/// (`num_splits`, `pack_gqa`, `sm_margin` only tune speed).
const MLA_DROPPED_SCALARS: [&str; 4] =
    ["window_size", "attention_chunk", "softcap", "cp_world_size"];

/// mate's combine kernel handles at most this many splits (B-5).
const MAX_SPLITS: i64 = 128;

/// The arguments of a call bound by name to the MUSA-side signature.
struct Bound<'c> {
    ctx: &'c CallContext<'c>,
    signature: &'static Signature,
    by_name: HashMap<&'c str, &'c EffectiveArg>,
    /// Arguments the scan cannot list may be present (`*args`, `**kwargs` it does not follow).
    opaque: bool,
}

impl<'c> Bound<'c> {
    fn new(ctx: &'c CallContext<'c>, signature: &'static Signature) -> Bound<'c> {
        let args = &ctx.call.args;
        let mut by_name = HashMap::new();
        let positional = args.iter().take_while(|a| a.kind == ArgKind::Positional);
        for ((param, _), arg) in signature.positional_params().iter().zip(positional) {
            by_name.insert(param.name(), arg);
        }
        for arg in args {
            if let ArgKind::Keyword(name) = &arg.kind {
                by_name.entry(name.as_str()).or_insert(arg);
            }
        }
        Bound {
            ctx,
            signature,
            by_name,
            opaque: args
                .iter()
                .any(|a| matches!(a.kind, ArgKind::Unpack | ArgKind::UnpackMapping)),
        }
    }

    /// The argument for `name`, unless it is absent or `None` on every path.
    fn given(&self, name: &str) -> Option<&'c EffectiveArg> {
        self.by_name
            .get(name)
            .copied()
            .filter(|a| !a.values.is_none())
    }

    fn literal(&self, name: &str) -> Option<&'c PyValue> {
        self.given(name).and_then(|a| a.values.as_literal())
    }

    /// Known not to be passed (or passed as `None`); unknowable when the call unpacks arguments.
    fn absent(&self, name: &str) -> bool {
        !self.opaque && self.given(name).is_none()
    }

    /// Passed with a value that is not known to be the parameter's default.
    fn differs_from_default(&self, name: &str) -> Option<&'c EffectiveArg> {
        let arg = self.given(name)?;
        let default = self
            .signature
            .params
            .iter()
            .find(|(p, _)| p.name() == name)
            .and_then(|(_, d)| d.value());
        match (arg.values.literals(), default) {
            (Some(values), Some(default))
                if values.iter().all(|v| super::python::python_eq(v, &default)) =>
            {
                None
            }
            _ => Some(arg),
        }
    }
}

/// A message suffix saying where an argument came from and whether it is always passed.
fn provenance(arg: &EffectiveArg) -> String {
    let mut parts = Vec::new();
    if let Some(note) = arg.origin.note() {
        parts.push(note);
    }
    if !arg.certain {
        parts.push("on some paths only".to_string());
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join(", ")),
    }
}

/// Every finding for the call.
pub fn check_call(ctx: &CallContext) -> Vec<Finding> {
    let mut out = Vec::new();
    let (target_name, target) = ctx.stack.on_musa();
    if let Some(splat) = ctx
        .call
        .args
        .iter()
        .find(|a| matches!(a.kind, ArgKind::Unpack | ArgKind::UnpackMapping))
    {
        out.push(Finding {
            rule: Rule::ArgumentUnpacking,
            span: splat.span,
            message: format!(
                "`{}` hides which parameters this call passes; checks that need every argument \
                 were skipped",
                splat.text
            ),
            help: "review this call by hand, or pass its arguments explicitly".into(),
        });
    }
    if binding(ctx, target_name, target, &mut out) {
        return out;
    }
    let bound = Bound::new(ctx, target);
    positional_rebinds(&bound, target_name, &mut out);
    ver_gate(&bound, &mut out);
    ignored_arguments(&bound, &mut out);
    fp8(&bound, &mut out);
    qv(&bound, &mut out);
    cache_seqlens(&bound, &mut out);
    metadata_injection(&bound, &mut out);
    scalar_hazards(&bound, &mut out);
    append_without_cache_seqlens(&bound, &mut out);
    return_arity(&bound, target_name, &mut out);
    out
}

/// FA3M003: every keyword the MUSA signature lacks, then (when the arguments can be laid out
/// statically) CPython's first other binding error. True when the call cannot bind at all.
fn binding(
    ctx: &CallContext,
    target_name: &str,
    target: &'static Signature,
    out: &mut Vec<Finding>,
) -> bool {
    let args = &ctx.call.args;
    let known = |name: &str| target.params.iter().any(|(p, _)| p.name() == name);
    for arg in args {
        if let ArgKind::Keyword(name) = &arg.kind
            && !known(name)
            && !target.var_keyword
        {
            let when = if arg.certain {
                ""
            } else {
                "on the paths that pass it, "
            };
            out.push(Finding {
                rule: Rule::SignatureMismatch,
                span: arg.span,
                message: format!(
                    "{when}{target_name} raises `TypeError: {}() got an unexpected keyword \
                     argument '{name}'`{}",
                    target.function,
                    provenance(arg)
                ),
                help: rename_help(name, target_name, target),
            });
        }
    }
    if args.iter().any(|a| a.kind == ArgKind::Unpack) {
        return false;
    }
    let mapping_unpacked = args.iter().any(|a| a.kind == ArgKind::UnpackMapping);
    let mut placeholder = KvCacheCall::default();
    for arg in args.iter().filter(|a| a.certain) {
        match &arg.kind {
            ArgKind::Positional => placeholder.positional.push(PyValue::None),
            ArgKind::Keyword(name) if known(name) => {
                placeholder.keywords.push((name.clone(), PyValue::None))
            }
            _ => {}
        }
    }
    let Err(message) = signature::bind(target, &placeholder) else {
        return false;
    };
    // With `**kwargs` still opaque, a "missing" argument may be in it.
    if mapping_unpacked && message.contains(" missing ") {
        return false;
    }
    out.push(layout_mismatch(ctx, target_name, target, message));
    true
}

/// What to do about a keyword the MUSA signature lacks.
fn rename_help(name: &str, target_name: &str, target: &Signature) -> String {
    let has = |name: &str| target.params.iter().any(|(p, _)| p.name() == name);
    match name {
        "block_table" if has("page_table") => {
            format!("{target_name} calls the paged-KV block table `page_table`: rename it")
        }
        "sinks" if has("learnable_sink") => {
            format!("{target_name} calls this parameter `learnable_sink`: rename it")
        }
        "s_aux" if has("sinks") => format!("{target_name} calls the attention sinks `sinks`: rename it"),
        "alibi_slopes" => {
            "mate has no ALiBi: remove it, and apply the bias another way if the slopes are not all zero"
                .into()
        }
        "fa_version" | "ver" => "MUSA runs FA3 only: remove it".into(),
        "out" => format!(
            "{target_name} allocates its output: remove `out=` and copy the result into the buffer"
        ),
        _ => format!("{target_name} has no parameter `{name}`: remove it"),
    }
}

/// FA3M003 for a call whose arguments cannot be laid out, pointing at the argument CPython
/// complains about.
fn layout_mismatch(
    ctx: &CallContext,
    target_name: &str,
    target: &'static Signature,
    message: String,
) -> Finding {
    let args = &ctx.call.args;
    let positional: Vec<&EffectiveArg> = args
        .iter()
        .filter(|a| a.kind == ArgKind::Positional)
        .collect();
    let slots = target.positional_params();
    let repeated = args.iter().find_map(|a| match &a.kind {
        ArgKind::Keyword(name) => slots[..positional.len().min(slots.len())]
            .iter()
            .any(|(p, _)| p.name() == name)
            .then_some((a, name)),
        _ => None,
    });
    let (span, help) = match repeated {
        Some((arg, name)) => (
            arg.span,
            format!("`{name}` is already passed by position; pass it once"),
        ),
        None if positional.len() > slots.len() => (
            positional[slots.len()].span,
            format!(
                "{target_name} takes {} positional parameters: pass the extra arguments by keyword or drop them",
                slots.len()
            ),
        ),
        None => (
            ctx.callee_span,
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
fn positional_rebinds(bound: &Bound, target_name: &str, out: &mut Vec<Finding>) {
    let (expected_name, expected) = bound.ctx.stack.expected_order();
    let positional = bound
        .ctx
        .call
        .args
        .iter()
        .take_while(|a| a.kind == ArgKind::Positional);
    for (i, arg) in positional.enumerate() {
        let (Some((actual, _)), Some((meant, _))) = (
            bound.signature.positional_params().get(i),
            expected.positional_params().get(i),
        ) else {
            continue;
        };
        if actual != meant {
            out.push(Finding {
                rule: Rule::PositionalRebinds,
                span: arg.span,
                message: format!(
                    "positional argument {} binds to `{actual}` in {target_name}, \
                     not to `{meant}` as in {expected_name}'s order{}",
                    i + 1,
                    provenance(arg)
                ),
                help: match expected_name {
                    "fa2" | "vllm-flash-attn" if *meant == Param::BlockTable => {
                        format!(
                            "pass it by keyword with its MUSA name: `page_table={}`",
                            arg.text
                        )
                    }
                    _ => format!("pass it by keyword: `{meant}={}`", arg.text),
                },
            });
        }
    }
}

/// FA3M001, FA3M002.
fn ver_gate(bound: &Bound, out: &mut Vec<Finding>) {
    if !bound.signature.params.iter().any(|(p, _)| *p == Param::Ver) {
        return;
    }
    let Some(arg) = bound.by_name.get("ver").copied() else {
        return;
    };
    let raises = upstream::VER_GATE.quoted();
    let provenance = provenance(arg);
    match arg.values.literals() {
        Some(values) if values.iter().all(|v| v.eq_int(3)) => {}
        Some(values) => {
            let shown: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            let ver = match shown.as_slice() {
                [one] => format!("`ver={one}`"),
                many => format!("`ver` (one of {})", many.join(", ")),
            };
            out.push(Finding {
                rule: Rule::VerNotThree,
                span: arg.span,
                message: format!(
                    "{ver}{provenance} makes the SGLang MUSA wrapper raise `{raises}`{}",
                    if values.iter().any(|v| v.eq_int(3)) {
                        " on the paths where it is not 3"
                    } else {
                        ""
                    }
                ),
                help: "drop `ver` (MUSA runs FA3 only) or pass `ver=3`".into(),
            });
        }
        None => out.push(Finding {
            rule: Rule::VerNotLiteral,
            span: arg.span,
            message: format!(
                "`ver={}`{provenance} is not a literal: the SGLang MUSA wrapper raises `{raises}` \
                 unless it equals 3",
                arg.text
            ),
            help: "make sure it is 3 on MUSA, or drop `ver` there".into(),
        }),
    }
}

/// FA3M005.
fn ignored_arguments(bound: &Bound, out: &mut Vec<Finding>) {
    if !bound.ctx.stack.via_sglang_wrapper() {
        return;
    }
    for name in DROPPED_BY_SGLANG_WRAPPER {
        if let Some(arg) = bound.given(name) {
            out.push(Finding {
                rule: Rule::IgnoredArgument,
                span: arg.span,
                message: format!(
                    "`{name}`{} is accepted and silently ignored by the SGLang MUSA wrapper \
                     (on CUDA only FA4 reads it)",
                    provenance(arg)
                ),
                help: "attention runs without it on MUSA: apply it another way or drop it".into(),
            });
        }
    }
}

/// FA3M006, FA3M020.
fn fp8(bound: &Bound, out: &mut Vec<Finding>) {
    let raises = upstream::FP16_BF16_ONLY.quoted();
    for name in DTYPE_CHECKED {
        let Some(arg) = bound.given(name) else {
            continue;
        };
        let cast_to_fp8 = arg.values.iter().find_map(|v| match v {
            Value::Cast { dtype, at } if (bound.ctx.is_fp8)(arg.values_file, dtype) => Some(*at),
            _ => None,
        });
        if let Some(at) = cast_to_fp8 {
            out.push(Finding {
                rule: Rule::Fp8Input,
                span: arg.span,
                message: format!(
                    "`{name}` is an fp8 tensor ({}){}: mate raises `{raises}`",
                    (bound.ctx.place)(arg.values_file, at),
                    provenance(arg)
                ),
                help: "keep q and the KV cache in float16/bfloat16 on MUSA (dequantize before the call)"
                    .into(),
            });
        }
    }
    for name in DESCALES {
        if let Some(arg) = bound.given(name) {
            out.push(Finding {
                rule: Rule::Fp8Descale,
                span: arg.span,
                message: format!(
                    "`{name}`{} is ignored on MUSA, and fp8 inputs fail with `{raises}`",
                    provenance(arg)
                ),
                help: "keep q and the KV cache in float16/bfloat16 on MUSA and drop the descale"
                    .into(),
            });
        }
    }
}

/// FA3M007, FA3M008 (one finding for every argument the MLA branch drops).
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
    let appends = bound.given("k").is_some() || bound.given("v").is_some();
    let ignored: Vec<&str> = MLA_DROPPED_WITH_NEW_KEYS
        .into_iter()
        .filter(|name| appends && bound.given(name).is_some())
        .chain(
            MLA_DROPPED_TENSORS
                .into_iter()
                .filter(|name| bound.given(name).is_some()),
        )
        .chain(MLA_DROPPED_SCALARS.into_iter().filter(|name| {
            bound
                .differs_from_default(name)
                .is_some_and(|arg| arg.values.literals().is_some())
        }))
        .collect();
    if !ignored.is_empty() {
        let names: Vec<String> = ignored.iter().map(|n| format!("`{n}`")).collect();
        let (verb, pronoun) = if ignored.len() == 1 {
            ("is", "it")
        } else {
            ("are", "them")
        };
        out.push(Finding {
            rule: Rule::IgnoredByMlaBranch,
            span: bound.ctx.callee_span,
            message: format!(
                "{} {verb} ignored when `qv` routes the call to mate's MLA decode kernel",
                names.join(", ")
            ),
            help: format!(
                "the MLA kernel does not honour {pronoun}: handle {pronoun} before the call or drop {pronoun}"
            ),
        });
    }
}

fn int_literal(value: Option<&PyValue>) -> Option<&PyValue> {
    value.filter(|v| matches!(v, PyValue::Int(_) | PyValue::Bool(_)))
}

/// FA3M009, FA3M012.
fn cache_seqlens(bound: &Bound, out: &mut Vec<Finding>) {
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
    if bound.ctx.stack.via_sglang_wrapper()
        && bound.absent("scheduler_metadata")
        && !bound.ctx.in_sglang_musa_backend
    {
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

/// FA3M010, FA3M011 (not for the MUSA backend's own calls: injection is its design).
fn metadata_injection(bound: &Bound, out: &mut Vec<Finding>) {
    if !bound.ctx.stack.via_sglang_wrapper()
        || !bound.absent("scheduler_metadata")
        || bound.ctx.in_sglang_musa_backend
    {
        return;
    }
    let span = bound.ctx.callee_span;
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
fn scalar_hazards(bound: &Bound, out: &mut Vec<Finding>) {
    if let Some(arg) = bound.given("softcap")
        && let Some(values) = arg.values.literals()
        && let Some(value) = values
            .iter()
            .find(|v| v.as_number().is_some_and(|x| x < 0.0))
    {
        out.push(Finding {
            rule: Rule::NegativeSoftcap,
            span: arg.span,
            message: format!(
                "`softcap={value}`{} enables soft-capping on MUSA (mate tests `softcap != 0.0`); \
                 upstream FlashAttention ignores values <= 0",
                provenance(arg)
            ),
            help: "pass `softcap=0.0` where no capping is intended".into(),
        });
    }
    let metadata_possible =
        bound.ctx.stack.via_sglang_wrapper() || !bound.absent("scheduler_metadata");
    if let Some(arg) = bound.given("num_splits") {
        match arg.values.as_literal().and_then(PyValue::as_int) {
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

/// FA3M019: `a, b = f(..., return_softmax_lse=True)` against the tuple MUSA returns: mate's fmha
/// path returns `(out, lse, out_accum, lse_accum)`, its MLA branch (`qv`) `(out, lse)` (musa-fa3.md
/// §7); FlashAttention-2, vLLM and FA4 return `(out, lse)`.
fn return_arity(bound: &Bound, target_name: &str, out: &mut Vec<Finding>) {
    let Some(unpacking) = bound.ctx.unpacked else {
        return;
    };
    let Some(lse) = bound.given("return_softmax_lse") else {
        return;
    };
    if lse.values.truthy() == Some(false) {
        return;
    }
    let (returned, branch) = if bound.given("qv").is_some() {
        (
            2,
            "`(out, softmax_lse)` from mate's MLA branch, which `qv` selects",
        )
    } else {
        (4, "`(out, softmax_lse, out_accum, softmax_lse_accum)`")
    };
    let targets = unpacking.targets;
    let error = if unpacking.starred {
        (targets > returned).then(|| {
            format!("not enough values to unpack (expected at least {targets}, got {returned})")
        })
    } else if targets < returned {
        Some(format!("too many values to unpack (expected {targets})"))
    } else if targets > returned {
        Some(format!(
            "not enough values to unpack (expected {targets}, got {returned})"
        ))
    } else {
        None
    };
    let Some(error) = error else {
        return;
    };
    out.push(Finding {
        rule: Rule::ReturnArity,
        span: unpacking.span,
        message: format!(
            "with `return_softmax_lse` {target_name} returns {branch}, so unpacking it into \
             {targets}{} raises `ValueError: {error}`",
            if unpacking.starred {
                " and a starred target"
            } else {
                " names"
            }
        ),
        help: "unpack as `out, lse, *rest = ...`, which fits every stack".into(),
    });
}
