//! The registry of scan rules: every diagnostic code with its severity, one-line summary and the
//! explanation `fa3conform explain` prints.
//!
//! Codes are stable: a rule is never renumbered and a code is never reused. The hazards come from
//! musa-fa3.md §8 and sgl-kernel-cuda.md §D, restricted to what a call's source text shows.

use crate::validate::Severity;
use std::fmt;

/// One rule of the scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    VerNotThree,
    VerNotLiteral,
    SignatureMismatch,
    PositionalRebinds,
    IgnoredArgument,
    Fp8Descale,
    QvOutsideMla,
    IgnoredByMlaBranch,
    IntCacheSeqlensPaged,
    InjectedMetadata,
    FixedLengthUnderInjection,
    IntCacheSeqlensUnderInjection,
    NegativeSoftcap,
    NumSplitsOver128,
    NumSplitsIgnored,
    SmMarginNotReserved,
    AppendWithoutCacheSeqlens,
    ArgumentUnpacking,
    ReturnArity,
    Fp8Input,
    UnresolvedImport,
    OutputTruncated,
    NotAnalysed,
    NotFollowed,
    InvalidFile,
}

/// A rule's registry entry.
#[derive(Debug)]
pub struct RuleInfo {
    /// `FA3Mnnn`.
    pub code: &'static str,
    /// kebab-case name, for SARIF and `--explain` output.
    pub name: &'static str,
    pub severity: Severity,
    /// Reported without `--select`. Rules that describe something true of every such call but
    /// harmful only in some settings (performance, SGLang's own design) are opt-in, as in ruff.
    pub default: bool,
    pub summary: &'static str,
    /// What the rule finds, why it matters on MUSA (with the spec reference) and how to fix it.
    pub explanation: &'static str,
}

impl Rule {
    /// Every rule, in code order.
    pub const ALL: [Rule; 25] = [
        Rule::VerNotThree,
        Rule::VerNotLiteral,
        Rule::SignatureMismatch,
        Rule::PositionalRebinds,
        Rule::IgnoredArgument,
        Rule::Fp8Descale,
        Rule::QvOutsideMla,
        Rule::IgnoredByMlaBranch,
        Rule::IntCacheSeqlensPaged,
        Rule::InjectedMetadata,
        Rule::FixedLengthUnderInjection,
        Rule::IntCacheSeqlensUnderInjection,
        Rule::NegativeSoftcap,
        Rule::NumSplitsOver128,
        Rule::NumSplitsIgnored,
        Rule::SmMarginNotReserved,
        Rule::AppendWithoutCacheSeqlens,
        Rule::ArgumentUnpacking,
        Rule::ReturnArity,
        Rule::Fp8Input,
        Rule::UnresolvedImport,
        Rule::OutputTruncated,
        Rule::NotAnalysed,
        Rule::NotFollowed,
        Rule::InvalidFile,
    ];

    /// Looks a rule up by code, case-insensitively (`fa3m001` works).
    pub fn from_code(code: &str) -> Option<Rule> {
        Rule::ALL
            .into_iter()
            .find(|r| r.code().eq_ignore_ascii_case(code))
    }

