//! The reference: what an accepted `flash_attn_with_kvcache` call computes, evaluated in f64.
//!
//! [`run`] takes a call, its materialised tensors, the [`Stack`] whose conventions apply and a
//! [`Precision`], and returns the output, the softmax lse and the caches after the in-place append.
//!
//! Semantics (cuda-fa3.md D.2, D.11, D.13, D.13b, D.14, D.15; sgl-kernel-cuda.md E.4; musa-fa3.md §6, §7):
//! * Per batch `b`: `sq_b` query rows, `sk_b = cache_seqlens[b] − leftpad[b] + new_b` keys; key `j` is
//!   cache position `leftpad[b] + j` of KV row `cache_batch_idx[b]` (through the page table when
//!   paged); without any varlen input every batch uses the full capacity.
//! * Masks are bottom-right aligned; causal/local/chunk are resolved from the static sizes per stack
//!   ([`mask`]), and the attended key set of a row is always an interval.
//! * `s = scale·(q·k + qv·v)` (fp8: times `q_descale·k_descale` of the query's KV head), then softcap
//!   `c·tanh(s/c)`; `P = softmax(s)`, where a learnable sink adds `exp(sink)` (not scaled) to the
//!   denominator and so to the lse; `out = P·v` (fp8: times `v_descale`).
//! * New keys are rotated (rotary) and rounded to the cache dtype before they are stored and
//!   attended; rotated queries are rounded to the input dtype, as the devices stage them.
//! * Rows without any attendable key: `out = 0`, `lse = −inf`; on MUSA with a sink, `lse = sink`
//!   where the row's tile has a key block (mate keeps the row's maximum at 0,
//!   docs/musa-device.md D1 — sgl-kernel does the same with FA3's tiles, which the reference does
//!   not model: −inf there). FA3 and sgl-kernel return `lse = +inf` everywhere when the call has
//!   no keys at all (`total_k + total_knew == 0`, cuda-fa3.md D.16).
//! * Rows no kernel writes — of a packed `q`, rows no `cu_seqlens_q` segment covers; on MUSA,
//!   packed rows of a segment longer than `max_seqlen_q` past the grid's m-blocks (D2, D5) — get
//!   `out = 0`, `lse = −inf` and are marked [`RefOutput::unspecified`]: nothing defines them.
//! * One rank of a context-parallel call through mate's FA3 wrapper ([`run_on_rank`]): local key
//!   `j` is global key `j·W + rank` of a sequence of `cp_tot_seqused_k[b]` keys, the query rows its
//!   last positions; the rank's out and lse cover its own keys ([`ContextParallel`],
//!   docs/spec/mate-context-parallel.md).
//! * MUSA's MLA branch (`qv` width 512 with `q` width 64) ignores append, rotary, window, chunk,
//!   softcap, sinks, leftpad and `cache_batch_idx`, and lays lse out as `(b, seqlen_q, h)`.
//!
//! Work is done per (batch, KV head) in blocks of query rows with matrix products over only the key
//! columns some row of the block attends to, so memory stays O(seqlen_k · (head_dim + block))
//! per task, never the whole (b, h, sq, sk) score tensor.

mod attend;
pub mod mask;
mod resolve;

pub use mask::{ContextParallel, Mask};

use crate::call::{Dtype, KvCacheCall, LseLayout};
use crate::numeric::round_to;
use crate::parallel;
use crate::tensor::Tensors;
use ndarray::{Array2, Array3, ArrayD, IxDyn};
use rayon::prelude::*;
use resolve::Problem;
use thiserror::Error;

/// The stack whose conventions an evaluation follows, where the stacks differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stack {
    /// SGLang's MUSA wrapper → mate (musa-fa3.md).
    Musa,
    /// sgl-kernel 0.3.21 on CUDA (sgl-kernel-cuda.md).
    SglKernel,
    /// Upstream FlashAttention-3 `hopper/` (cuda-fa3.md).
    Fa3,
}

impl Stack {
    pub const ALL: [Stack; 3] = [Stack::Musa, Stack::SglKernel, Stack::Fa3];

