//! The numbers a MUSA device returns for a call, derived from the clean reference's: the departures
//! that decide values are overlaid, the elements they leave undefined are marked unspecified
//! (docs/musa-device.md):
//!
//! * D1 — rows the clamp hits: every P is rounded to the input dtype relative to 0 (the largest
//!   too), so the low-precision baseline of such a row is moved by one rounding of P times the
//!   largest value. fp16 rows are unspecified where the largest visible scaled logit is below
//!   −3: between −17.4 and −3 the precision lost depends on the data; below −17.4 P rounds to 0
//!   and a single split gives `out = 0`, but with split-KV only the split holding the row's last
//!   key is clamped (the others see the row's keys in their first block or none), so `out` lies
//!   between 0 and the clean value as the scheduler metadata's split count decides, which the
//!   call alone does not fix.
//! * D3 — non-finite V after a batch's last key inside its last key block: `out = NaN` for every
//!   row whose tile processes that block.
//! * D4 — the overrun columns of a paged append (and the (192, 128) K store): those cache
//!   elements, and every output row attending a key they touch, are unspecified.
//! * D6 — negative `softmax_scale`: `out = NaN` (lse unspecified: +inf, or NaN after a combine)
//!   for rows whose processed key blocks hold a masked score; rows that may overflow P are
//!   unspecified; the rest is clean.
//!
//! The kernel path must agree with this under the tolerance rule (the differential oracle,
//! `conform --suite kernel`). It is what a MUSA device must give: `export` writes it into the
//! bundles of the `musa` profile, with the unspecified elements, which `verify` does not compare.

use super::{Call, Lengths};
use crate::call::{Dtype, KvCacheCall, Param};
use crate::reference::{self, Precision, RefError, RefOutput, Stack, Unspecified};
use crate::tensor::{HostTensor, Tensors};
use crate::validate::Profile;
use crate::validate::profiles::MUSA;
use ndarray::{ArrayD, Axis, IxDyn};
use std::borrow::Cow;

/// Above this a clamped fp16 row's largest P is far from fp16's subnormals: clean within the rule.
const FP16_CLEAN_ABOVE: f64 = -3.0;

/// Where one query row's values sit in `out` and `lse`.
#[derive(Clone, Copy)]
struct Row {
    batch: usize,
    /// Row of q (`cu_seqlens_q[b] + i`, or `b · seqlen_q + i`).
    q_row: usize,
    position: usize,
    head: usize,
}

/// The exact and low-precision references of a call on the MUSA stack, with the device's
/// departures ([`expected`]): what the kernel path and a MUSA device must match. A call the `musa`
/// profile rejects has no device numbers: refused, rather than answered with clean attention
/// that the kernel path (which models the device whatever the call) would not match.
pub fn musa_references(
    call: &KvCacheCall,
    tensors: &Tensors,
) -> Result<(RefOutput, RefOutput), RefError> {
    if let Some(rejection) = MUSA.validate(call).rejection() {
        return Err(RefError::Unevaluable(format!(
            "the musa profile rejects the call: {rejection}"
        )));
    }
    let read = device_inputs(call, tensors);
    let run = |precision| reference::run(call, &read, Stack::Musa, precision);
    let (ref64, lowprec) = (run(Precision::Exact)?, run(Precision::LowPrecision)?);
    Ok(expected(call, tensors, ref64, lowprec))
}

/// The inputs as the device reads them where that is itself clean attention: cos/sin rows at or
/// past the capacity read as 0 (the descriptor covers `{capacity, rotary_dim/2}`, D5). Borrowed
/// unless a table reaches past the capacity.
fn device_inputs<'t>(call: &KvCacheCall, tensors: &'t Tensors) -> Cow<'t, Tensors> {
    let mut read = Cow::Borrowed(tensors);
    let verdict = MUSA.validate(call);
    let Some(capacity) = verdict.resolved().map(|r| r.seqlen_k) else {
        return read;
    };
    let past_capacity =
        |table: &HostTensor| table.shape().len() == 2 && table.shape()[0] > capacity;
    for name in ["rotary_cos", "rotary_sin"] {
        if !read.get(name).is_some_and(past_capacity) {
            continue;
        }
        if let Some(table) = read.to_mut().get_mut(name) {
            table
                .data
                .slice_each_axis_mut(|axis| match axis.axis.index() {
                    0 => ndarray::Slice::from(capacity..),
                    _ => ndarray::Slice::from(..),
                })
                .fill(0.0);
        }
    }
    read
}

