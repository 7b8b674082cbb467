//! From a call and its materialised tensors to a [`Plan`]: mate's resolved parameters (mask,
//! kernel configuration, metadata, split count) and every size the C code will index with,
//! re-checked so that no input can make it read or write out of bounds.

use super::conventions::Conventions;
use super::{KernelError, KernelOptions, MetadataSource};
use crate::call::{BoundArgs, Dims, Dtype, KvCacheCall, Param, PyValue};
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
    pub conventions: Conventions,
    /// One rank of a context-parallel call: world size, rank, the total key count per batch.
    pub context_parallel: Option<(i64, i64, Vec<i32>)>,
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
    let pack = mate::enable_pack_gqa(pack_gqa, seqlen_q as i64, group as i64);
    KernelConfig {
        head_dim_rounded: mate::round_head_dim(d),
        head_dim_v_rounded: mate::round_head_dim(dv),
        pack_gqa: pack,
        tile_m: mate::candidate_tile_m((if pack { seqlen_q * group } else { seqlen_q }) as i64),
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
    let dims = Dims::of(&args).map_err(|e| KernelError::Rejected(e.0))?;
    let planner = Planner {
        args: &args,
        tensors,
        dims: &dims,
        options,
        mate_only: options.stack == Stack::Musa,
    };
    // Each step checks what the next one indexes with, so they run in this order.
    let group = planner.group()?;
    let q_dtype = planner.check_tensors()?;
    let lengths = planner.lengths()?;
    planner.check_indices()?;
    planner.check_fit(&lengths)?;
    let mask = planner.mask(&lengths)?;
    let context_parallel = planner.context_parallel(&mask.resolved)?;
    let pack_gqa = match args.get(Param::PackGqa) {
        PyValue::None => None,
        v => v.truthy(),
    };
    let config = planner.kernel_config(group, pack_gqa)?;
    let softmax_scale = planner.softmax_scale()?;
    let softcap = Some(args.get(Param::Softcap).as_number().unwrap_or(0.0))
        .filter(|&s| options.stack.softcap_enabled(s))
        .unwrap_or(0.0);
    let rotary_dim = planner.rotary_dim(&lengths, &mask.resolved)?;
    let metadata = planner.metadata(&lengths, &mask, pack_gqa)?;
    let num_splits = planner.num_splits(metadata.is_some(), &mask.resolved, &config)?;
    if let Some(metadata) = &metadata {
        check_metadata(metadata, dims.batch_size, num_splits)?;
    }

    let conventions = Conventions::of(
        options.stack,
        &dims,
        &config,
        lengths.leftpad.is_some(),
        tensors.contains_key("rotary_cos"),
        tensors.get("rotary_cos").map_or(0, |t| t.shape()[0]),
    );
    let cache_seqlens = lengths
        .cache_seqlens
        .map(|l| l.into_iter().map(|x| x as i32).collect());
    Ok(Plan {
        dims,
        mask: mask.resolved,
        config,
        softmax_scale,
        softcap,
        rotary_interleaved: args.get(Param::RotaryInterleaved).truthy().unwrap_or(true),
        rotary_dim,
        cache_seqlens,
        metadata,
        num_splits,
        out_dtype: if q_dtype == Dtype::Float8E4m3fn {
            Dtype::Bfloat16
        } else {
            q_dtype
        },
        conventions,
        context_parallel,
    })
}

/// One call on its way to a [`Plan`].
struct Planner<'a> {
    args: &'a BoundArgs,
    tensors: &'a Tensors,
    dims: &'a Dims,
    options: &'a KernelOptions,
    /// mate's rules only (the MUSA stack): no fallback configuration for other head dims.
    mate_only: bool,
}

/// The call's per-batch index vectors, each `None` when not given.
struct Lengths {
    cu_q: Option<Vec<i64>>,
    cu_new: Option<Vec<i64>>,
    /// `cache_seqlens`, an int expanded to one per batch.
    cache_seqlens: Option<Vec<i64>>,
    leftpad: Option<Vec<i64>>,
}

/// The mask arguments as the call passes them, and as mate resolves them.
struct MaskArgs {
    causal: bool,
    window_left: Option<i64>,
    window_right: Option<i64>,
    /// The attention chunk after mate's reset (§6.2).
    chunk: i64,
    resolved: ResolvedMask,
}

