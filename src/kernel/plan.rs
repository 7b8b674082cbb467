//! From a call and its materialised tensors to a [`Plan`]: mate's resolved parameters (mask,
//! kernel configuration, metadata, split count) and every size the C code will index with,
//! re-checked so that no input can make it read or write out of bounds.

use super::{KernelError, KernelOptions, MetadataSource};
use crate::call::{Dims, Dtype, KvCacheCall, PyValue};
use crate::mate::{
    self, KernelConfig, MetadataArgs, ResolvedMask, SchedulerMetadata, SplitHeuristicArgs,
};
use crate::reference::Stack;
use crate::tensor::{HostTensor, Tensors};

/// Largest head dim the host kernel takes (its per-row scratch lives on the stack).
pub const MAX_HEAD_DIM: usize = 1024;

/// Everything the C side needs besides the tensor data.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub dims: Dims,
    pub mask: ResolvedMask,
    pub config: KernelConfig,
    pub softmax_scale: f64,
    pub softcap: f64,
    pub rotary_interleaved: bool,
    pub rotary_dim: usize,
    /// The call's `cache_seqlens` as a vector (an int becomes `k_cache.shape[0]` copies).
    pub cache_seqlens: Option<Vec<i32>>,
    pub metadata: Option<SchedulerMetadata>,
    /// S_F: split slots of the partial outputs (1 without metadata).
    pub num_splits: usize,
    pub out_dtype: Dtype,
}

impl Plan {
    /// Rows per cache row or page (`page_size` when paged, else the capacity).
    pub fn cache_rows(&self) -> usize {
        if self.dims.paged {
            self.dims.page_size
        } else {
            self.dims.seqlen_k
        }
    }

    /// Split slots of the partial outputs: S_F when split tiles exist (metadata and S_F > 1),
    /// else none.
    pub fn accum_splits(&self) -> usize {
        if self.metadata.is_some() && self.num_splits > 1 {
            self.num_splits
        } else {
            0
        }
    }

    /// Rows per (batch, head, split) of the partial outputs: all of `total_q` in a single batch
    /// slot when varlen (batch stride 0), else `seqlen_q`.
    pub fn accum_rows(&self) -> usize {
        if self.dims.varlen_q {
            self.dims.total_q
        } else {
            self.dims.seqlen_q
        }
    }

    /// Elements of the partial LSE (times `head_dim_v` for the partial O).
    pub fn accum_numel(&self) -> usize {
        let batches = if self.dims.varlen_q {
            1
        } else {
            self.dims.batch_size
        };
        batches * self.dims.num_heads * self.accum_splits() * self.accum_rows()
    }
}

fn fail<T>(message: impl Into<String>) -> Result<T, KernelError> {
    Err(KernelError::Rejected(message.into()))
}

fn ensure(cond: bool, message: impl FnOnce() -> String) -> Result<(), KernelError> {
    if cond { Ok(()) } else { fail(message()) }
}

fn shape_is(tensors: &Tensors, name: &str, shape: &[usize]) -> Result<(), KernelError> {
    match tensors.get(name) {
        Some(t) if t.shape() == shape => Ok(()),
        Some(t) => fail(format!(
            "{name} has shape {:?}, expected {shape:?}",
            t.shape()
        )),
        None => fail(format!("{name} is not materialised")),
    }
}

pub(super) fn ints(tensors: &Tensors, name: &str) -> Option<Vec<i64>> {
    tensors.get(name).map(HostTensor::ints)
}

fn int_arg(value: &PyValue, name: &str, default: i64) -> Result<i64, KernelError> {
    match value {
        PyValue::None => Ok(default),
        v => v
            .as_int()
            .ok_or_else(|| KernelError::Rejected(format!("{name} must be an int"))),
    }
}