/// `ref64` and `lowprec` with the device's departures (see the module documentation), for a call
/// the `musa` profile accepts; other calls come back unchanged.
pub fn expected(
    call: &KvCacheCall,
    tensors: &Tensors,
    ref64: RefOutput,
    lowprec: RefOutput,
) -> (RefOutput, RefOutput) {
    let verdict = MUSA.validate(call);
    let (Some(resolved), Ok(args)) = (verdict.resolved(), call.bind_canonical()) else {
        return (ref64, lowprec);
    };
    if resolved.mla_decode {
        return (ref64, lowprec);
    }
    let values = |param: Param| Some(tensors.get(param.name()).map(|t| t.ints()));
    let c = Call::new(&args, resolved, &values);
    let Some(lengths) = c.lengths.clone() else {
        return (ref64, lowprec);
    };
    let mut overlay = Overlay::new(&c, ref64, lowprec);
    overlay.clamped_rows(&c, &lengths, tensors);
    overlay.non_finite_past_last_key(&c, &lengths, tensors);
    overlay.append_overruns(&c, &lengths, tensors);
    overlay.negative_scale(&c, &lengths, tensors);
    overlay.finish()
}

struct Overlay {
    ref64: RefOutput,
    lowprec: RefOutput,
    unspecified: Unspecified,
    varlen: bool,
}

impl Overlay {
    fn new(c: &Call, ref64: RefOutput, lowprec: RefOutput) -> Overlay {
        let cache_mask = |cache: &Option<ArrayD<f64>>| {
            cache
                .as_ref()
                .map(|a| ArrayD::from_elem(a.raw_dim(), false))
        };
        let unspecified = ref64.unspecified.clone().unwrap_or_else(|| Unspecified {
            out: ArrayD::from_elem(ref64.out.raw_dim(), false),
            lse: ArrayD::from_elem(ref64.lse.raw_dim(), false),
            k_cache: None,
            v_cache: None,
        });
        let unspecified = Unspecified {
            k_cache: unspecified.k_cache.or_else(|| cache_mask(&ref64.k_cache)),
            v_cache: unspecified.v_cache.or_else(|| cache_mask(&ref64.v_cache)),
            ..unspecified
        };
        Overlay {
            varlen: c.resolved.varlen_q,
            ref64,
            lowprec,
            unspecified,
        }
    }

    /// Every query row of known length, with its attended keys; `head` is the head within its
    /// KV head's group (the callers add `hk · r`).
    fn rows(c: &Call, lengths: &[Lengths]) -> Vec<(Row, (usize, usize))> {
        c.rows()
            .map(|(batch, position, g, keys)| {
                let row = Row {
                    batch,
                    q_row: lengths[batch].q_start + position,
                    position,
                    head: g,
                };
                (row, keys)
            })
            .collect()
    }

    fn out_index(&self, row: Row, head: usize) -> (Vec<usize>, Vec<usize>) {
        if self.varlen {
            (vec![row.q_row, head], vec![head, row.q_row])
        } else {
            (
                vec![row.batch, row.position, head],
                vec![row.batch, head, row.position],
            )
        }
    }

    /// Sets `out` of one row and head to `value`, in every column or in those `columns` marks.
    fn set_out(&mut self, row: Row, head: usize, value: f64, columns: Option<&[bool]>) {
        let (out, _) = self.out_index(row, head);
        for a in [&mut self.ref64.out, &mut self.lowprec.out] {
            let mut view = a.view_mut();
            for &i in &out {
                view.index_axis_inplace(Axis(0), i);
            }
            for (c, x) in view.iter_mut().enumerate() {
                if columns.is_none_or(|marked| marked[c]) {
                    *x = value;
                }
            }
        }
    }

    fn mark(&mut self, row: Row, head: usize, out: bool, lse: bool) {
        let (out_at, lse_at) = self.out_index(row, head);
        if out {
            let mut view = self.unspecified.out.view_mut();
            for &i in &out_at {
                view.index_axis_inplace(Axis(0), i);
            }
            view.fill(true);
        }
        if lse {
            self.unspecified.lse[IxDyn(&lse_at)] = true;
        }
    }