    pub fn name(self) -> &'static str {
        match self {
            Stack::Musa => "musa",
            Stack::SglKernel => "sgl-kernel",
            Stack::Fa3 => "fa3",
        }
    }

    /// Whether a `softcap` value turns softcapping on: any non-zero value in mate
    /// (musa-fa3.md §6.4), only positive values in FA3 and sgl-kernel (cuda-fa3.md D.15).
    pub fn softcap_enabled(self, softcap: f64) -> bool {
        match self {
            Stack::Musa => softcap != 0.0,
            Stack::SglKernel | Stack::Fa3 => softcap > 0.0,
        }
    }

    /// Whether the stack has learnable sinks (`sinks`; FA3 has none).
    pub fn has_sinks(self) -> bool {
        self != Stack::Fa3
    }
}

/// How intermediates are rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Everything in f64; only the values the devices store (rotated q, new k/v in the cache) are rounded.
    Exact,
    /// FA3's test baseline `attention_ref(upcast=False, reorder_ops=True)` (cuda-fa3.md §E): math in
    /// the input dtype (bf16 for fp8 inputs): `k·scale` rounded, scores rounded, softcap in that dtype,
    /// probabilities rounded (fp8: also through fp8), output rounded. Used to size tolerances.
    LowPrecision,
}

/// What a call returns and leaves behind, in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct RefOutput {
    /// `(b, seqlen_q, h, dv)`, or `(total_q, h, dv)` with `cu_seqlens_q`.
    pub out: ArrayD<f64>,
    /// `(b, h, seqlen_q)` or `(h, total_q)`; MUSA's MLA branch: `(b, seqlen_q, h)` for 4-D `q`.
    pub lse: ArrayD<f64>,
    /// `k_cache` after the append (values in the cache dtype); `None` when nothing was appended.
    pub k_cache: Option<ArrayD<f64>>,
    pub v_cache: Option<ArrayD<f64>>,
    /// The attention input dtype (`q`'s), which sets the tolerance multipliers.
    pub dtype: Dtype,
    /// The stack applied a softcap, which raises the tolerance's maximum multiplier.
    pub softcap: bool,
    /// The appended keys were rotated (so cache keys are compared with a tolerance, not bit-exactly).
    pub rotated_keys: bool,
    /// Elements no definition fixes (rows no kernel writes, values a device race decides);
    /// `None` when every element is defined.
    pub unspecified: Option<Unspecified>,
    /// The largest scaled logit each row attends, in lse's layout (−inf for rows without keys);
    /// `None` where the numbers were not computed here (read from a bundle).
    pub max_logit: Option<ArrayD<f64>>,
}

/// Masks over `out`, `lse` and the caches (same shapes): `true` where the element is unspecified.
#[derive(Clone, Debug, PartialEq)]
pub struct Unspecified {
    pub out: ArrayD<bool>,
    pub lse: ArrayD<bool>,
    /// `None`: every cache element is defined.
    pub k_cache: Option<ArrayD<bool>>,
    pub v_cache: Option<ArrayD<bool>>,
}

/// Why the reference cannot evaluate a call.
#[derive(Debug, Error, PartialEq)]
pub enum RefError {
    #[error("the call does not bind: {0}")]
    Binding(String),
    #[error("the reference cannot evaluate this call: {0}")]
    Unevaluable(String),
}

/// Evaluates `call` with its materialised `tensors` under `stack`'s conventions.
///
/// Never panics on a malformed call: anything the reference cannot give a meaning to (shapes that
/// disagree, indices out of range, reads or writes beyond the cache) is a [`RefError`].
pub fn run(
    call: &KvCacheCall,
    tensors: &Tensors,
    stack: Stack,
    precision: Precision,
) -> Result<RefOutput, RefError> {
    let problem = Problem::resolve(call, tensors, stack, precision, None)?;
    evaluate(&problem)
}