fn window(value: &PyValue) -> Result<(Option<i64>, Option<i64>), KernelError> {
    match value {
        PyValue::None => Ok((Some(-1), Some(-1))),
        v => match v.as_sequence() {
            Some([l, r]) => Ok((l.as_int(), r.as_int())),
            _ => fail("window_size must be a pair"),
        },
    }
}

/// Checks that a cu_seqlens vector of b+1 entries starts at 0 or more, never decreases and
/// stays within `rows`.
fn check_cu_seqlens(cu: &[i64], batch: usize, rows: usize, name: &str) -> Result<(), KernelError> {
    ensure(cu.len() == batch + 1, || {
        format!("{name} must have {} entries", batch + 1)
    })?;
    ensure(
        cu[0] >= 0 && cu.windows(2).all(|w| w[0] <= w[1]) && cu[batch] as usize <= rows,
        || format!("{name} must be non-decreasing within [0, {rows}]"),
    )
}

/// The configuration for a head-dim pair mate has no kernel for: §6.4's pack-GQA rule and
/// candidate tile_m, mate's tile_n.
fn generic_config(
    d: usize,
    dv: usize,
    seqlen_q: usize,
    group: usize,
    pack_gqa: Option<bool>,
) -> KernelConfig {
    let pack = mate::enable_pack_gqa(pack_gqa, seqlen_q, group);
    KernelConfig {
        head_dim_rounded: mate::round_head_dim(d),
        head_dim_v_rounded: mate::round_head_dim(dv),
        pack_gqa: pack,
        tile_m: mate::candidate_tile_m(if pack { seqlen_q * group } else { seqlen_q }),
        tile_n: mate::TILE_N,
        stages_k: 1,
        stages_v: 1,
    }
}

