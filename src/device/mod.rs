//! What the MUSA device does where mate's forward kernel departs from clean attention
//! (docs/musa-device.md D1-D6): the hazards a call runs into, decided from the call and the values
//! its spec gives (lengths, index tensors, cache contents). The kernel path computes the numbers;
//! these findings name the cause and the consequence.
//!
//! Lengths come from the spec's values only: where a length tensor carries no values, the
//! findings that need it are left out rather than guessed.

mod expected;

pub use expected::{expected, musa_references};

use crate::call::{BoundArgs, KvCacheCall, Param, PyValue, TensorArg};
use crate::mate::{ResolvedMask, Tiles};
use crate::reference::Mask;
use crate::validate::registry::device::{
    H_DEV_APPEND_PAST_CAPACITY, H_DEV_APPEND_PREDICATE_UB, H_DEV_NEGATIVE_SCALE,
    H_DEV_NONFINITE_PAST_LAST_KEY, H_DEV_PAGED_APPEND_OVERRUN, H_DEV_READ_PAST_CAPACITY,
    H_DEV_ROTARY_PAST_TABLE, H_DEV_ROW_MAX_CLAMPED, H_DEV_ROWS_UNCOVERED,
    H_DEV_SEGMENT_OVER_MAX_SEQLEN_Q, H_DEV_SINK_LSE,
};
use crate::validate::{self, Hazard, Resolved, ranges, span};

/// One batch's lengths, as far as the spec's values give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lengths {
    /// First row of the batch in q's rows (`cu_seqlens_q[b]`, or `b · seqlen_q`).
    q_start: usize,
    seqlen_q: usize,
    leftpad: i64,
    /// `cache_seqlens[b]` (the capacity without it).
    used: i64,
    new: i64,
    /// Rotary position of the first new key and of query 0.
    rotary_start: i64,
    /// Cache row (page-table row) of the batch.
    kv_row: i64,
}

impl Lengths {
    fn seqlen_k(&self) -> usize {
        (self.used - self.leftpad + self.new).max(0) as usize
    }
}

/// Where lengths come from: `Some(None)` for an index tensor the call does not pass, `None` for
/// one passed without values.
type IndexValues<'a> = &'a dyn Fn(Param) -> Option<Option<Vec<i64>>>;

fn batch_lengths(args: &BoundArgs, r: &Resolved, values: IndexValues) -> Option<Vec<Lengths>> {
    let b = r.batch_size;
    let segments: Vec<(usize, usize)> = match values(Param::CuSeqlensQ)? {
        Some(cu) if cu.len() == b + 1 && cu[0] >= 0 && cu.windows(2).all(|w| w[0] <= w[1]) => cu
            .windows(2)
            .map(|w| (w[0] as usize, (w[1] - w[0]) as usize))
            .collect(),
        Some(_) => return None,
        None => (0..b).map(|i| (i * r.seqlen_q, r.seqlen_q)).collect(),
    };
    let used: Vec<i64> = match args.get(Param::CacheSeqlens) {
        PyValue::None => vec![r.seqlen_k as i64; b],
        PyValue::Tensor(_) => values(Param::CacheSeqlens)??,
        v => vec![v.as_int()?; b],
    };
    let leftpad = values(Param::CacheLeftpad)?.unwrap_or_else(|| vec![0; b]);
    let new: Vec<i64> = match args.tensor(Param::K) {
        None => vec![0; b],
        Some(k) => match values(Param::CuSeqlensKNew)? {
            Some(cu) if cu.len() == b + 1 => cu.windows(2).map(|w| w[1] - w[0]).collect(),
            Some(_) => return None,
            None => vec![*k.shape.get(1)? as i64; b],
        },
    };
    let rotary = values(Param::RotarySeqlens)?;
    let kv_rows = values(Param::CacheBatchIdx)?;
    if [used.len(), leftpad.len(), new.len()]
        .iter()
        .any(|&n| n != b)
    {
        return None;
    }
    Some(
        (0..b)
            .map(|i| Lengths {
                q_start: segments[i].0,
                seqlen_q: segments[i].1,
                leftpad: leftpad[i],
                used: used[i],
                new: new[i],
                rotary_start: rotary
                    .as_ref()
                    .and_then(|v| v.get(i).copied())
                    .unwrap_or(used[i]),
                kv_row: kv_rows
                    .as_ref()
                    .and_then(|v| v.get(i).copied())
                    .unwrap_or(i as i64),
            })
            .collect(),
    )
}