/// Evaluates `call` as one rank of a context-parallel call through mate's FA3 wrapper, on MUSA:
/// the attention of each query row over the rank's keys, placed at their global positions
/// ([`ContextParallel`]), with its lse over those keys. `call` is in the canonical signature (the
/// context-parallel arguments are `cp`).
pub fn run_on_rank(
    call: &KvCacheCall,
    tensors: &Tensors,
    cp: &ContextParallel,
    precision: Precision,
) -> Result<RefOutput, RefError> {
    let problem = Problem::resolve(call, tensors, Stack::Musa, precision, Some(cp))?;
    evaluate(&problem)
}

/// An upper bound on the bytes [`run`] (or [`run_on_rank`] with `cp`) allocates for `call` on
/// `tensors`, its result included: what a caller holds in its memory budget before running it.
pub fn scratch_bytes(
    call: &KvCacheCall,
    tensors: &Tensors,
    stack: Stack,
    cp: Option<&ContextParallel>,
) -> Result<u128, RefError> {
    let problem = Problem::resolve(call, tensors, stack, Precision::Exact, cp)?;
    Ok(evaluation_bytes(&problem))
}

/// What [`evaluate`] (and [`Problem::resolve`] before it) allocates at most: the batches' plans and
/// fp8 descale factors, the new tokens and the appended caches; the groups'
/// results, all held until they are placed; the output, lse and largest-logit arrays (the
/// `(b, h, s)` layouts copy the last two while permuting, twice at most) and the unwritten-row
/// masks; and the scratch of as many groups (one per batch and KV head) as run at once, the
/// largest ones, each on its own worker.
fn evaluation_bytes(p: &Problem) -> u128 {
    let (h, hk) = (p.num_heads as u128, p.num_heads_k as u128);
    let (d, dv, total_q) = (p.head_dim as u128, p.head_dim_v as u128, p.total_q as u128);
    let batches = p.batches.len() as u128;
    let plans = batches * (std::mem::size_of::<resolve::BatchPlan>() as u128 + 3 * 8 * hk);
    let new_keys: u128 = p.batches.iter().map(|b| b.new_keys as u128).sum();
    let new_tokens = 8 * new_keys * hk * (d + dv);
    let caches = match p.new_kv {
        true => 8 * (p.k_cache_full.len() + p.v_cache_full.len()) as u128,
        false => 0,
    };
    let results: u128 = (0..p.batches.len())
        .map(|b| hk * attend::group_result_bytes(p, b))
        .sum();
    let arrays = 8 * total_q * h * (dv + 3 * 2) + total_q * h * (dv + 2);
    let workers = match parallel::enabled() {
        true => rayon::current_num_threads(),
        false => 1,
    };
    let mut scratch: Vec<u128> = (0..p.batches.len())
        .map(|b| attend::group_scratch_bytes(p, b))
        .collect();
    scratch.sort_unstable_by(|a, b| b.cmp(a));
    // A group per (batch, KV head).
    let concurrent: u128 = scratch
        .iter()
        .flat_map(|&bytes| std::iter::repeat_n(bytes, p.num_heads_k))
        .take(workers)
        .sum();
    plans + new_tokens + caches + results + arrays + concurrent
}

