//! Stale-metadata detection: does a metadata buffer (or the `get_scheduler_metadata` arguments
//! it was computed with) describe a call? Each finding names the field at fault and what the
//! device does with it (musa-fa3.md §6.11):
//!
//! | field | violation | symptom |
//! |---|---|---|
//! | length | < 4·b | `AssertionError: metadata buffer is too small` (the profile's rejection) |
//! | length | > 4·b | vectors re-sliced at the call's b: the others below follow |
//! | batch_table | not a permutation | batches computed twice or never, other memory indexed |
//! | num_m_blocks | < rows needed | trailing rows never computed (NaN on the kernel path, through the combine when split) |
//! | num_splits_dynamic | > S_F | splits beyond S_F never run, combine reads out of bounds |
//! | num_splits_dynamic | ≤ 0 | the position's rows never computed (NaN on the kernel path) |
//! | num_nheads_in_l2 | anything | nothing (no reader) |

use super::args::{get_scheduler_metadata, own_args, sglang_injected_args};
use crate::call::{CachedBuffer, KvCacheCall, MetadataArgsSpec, PyValue};
use crate::mate::{self, DEFAULT_MP, ResolvedMask, SchedulerMetadata, SplitHeuristicArgs};
use crate::tensor::{DEFAULT_MEMORY_CAP, Tensors, materialise_index_tensors};
use crate::validate::profiles::MUSA;
use crate::validate::registry::scheduler::{
    H_SCHED_ARGS_DIFFER, H_SCHED_ARGS_DROPPED, H_SCHED_BATCH_TABLE, H_SCHED_BUFFER_LONGER,
    H_SCHED_DROPPED_BY_SINKS, H_SCHED_M_BLOCKS, H_SCHED_PERF_ONLY, H_SCHED_SPLITS_EXCEED,
    H_SCHED_SPLITS_NONPOSITIVE, H_SCHED_UNCHECKED, H_SCHED_VALUES_NOT_FROM_ARGS,
};
use crate::validate::{Hazard, Profile, Resolved, span};

/// What the forward needs of the metadata, from the call alone.
struct Needs {
    batch: usize,
    /// Query rows per sequence.
    qlen: Vec<i64>,
    /// Packed rows per query row (the group size with pack-GQA, else 1).
    pack_factor: i64,
    tile_m: i64,
    /// S_F: the forward's split slots.
    splits: i64,
}

impl Needs {
    fn of(resolved: &Resolved, tensors: &Tensors, sm_margin: i64, mp: usize) -> Needs {
        let b = resolved.batch_size;
        let qlen = match tensors.get("cu_seqlens_q").map(|t| t.ints()) {
            Some(cu) if cu.len() == b + 1 => cu.windows(2).map(|w| w[1] - w[0]).collect(),
            _ => vec![resolved.seqlen_q as i64; b],
        };
        let group = (resolved.num_heads / resolved.num_heads_k.max(1)) as i64;
        Needs {
            batch: b,
            qlen,
            pack_factor: if resolved.pack_gqa { group } else { 1 },
            tile_m: resolved.tile_m as i64,
            splits: forward_splits(resolved, sm_margin, mp),
        }
    }

    fn m_blocks(&self, batch: usize) -> i64 {
        (self.qlen[batch] * self.pack_factor + self.tile_m - 1) / self.tile_m
    }
}

/// S_F: the forward's split count with metadata (musa-fa3.md §6.6, fwd inputs): the call's
/// `num_splits` when positive, else the host heuristic on the forward's own sizes.
fn forward_splits(r: &Resolved, sm_margin: i64, mp: usize) -> i64 {
    if r.num_splits > 0 {
        return r.num_splits;
    }
    mate::num_splits_heuristic(&SplitHeuristicArgs {
        batch: r.batch_size,
        num_heads: r.num_heads,
        num_heads_k: r.num_heads_k,
        seqlen_q: r.seqlen_q,
        seqlen_k: r.seqlen_k,
        head_dim: r.head_size,
        head_dim_v: r.head_size_v,
        num_mp: mp as i64 - sm_margin,
        mask: ResolvedMask {
            is_causal: r.is_causal,
            is_local: r.is_local,
            window_left: r.window_left,
            window_right: r.window_right,
            attention_chunk: r.attention_chunk,
        },
        tile_m: r.tile_m,
        tile_n: r.tile_n,
    }) as i64
}