/// The device's view of one call: mate's resolution, the tiling and the per-batch lengths.
struct Call<'a> {
    args: &'a BoundArgs,
    resolved: &'a Resolved,
    tiles: Tiles,
    mask: Mask,
    lengths: Option<Vec<Lengths>>,
}

impl<'a> Call<'a> {
    fn new(args: &'a BoundArgs, resolved: &'a Resolved, values: IndexValues) -> Call<'a> {
        Call {
            tiles: Tiles {
                tile_m: resolved.tile_m,
                tile_n: resolved.tile_n,
                pack_gqa: resolved.pack_gqa,
                group: resolved.num_heads / resolved.num_heads_k.max(1),
                mask: ResolvedMask {
                    is_causal: resolved.is_causal,
                    is_local: resolved.is_local,
                    window_left: resolved.window_left,
                    window_right: resolved.window_right,
                    attention_chunk: resolved.attention_chunk,
                },
            },
            mask: mask_of(resolved),
            lengths: batch_lengths(args, resolved, values),
            resolved,
            args,
        }
    }

    fn group(&self) -> usize {
        self.resolved.num_heads / self.resolved.num_heads_k
    }

    fn tensor(&self, param: Param) -> Option<&TensorArg> {
        self.args.tensor(param)
    }

    /// `(batch, position, head-in-group, attended keys)` of every query row of known lengths.
    fn rows(&self) -> impl Iterator<Item = (usize, usize, usize, (usize, usize))> + '_ {
        let group = self.group();
        self.lengths
            .iter()
            .flatten()
            .enumerate()
            .flat_map(move |(b, l)| {
                let (sq, sk) = (l.seqlen_q, l.seqlen_k());
                (0..sq).flat_map(move |i| {
                    (0..group).map(move |g| (b, i, g, self.mask.key_range(i, sq, sk)))
                })
            })
    }

    /// Query rows (as q's row index) of the rows `select` picks.
    fn q_rows(&self, select: impl Fn(usize, usize, usize, (usize, usize)) -> bool) -> Vec<usize> {
        let lengths = self.lengths.as_deref().unwrap_or_default();
        let mut rows: Vec<usize> = self
            .rows()
            .filter(|&(b, i, g, keys)| select(b, i, g, keys))
            .map(|(b, i, _, _)| lengths[b].q_start + i)
            .collect();
        rows.dedup();
        rows
    }
}

fn mask_of(r: &Resolved) -> Mask {
    if r.is_causal {
        Mask::Causal
    } else if r.is_local {
        Mask::Local {
            left: r.window_left,
            right: r.window_right,
            chunk: r.attention_chunk,
        }
    } else {
        Mask::Full
    }
}

/// The hazards of the device's departures from clean attention that `call`, accepted by the
/// `musa` profile with `resolved`, runs into.
pub fn findings(call: &KvCacheCall, resolved: &Resolved) -> Vec<Hazard> {
    if resolved.mla_decode {
        return Vec::new();
    }
    let Ok(args) = call.bind_canonical() else {
        return Vec::new();
    };
    let values = |param: Param| match args.tensor(param) {
        None => Some(None),
        Some(t) => t.int_values().map(Some),
    };
    let c = Call::new(&args, resolved, &values);
    let mut found = Vec::new();
    clamped_rows(&c, &mut found);
    uncovered_rows(&c, &mut found);
    non_finite_past_last_key(&c, &mut found);
    append_overruns(&c, &mut found);
    long_segments(&c, &mut found);
    capacity_overruns(&c, &mut found);
    rotary_past_table(&c, &mut found);
    negative_scale(&c, &mut found);
    sink_lse(&c, &mut found);
    found
}