    fn max_logit(&self, row: Row, head: usize) -> f64 {
        let (_, lse_at) = self.out_index(row, head);
        self.ref64
            .max_logit
            .as_ref()
            .map_or(f64::INFINITY, |m| m[IxDyn(&lse_at)])
    }

    /// D1.
    fn clamped_rows(&mut self, c: &Call, lengths: &[Lengths], tensors: &Tensors) {
        let Some(dtype) = c.tensor(Param::Q).map(|q| q.dtype) else {
            return;
        };
        if !(c.resolved.is_causal || c.resolved.is_local) {
            return;
        }
        let roundoff = match dtype {
            Dtype::Float16 => 2f64.powi(-11),
            _ => 2f64.powi(-8),
        };
        let largest = |values: &mut dyn Iterator<Item = &f64>| {
            values
                .filter(|x| x.is_finite())
                .fold(0.0f64, |m, x| m.max(x.abs()))
        };
        // The appended values, which the call brings whatever its pool holds.
        let appended = tensors
            .get("v")
            .map_or(0.0, |v| largest(&mut v.data.iter()));
        let v_cache = tensors.get("v_cache");
        let group = c.group();
        for (row, (lo, hi)) in Self::rows(c, lengths) {
            let l = &lengths[row.batch];
            let tile = c.tiles.row_tile(
                row.position,
                row.head,
                l.seqlen_q,
                l.seqlen_k(),
                hi.checked_sub(1),
                None,
            );
            if lo >= hi || !tile.masked_in_first_block {
                continue;
            }
            for hk in 0..c.resolved.num_heads_k {
                let head = hk * group + row.head;
                if dtype == Dtype::Float16 && self.max_logit(row, head) < FP16_CLEAN_ABOVE {
                    self.mark(row, head, true, false);
                    continue;
                }
                // Every value the row's P can weigh (its visible keys, as the device reads them,
                // and the appended ones), as a bound of what one rounding of each P moves. Only
                // these: the pool's other rows must not matter (a slim bundle drops them).
                let cached = v_cache.map_or(0.0, |v| {
                    largest(&mut (lo..hi).flat_map(|key| {
                        device_row(c, l, tensors, v, l.leftpad as usize + key, hk)
                            .into_iter()
                            .flat_map(|r| r.to_slice().unwrap_or(&[]))
                    }))
                });
                self.widen_baseline(row, head, roundoff * cached.max(appended));
            }
        }
    }

    /// Moves the low-precision baseline of one row and head at least `by` away from `ref64`: the
    /// device rounds every P of a clamped row, the largest included (relative to 0, not to the
    /// row's maximum, which a low-precision implementation keeps exact), so even a row with one
    /// visible key is off by up to one rounding of P times its values.
    fn widen_baseline(&mut self, row: Row, head: usize, by: f64) {
        let (at, _) = self.out_index(row, head);
        let (mut exact, mut low) = (self.ref64.out.view(), self.lowprec.out.view_mut());
        for &i in &at {
            exact.index_axis_inplace(Axis(0), i);
            low.index_axis_inplace(Axis(0), i);
        }
        for (x, e) in low.iter_mut().zip(exact.iter()) {
            if e.is_finite() && x.is_finite() {
                *x = e + (*x - e).abs().max(by);
            }
        }
    }

    /// D3.
    fn non_finite_past_last_key(&mut self, c: &Call, lengths: &[Lengths], tensors: &Tensors) {
        let Some(v) = tensors.get("v_cache") else {
            return;
        };
        let group = c.group();
        let bn = c.tiles.tile_n;
        for (b, l) in lengths.iter().enumerate() {
            let sk = l.seqlen_k();
            let block_end = sk.div_ceil(bn) * bn;
            for hk in 0..c.resolved.num_heads_k {
                // Columns where some V row after the last key holds a non-finite value.
                let mut columns = vec![false; c.resolved.head_size_v];
                for key in sk..block_end {
                    if let Some(row) = device_row(c, l, tensors, v, l.leftpad as usize + key, hk) {
                        for (marked, x) in columns.iter_mut().zip(row) {
                            *marked |= !x.is_finite();
                        }
                    }
                }
                if !columns.contains(&true) || sk == 0 {
                    continue;
                }
                let last_block = ((sk - 1) / bn) as i64;
                for (row, _) in Self::rows(c, lengths)
                    .into_iter()
                    .filter(|(r, _)| r.batch == b)
                {
                    let tile = c
                        .tiles
                        .row_tile(row.position, row.head, l.seqlen_q, sk, None, None);
                    let (n_min, n_max) = c.tiles.key_blocks(tile.m_block, l.seqlen_q, sk, None);
                    if (n_min..n_max).contains(&last_block) {
                        self.set_out(row, hk * group + row.head, f64::NAN, Some(&columns));
                    }
                }
            }
        }
    }