    pub fn code(self) -> &'static str {
        self.info().code
    }

    pub fn severity(self) -> Severity {
        self.info().severity
    }

    /// Reported unless `--select` says otherwise.
    pub fn enabled_by_default(self) -> bool {
        self.info().default
    }

    pub fn info(self) -> &'static RuleInfo {
        match self {
            Rule::VerNotThree => &RuleInfo {
                code: "FA3M001",
                name: "ver-not-3",
                severity: Severity::Error,
                default: true,
                summary: "`ver` is a literal other than 3: the SGLang MUSA wrapper raises ValueError",
                explanation: "\
The SGLang MUSA wrapper's first statement compares `ver` with 3 (Python `!=`) and raises
`ValueError: Only ver=3 is supported for MUSA FA3.` otherwise (musa-fa3.md §3). `3.0` passes;
`4`, `2`, `None`, `True` and `\"3\"` raise. On CUDA, sgl-kernel 0.3.13-0.3.21 ran FA4 for `ver=4` and
FA3 for every other value; from 0.4.0 `ver` is never read (sgl-kernel-cuda.md §D).

Fix: drop the `ver` argument (MUSA runs FA3 only) or pass `ver=3`.",
            },
            Rule::VerNotLiteral => &RuleInfo {
                code: "FA3M002",
                name: "ver-not-literal",
                severity: Severity::Warning,
                default: true,
                summary: "`ver` is computed: the MUSA wrapper raises ValueError unless it equals 3",
                explanation: "\
`ver` is passed as an expression the scan cannot evaluate. The SGLang MUSA wrapper raises
`ValueError: Only ver=3 is supported for MUSA FA3.` for any value that is not equal to 3, before
doing anything else (musa-fa3.md §3). Code that selects FA4 with `ver=4` on CUDA fails on MUSA.

Fix: make sure the expression is 3 on MUSA, or drop the argument there.",
            },
            Rule::SignatureMismatch => &RuleInfo {
                code: "FA3M003",
                name: "signature-mismatch",
                severity: Severity::Error,
                default: true,
                summary: "the call does not bind to the MUSA signature: Python raises TypeError",
                explanation: "\
The arguments do not bind to the signature of the function the call reaches on MUSA, so Python raises
`TypeError` before any code runs. The message is CPython 3.11's, computed by binding the call.
Every keyword the MUSA signature lacks is reported (CPython names only the first; the next raises once
that one is fixed), also next to `**kwargs` and for keys of a dict expanded with `**`.
Typical causes: keywords of newer sgl-kernel releases (`out`, `only_qv`, 0.4.x) that the SGLang MUSA
wrapper lacks; `ver`, `score_mod`, `aux_tensors`, `sinks` passed to mate's FA3 wrapper or to
`mate.flash_attn_with_kvcache` (which calls the sink `learnable_sink`); FlashAttention-2 and vLLM
keywords (`block_table` is `page_table` on MUSA, `alibi_slopes` has no MUSA counterpart, `fa_version`
and `out` do not exist; docs/spec/flash-attn-2.md, vllm-flash-attn.md); more positional arguments than
the MUSA signature has (musa-fa3.md §2, sgl-kernel-cuda.md §D).

Fix: remove the keyword, or rename it to the MUSA parameter (e.g. `block_table` -> `page_table`,
`sinks` -> `learnable_sink` for mate).",
            },
            Rule::PositionalRebinds => &RuleInfo {
                code: "FA3M004",
                name: "positional-rebinds",
                severity: Severity::Error,
                default: true,
                summary: "a positional argument binds to a different parameter on MUSA",
                explanation: "\
Positional order differs between stacks. `mate.mha_interface.flash_attn_with_kvcache` (also exported as
`mate.flash_attn_with_kvcache`) inserts `learnable_sink` at position 23, so a value written for FA3's
`attention_chunk` lands in `learnable_sink`, `softcap` in `attention_chunk`, and so on (musa-fa3.md
§2.3, hazard 13). No error is raised: the call silently means something else.

Fix: pass every argument after `window_size` by keyword.",
            },
            Rule::IgnoredArgument => &RuleInfo {
                code: "FA3M005",
                name: "ignored-argument",
                severity: Severity::Warning,
                default: true,
                summary: "the argument is accepted and silently ignored on MUSA",
                explanation: "\
The SGLang MUSA wrapper (V3) accepts `score_mod` and `aux_tensors` and never reads them: attention is
computed without the score modification (musa-fa3.md §2.1, hazard 15). On CUDA they are FA4-only
(sgl-kernel 0.3.21 with `ver=4`, SGLang's dispatcher). Also reported when they reach the call through a
`**` dict. Later wrapper versions raise `NotImplementedError` for them instead.

Fix: implement the score modification another way, or do not route these calls to MUSA.",
            },
            Rule::Fp8Descale => &RuleInfo {
                code: "FA3M006",
                name: "fp8-descale",
                severity: Severity::Warning,
                default: true,
                summary: "fp8 descale argument: mate accepts only float16/bfloat16 inputs",
                explanation: "\
mate does not support fp8. `q_descale`, `k_descale` and `v_descale` are accepted and never used, and
fp8 inputs fail with `AssertionError: inputs must be float16 or bfloat16` (musa-fa3.md hazard 6,
F-9). A descale argument means the call was written for an fp8 KV cache.

Fix: keep q and the KV cache in float16/bfloat16 on MUSA (dequantize first) and drop the descales.",
            },
            Rule::QvOutsideMla => &RuleInfo {
                code: "FA3M007",
                name: "qv-outside-mla",
                severity: Severity::Warning,
                default: false,
                summary: "`qv` is supported on MUSA only for MLA decode shapes (q 64, qv 512)",
                explanation: "\
mate routes a call by shape: with `qv.shape[-1] == 512` and `q.shape[-1] == 64` it runs the MLA
decode kernel; any other `qv` fails with `AssertionError: qv parameter is not supported yet`
(musa-fa3.md hazard 7, F-1, §6.12). The scan cannot see shapes, and `qv` in real code is almost
always the MLA shape (DeepSeek's 64/512), so the rule is off by default (`--select FA3M007`). The MLA
branch returns `(out, lse)` with lse laid out (b, s, h), not FA3's 4-tuple (hazard 8: FA3M019).

Fix: check that q and qv have the MLA head dims; otherwise fold qv into q/k before the call.",
            },
            Rule::IgnoredByMlaBranch => &RuleInfo {
                code: "FA3M008",
                name: "ignored-by-mla-branch",
                severity: Severity::Warning,
                default: true,
                summary: "argument ignored when `qv` routes the call to mate's MLA kernel",
                explanation: "\
When `qv` is given (the MLA decode shape), mate's MLA branch passes only q, qv, the caches,
`cache_seqlens`, `page_table`, `softmax_scale`, `causal`, `cu_seqlens_q`, `max_seqlen_q` and
`scheduler_metadata` to the kernel; everything else is silently ignored (musa-fa3.md §6.12, hazard 7).
Reported are the ones whose loss changes the result: `k`/`v` (no cache append; with them the rotary
arguments and `cu_seqlens_k_new`), `cache_batch_idx`, `cache_leftpad`, sinks and the
context-parallel tensor when given, and `window_size`, `attention_chunk`, `softcap`, `cp_world_size`
when their value is known not to be the default (`num_splits`, `pack_gqa` and `sm_margin` only tune
speed). One diagnostic per call lists them all.

Fix: append new KV to the cache yourself and drop the arguments the MLA kernel does not honour.",
            },
            Rule::IntCacheSeqlensPaged => &RuleInfo {
                code: "FA3M009",
                name: "int-cache-seqlens-paged",
                severity: Severity::Error,
                default: true,
                summary: "int `cache_seqlens` with `page_table`: mate sizes it by the page count",
                explanation: "\
mate turns an int `cache_seqlens` into a tensor of length `k_cache.shape[0]`; upstream FA3 uses
`q.shape[0]`. With a paged cache `k_cache.shape[0]` is the number of pages, so the call fails with
`AssertionError: seqused_k must have shape (batch_size,)` unless the page count equals the batch
size (musa-fa3.md hazard 3, F-22).

Fix: pass a per-sequence int32 tensor, e.g. `torch.full((batch,), n, dtype=torch.int32, device=q.device)`.",
            },
            Rule::InjectedMetadata => &RuleInfo {
                code: "FA3M010",
                name: "injected-metadata",
                severity: Severity::Warning,
                default: false,
                summary: "no `scheduler_metadata`: the SGLang MUSA wrapper injects cached metadata",
                explanation: "\
With `scheduler_metadata=None` the SGLang MUSA wrapper (V3) injects scheduler metadata as soon as
any MUSA attention backend has run a layer. The metadata is cached per forward prefix and shared by
every layer, batch, backend instance and micro-batch, so it may describe another call: stale or
mis-sliced metadata silently produces wrong attention (musa-fa3.md §4, hazard 1). Upstream FA3
computes fresh metadata inside every call. Off by default (`--select FA3M010`): whether the injected
metadata is wrong depends on the process. Never reported for the calls of SGLang's MUSA backend itself,
whose design it is.

Fix: compute metadata for this call (`get_scheduler_metadata`) and pass it explicitly.",
            },
            Rule::FixedLengthUnderInjection => &RuleInfo {
                code: "FA3M011",
                name: "fixed-length-under-injection",
                severity: Severity::Warning,
                default: false,
                summary: "no `cu_seqlens_q` and no `scheduler_metadata`: injection raises AttributeError",
                explanation: "\
Metadata injection reads the batch size from `cu_seqlens_q.shape`. A fixed-length call (4-D q, no
`cu_seqlens_q`) without `scheduler_metadata` therefore fails with
`AttributeError: 'NoneType' object has no attribute 'shape'` once any SGLang MUSA attention layer has
run in the process (musa-fa3.md §4.2, hazard 28). Off by default (`--select FA3M011`): injection
happens only in an SGLang process with a MUSA attention backend.

Fix: pass `cu_seqlens_q` and `max_seqlen_q` (varlen form), or pass `scheduler_metadata`.",
            },
            Rule::IntCacheSeqlensUnderInjection => &RuleInfo {
                code: "FA3M012",
                name: "int-cache-seqlens-under-injection",
                severity: Severity::Warning,
                default: false,
                summary: "int `cache_seqlens` without `scheduler_metadata`: injection raises AttributeError",
                explanation: "\
When metadata injection recomputes (the first layer of a pipeline stage, or a new forward prefix), it
hands `cache_seqlens` to mate's `get_scheduler_metadata`, which calls `.stride` on it before mate's own
int-to-tensor conversion could run: `AttributeError: 'int' object has no attribute 'stride'`
(musa-fa3.md §4.6, hazard 3). Off by default (`--select FA3M012`): injection happens only in an SGLang
process with a MUSA attention backend.

Fix: pass `cache_seqlens` as an int32 tensor of shape (batch,).",
            },
            Rule::NegativeSoftcap => &RuleInfo {
                code: "FA3M013",
                name: "negative-softcap",
                severity: Severity::Warning,
                default: true,
                summary: "negative `softcap` is applied on MUSA, ignored upstream",
                explanation: "\
mate enables soft-capping for any `softcap != 0.0`; upstream FA3 only for `softcap > 0.0`
(musa-fa3.md hazard 23). A negative value that was a no-op on CUDA changes the results on MUSA.

Fix: pass `softcap=0.0` where no capping is intended.",
            },
            Rule::NumSplitsOver128 => &RuleInfo {
                code: "FA3M014",
                name: "num-splits-over-128",
                severity: Severity::Warning,
                default: true,
                summary: "`num_splits` > 128: mate raises ValueError after the kernel ran",
                explanation: "\
With scheduler metadata (passed, or injected by the SGLang MUSA wrapper) a `num_splits` above 128
makes mate's combine step raise `ValueError: num_split exceeds max supported splits 128`, after the
forward kernel ran and appended any new KV to the cache. Upstream allows 256 and raises RuntimeError
(musa-fa3.md hazard 5, B-5).

Fix: use `num_splits` <= 128 (0 lets the heuristic choose).",
            },
            Rule::NumSplitsIgnored => &RuleInfo {
                code: "FA3M015",
                name: "num-splits-ignored",
                severity: Severity::Warning,
                default: false,
                summary: "`num_splits` is ignored by mate without `scheduler_metadata`",
                explanation: "\
Called directly (through `flash_attn_interface`, `flash_attn_3.interface` or `mate`) without
`scheduler_metadata`, mate runs a single split whatever `num_splits` says (musa-fa3.md hazard 4,
§6.9): no split-KV parallelism, and results may differ from a split run in the last bits. Off by default
(`--select FA3M015`): it costs speed, not correctness.

Fix: compute metadata with `get_scheduler_metadata(..., num_splits=...)` and pass it.",
            },
            Rule::SmMarginNotReserved => &RuleInfo {
                code: "FA3M016",
                name: "sm-margin-not-reserved",
                severity: Severity::Warning,
                default: false,
                summary: "`sm_margin` does not reserve multiprocessors on MUSA",
                explanation: "\
mate uses `sm_margin` only to lower the split heuristic's multiprocessor count; the persistent grid
still launches one CTA per multiprocessor (musa-fa3.md hazard 22). Multiprocessors are not left free
for concurrent communication kernels as upstream callers expect. Off by default (`--select FA3M016`):
it costs overlap, not correctness.

Fix: do not rely on `sm_margin` for overlap on MUSA.",
            },
            Rule::AppendWithoutCacheSeqlens => &RuleInfo {
                code: "FA3M017",
                name: "append-without-cache-seqlens",
                severity: Severity::Error,
                default: true,
                summary: "`k`/`v` appended without `cache_seqlens`: unchecked on MUSA",
                explanation: "\
Upstream FA3 rejects new keys/values without `cache_seqlens`; mate does not check it (musa-fa3.md
hazard 19). With none of `cu_seqlens_q`, `cache_seqlens`, `cache_leftpad` the kernel's JIT build
fails (`RuntimeError: Ninja build failed. ...`, J-1); otherwise the new keys are written at an offset
computed without the cache lengths (after the full capacity with `cu_seqlens_q` only: out of
bounds).

Fix: pass `cache_seqlens` (int32, shape (batch,)) whenever `k`/`v` are given.",
            },
            Rule::ArgumentUnpacking => &RuleInfo {
                code: "FA3M018",
                name: "argument-unpacking",
                severity: Severity::Info,
                default: false,
                summary: "`*args`/`**kwargs` hide arguments from the scan",
                explanation: "\
The call unpacks a sequence or mapping the scan cannot follow (a `**kwargs` parameter, a dict built from
something else), so it cannot see every parameter passed. Explicit keywords are still bound and
checked, and the keys of dicts built in the same function (`kwargs = {}; kwargs[\"ver\"] = 4`) are read as
keywords; the rules that need an argument to be absent are skipped. Off by default (`--select FA3M018`).

