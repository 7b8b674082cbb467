//! `certify --numerics`: the numbers of each call the MUSA stack accepts. The call runs through
//! the modelled stack ([`musa::flash_attn_with_kvcache_on`], the kernel path standing in for the
//! device) with the metadata it would get — the `scheduler_metadata` values the spec gives, else
//! the buffer its `metadata_args` describe, else what SGLang injects (with the injection cache
//! shared by the file's calls in order, as one process would) — and through the f64 and
//! low-precision references; the tolerance rule ([`crate::tolerance`]) judges. A call to mate's
//! FA3-compatible wrapper (certified with `--profile mate`) runs as one rank's call on the kernel
//! path ([`check_mate`]).

use crate::call::{KvCacheCall, PyValue};
use crate::kernel::{self, KernelError, KernelOptions};
use crate::memory::Budget;
use crate::musa::{self, InjectionCache, MusaError, MusaOptions};
use crate::reference::{self, ContextParallel, Precision, Stack};
use crate::scheduler::get_scheduler_metadata;
use crate::tensor::{Tensors, host_bytes, materialise};
use crate::tolerance::Report;

/// What the numeric check found for one call.
#[derive(Debug)]
pub enum Numerics {
    /// Within the tolerance rule; the measured deviations.
    Within(Report),
    /// Not within it: which tensor, where, by how much.
    Differs(String),
    /// Not run, and why (the stack raises, mate's MLA branch, over the memory cap, ...).
    NotRun(String),
}

impl Numerics {
    /// A difference fails certification; a check that could not run does not.
    pub fn fails(&self) -> bool {
        matches!(self, Numerics::Differs(_))
    }

    /// One line for the human report.
    pub fn describe(&self) -> String {
        match self {
            Numerics::Within(report) => {
                let caches = if report.caches_compared {
                    ", caches after the append as the rule says"
                } else {
                    ""
                };
                format!(
                    "within tolerance: out {}; lse {}{caches}",
                    report.out, report.lse
                )
            }
            Numerics::Differs(why) => format!("DIFFERS from the reference: {why}"),
            Numerics::NotRun(why) => format!("not run: {why}"),
        }
    }

    /// The status name in the JSON report.
    pub fn status(&self) -> &'static str {
        match self {
            Numerics::Within(_) => "within-tolerance",
            Numerics::Differs(_) => "differs",
            Numerics::NotRun(_) => "not-run",
        }
    }
}

/// Runs `call` on the modelled MUSA stack and the references. `cache` is SGLang's metadata cache,
/// carried from the previous calls of the same process.
pub fn check(call: &KvCacheCall, cache: &mut InjectionCache, options: &MusaOptions) -> Numerics {
    // The lse is needed for the comparison; asking for it changes nothing else.
    let call = match with_described_metadata(&call.returning_lse(), options.mp) {
        Ok(call) => call,
        Err(why) => return Numerics::NotRun(why),
    };
    let tensors = match materialise(&call, options.memory.left()) {
        Ok(tensors) => tensors,
        Err(e) => return Numerics::NotRun(format!("the call's tensors: {e}")),
    };
    let budget = match budget_for_references(&call, &tensors, None, options) {
        Ok(budget) => budget,
        Err(why) => return Numerics::NotRun(why),
    };
    let mut stack_budget = budget.clone();
    // the stack counts the tensors itself
    stack_budget.release(host_bytes(&tensors) as u128);
    let stack_options = MusaOptions {
        memory: stack_budget,
        ..options.clone()
    };
    let output = match musa::flash_attn_with_kvcache_on(&call, &tensors, cache, &stack_options) {
        Ok(output) => output,
        Err(MusaError::Raises(rejection)) => {
            return Numerics::NotRun(format!("the stack raises {rejection}"));
        }
        // Over the memory cap is the host's limit, not the device's.
        Err(MusaError::Kernel(KernelError::OverCap { needed, .. })) => {
            return kernel_over_budget(&budget, needed);
        }
        // The kernel path refuses what the device would race on or read out of bounds for; the
        // hazards name it.
        Err(MusaError::Kernel(e)) => {
            return Numerics::Differs(format!("the device would not compute this call: {e}"));
        }
        Err(e) => return Numerics::NotRun(e.to_string()),
    };
    let run = |precision| reference::run(&call, &tensors, Stack::Musa, precision);
    let (exact, low) = match (run(Precision::Exact), run(Precision::LowPrecision)) {
        (Ok(exact), Ok(low)) => (exact, low),
        (Err(e), _) | (_, Err(e)) => return Numerics::NotRun(format!("the reference: {e}")),
    };
    match output.judge(&exact, &low) {
        Ok(report) => Numerics::Within(report),
        Err(why) => Numerics::Differs(why),
    }
}