    /// D4: overrun columns of appended rows, and the rows attending keys they touch.
    fn append_overruns(&mut self, c: &Call, lengths: &[Lengths], tensors: &Tensors) {
        let r = c.resolved;
        if c.tensor(Param::K).is_none() {
            return;
        }
        let rotary = c.tensor(Param::RotaryCos).is_some();
        // (cache, first unspecified column, columns stored) per cache.
        let mut stores: Vec<(&str, usize, usize)> = Vec::new();
        if r.paged && !rotary && r.head_size < r.head_size_rounded {
            stores.push(("k_cache", r.head_size, r.head_size_rounded));
        }
        if r.paged && r.head_size_v < r.head_size_v_rounded {
            stores.push(("v_cache", r.head_size_v, r.head_size_v_rounded));
        }
        if !r.paged && !rotary && (r.head_size_rounded, r.head_size_v_rounded) == (192, 128) {
            // Columns 128..192 of the new keys themselves.
            stores.push(("k_cache", 128, r.head_size));
        }
        if stores.is_empty() {
            return;
        }
        for (name, from, to) in stores {
            let Some(cache) = tensors.get(name) else {
                continue;
            };
            let mask = match name {
                "k_cache" => self.unspecified.k_cache.as_mut(),
                _ => self.unspecified.v_cache.as_mut(),
            };
            let Some(mask) = mask else { continue };
            let flat = mask.as_slice_mut().expect("a fresh mask is contiguous");
            for l in lengths {
                for t in 0..l.new.max(0) as usize {
                    let position = l.used as usize + t;
                    for hk in 0..r.num_heads_k {
                        let at = device_offset(c, l, tensors, cache, position, hk);
                        let (first, last) = (at + from as i64, at + to as i64);
                        for e in first.max(0)..last.min(flat.len() as i64) {
                            flat[e as usize] = true;
                        }
                    }
                }
            }
        }
        self.rows_attending_unspecified_keys(c, lengths, tensors);
    }

    /// Output rows attending a key whose K or V elements are unspecified.
    fn rows_attending_unspecified_keys(
        &mut self,
        c: &Call,
        lengths: &[Lengths],
        tensors: &Tensors,
    ) {
        let group = c.group();
        let tainted = |name: &str, mask: &Option<ArrayD<bool>>, l: &Lengths, key: usize, hk| {
            let (Some(cache), Some(mask)) = (tensors.get(name), mask.as_ref()) else {
                return false;
            };
            let flat = mask.as_slice().expect("contiguous");
            let dims = cache.shape()[3] as i64;
            let at = device_offset(c, l, tensors, cache, l.leftpad as usize + key, hk);
            (at.max(0)..(at + dims).min(flat.len() as i64)).any(|e| flat[e as usize])
        };
        // Per (batch, KV head): how many of the keys before each position are tainted.
        let counts: Vec<Vec<Vec<usize>>> = lengths
            .iter()
            .map(|l| {
                (0..c.resolved.num_heads_k)
                    .map(|hk| {
                        let mut count = vec![0; l.seqlen_k() + 1];
                        for key in 0..l.seqlen_k() {
                            let bad = tainted("k_cache", &self.unspecified.k_cache, l, key, hk)
                                || tainted("v_cache", &self.unspecified.v_cache, l, key, hk);
                            count[key + 1] = count[key] + usize::from(bad);
                        }
                        count
                    })
                    .collect()
            })
            .collect();
        let mut marks = Vec::new();
        for (row, (lo, hi)) in Self::rows(c, lengths) {
            for (hk, count) in counts[row.batch].iter().enumerate() {
                if lo < hi && count[hi] > count[lo] {
                    marks.push((row, hk * group + row.head));
                }
            }
        }
        for (row, head) in marks {
            self.mark(row, head, true, true);
        }
    }