/// `name=value` of every argument that differs, split into the ones mate reads and the dropped ones.
fn argument_differences(
    given: &MetadataArgsSpec,
    own: &MetadataArgsSpec,
) -> (Vec<(&'static str, String)>, Vec<String>) {
    fn show<T: std::fmt::Debug>(x: &T) -> String {
        format!("{x:?}")
            .replace("Some(", "")
            .replace([')', '"'], "")
    }
    // `qkv_dtype=None` is Python's default, torch.bfloat16.
    let bf16 = Some("bfloat16".to_string());
    // `window_size=None` is mate's `(-1, -1)`.
    let normalised = |a: &MetadataArgsSpec| MetadataArgsSpec {
        qkv_dtype: a.qkv_dtype.clone().or(bf16.clone()),
        window_size: Some(a.window_size.unwrap_or([-1, -1])),
        ..a.clone()
    };
    let (given, own) = (&normalised(given), &normalised(own));
    macro_rules! diffs {
        ($($field:ident),*) => {{
            let mut out = Vec::new();
            $(if given.$field != own.$field {
                out.push((
                    stringify!($field),
                    format!("{}={}, call has {}", stringify!($field), show(&given.$field), show(&own.$field)),
                ));
            })*
            out
        }};
    }
    let read = diffs!(
        batch_size,
        max_seqlen_q,
        max_seqlen_k,
        num_heads_q,
        num_heads_kv,
        headdim,
        headdim_v,
        cache_seqlens,
        cu_seqlens_q,
        cu_seqlens_k_new,
        cache_leftpad,
        max_seqlen_k_new,
        causal,
        window_size,
        attention_chunk,
        num_splits,
        pack_gqa,
        sm_margin
    );
    let dropped = diffs!(page_size, qkv_dtype, has_softcap);
    (read, dropped.into_iter().map(|(_, d)| d).collect())
}

/// The arguments that decide one field, for naming the cause of a finding.
const M_BLOCK_ARGS: &[&str] = &[
    "batch_size",
    "max_seqlen_q",
    "cu_seqlens_q",
    "num_heads_q",
    "num_heads_kv",
    "headdim",
    "headdim_v",
    "pack_gqa",
];
const SPLIT_ARGS: &[&str] = &[
    "batch_size",
    "max_seqlen_q",
    "max_seqlen_k",
    "num_heads_q",
    "num_heads_kv",
    "headdim",
    "headdim_v",
    "cache_seqlens",
    "cu_seqlens_q",
    "cu_seqlens_k_new",
    "cache_leftpad",
    "max_seqlen_k_new",
    "causal",
    "window_size",
    "attention_chunk",
    "num_splits",
    "pack_gqa",
    "sm_margin",
];

/// "computed for <differences that decide this field>", or `fallback` when the arguments are
/// unknown or none of them explains it.
fn cause(differences: &[(&'static str, String)], relevant: &[&str], fallback: String) -> String {
    let named: Vec<&str> = differences
        .iter()
        .filter(|(name, _)| relevant.contains(name))
        .map(|(_, text)| text.as_str())
        .collect();
    if named.is_empty() {
        fallback
    } else {
        format!("computed for {}", named.join("; "))
    }
}

/// Rows lost per sequence: `(sequence, first lost row, query rows, position whose combine
/// merges rows another position computes)`.
type LostRows = (usize, i64, i64, Option<(usize, usize)>);

/// "rows 256..300 of sequence 0 are never computed", "of each sequence" when every sequence loses
/// the same rows.
fn describe_rows(lost: &[LostRows], batch: usize) -> String {
    let same = lost
        .windows(2)
        .all(|w| (w[0].1, w[0].2) == (w[1].1, w[1].2))
        && lost.iter().all(|l| l.3.is_none());
    if same && lost.len() == batch && batch > 1 {
        return format!(
            "rows {} of each sequence are never computed",
            span(lost[0].1, lost[0].2)
        );
    }
    lost.iter()
        .map(|&(x, lo, hi, combine)| match combine {
            None => format!("rows {} of sequence {x} are never computed", span(lo, hi)),
            Some((short, other)) => format!(
                "rows {} of sequence {x} are computed by position {other} only, and position \
                 {short}'s combine merges them from split partials it did not write",
                span(lo, hi)
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks metadata `values` against `call` (whose tensors are `tensors`). `args`, when known, are
/// the `get_scheduler_metadata` arguments the values were computed with; they name the causes.
/// A call the `musa` profile rejects for another reason than the buffer length gets no findings.
pub fn check_buffer(
    call: &KvCacheCall,
    tensors: &Tensors,
    values: &[i32],
    args: Option<&MetadataArgsSpec>,
    mp: usize,
) -> Vec<Hazard> {
    if call.passed("sinks").is_some_and(|s| !s.is_none()) {
        return vec![Hazard::new(H_SCHED_DROPPED_BY_SINKS, &[])];
    }
    let verdict = MUSA.validate(&call.with_scheduler_metadata(values));
    let Some(resolved) = verdict.resolved() else {
        return Vec::new();
    };
    if resolved.mla_decode {
        return Vec::new();
    }
    let sm_margin = call
        .passed("sm_margin")
        .and_then(PyValue::as_int)
        .unwrap_or(0);
    let needs = Needs::of(resolved, tensors, sm_margin, mp);
    let b = needs.batch;
    let own = own_args(call, tensors).ok();
    let (differences, dropped) = match (args, &own) {
        (Some(given), Some(own)) => argument_differences(given, own),
        _ => (Vec::new(), Vec::new()),
    };
    let mut findings = Vec::new();
    if !differences.is_empty() {
        let list: Vec<&str> = differences.iter().map(|(_, t)| t.as_str()).collect();
        findings.push(Hazard::new(H_SCHED_ARGS_DIFFER, &[list.join("; ")]));
    }
    if !dropped.is_empty() {
        findings.push(Hazard::new(H_SCHED_ARGS_DROPPED, &[dropped.join("; ")]));
    }
    if values.len() > 4 * b {
        findings.push(Hazard::new(
            H_SCHED_BUFFER_LONGER,
            &[
                values.len().to_string(),
                (4 * b).to_string(),
                b.to_string(),
                (values.len() / 4).to_string(),
            ],
        ));
    }
    let metadata = SchedulerMetadata::from_tensor(values, b)
        .expect("the profile accepted the length (metadata buffer is too small otherwise)");
    let before = findings.len();
    check_batch_table(&metadata.batch_table, b, &mut findings);
    check_m_blocks(&metadata, &needs, &differences, &mut findings);
    check_splits(&metadata, &needs, &differences, &mut findings);
    if findings.len() == before {
        if let Some(expected) = own.and_then(|o| get_scheduler_metadata(&o, mp).ok()) {
            let fields: Vec<&str> = [
                (
                    "num_splits_dynamic",
                    metadata.num_splits_dynamic != expected.num_splits_dynamic,
                ),
                ("batch_table", metadata.batch_table != expected.batch_table),
                (
                    "num_m_blocks",
                    metadata.num_m_blocks != expected.num_m_blocks,
                ),
                (
                    "num_nheads_in_l2",
                    metadata.num_nheads_in_l2 != expected.num_nheads_in_l2,
                ),
            ]
            .into_iter()
            .filter_map(|(name, differs)| differs.then_some(name))
            .collect();
            if !fields.is_empty() {
                findings.push(Hazard::new(H_SCHED_PERF_ONLY, &[fields.join(", ")]));
            }
        }
    }
    findings
}

fn check_batch_table(table: &[i32], b: usize, findings: &mut Vec<Hazard>) {
    let mut count = vec![0usize; b];
    let mut out_of_range = Vec::new();
    for &x in table {
        match usize::try_from(x).ok().filter(|&x| x < b) {
            Some(x) => count[x] += 1,
            None => out_of_range.push(x),
        }
    }
    let twice: Vec<usize> = (0..b).filter(|&x| count[x] > 1).collect();
    let never: Vec<usize> = (0..b).filter(|&x| count[x] == 0).collect();
    if twice.is_empty() && never.is_empty() && out_of_range.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    if !twice.is_empty() {
        parts.push(format!("sequences {twice:?} are computed twice"));
    }
    if !never.is_empty() {
        parts.push(format!("sequences {never:?} are never computed"));
    }
    if !out_of_range.is_empty() {
        parts.push(format!("values {out_of_range:?} index other memory"));
    }
    findings.push(Hazard::new(
        H_SCHED_BATCH_TABLE,
        &[format!("{table:?}"), b.to_string(), parts.join(", ")],
    ));
}

/// Rows no position computes; with a sequence at several positions (batch_table not a
/// permutation), a short position's rows count as computed by a longer one unless the short one
/// splits, as its combine then rewrites every row of the sequence from its own partials (§6.10).
fn check_m_blocks(
    metadata: &SchedulerMetadata,
    needs: &Needs,
    differences: &[(&'static str, String)],
    findings: &mut Vec<Hazard>,
) {
    // Per sequence: (position, query rows its tiles compute, whether it splits).
    let mut positions: Vec<Vec<(usize, i64, bool)>> = vec![Vec::new(); needs.batch];
    let mut first_short = None;
    for (p, &x) in metadata.batch_table.iter().enumerate() {
        let Some(x) = usize::try_from(x).ok().filter(|&x| x < needs.batch) else {
            continue;
        };
        let (have, need) = (i64::from(metadata.num_m_blocks[p]), needs.m_blocks(x));
        // Packed row r is query row r / pack_factor: rows up to the first one not fully covered.
        let covered = ((have.max(0) * needs.tile_m) / needs.pack_factor).min(needs.qlen[x]);
        positions[x].push((p, covered, metadata.num_splits_dynamic[p] > 1));
        if have < need && needs.qlen[x] > 0 {
            first_short.get_or_insert((x, have, need));
        }
    }
    let Some((x, have, need)) = first_short else {
        return;
    };
    let mut lost: Vec<LostRows> = Vec::new();
    for (x, at) in positions.iter().enumerate() {
        let qlen = needs.qlen[x];
        let Some(&(longest, computed, _)) = at.iter().max_by_key(|&&(p, c, _)| (c, usize::MAX - p))
        else {
            continue;
        };
        if computed < qlen {
            lost.push((x, computed, qlen, None));
        }
        let merged = at
            .iter()
            .filter(|&&(p, c, splits)| splits && c < computed && p != longest)
            .min_by_key(|&&(_, c, _)| c);
        if let Some(&(short, from, _)) = merged {
            lost.push((x, from, computed, Some((short, longest))));
        }
    }
    if lost.is_empty() {
        return;
    }
    lost.sort_unstable();
    let fallback = format!(
        "has {have} block(s) of {} rows for sequence {x}, which needs {need}",
        needs.tile_m
    );
    findings.push(Hazard::new(
        H_SCHED_M_BLOCKS,
        &[
            cause(differences, M_BLOCK_ARGS, fallback),
            describe_rows(&lost, needs.batch),
        ],
    ));
}

fn check_splits(
    metadata: &SchedulerMetadata,
    needs: &Needs,
    differences: &[(&'static str, String)],
    findings: &mut Vec<Hazard>,
) {
    let entry = |p: usize| (metadata.batch_table[p], metadata.num_splits_dynamic[p]);
    let b = metadata.batch_table.len();
    if let Some((x, n)) = (0..b)
        .map(entry)
        .find(|&(_, n)| i64::from(n) > needs.splits)
    {
        let fallback = format!("gives sequence {x}");
        let what = cause(differences, SPLIT_ARGS, fallback.clone());
        let what = if what == fallback {
            what
        } else {
            format!("{what}, gives sequence {x}")
        };
        findings.push(Hazard::new(
            H_SCHED_SPLITS_EXCEED,
            &[what, n.to_string(), needs.splits.to_string()],
        ));
    }
    if let Some((x, n)) = (0..b).map(entry).find(|&(_, n)| n <= 0) {
        findings.push(Hazard::new(
            H_SCHED_SPLITS_NONPOSITIVE,
            &[format!("gives sequence {x} {n} split(s)")],
        ));
    }
}

/// The findings for `call`'s metadata: its `scheduler_metadata` values and/or its
/// `metadata_args`, or (when it passes neither) the metadata SGLang's wrapper would compute for it
/// now. Empty when there is nothing to check or everything matches. Uses the default device
/// ([`DEFAULT_MP`] multiprocessors) and the default memory cap.
pub fn stale_metadata_findings(call: &KvCacheCall) -> Vec<Hazard> {
    stale_metadata_findings_on(call, DEFAULT_MP, DEFAULT_MEMORY_CAP)
}

/// [`stale_metadata_findings`] for a device with `mp` multiprocessors, reading the call's integer
/// tensors only while they fit in `memory_cap` bytes (beyond it the metadata is reported
/// unchecked).
pub fn stale_metadata_findings_on(call: &KvCacheCall, mp: usize, memory_cap: usize) -> Vec<Hazard> {
    let unchecked = |why: String| vec![Hazard::new(H_SCHED_UNCHECKED, &[why])];
    let passed = call
        .passed("scheduler_metadata")
        .and_then(PyValue::as_tensor);
    // A tensor the spec gives by shape only has no contents to check (the materialiser would make
    // it zeros); its length is checked by the profile.
    if passed.is_some_and(|t| t.values.is_none()) && call.metadata_args.is_none() {
        return Vec::new();
    }
    // The checks read integers only: a server's KV pool would be over any cap.
    let tensors = match materialise_index_tensors(call, memory_cap) {
        Ok(t) => t,
        Err(e) => return unchecked(e.to_string()),
    };
    let passed_values = tensors
        .get("scheduler_metadata")
        .filter(|_| passed.is_some_and(|t| t.values.is_some()))
        .map(|t| t.ints().into_iter().map(|v| v as i32).collect::<Vec<_>>());
    let (passed_values, args) = match (&call.metadata_args, passed_values) {
        (Some(args), values) => (values, Some(args.clone())),
        (None, Some(values)) => (Some(values), None),
        (None, None) => match injected_buffer(call, &tensors) {
            Some(buffer) => (buffer.values, buffer.metadata_args),
            None => return Vec::new(),
        },
    };
    let from_args = match &args {
        Some(a) => match get_scheduler_metadata(a, mp) {
            Ok(m) => Some(m.to_tensor()),
            Err(e) => return unchecked(format!("get_scheduler_metadata(metadata_args): {e}")),
        },
        None => None,
    };
    let mut findings = Vec::new();
    let values = match (passed_values, from_args) {
        (Some(values), Some(computed)) => {
            if let Some(i) =
                (0..values.len().max(computed.len())).find(|&i| values.get(i) != computed.get(i))
            {
                findings.push(Hazard::new(
                    H_SCHED_VALUES_NOT_FROM_ARGS,
                    &[mp.to_string(), i.to_string()],
                ));
            }
            values
        }
        (Some(values), None) | (None, Some(values)) => values,
        (None, None) => return Vec::new(),
    };
    let call = if call.passed("scheduler_metadata").is_some() {
        call.clone()
    } else {
        call.with_scheduler_metadata(&values)
    };
    findings.extend(check_buffer(&call, &tensors, &values, args.as_ref(), mp));
    findings
}

/// The buffer SGLang's wrapper injects for this call (§4.1–§4.5): the arguments it recomputes
/// with, or the cached buffer the context gives for the prefix it reuses; `None` otherwise
/// (reuse of a tensor whose contents are unknown, MLA, no injection).
fn injected_buffer(call: &KvCacheCall, tensors: &Tensors) -> Option<CachedBuffer> {
    let backend = call.context.sglang_backend.as_ref()?;
    let layer = backend.layer.as_ref()?;
    if backend.use_mla
        || call
            .passed("scheduler_metadata")
            .is_some_and(|v| !v.is_none())
    {
        return None;
    }
    let update = crate::validate::profiles::should_update(backend).ok()?;
    if !update && backend.caches(&backend.prefix) {
        return backend.cached_metadata.get(&backend.prefix).cloned();
    }
    let args = sglang_injected_args(call, tensors, layer, backend.max_seqlen_k).ok()?;
    Some(CachedBuffer {
        values: None,
        metadata_args: Some(args),
    })
}