fn evaluate(p: &Problem) -> Result<RefOutput, RefError> {
    let new_tokens = p.new_tokens()?;
    let (k_cache, v_cache) = p.appended_caches(&new_tokens)?.unzip();
    let mut out = Array3::<f64>::zeros((p.total_q, p.num_heads, p.head_dim_v));
    let mut lse = Array2::<f64>::from_elem((p.num_heads, p.total_q), f64::NEG_INFINITY);
    let mut max_logit = lse.clone();
    if p.empty_kv_is_plus_inf() {
        lse.fill(f64::INFINITY);
    } else {
        let tasks: Vec<(usize, usize)> = (0..p.batches.len())
            .flat_map(|b| (0..p.num_heads_k).map(move |hk| (b, hk)))
            .filter(|&(b, _)| p.batches[b].seqlen_q > 0)
            .collect();
        let attend = |&(b, hk): &(usize, usize)| attend::attend_group(p, &new_tokens, b, hk);
        let results: Vec<Result<attend::GroupResult, RefError>> = match parallel::enabled() {
            true => tasks.par_iter().map(attend).collect(),
            false => tasks.iter().map(attend).collect(),
        };
        for ((b, hk), result) in tasks.into_iter().zip(results) {
            let result = result?;
            let batch = &p.batches[b];
            let group = p.group_size();
            for g in 0..group {
                let head = hk * group + g;
                for i in 0..batch.seqlen_q {
                    let row = g * batch.seqlen_q + i;
                    let q_row = batch.q_start + i;
                    out.slice_mut(ndarray::s![q_row, head, ..])
                        .assign(&result.out.row(row));
                    lse[[head, q_row]] = result.lse[row];
                    max_logit[[head, q_row]] = result.max_logit[row];
                }
            }
        }
    }
    if p.precision == Precision::LowPrecision {
        let work = p.work_dtype();
        out.mapv_inplace(|x| round_to(work, x));
    }
    let unspecified = match unwritten_rows(p) {
        Some(rows) => {
            let dv = p.head_dim_v;
            let out_mask =
                Array3::from_shape_fn((p.total_q, p.num_heads, dv), |(q, h, _)| rows[[q, h]]);
            Some(Unspecified {
                out: shape_out(p, out_mask)?,
                lse: shape_lse(p, rows.t().to_owned())?,
                k_cache: None,
                v_cache: None,
            })
        }
        None => None,
    };
    Ok(RefOutput {
        out: shape_out(p, out)?,
        lse: shape_lse(p, lse)?,
        k_cache,
        v_cache,
        dtype: p.dtype,
        softcap: p.softcap.is_some(),
        rotated_keys: p.rotary.is_some() && p.new_kv,
        unspecified,
        max_logit: Some(shape_lse(p, max_logit)?),
    })
}

/// `(total_q, h)`: rows no kernel writes, or `None` when there are none.
fn unwritten_rows(p: &Problem) -> Option<Array2<bool>> {
    if p.empty_kv_is_plus_inf() {
        // The empty-KV path fills the whole of out and lse.
        return None;
    }
    let mut rows = Array2::from_elem((p.total_q, p.num_heads), true);
    let group = p.group_size();
    let grid_rows = p.tiles.map(|t| t.grid_m_blocks(p.seqlen_q) * t.tile_m);
    for batch in &p.batches {
        for i in 0..batch.seqlen_q {
            for h in 0..p.num_heads {
                let written = match (p.tiles, grid_rows) {
                    (Some(tiles), Some(limit)) => tiles.packed_row(i, h % group) < limit,
                    _ => true,
                };
                rows[[batch.q_start + i, h]] = !written;
            }
        }
    }
    rows.iter().any(|&u| u).then_some(rows)
}

fn reshape<T>(a: ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, RefError> {
    a.into_shape_with_order(IxDyn(shape))
        .map_err(|e| RefError::Unevaluable(format!("output layout: {e}")))
}

fn shape_out<T: Clone>(p: &Problem, out: Array3<T>) -> Result<ArrayD<T>, RefError> {
    match p.lse_layout {
        LseLayout::HeadTotal => Ok(out.into_dyn()),
        LseLayout::BatchHeadSeq | LseLayout::BatchSeqHead => reshape(
            out.into_dyn(),
            &[p.batches.len(), p.seqlen_q, p.num_heads, p.head_dim_v],
        ),
    }
}

fn shape_lse<T: Clone>(p: &Problem, lse: Array2<T>) -> Result<ArrayD<T>, RefError> {
    let (b, s, h) = (p.batches.len(), p.seqlen_q, p.num_heads);
    match p.lse_layout {
        LseLayout::HeadTotal => Ok(lse.into_dyn()),
        // (h, b·s) → (h, b, s) → (b, h, s)
        LseLayout::BatchHeadSeq => {
            let hbs = reshape(lse.into_dyn(), &[h, b, s])?;
            Ok(hbs
                .permuted_axes(IxDyn(&[1, 0, 2]))
                .as_standard_layout()
                .to_owned())
        }
        LseLayout::BatchSeqHead => {
            let hbs = reshape(lse.into_dyn(), &[h, b, s])?;
            Ok(hbs
                .permuted_axes(IxDyn(&[1, 2, 0]))
                .as_standard_layout()
                .to_owned())
        }
    }
}