/// D1: fp16 rows that see no key in the first key block their tile processes.
fn clamped_rows(c: &Call, found: &mut Vec<Hazard>) {
    let fp16 = c
        .tensor(Param::Q)
        .is_some_and(|q| q.dtype == crate::call::Dtype::Float16);
    if !fp16 || !(c.resolved.is_causal || c.resolved.is_local) || c.lengths.is_none() {
        return;
    }
    let lengths = c.lengths.as_deref().unwrap_or_default();
    let rows = c.q_rows(|b, i, g, (lo, hi)| {
        let l = &lengths[b];
        lo < hi
            && c.tiles
                .row_tile(i, g, l.seqlen_q, l.seqlen_k(), Some(hi - 1), None)
                .masked_in_first_block
    });
    if !rows.is_empty() {
        found.push(Hazard::new(H_DEV_ROW_MAX_CLAMPED, &[ranges(rows)]));
    }
}

/// D2: rows of q before the first or after the last segment.
fn uncovered_rows(c: &Call, found: &mut Vec<Hazard>) {
    let Some(cu) = c.tensor(Param::CuSeqlensQ).and_then(TensorArg::int_values) else {
        return;
    };
    let (Some(&first), Some(&last)) = (cu.first(), cu.last()) else {
        return;
    };
    let total = c.resolved.total_q;
    let rows: Vec<usize> = (0..total)
        .filter(|&q| (q as i64) < first || (q as i64) >= last)
        .collect();
    if !rows.is_empty() {
        found.push(Hazard::new(H_DEV_ROWS_UNCOVERED, &[ranges(rows)]));
    }
}

/// D3: non-finite V values the last key block of a batch multiplies by P = 0.
fn non_finite_past_last_key(c: &Call, found: &mut Vec<Hazard>) {
    let (Some(lengths), Some(v)) = (c.lengths.as_deref(), c.tensor(Param::VCache)) else {
        return;
    };
    let Some(values) = v.values.as_ref().map(|v| v.to_f64()) else {
        return;
    };
    let [rows, slots, heads, dv] = v.shape[..] else {
        return;
    };
    let table = match c.tensor(Param::PageTable) {
        Some(t) => match t.int_values() {
            Some(values) => Some((values, t.shape.get(1).copied().unwrap_or(0))),
            None => return,
        },
        None => None,
    };
    let bn = c.resolved.tile_n as i64;
    let capacity = c.resolved.seqlen_k as i64;
    for (b, l) in lengths.iter().enumerate() {
        let sk = l.seqlen_k() as i64;
        let block_end = (sk + bn - 1) / bn * bn;
        for key in sk..block_end {
            let position = l.leftpad + key;
            // Where the device reads that V row (docs/musa-device.md D3): the cache row up to its
            // capacity, or the page the page-table entry names.
            let slot = match &table {
                None if position < capacity => Some((l.kv_row, position)),
                None => None,
                Some((entries, per_row)) => {
                    let entry = l.kv_row * *per_row as i64 + position / slots as i64;
                    let page = entries.get(entry as usize).copied().unwrap_or(0);
                    Some((page, position % slots as i64))
                }
            };
            let Some((row, at)) = slot else { continue };
            if row < 0 || row as usize >= rows || at as usize >= slots {
                continue;
            }
            let base = (row as usize * slots + at as usize) * heads * dv;
            if let Some(x) = values[base..base + heads * dv]
                .iter()
                .find(|x| !x.is_finite())
            {
                found.push(Hazard::new(
                    H_DEV_NONFINITE_PAST_LAST_KEY,
                    &[x.to_string(), b.to_string(), position.to_string()],
                ));
                return;
            }
        }
    }
}

