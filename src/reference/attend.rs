//! Attention of one (batch, KV head) group: gather its keys, then process the group's query rows
//! (all query heads of the KV head stacked, as pack-GQA does) in blocks, multiplying only over the
//! key columns that some row of the block attends to.

use super::resolve::{NewTokens, Problem};
use super::{Precision, RefError};
use crate::call::Dtype;
use crate::numeric::round_to;
use ndarray::{Array1, Array2, s};

/// Query rows per block: small enough that a causal block wastes little of the key range, large
/// enough for efficient matrix products.
const ROW_BLOCK: usize = 128;

/// Output rows `g · seqlen_q + i` for query head `hk · group + g`, row `i`.
pub struct GroupResult {
    pub out: Array2<f64>,
    pub lse: Array1<f64>,
    /// The largest scaled logit of each row (−inf without keys).
    pub max_logit: Array1<f64>,
}

/// Keys and values of one (batch, KV head), `(seqlen_k, d)` and `(seqlen_k, dv)`.
fn gather_kv(
    p: &Problem,
    new: &NewTokens,
    b: usize,
    hk: usize,
) -> Result<(Array2<f64>, Array2<f64>), RefError> {
    let batch = &p.batches[b];
    let mut k = Array2::zeros((batch.seqlen_k(), p.head_dim));
    let mut v = Array2::zeros((batch.seqlen_k(), p.head_dim_v));
    // Copy runs of positions that are contiguous in the cache (a page, or the rest of a row).
    let mut j = 0;
    while j < batch.old_keys {
        let (row, offset) = p.slot(batch.kv_row, batch.leftpad + j)?;
        let run = p.run_length(offset).min(batch.old_keys - j);
        let span = offset..offset + run;
        k.slice_mut(s![j..j + run, ..])
            .assign(&p.k_cache.slice(s![row, span.clone(), hk, ..]));
        v.slice_mut(s![j..j + run, ..])
            .assign(&p.v_cache.slice(s![row, span, hk, ..]));
        j += run;
    }
    let old = batch.old_keys;
    k.slice_mut(s![old.., ..])
        .assign(&new.keys[b].slice(s![.., hk, ..]));
    v.slice_mut(s![old.., ..])
        .assign(&new.values[b].slice(s![.., hk, ..]));
    Ok((k, v))
}

/// Stacked query rows `(group · sq, dim)` of one (batch, KV head) from a `(total_q, h, dim)` view.
fn stack_rows(p: &Problem, src: ndarray::ArrayView3<f64>, b: usize, hk: usize) -> Array2<f64> {
    let batch = &p.batches[b];
    let group = p.group_size();
    let mut rows = Array2::zeros((group * batch.seqlen_q, src.dim().2));
    for g in 0..group {
        rows.slice_mut(s![g * batch.seqlen_q..(g + 1) * batch.seqlen_q, ..])
            .assign(&src.slice(s![
                batch.q_start..batch.q_start + batch.seqlen_q,
                hk * group + g,
                ..
            ]));
    }
    rows
}

/// The operands after the precision's staging: scores are `qs · ks^T (+ qvs · vs^T)` times
/// `score_factor`, and the output is `P · vs` times `out_factor`.
struct Operands {
    q: Array2<f64>,
    qv: Option<Array2<f64>>,
    k: Array2<f64>,
    v: Array2<f64>,
    score_factor: f64,
    out_factor: f64,
}