/// Runs a call to mate's FA3-compatible wrapper (profile `mate`, which must have accepted it) on
/// the kernel path and the references: one rank's call ([`musa::mate_rank`]) with the
/// metadata its `metadata_args` describe, on the tensors the call itself materialises (the data
/// `export` ships for it). No SGLang wrapper, so nothing is injected.
pub fn check_mate(call: &KvCacheCall, options: &MusaOptions) -> Numerics {
    let rank = with_described_metadata(&call.returning_lse(), options.mp)
        .and_then(|call| Ok((musa::mate_rank(&call)?, call)));
    let ((rank_call, cp), call) = match rank {
        Ok(rank) => rank,
        Err(why) => return Numerics::NotRun(why),
    };
    match materialise(&call, options.memory.left()) {
        Ok(tensors) => check_rank_on(&rank_call, musa::rank_tensors(tensors), &cp, options),
        Err(e) => Numerics::NotRun(format!("the call's tensors: {e}")),
    }
}

/// Runs one rank of a context-parallel call through mate's FA3 wrapper — `call` in the canonical
/// signature, its context-parallel arguments `cp`, its metadata values given — on the kernel path
/// and the references ([`reference::run_on_rank`]). The `mate` profile must have accepted it.
pub fn check_rank(call: &KvCacheCall, cp: &ContextParallel, options: &MusaOptions) -> Numerics {
    let call = call.returning_lse();
    match materialise(&call, options.memory.left()) {
        Ok(tensors) => check_rank_on(&call, tensors, cp, options),
        Err(e) => Numerics::NotRun(format!("the call's tensors: {e}")),
    }
}

/// [`check_rank`] on materialised tensors; `call` returns its lse.
fn check_rank_on(
    call: &KvCacheCall,
    tensors: Tensors,
    cp: &ContextParallel,
    options: &MusaOptions,
) -> Numerics {
    let budget = match budget_for_references(call, &tensors, Some(cp), options) {
        Ok(budget) => budget,
        Err(why) => return Numerics::NotRun(why),
    };
    let kernel_options = KernelOptions {
        mp: options.mp,
        memory_cap: budget.left(),
        context_parallel: Some(cp.clone()),
        ..KernelOptions::default()
    };
    let output = match kernel::run(call, &tensors, &kernel_options) {
        Ok(output) => output,
        Err(KernelError::OverCap { needed, .. }) => return kernel_over_budget(&budget, needed),
        Err(e) => return Numerics::Differs(format!("the device would not compute this call: {e}")),
    };
    let run = |precision| reference::run_on_rank(call, &tensors, cp, precision);
    match (run(Precision::Exact), run(Precision::LowPrecision)) {
        (Ok(exact), Ok(low)) => match output.judge(&exact, &low) {
            Ok(report) => Numerics::Within(report),
            Err(why) => Numerics::Differs(why.to_string()),
        },
        (Err(e), _) | (_, Err(e)) => Numerics::NotRun(format!("the reference: {e}")),
    }
}

/// The memory budget of one check after the call's tensors and what the f64 and low-precision
/// references allocate (both results are held with the kernel path's): the kernel path gets the
/// rest. Why the check is not run when the references do not fit.
fn budget_for_references(
    call: &KvCacheCall,
    tensors: &Tensors,
    cp: Option<&ContextParallel>,
    options: &MusaOptions,
) -> Result<Budget, String> {
    let mut budget = options.memory.clone();
    let references = reference::scratch_bytes(call, tensors, Stack::Musa, cp)
        .map_err(|e| format!("the reference: {e}"))?;
    budget
        .hold("the call's tensors", host_bytes(tensors) as u128)
        .and_then(|()| {
            budget.hold(
                "the reference (in f64 and in low precision)",
                2 * references,
            )
        })
        .map_err(|over| over.to_string())?;
    Ok(budget)
}

/// Not run: the kernel path's buffers do not fit in what the tensors and the references leave.
fn kernel_over_budget(budget: &Budget, needed: u128) -> Numerics {
    Numerics::NotRun(budget.refusal("the kernel path", needed).to_string())
}

/// `call` passing the buffer its `metadata_args` describe on a device with `mp` multiprocessors,
/// when the spec gives no values of its own: the metadata tensor the real call passes was
/// computed with those arguments.
pub fn with_described_metadata(call: &KvCacheCall, mp: usize) -> Result<KvCacheCall, String> {
    let values_given = call
        .passed("scheduler_metadata")
        .and_then(PyValue::as_tensor)
        .is_some_and(|t| t.values.is_some());
    match &call.metadata_args {
        Some(args) if !values_given => get_scheduler_metadata(args, mp)
            .map(|metadata| call.with_scheduler_metadata(&metadata.to_tensor()))
            .map_err(|e| format!("get_scheduler_metadata(metadata_args): {e}")),
        _ => Ok(call.clone()),
    }
}