    /// D6.
    fn negative_scale(&mut self, c: &Call, lengths: &[Lengths], tensors: &Tensors) {
        let r = c.resolved;
        if r.softmax_scale >= 0.0 || r.softcap != 0.0 {
            return;
        }
        // P = exp((max − s)·|scale|) overflows the input dtype past this exponent.
        let limit = match c.tensor(Param::Q).map(|q| q.dtype) {
            Some(Dtype::Float16) => 11.0,
            _ => 88.0,
        };
        let abs_max = |name: &str| {
            tensors
                .get(name)
                .map_or(0.0, |t| t.data.iter().fold(0.0f64, |m, x| m.max(x.abs())))
        };
        let spread = 2.0 * abs_max("q") * abs_max("k_cache").max(abs_max("k")) * r.head_size as f64;
        let may_overflow = spread * r.softmax_scale.abs() > limit;
        let group = c.group();
        let bn = c.tiles.tile_n;
        for (row, (lo, hi)) in Self::rows(c, lengths) {
            let l = &lengths[row.batch];
            let tile =
                c.tiles
                    .row_tile(row.position, row.head, l.seqlen_q, l.seqlen_k(), None, None);
            let (n_min, n_max) = c
                .tiles
                .key_blocks(tile.m_block, l.seqlen_q, l.seqlen_k(), None);
            if n_min >= n_max {
                continue;
            }
            let processed = (n_min as usize * bn, n_max as usize * bn);
            let masked = processed.0 < lo || processed.1 > hi || lo >= hi;
            for hk in 0..r.num_heads_k {
                let head = hk * group + row.head;
                if masked {
                    self.set_out(row, head, f64::NAN, None);
                    self.mark(row, head, false, true);
                } else if may_overflow {
                    self.mark(row, head, true, true);
                }
            }
        }
    }

    fn finish(self) -> (RefOutput, RefOutput) {
        let any = |m: &ArrayD<bool>| m.iter().any(|&x| x);
        let u = &self.unspecified;
        let needed = any(&u.out)
            || any(&u.lse)
            || u.k_cache.as_ref().is_some_and(any)
            || u.v_cache.as_ref().is_some_and(any);
        let unspecified = needed.then_some(self.unspecified);
        (
            RefOutput {
                unspecified: unspecified.clone(),
                ..self.ref64
            },
            RefOutput {
                unspecified,
                ..self.lowprec
            },
        )
    }
}

/// The element offset the device addresses for cache position `position` (leftpad included) of
/// KV head `hk` of a batch (as the kernel path's `fa3_device_offset`).
fn device_offset(
    c: &Call,
    l: &Lengths,
    tensors: &Tensors,
    cache: &crate::tensor::HostTensor,
    position: usize,
    hk: usize,
) -> i64 {
    let shape = cache.shape();
    let (slots, heads, dims) = (shape[1] as i64, shape[2] as i64, shape[3] as i64);
    let (row, slot) = match tensors.get("page_table") {
        Some(table) if c.resolved.paged => {
            let per_row = table.shape()[1] as i64;
            let entries = table.ints();
            let entry = l.kv_row * per_row + position as i64 / slots;
            (
                entries.get(entry as usize).copied().unwrap_or(0),
                position as i64 % slots,
            )
        }
        _ => (l.kv_row, position as i64),
    };
    ((row * slots + slot) * heads + hk as i64) * dims
}

/// The V (or K) row the device reads for `position` of KV head `hk`: `None` where it reads zeros
/// (past a contiguous cache's capacity, outside the buffer).
fn device_row<'t>(
    c: &Call,
    l: &Lengths,
    tensors: &Tensors,
    cache: &'t crate::tensor::HostTensor,
    position: usize,
    hk: usize,
) -> Option<ndarray::ArrayView1<'t, f64>> {
    if !c.resolved.paged && position >= c.resolved.seqlen_k {
        return None;
    }
    let at = device_offset(c, l, tensors, cache, position, hk);
    let dims = cache.shape()[3] as i64;
    let flat = cache.data.as_slice()?;
    if at < 0 || at + dims > flat.len() as i64 {
        return None;
    }
    Some(ndarray::ArrayView1::from(
        &flat[at as usize..(at + dims) as usize],
    ))
}