/// D4: a paged append storing rounded head dims; the (192, 128) contiguous K store.
fn append_overruns(c: &Call, found: &mut Vec<Hazard>) {
    let r = c.resolved;
    if c.tensor(Param::K).is_none() {
        return;
    }
    let rotary = c.tensor(Param::RotaryCos).is_some();
    let k_over = r.paged && !rotary && r.head_size != r.head_size_rounded;
    let v_over = r.paged && r.head_size_v != r.head_size_v_rounded;
    if k_over || v_over {
        let mut past = Vec::new();
        if k_over {
            past.push(format!(
                "k columns {}",
                span(r.head_size as i64, r.head_size_rounded as i64)
            ));
        }
        if v_over {
            past.push(format!(
                "v columns {}",
                span(r.head_size_v as i64, r.head_size_v_rounded as i64)
            ));
        }
        found.push(Hazard::new(
            H_DEV_PAGED_APPEND_OVERRUN,
            &[
                r.head_size.to_string(),
                r.head_size_v.to_string(),
                r.head_size_rounded.to_string(),
                r.head_size_v_rounded.to_string(),
                past.join(" and "),
            ],
        ));
    }
    if !r.paged && !rotary && (r.head_size_rounded, r.head_size_v_rounded) == (192, 128) {
        found.push(Hazard::new(
            H_DEV_APPEND_PREDICATE_UB,
            &[r.head_size.to_string(), r.head_size_v.to_string()],
        ));
    }
}

/// D5: varlen segments longer than `max_seqlen_q`.
fn long_segments(c: &Call, found: &mut Vec<Hazard>) {
    let Some(lengths) = c.lengths.as_deref() else {
        return;
    };
    if !c.resolved.varlen_q {
        return;
    }
    let max = c.resolved.seqlen_q;
    let limit = c.tiles.grid_m_blocks(max) * c.tiles.tile_m;
    for (b, l) in lengths.iter().enumerate().filter(|(_, l)| l.seqlen_q > max) {
        let unwritten: Vec<usize> = (0..l.seqlen_q)
            .filter(|&i| (0..c.group()).any(|g| c.tiles.packed_row(i, g) >= limit))
            .map(|i| l.q_start + i)
            .collect();
        let what = if unwritten.is_empty() {
            format!(
                "the grid's {} m-block(s) of {} rows still cover it",
                c.tiles.grid_m_blocks(max),
                c.tiles.tile_m
            )
        } else {
            format!("rows {} of q are never written", ranges(unwritten))
        };
        found.push(Hazard::new(
            H_DEV_SEGMENT_OVER_MAX_SEQLEN_Q,
            &[b.to_string(), l.seqlen_q.to_string(), max.to_string(), what],
        ));
    }
}

/// D5: appends and reads past the capacity, with `cache_seqlens` given.
fn capacity_overruns(c: &Call, found: &mut Vec<Hazard>) {
    let Some(lengths) = c.lengths.as_deref() else {
        return;
    };
    if c.args.get(Param::CacheSeqlens).is_none() {
        // Without cache_seqlens every append lands past the capacity: the profile's
        // H-MUSA-APPEND-BEYOND-CAPACITY says so.
        return;
    }
    let r = c.resolved;
    let capacity = r.seqlen_k as i64;
    let leftpad = c.tensor(Param::CacheLeftpad).is_some();
    for (b, l) in lengths.iter().enumerate() {
        let end = l.used + l.new;
        if l.new > 0 && end > capacity {
            let where_ = if r.paged {
                "they land in the pages the following page-table entries name (past the table: page 0), racing with the sequences that own them".to_string()
            } else {
                format!(
                    "they land in the first slots of cache row {} (dropped past the cache), racing with that row's own use",
                    l.kv_row + 1
                )
            };
            found.push(Hazard::new(
                H_DEV_APPEND_PAST_CAPACITY,
                &[
                    b.to_string(),
                    span(l.used.max(capacity), end),
                    capacity.to_string(),
                    where_,
                ],
            ));
        }
        if end > capacity {
            let what = if r.paged {
                "keys past it come from the pages the following page-table entries name (past the table: page 0)"
            } else if leftpad {
                "keys past it are read from the next cache row (cache_leftpad makes K an LSU load); V past it reads as zero"
            } else {
                "keys and values past it read as zero, so those positions take part with score 0"
            };
            found.push(Hazard::new(
                H_DEV_READ_PAST_CAPACITY,
                &[
                    b.to_string(),
                    l.seqlen_k().to_string(),
                    capacity.to_string(),
                    what.into(),
                ],
            ));
        }
    }
}