pub(super) fn plan(
    call: &KvCacheCall,
    tensors: &Tensors,
    options: &KernelOptions,
) -> Result<Plan, KernelError> {
    ensure(options.mp >= 1, || {
        "the multiprocessor count must be positive".into()
    })?;
    let args = call.bind_canonical().map_err(KernelError::Rejected)?;
    let mate_only = options.stack == Stack::Musa;
    let dims = Dims::of(&args).map_err(|e| KernelError::Rejected(e.0))?;
    let (b, h, hk, d, dv) = (
        dims.batch_size,
        dims.num_heads,
        dims.num_heads_k,
        dims.head_size,
        dims.head_size_v,
    );
    ensure(hk > 0 && h % hk == 0, || {
        "num_head must be divisible by num_head_kv".into()
    })?;
    ensure(
        (1..=MAX_HEAD_DIM).contains(&d) && (1..=MAX_HEAD_DIM).contains(&dv),
        || format!("head dims must be in 1..={MAX_HEAD_DIM}"),
    )?;
    let group = h / hk;

    // Shapes of every tensor the kernel reads or writes.
    let q_dtype = tensors
        .get("q")
        .map(|t| t.dtype)
        .ok_or_else(|| KernelError::Rejected("q is not materialised".into()))?;
    for name in [
        "q",
        "k_cache",
        "v_cache",
        "k",
        "v",
        "qv",
        "rotary_cos",
        "rotary_sin",
    ] {
        if let Some(t) = tensors.get(name) {
            ensure(
                matches!(
                    t.dtype,
                    Dtype::Float16 | Dtype::Bfloat16 | Dtype::Float8E4m3fn | Dtype::Float32
                ),
                || {
                    format!(
                        "{name} has dtype {}, which the kernel does not take",
                        t.dtype
                    )
                },
            )?;
        }
    }
    let q_rows = if dims.varlen_q {
        vec![dims.total_q, h, d]
    } else {
        vec![b, dims.seqlen_q, h, d]
    };
    shape_is(tensors, "q", &q_rows)?;
    let cache_rows = if dims.paged {
        dims.page_size
    } else {
        dims.seqlen_k
    };
    shape_is(tensors, "k_cache", &[dims.cache_batch, cache_rows, hk, d])?;
    shape_is(tensors, "v_cache", &[dims.cache_batch, cache_rows, hk, dv])?;
    if tensors.contains_key("qv") {
        let mut shape = q_rows.clone();
        *shape.last_mut().expect("q has a head dim") = dv;
        shape_is(tensors, "qv", &shape)?;
    }
    if dims.new_kv {
        ensure(tensors.contains_key("v"), || "k given without v".into())?;
        let rows = if dims.varlen_new {
            vec![dims.total_new]
        } else {
            vec![b, dims.seqlen_new]
        };
        shape_is(tensors, "k", &[rows.clone(), vec![hk, d]].concat())?;
        shape_is(tensors, "v", &[rows, vec![hk, dv]].concat())?;
    }
    for name in ["q_descale", "k_descale", "v_descale"] {
        if tensors.contains_key(name) {
            shape_is(tensors, name, &[b, hk])?;
        }
    }
    if tensors.contains_key("sinks") {
        shape_is(tensors, "sinks", &[h])?;
    }

    // Per-batch lengths and indices.
    let cu_q = ints(tensors, "cu_seqlens_q");
    if let Some(cu) = &cu_q {
        check_cu_seqlens(cu, b, dims.total_q, "cu_seqlens_q")?;
        ensure(
            cu.windows(2)
                .all(|w| (w[1] - w[0]) as usize <= dims.seqlen_q),
            || "a cu_seqlens_q length exceeds max_seqlen_q".into(),
        )?;
    }
    let cu_new = if dims.varlen_new {
        let cu = ints(tensors, "cu_seqlens_k_new").unwrap_or_default();
        check_cu_seqlens(&cu, b, dims.total_new, "cu_seqlens_k_new")?;
        Some(cu)
    } else {
        None
    };
    let cache_seqlens: Option<Vec<i64>> = match args.get("cache_seqlens") {
        PyValue::None => None,
        PyValue::Tensor(_) => ints(tensors, "cache_seqlens"),
        // mate: an int becomes k_cache.shape[0] copies (musa-fa3.md §2.3); FA3 and sgl-kernel:
        // one per batch (cuda-fa3.md A.4).
        v => {
            let len = if mate_only { dims.cache_batch } else { b };
            Some(vec![int_arg(v, "cache_seqlens", 0)?; len])
        }
    };
    if let Some(lens) = &cache_seqlens {
        ensure(lens.len() == b, || {
            "seqused_k must have shape (batch_size,)".into()
        })?;
    }
    let leftpad = ints(tensors, "cache_leftpad");
    if let Some(pad) = &leftpad {
        ensure(pad.len() == b, || {
            "cache_leftpad must have shape (batch_size,)".into()
        })?;
    }
    let kv_rows = if dims.paged {
        tensors.get("page_table").map_or(0, |t| t.shape()[0])
    } else {
        dims.cache_batch
    };
    let batch_idx = ints(tensors, "cache_batch_idx");
    if let Some(idx) = &batch_idx {
        ensure(idx.len() == b, || {
            "cache_batch_idx must have shape (batch_size,)".into()
        })?;
        ensure(
            idx.iter().all(|&i| i >= 0 && (i as usize) < kv_rows),
            || format!("cache_batch_idx values must lie in [0, {kv_rows})"),
        )?;
    } else {
        ensure(b <= kv_rows, || {
            format!("{b} batches but {kv_rows} cache rows")
        })?;
    }
    if dims.paged {
        let table = ints(tensors, "page_table").unwrap_or_default();
        ensure(
            table
                .iter()
                .all(|&p| p >= 0 && (p as usize) < dims.num_pages),
            || format!("page_table entries must lie in [0, {})", dims.num_pages),
        )?;
        ensure(dims.page_size > 0, || "page size must be positive".into())?;
    }
    let new_len = |i: usize| -> i64 {
        match &cu_new {
            Some(cu) => cu[i + 1] - cu[i],
            None if dims.new_kv => dims.seqlen_new as i64,
            None => 0,
        }
    };
    let capacity = dims.seqlen_k as i64;
    for i in 0..b {
        let used = cache_seqlens.as_ref().map_or(capacity, |l| l[i]);
        let pad = leftpad.as_ref().map_or(0, |l| l[i]);
        ensure(
            0 <= pad && pad <= used && used + new_len(i) <= capacity,
            || {
                format!(
                    "batch {i}: leftpad {pad}, cache_seqlens {used} and {} new keys do not fit the \
                 cache capacity {capacity}",
                    new_len(i)
                )
            },
        )?;
    }

    // mate's resolution (§6.2, §6.1, §6.3/§6.4).
    let causal = args.get("causal").truthy().unwrap_or(false);
    let (window_left, window_right) = window(args.get("window_size"))?;
    let fixed_length = !dims.varlen_q
        && !dims.varlen_new
        && cache_seqlens.is_none()
        && leftpad.is_none()
        && !dims.paged
        && !dims.new_kv;
    let chunk = mate::reset_attention_chunk(
        int_arg(args.get("attention_chunk"), "attention_chunk", 0)?,
        fixed_length,
        dims.seqlen_q as i64,
        capacity,
    );
    let mask = mate::resolve_mask(
        dims.seqlen_q as i64,
        capacity,
        causal,
        window_left,
        window_right,
        chunk,
    );
    let pack_gqa = match args.get("pack_gqa") {
        PyValue::None => None,
        v => v.truthy(),
    };
    let config = match mate::kernel_config(d, dv, dims.seqlen_q, group, pack_gqa) {
        Ok(config) => config,
        Err(e) if mate_only => return fail(e.to_string()),
        Err(_) => generic_config(d, dv, dims.seqlen_q, group, pack_gqa),
    };
    let qv_dim = tensors.get("qv").map_or(0, |_| dv);
    let softmax_scale = match args.get("softmax_scale") {
        PyValue::None => ((d + qv_dim) as f64).powf(-0.5),
        v => v
            .as_number()
            .ok_or_else(|| KernelError::Rejected("softmax_scale must be a number".into()))?,
    };
    let softcap = Some(args.get("softcap").as_number().unwrap_or(0.0))
        .filter(|&s| options.stack.softcap_enabled(s))
        .unwrap_or(0.0);

    // Rotary: rows read are r_b + t for new keys and r_b (+ i) for queries.
    let rotary_dim = match tensors.get("rotary_cos") {
        Some(cos) => {
            ensure(dims.new_kv, || {
                "If rotary cos/sin are provided, new key / value to be appended to KV cache must \
                 also be provided"
                    .into()
            })?;
            let rotary_dim = cos.shape().get(1).copied().unwrap_or(0) * 2;
            ensure(rotary_dim <= d && cos.shape().len() == 2, || {
                "rotary_dim must be <= headdim".into()
            })?;
            shape_is(tensors, "rotary_sin", cos.shape())?;
            let seqlen_ro = cos.shape()[0] as i64;
            let rotary_seqlens = ints(tensors, "rotary_seqlens");
            for i in 0..b {
                let start = match &rotary_seqlens {
                    Some(r) if r.len() == b => r[i],
                    Some(_) => return fail("rotary_seqlens must have shape (batch_size,)"),
                    None => cache_seqlens.as_ref().map_or(capacity, |l| l[i]),
                };
                let q_len = cu_q
                    .as_ref()
                    .map_or(dims.seqlen_q as i64, |c| c[i + 1] - c[i]);
                let q_span = if mask.is_causal || mask.is_local {
                    q_len
                } else {
                    1
                };
                let last = start + new_len(i).max(q_span) - 1;
                ensure(start >= 0 && last < seqlen_ro, || {
                    format!("batch {i} reads cos/sin rows up to {last}, beyond {seqlen_ro}")
                })?;
            }
            rotary_dim
        }
        None => 0,
    };

    // Metadata (§6.5: sinks disable it) and the split count S_F (§6.6, §6.9).
    let has_sinks = tensors.contains_key("sinks");
    let metadata = if has_sinks {
        None
    } else {
        match options.metadata {
            MetadataSource::None => None,
            MetadataSource::FromCall => match tensors.get("scheduler_metadata") {
                Some(t) => {
                    let values: Vec<i32> = t.ints().into_iter().map(|x| x as i32).collect();
                    Some(SchedulerMetadata::from_tensor(&values, b).ok_or_else(|| {
                        KernelError::Rejected("metadata buffer is too small".into())
                    })?)
                }
                None => None,
            },
            MetadataSource::Computed => match mate::scheduler_metadata(&MetadataArgs {
                batch: b,
                max_seqlen_q: dims.seqlen_q,
                max_seqlen_k: dims.seqlen_k,
                num_heads: h,
                num_heads_k: hk,
                head_dim: d,
                head_dim_v: dv,
                seqused_k: cache_seqlens.clone(),
                cu_seqlens_q: cu_q.clone(),
                cu_seqlens_k_new: cu_new.clone(),
                leftpad_k: leftpad.clone(),
                max_seqlen_k_new: dims.seqlen_new,
                is_causal: causal,
                window_left,
                window_right,
                attention_chunk: chunk,
                num_splits: int_arg(args.get("num_splits"), "num_splits", 0)?,
                pack_gqa,
                mp: options.mp,
                mp_margin: 0,
                ..MetadataArgs::default()
            }) {
                Ok(metadata) => Some(metadata),
                // Head dims only the generic configuration runs: no metadata, as without it.
                Err(_) if !mate_only => None,
                Err(e) => return fail(e.to_string()),
            },
        }
    };
    let num_splits = match &metadata {
        None => 1,
        Some(_) => {
            let requested = int_arg(args.get("num_splits"), "num_splits", 0)?;
            if requested > 0 {
                requested as usize
            } else {
                let margin = int_arg(args.get("sm_margin"), "sm_margin", 0)?;
                mate::num_splits_heuristic(&SplitHeuristicArgs {
                    batch: b,
                    num_heads: h,
                    num_heads_k: hk,
                    seqlen_q: dims.seqlen_q,
                    seqlen_k: dims.seqlen_k,
                    head_dim: d,
                    head_dim_v: dv,
                    num_mp: options.mp as i64 - margin,
                    mask,
                    tile_m: config.tile_m,
                    tile_n: config.tile_n,
                })
            }
        }
    };
    ensure(num_splits <= mate::MAX_SPLITS, || {
        "num_split exceeds max supported splits 128".into()
    })?;
    if let Some(m) = &metadata {
        // Entries the device would turn into races or out-of-bounds reads (§6.11 ii, iv).
        let mut seen = vec![false; b];
        for &batch in &m.batch_table {
            ensure(
                batch >= 0 && (batch as usize) < b && !seen[batch as usize],
                || "batch_table is not a permutation of the batch indices".into(),
            )?;
            seen[batch as usize] = true;
        }
        ensure(
            m.num_splits_dynamic
                .iter()
                .all(|&n| n as i64 <= num_splits as i64),
            || format!("num_splits_dynamic exceeds the {num_splits} split slots"),
        )?;
    }

    let cache_seqlens = cache_seqlens.map(|l| l.into_iter().map(|x| x as i32).collect());
    Ok(Plan {
        dims,
        mask,
        config,
        softmax_scale,
        softcap,
        rotary_interleaved: args.get("rotary_interleaved").truthy().unwrap_or(true),
        rotary_dim,
        cache_seqlens,
        metadata,
        num_splits,
        out_dtype: if q_dtype == Dtype::Float8E4m3fn {
            Dtype::Bfloat16
        } else {
            q_dtype
        },
    })
}