fn operands(p: &Problem, new: &NewTokens, b: usize, hk: usize) -> Result<Operands, RefError> {
    let batch = &p.batches[b];
    let (mut k, mut v) = gather_kv(p, new, b, hk)?;
    let mut q = stack_rows(p, p.q, b, hk);
    if let Some(rotary) = &p.rotary {
        for (r, mut row) in q.outer_iter_mut().enumerate() {
            let i = r % batch.seqlen_q;
            let position = batch.rotary_start + if rotary.positions_advance { i } else { 0 };
            rotary.rotate(
                row.as_slice_mut().expect("owned rows are contiguous"),
                position,
            );
        }
        q.mapv_inplace(|x| round_to(p.dtype, x));
    }
    let mut qv = p.qv.map(|qv| stack_rows(p, qv, b, hk));
    let (qd, kd, vd) = match &p.descale {
        Some(d) => (d.q[[b, hk]], d.k[[b, hk]], d.v[[b, hk]]),
        None => (1.0, 1.0, 1.0),
    };
    Ok(match p.precision {
        Precision::Exact => Operands {
            q,
            qv,
            k,
            v,
            score_factor: p.scale * qd * kd,
            out_factor: vd,
        },
        Precision::LowPrecision => {
            // attention_ref(upcast=False, reorder_ops=True): descaled inputs rounded to the work
            // dtype, then `k · scale` and `qv · scale` rounded.
            let work = p.work_dtype();
            let scale_round = |a: &mut Array2<f64>, factor: f64| {
                a.mapv_inplace(|x| round_to(work, x * factor));
            };
            if p.descale.is_some() {
                scale_round(&mut q, qd);
                scale_round(&mut k, kd);
                scale_round(&mut v, vd);
            }
            scale_round(&mut k, p.scale);
            if let Some(qv) = qv.as_mut() {
                scale_round(qv, qd);
                scale_round(qv, p.scale);
            }
            Operands {
                q,
                qv,
                k,
                v,
                score_factor: 1.0,
                out_factor: 1.0,
            }
        }
    })
}

/// An upper bound on the bytes [`attend_group`] allocates for a group of batch `b` besides its
/// result: the gathered keys and values, the stacked query rows (and `qv` rows), and one row
/// block's scores (with `qv`, its second product) and output.
pub fn group_scratch_bytes(p: &Problem, b: usize) -> u128 {
    let batch = &p.batches[b];
    let rows = (p.group_size() * batch.seqlen_q) as u128;
    let (d, dv, sk) = (
        p.head_dim as u128,
        p.head_dim_v as u128,
        batch.seqlen_k() as u128,
    );
    let dqv = p.qv.map_or(0, |qv| qv.dim().2) as u128;
    let block = (ROW_BLOCK as u128).min(rows);
    let products = if p.qv.is_some() { 2 } else { 1 };
    let packing = [(block, d, sk), (block, dqv, sk), (block, sk, dv)]
        .into_iter()
        .map(|(m, k, n)| packing_bytes(m, k, n))
        .max()
        .unwrap_or(0);
    8 * (sk * (d + dv) + rows * (d + dqv) + block * (products * sk + dv)) + packing
}

/// The packing buffer matrixmultiply 0.3 (ndarray's f64 products) allocates for an
/// `(m × k)·(k × n)` product: blocks of at most 64 × 256 × 1024, rounded up to its kernel's rows
/// and columns (8 at most), and an alignment (`make_packing_buffer`, archparam_defaults.rs).
fn packing_bytes(m: u128, k: u128, n: u128) -> u128 {
    let (m, k, n) = (m.min(64), k.min(256), n.min(1024));
    8 * k * (m.next_multiple_of(8) + n.next_multiple_of(8)) + 64
}

/// The bytes [`attend_group`]'s result for a group of batch `b` holds: its output rows, lse and
/// largest logits.
pub fn group_result_bytes(p: &Problem, b: usize) -> u128 {
    let rows = (p.group_size() * p.batches[b].seqlen_q) as u128;
    8 * rows * (p.head_dim_v as u128 + 2)
}