/// D5: rotary positions past `{capacity, rotary_dim/2}` or past `rotary_cos`.
fn rotary_past_table(c: &Call, found: &mut Vec<Hazard>) {
    let (Some(lengths), Some(cos)) = (c.lengths.as_deref(), c.tensor(Param::RotaryCos)) else {
        return;
    };
    if c.tensor(Param::K).is_none() {
        return;
    }
    let capacity = c.resolved.seqlen_k as i64;
    let table_rows = cos.shape.first().copied().unwrap_or(0) as i64;
    let advances = c.resolved.is_causal || c.resolved.is_local;
    for (b, l) in lengths.iter().enumerate() {
        let span = l.new.max(if advances { l.seqlen_q as i64 } else { 1 });
        let last = l.rotary_start + span - 1;
        let readable = capacity.min(table_rows);
        if span > 0 && last >= readable {
            let what = if table_rows < capacity && l.rotary_start + span > table_rows {
                format!(
                    "rows {} lie past rotary_cos ({table_rows} rows): the device reads the memory after it",
                    validate::span(
                        table_rows.max(l.rotary_start),
                        (l.rotary_start + span).min(capacity)
                    )
                )
            } else {
                "the rotated dims of those keys and queries become 0".to_string()
            };
            found.push(Hazard::new(
                H_DEV_ROTARY_PAST_TABLE,
                &[b.to_string(), last.to_string(), readable.to_string(), what],
            ));
        }
    }
}

/// D6: a negative `softmax_scale` without softcap.
fn negative_scale(c: &Call, found: &mut Vec<Hazard>) {
    let r = c.resolved;
    if r.softmax_scale >= 0.0 || r.softcap != 0.0 {
        return;
    }
    let bn = r.tile_n;
    let padded = match c.lengths.as_deref() {
        Some(lengths) => lengths.iter().any(|l| l.seqlen_k() % bn != 0),
        None => r.seqlen_k % bn != 0,
    };
    let what = if r.is_causal || r.is_local {
        "the causal/local mask puts masked scores into the rows' key blocks: out NaN, lse +inf"
    } else if padded {
        "the last key block of a sequence whose length is not a multiple of 64 holds masked scores: out NaN, lse +inf for every row"
    } else {
        "with no masked score the result is clean attention until (max − s)·|scale| overflows P (≈ 11.09 in fp16, 88.7 in bf16): then inf/NaN"
    };
    found.push(Hazard::new(
        H_DEV_NEGATIVE_SCALE,
        &[crate::call::python_float_repr(r.softmax_scale), what.into()],
    ));
}

/// #15 item 1: lse of fully masked rows with a sink.
fn sink_lse(c: &Call, found: &mut Vec<Hazard>) {
    if c.tensor(Param::Sinks).is_none() || c.lengths.is_none() {
        return;
    }
    let lengths = c.lengths.as_deref().unwrap_or_default();
    let empty = |sink: bool| {
        c.q_rows(|b, i, g, (lo, hi)| {
            let l = &lengths[b];
            lo >= hi
                && c.tiles
                    .row_tile(i, g, l.seqlen_q, l.seqlen_k(), None, None)
                    .has_key_block
                    == sink
        })
    };
    let (sink, minus_inf) = (empty(true), empty(false));
    if sink.is_empty() && minus_inf.is_empty() {
        return;
    }
    let mut all: Vec<usize> = sink.iter().chain(&minus_inf).copied().collect();
    all.sort_unstable();
    all.dedup();
    let or_none = |rows: Vec<usize>| {
        if rows.is_empty() {
            "none".to_string()
        } else {
            format!("rows {}", ranges(rows))
        }
    };
    found.push(Hazard::new(
        H_DEV_SINK_LSE,
        &[ranges(all), or_none(sink), or_none(minus_inf)],
    ));
}