impl Planner<'_> {
    /// Query heads per KV head, after checking the head counts and dims.
    fn group(&self) -> Result<usize, KernelError> {
        let Dims {
            num_heads: h,
            num_heads_k: hk,
            head_size: d,
            head_size_v: dv,
            ..
        } = *self.dims;
        ensure(hk > 0 && h % hk == 0, || {
            "num_head must be divisible by num_head_kv".into()
        })?;
        ensure(
            (1..=MAX_HEAD_DIM).contains(&d) && (1..=MAX_HEAD_DIM).contains(&dv),
            || format!("head dims must be in 1..={MAX_HEAD_DIM}"),
        )?;
        Ok(h / hk)
    }

    /// Dtypes and shapes of every tensor the kernel reads or writes; `q`'s dtype.
    fn check_tensors(&self) -> Result<Dtype, KernelError> {
        let (tensors, dims) = (self.tensors, self.dims);
        let (b, h, hk, d, dv) = (
            dims.batch_size,
            dims.num_heads,
            dims.num_heads_k,
            dims.head_size,
            dims.head_size_v,
        );
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
        Ok(q_dtype)
    }

    /// The per-batch lengths, each checked against the batch.
    fn lengths(&self) -> Result<Lengths, KernelError> {
        let (tensors, dims) = (self.tensors, self.dims);
        let b = dims.batch_size;
        let cu_q = ints(tensors, "cu_seqlens_q");
        if let Some(cu) = &cu_q {
            check_cu_seqlens(cu, b, dims.total_q, "cu_seqlens_q")?;
            // mate runs longer segments over max_seqlen_q's m-blocks (docs/musa-device.md D5).
            ensure(
                self.mate_only
                    || cu
                        .windows(2)
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
        let cache_seqlens: Option<Vec<i64>> = match self.args.get(Param::CacheSeqlens) {
            PyValue::None => None,
            PyValue::Tensor(_) => ints(tensors, "cache_seqlens"),
            // mate: an int becomes k_cache.shape[0] copies (musa-fa3.md §2.3); FA3 and sgl-kernel:
            // one per batch (cuda-fa3.md A.4).
            v => {
                let len = if self.mate_only { dims.cache_batch } else { b };
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
        Ok(Lengths {
            cu_q,
            cu_new,
            cache_seqlens,
            leftpad,
        })
    }

    /// `cache_batch_idx` and the page table address rows and pages that exist.
    fn check_indices(&self) -> Result<(), KernelError> {
        let (tensors, dims) = (self.tensors, self.dims);
        let b = dims.batch_size;
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
        Ok(())
    }

    /// Keys batch `i` appends.
    fn new_len(&self, lengths: &Lengths, i: usize) -> i64 {
        match &lengths.cu_new {
            Some(cu) => cu[i + 1] - cu[i],
            None if self.dims.new_kv => self.dims.seqlen_new as i64,
            None => 0,
        }
    }

    /// Every batch's left padding, cached and appended keys fit the cache capacity — for mate,
    /// the positions the model follows: mate appends and reads past the capacity through its own
    /// addressing (docs/musa-device.md D5), modelled as far as one cache pool past it.
    fn check_fit(&self, lengths: &Lengths) -> Result<(), KernelError> {
        let dims = self.dims;
        let capacity = dims.seqlen_k as i64;
        let cache_rows = if dims.paged {
            dims.page_size
        } else {
            dims.seqlen_k
        };
        let reachable = if self.mate_only {
            capacity + (dims.cache_batch * cache_rows) as i64
        } else {
            capacity
        };
        for i in 0..dims.batch_size {
            let used = lengths.cache_seqlens.as_ref().map_or(capacity, |l| l[i]);
            let pad = lengths.leftpad.as_ref().map_or(0, |l| l[i]);
            let new = self.new_len(lengths, i);
            ensure(0 <= pad && pad <= used && used + new <= reachable, || {
                format!(
                    "batch {i}: leftpad {pad}, cache_seqlens {used} and {new} new keys do not fit \
                     the {reachable} positions modelled (cache capacity {capacity})"
                )
            })?;
        }
        Ok(())
    }

    /// mate's resolution of the mask arguments (§6.2, §6.1).
    fn mask(&self, lengths: &Lengths) -> Result<MaskArgs, KernelError> {
        let (args, dims) = (self.args, self.dims);
        let causal = args.get(Param::Causal).truthy().unwrap_or(false);
        let (window_left, window_right) = window(args.get(Param::WindowSize))?;
        let fixed_length = !dims.varlen_q
            && !dims.varlen_new
            && lengths.cache_seqlens.is_none()
            && lengths.leftpad.is_none()
            && !dims.paged
            && !dims.new_kv;
        let capacity = dims.seqlen_k as i64;
        let chunk = mate::reset_attention_chunk(
            int_arg(args.get(Param::AttentionChunk), "attention_chunk", 0)?,
            fixed_length,
            dims.seqlen_q as i64,
            capacity,
        );
        let resolved = mate::resolve_mask(
            dims.seqlen_q as i64,
            capacity,
            causal,
            window_left,
            window_right,
            chunk,
        );
        Ok(MaskArgs {
            causal,
            window_left,
            window_right,
            chunk,
            resolved,
        })
    }

    /// The rank's context-parallel arguments as the kernel reads them (none while the world size
    /// is 1: mate's `enable_cp` is `cp_world_size > 1`).
    fn context_parallel(
        &self,
        mask: &ResolvedMask,
    ) -> Result<Option<(i64, i64, Vec<i32>)>, KernelError> {
        let Some(cp) = self.options.context_parallel.as_ref() else {
            return Ok(None);
        };
        let Some(cp) = cp
            .applied(mask.is_local, self.dims.batch_size)
            .map_err(KernelError::Rejected)?
        else {
            return Ok(None);
        };
        let fits = |x: usize| i32::try_from(x).ok();
        let totals: Option<Vec<i32>> = cp.tot_seqused_k.iter().map(|&t| fits(t)).collect();
        match (totals, fits(cp.world_size), fits(cp.rank)) {
            (Some(totals), Some(world), Some(rank)) => {
                Ok(Some((i64::from(world), i64::from(rank), totals)))
            }
            _ => fail("cp_tot_seqused_k, the world size and the rank must be int32"),
        }
    }

    /// mate's kernel configuration (§6.3/§6.4); other stacks' head dims without a mate kernel get
    /// the generic one.
    fn kernel_config(
        &self,
        group: usize,
        pack_gqa: Option<bool>,
    ) -> Result<KernelConfig, KernelError> {
        let dims = self.dims;
        let (d, dv, seqlen_q) = (dims.head_size, dims.head_size_v, dims.seqlen_q);
        match mate::kernel_config(d, dv, seqlen_q as i64, group as i64, pack_gqa) {
            Ok(config) => Ok(config),
            Err(e) if self.mate_only => fail(e.to_string()),
            Err(_) => Ok(generic_config(d, dv, seqlen_q, group, pack_gqa)),
        }
    }

    /// The given `softmax_scale`, else `1/sqrt(d + dv)` with `qv`, `1/sqrt(d)` without.
    fn softmax_scale(&self) -> Result<f64, KernelError> {
        let d = self.dims.head_size;
        let qv_dim = self.tensors.get("qv").map_or(0, |_| self.dims.head_size_v);
        match self.args.get(Param::SoftmaxScale) {
            PyValue::None => Ok(((d + qv_dim) as f64).powf(-0.5)),
            v => v
                .as_number()
                .ok_or_else(|| KernelError::Rejected("softmax_scale must be a number".into())),
        }
    }

    /// The rotary dim (0 without rotary), after checking that every row read exists: rows
    /// `r_b + t` for new keys and `r_b (+ i)` for queries.
    fn rotary_dim(&self, lengths: &Lengths, mask: &ResolvedMask) -> Result<usize, KernelError> {
        let (tensors, dims) = (self.tensors, self.dims);
        let Some(cos) = tensors.get("rotary_cos") else {
            return Ok(0);
        };
        ensure(dims.new_kv, || {
            "If rotary cos/sin are provided, new key / value to be appended to KV cache must \
             also be provided"
                .into()
        })?;
        let rotary_dim = cos.shape().get(1).copied().unwrap_or(0) * 2;
        ensure(
            rotary_dim <= dims.head_size && cos.shape().len() == 2,
            || "rotary_dim must be <= headdim".into(),
        )?;
        shape_is(tensors, "rotary_sin", cos.shape())?;
        let seqlen_ro = cos.shape()[0] as i64;
        let rotary_seqlens = ints(tensors, "rotary_seqlens");
        let b = dims.batch_size;
        for i in 0..b {
            let start = match &rotary_seqlens {
                Some(r) if r.len() == b => r[i],
                Some(_) => return fail("rotary_seqlens must have shape (batch_size,)"),
                None => lengths
                    .cache_seqlens
                    .as_ref()
                    .map_or(dims.seqlen_k as i64, |l| l[i]),
            };
            let q_len = lengths
                .cu_q
                .as_ref()
                .map_or(dims.seqlen_q as i64, |c| c[i + 1] - c[i]);
            let q_span = if mask.is_causal || mask.is_local {
                q_len
            } else {
                1
            };
            let last = start + self.new_len(lengths, i).max(q_span) - 1;
            // mate reads rows past its table as 0 (docs/musa-device.md D5).
            ensure(start >= 0 && (self.mate_only || last < seqlen_ro), || {
                format!("batch {i} reads cos/sin rows up to {last}, beyond {seqlen_ro}")
            })?;
        }
        Ok(rotary_dim)
    }

    /// The forward's metadata (§6.5: sinks disable it).
    fn metadata(
        &self,
        lengths: &Lengths,
        mask: &MaskArgs,
        pack_gqa: Option<bool>,
    ) -> Result<Option<SchedulerMetadata>, KernelError> {
        let (tensors, dims) = (self.tensors, self.dims);
        if tensors.contains_key("sinks") {
            return Ok(None);
        }
        match &self.options.metadata {
            MetadataSource::None => Ok(None),
            MetadataSource::FromCall => match tensors.get("scheduler_metadata") {
                Some(t) => {
                    let values: Vec<i32> = t.ints().into_iter().map(|x| x as i32).collect();
                    metadata_buffer(&values, dims.batch_size).map(Some)
                }
                None => Ok(None),
            },
            MetadataSource::Injected(values) => metadata_buffer(values, dims.batch_size).map(Some),
            MetadataSource::Computed => match mate::scheduler_metadata(&MetadataArgs {
                batch: dims.batch_size,
                max_seqlen_q: dims.seqlen_q,
                max_seqlen_k: dims.seqlen_k,
                num_heads: dims.num_heads,
                num_heads_k: dims.num_heads_k,
                head_dim: dims.head_size,
                head_dim_v: dims.head_size_v,
                seqused_k: lengths.cache_seqlens.clone(),
                cu_seqlens_q: lengths.cu_q.clone(),
                cu_seqlens_k_new: lengths.cu_new.clone(),
                leftpad_k: lengths.leftpad.clone(),
                max_seqlen_k_new: dims.seqlen_new,
                is_causal: mask.causal,
                window_left: mask.window_left,
                window_right: mask.window_right,
                attention_chunk: mask.chunk,
                num_splits: int_arg(self.args.get(Param::NumSplits), "num_splits", 0)?,
                pack_gqa,
                mp: self.options.mp,
                mp_margin: 0,
                ..MetadataArgs::default()
            }) {
                Ok(metadata) => Ok(Some(metadata)),
                // Head dims only the generic configuration runs: no metadata, as without it.
                Err(_) if !self.mate_only => Ok(None),
                Err(e) => fail(e.to_string()),
            },
        }
    }

    /// The split count S_F (§6.6, §6.9): 1 without metadata, else the requested count or mate's
    /// heuristic.
    fn num_splits(
        &self,
        has_metadata: bool,
        mask: &ResolvedMask,
        config: &KernelConfig,
    ) -> Result<usize, KernelError> {
        let (args, dims) = (self.args, self.dims);
        let num_splits = if !has_metadata {
            1
        } else {
            let requested = int_arg(args.get(Param::NumSplits), "num_splits", 0)?;
            if requested > 0 {
                requested as usize
            } else {
                let margin = int_arg(args.get(Param::SmMargin), "sm_margin", 0)?;
                mate::num_splits_heuristic(&SplitHeuristicArgs {
                    batch: dims.batch_size,
                    num_heads: dims.num_heads,
                    num_heads_k: dims.num_heads_k,
                    seqlen_q: dims.seqlen_q,
                    seqlen_k: dims.seqlen_k,
                    head_dim: dims.head_size,
                    head_dim_v: dims.head_size_v,
                    num_mp: self.options.mp as i64 - margin,
                    mask: *mask,
                    tile_m: config.tile_m,
                    tile_n: config.tile_n,
                })
            }
        };
        ensure(num_splits <= mate::MAX_SPLITS, || {
            "num_split exceeds max supported splits 128".into()
        })?;
        Ok(num_splits)
    }
}

/// Metadata entries the device would turn into races or out-of-bounds reads (§6.11 ii, iv).
fn check_metadata(
    metadata: &SchedulerMetadata,
    batch: usize,
    num_splits: usize,
) -> Result<(), KernelError> {
    let mut seen = vec![false; batch];
    for &b in &metadata.batch_table {
        ensure(b >= 0 && (b as usize) < batch && !seen[b as usize], || {
            "batch_table is not a permutation of the batch indices".into()
        })?;
        seen[b as usize] = true;
    }
    ensure(
        metadata
            .num_splits_dynamic
            .iter()
            .all(|&n| n as i64 <= num_splits as i64),
        || format!("num_splits_dynamic exceeds the {num_splits} split slots"),
    )
}

/// The forward's view of a metadata buffer's values.
fn metadata_buffer(values: &[i32], batch_size: usize) -> Result<SchedulerMetadata, KernelError> {
    SchedulerMetadata::from_tensor(values, batch_size)
        .ok_or_else(|| KernelError::Rejected("metadata buffer is too small".into()))
}