Fix: review the call by hand, or pass the arguments explicitly.",
            },
            Rule::ReturnArity => &RuleInfo {
                code: "FA3M019",
                name: "return-arity",
                severity: Severity::Error,
                default: true,
                summary: "the result is unpacked into a different number of values than MUSA returns",
                explanation: "\
With `return_softmax_lse=True`, mate's fmha path returns the 4-tuple `(out, softmax_lse, out_accum,
softmax_lse_accum)` and its MLA decode branch (taken with `qv`) the 2-tuple `(out, softmax_lse)`
(musa-fa3.md §7, hazard 8). FlashAttention-2, vLLM's `vllm_flash_attn` and FA4 return 2-tuples, FA3 and
sgl-kernel 4-tuples. `out, lse = f(..., return_softmax_lse=True)` written for a 2-tuple raises
`ValueError: too many values to unpack (expected 2)` on MUSA (CPython 3.11's text); four names against
the MLA branch raise `ValueError: not enough values to unpack (expected 4, got 2)`. The scan follows the
result through one variable (`result = f(...)`, then `o, lse = result`).

Fix: unpack as `out, lse, *rest = ...`, which fits every stack.",
            },
            Rule::Fp8Input => &RuleInfo {
                code: "FA3M020",
                name: "fp8-input",
                severity: Severity::Error,
                default: true,
                summary: "q, a KV cache or new keys/values are fp8: mate raises AssertionError",
                explanation: "\
The tensor passed as `q`, `k_cache`, `v_cache`, `k` or `v` was converted to a torch fp8 dtype
(`x.to(torch.float8_e4m3fn)`, `x.view(dtype)` or `torch.empty(..., dtype=dtype)` with a dtype variable
holding `torch.float8_*`, in the same function or through module constants). mate supports float16 and
bfloat16 only: the call fails with `AssertionError: inputs must be float16 or bfloat16` (musa-fa3.md
hazard 6, F-9).

Fix: keep q and the KV cache in float16/bfloat16 on MUSA; dequantize before the call.",
            },
            Rule::UnresolvedImport => &RuleInfo {
                code: "FA3M021",
                name: "unresolved-import",
                severity: Severity::Info,
                default: true,
                summary: "`flash_attn_with_kvcache` is imported from a module the scan does not know",
                explanation: "\
The file imports `flash_attn_with_kvcache` from a module that is neither one of the entry points the scan
models (docs/spec/entry-points.md) nor a module of the scanned tree, so calls of that name were not
checked. The scan says so instead of staying silent: a file without findings is not necessarily clean.

Fix: scan the tree that defines the module too, or check its calls by hand (`certify` with a call spec).",
            },
            Rule::OutputTruncated => &RuleInfo {
                code: "FA3M022",
                name: "output-truncated",
                severity: Severity::Info,
                default: true,
                summary: "more diagnostics in this file than are reported",
                explanation: "\
A file produced more diagnostics than the per-file limit, so the rest were counted but not reported
(the output of a scan stays bounded whatever the input). The summary counts every call site.

Fix: fix the reported ones and scan again, or narrow the codes with `--select`.",
            },
            Rule::NotAnalysed => &RuleInfo {
                code: "FA3M023",
                name: "not-analysed",
                severity: Severity::Info,
                default: true,
                summary: "an expression nested too deeply for the scan; calls inside it were not checked",
                explanation: "\
The scan analyses expressions up to 200 levels of nesting (CPython itself refuses more than 200 nested
brackets). Calls inside a deeper expression were not found or checked.

Fix: split the expression, or check its calls by hand.",
            },
            Rule::NotFollowed => &RuleInfo {
                code: "FA3M024",
                name: "not-followed",
                severity: Severity::Info,
                default: true,
                summary: "partials and wrappers the scan stopped following; the paths past them were not checked",
                explanation: "\
The scan follows a call through `functools.partial` objects and wrapper functions to the entry point it
reaches, up to 8 wrappers deep and 256 steps (entry points, partials and wrappers reached) per call site:
real wrappers forward a few calls a few levels deep, and code past these limits (a name bound to one of
several partials in branches the scan cannot decide, level after level; wrappers that each call the next
many times) would take time exponential in its nesting. The paths past the limits were not checked; the
ones within them were.

Fix: check the call as the entry point receives it by hand (`certify` with a call spec), or simplify the
partials and wrappers.",
            },
            Rule::InvalidFile => &RuleInfo {
                code: "FA3M900",
                name: "invalid-file",
                severity: Severity::Error,
                default: true,
                summary: "the file could not be read as Python and was skipped",
                explanation: "\
The file is not UTF-8, cannot be read, contains a syntax error, or exceeds a limit of CPython's
tokenizer (`SyntaxError: too many nested parentheses` past 200 nested brackets,
`IndentationError: too many levels of indentation` at 100 levels), so its call sites were not checked. Files that never mention `flash_attn_with_kvcache` or an alias of it are read but not parsed:
syntax errors are reported only for files that could call it.

Fix: fix the file, or exclude it (`.gitignore`, `--ignore FA3M900`).",
            },
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Which rules a scan reports: the default ones (or exactly `select`'s, when given), minus
/// `ignore`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub select: Vec<Rule>,
    pub ignore: Vec<Rule>,
}

impl Selection {
    pub fn reports(&self, rule: Rule) -> bool {
        let selected = if self.select.is_empty() {
            rule.enabled_by_default()
        } else {
            self.select.contains(&rule)
        };
        selected && !self.ignore.contains(&rule)
    }
}

/// The text `fa3conform explain CODE` prints.
pub fn explain(rule: Rule) -> String {
    let info = rule.info();
    let enabled = if info.default { "" } else { ", off by default" };
    format!(
        "{} ({}) [{}{enabled}]\n\n{}\n\n{}\n",
        info.code,
        info.name,
        info.severity.name(),
        info.summary,
        info.explanation
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_ordered_and_well_formed() {
        let codes: Vec<&str> = Rule::ALL.iter().map(|r| r.code()).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(codes, sorted, "codes must be unique and listed in order");
        for code in codes {
            assert!(code.starts_with("FA3M") && code.len() == 7, "{code}");
            assert!(code[4..].bytes().all(|b| b.is_ascii_digit()), "{code}");
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(Rule::from_code("fa3m001"), Some(Rule::VerNotThree));
        assert_eq!(Rule::from_code("FA3M900"), Some(Rule::InvalidFile));
        assert_eq!(Rule::from_code("FA3M999"), None);
    }
}