pub fn attend_group(
    p: &Problem,
    new: &NewTokens,
    b: usize,
    hk: usize,
) -> Result<GroupResult, RefError> {
    let batch = &p.batches[b];
    let sq = batch.seqlen_q;
    let ops = operands(p, new, b, hk)?;
    let rows = ops.q.nrows();
    let group = p.group_size();
    let mut out = Array2::zeros((rows, p.head_dim_v));
    let mut lse = Array1::from_shape_fn(rows, |r| empty_row_lse(p, b, hk, r));
    let mut max_logit = Array1::from_elem(rows, f64::NEG_INFINITY);
    let low = p.precision == Precision::LowPrecision;
    let work = p.work_dtype();
    let round = |x: f64| if low { round_to(work, x) } else { x };
    for r0 in (0..rows).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(rows);
        let ranges: Vec<(usize, usize)> = (r0..r1).map(|r| p.key_range(b, r % sq)).collect();
        let Some(c0) = ranges.iter().filter(|(lo, hi)| lo < hi).map(|r| r.0).min() else {
            continue;
        };
        let c1 = ranges.iter().map(|r| r.1).max().unwrap_or(c0);
        let mut scores = ops
            .q
            .slice(s![r0..r1, ..])
            .dot(&ops.k.slice(s![c0..c1, ..]).t());
        if low {
            scores.mapv_inplace(round);
        }
        if let Some(qv) = &ops.qv {
            let extra = qv
                .slice(s![r0..r1, ..])
                .dot(&ops.v.slice(s![c0..c1, ..]).t());
            scores.zip_mut_with(&extra, |s, &e| *s = round(*s + round(e)));
        }
        for (local, mut row) in scores.outer_iter_mut().enumerate() {
            let (lo, hi) = ranges[local];
            if lo == hi {
                row.fill(0.0);
                continue;
            }
            let head = hk * group + (r0 + local) / sq;
            let sink = p.sinks.as_ref().map(|s| s[head]);
            let (a, z) = (lo - c0, hi - c0);
            (lse[r0 + local], max_logit[r0 + local]) =
                softmax_in_place(p, row.slice_mut(s![a..z]), ops.score_factor, sink);
            // Columns outside the row's range get probability 0.
            row.slice_mut(s![..a]).fill(0.0);
            row.slice_mut(s![z..]).fill(0.0);
        }
        let block_out = scores.dot(&ops.v.slice(s![c0..c1, ..]));
        out.slice_mut(s![r0..r1, ..]).assign(&block_out);
    }
    if ops.out_factor != 1.0 {
        out.mapv_inplace(|x| x * ops.out_factor);
    }
    Ok(GroupResult {
        out,
        lse,
        max_logit,
    })
}

/// The lse of group row `r` if it attends no key: −inf, except on MUSA with a sink where the row's
/// tile has a key block — mate keeps the row's maximum at 0 and adds `exp(sink)` to the empty sum
/// (docs/musa-device.md D1, musa-fa3.md §7). On a context-parallel rank the tile's key blocks
/// follow the global causal limit.
fn empty_row_lse(p: &Problem, b: usize, hk: usize, r: usize) -> f64 {
    let batch = &p.batches[b];
    let (g, i) = (r / batch.seqlen_q, r % batch.seqlen_q);
    match (&p.tiles, &p.sinks) {
        (Some(tiles), Some(sinks))
            if tiles
                .row_tile(
                    i,
                    g,
                    batch.seqlen_q,
                    batch.seqlen_k(),
                    None,
                    p.context_parallel.as_ref().map(|cp| cp.rank_keys(b)),
                )
                .has_key_block =>
        {
            sinks[hk * p.group_size() + g]
        }
        _ => f64::NEG_INFINITY,
    }
}

/// Turns the raw scores of a row's attended keys (at least one) into probabilities in place and
/// returns the row's lse and its largest scaled logit.
fn softmax_in_place(
    p: &Problem,
    mut row: ndarray::ArrayViewMut1<f64>,
    score_factor: f64,
    sink: Option<f64>,
) -> (f64, f64) {
    let low = p.precision == Precision::LowPrecision;
    let work = p.work_dtype();
    let round = |x: f64| if low { round_to(work, x) } else { x };
    row.mapv_inplace(|raw| {
        let s = raw * score_factor;
        match p.softcap {
            Some(cap) => round(round(round(s / cap).tanh()) * cap),
            None => s,
        }
    });
    let row_max = row.fold(f64::NEG_INFINITY, |m, &x| m.max(x));
    let shift = sink.map_or(row_max, |s| row_max.max(s));
    row.mapv_inplace(|s| (s - shift).exp());
    let denominator = row.sum() + sink.map_or(0.0, |s| (s - shift).exp());
    row.mapv_inplace(|e| e / denominator);
    if low {
        row.mapv_inplace(|x| {
            let x = round_to(work, x);
            if p.dtype == Dtype::Float8E4m3fn {
                round_to(Dtype::Float8E4m3fn, x)
            } else {
                x
            }
        });
    }
    (shift + denominator.ln(), row_max)
}
