//! The whole MUSA stack as one function: SGLang's V3 wrapper (with its scheduler-metadata
//! auto-injection) → mate's FA3 wrapper → mate's forward, the kernel path standing in for the
//! device.
//!
//! [`flash_attn_with_kvcache`] raises what the `musa` profile raises; otherwise it picks the
//! metadata the forward reads (the passed tensor, or the one SGLang injects: recomputed through
//! mate's `get_scheduler_metadata` with the layer's and backend's values, or the tensor cached under
//! the prefix), runs the kernel path driven by it, and returns what the Python call returns. The
//! wrapper's module-global metadata dict is an explicit [`InjectionCache`] the caller keeps
//! between calls. Calls mate routes to its MLA decode branch give [`MusaError::MlaBranch`].

use crate::call::{
    CachedBuffer, KvCacheCall, LayerInfo, MetadataArgsSpec, Param, PyValue, SglangBackend,
    signature,
};
use crate::kernel::{self, KernelError, KernelOptions, MetadataSource};
use crate::mate::DEFAULT_MP;
use crate::memory::Budget;
use crate::reference::{ContextParallel, RefOutput};
use crate::scheduler::{self, MetadataError};
use crate::tensor::{
    DEFAULT_MEMORY_CAP, HostTensor, MaterialiseError, Tensors, host_bytes, materialise,
};
use crate::tolerance;
use crate::validate::profiles::{MUSA, should_update};
use crate::validate::{Hazard, Profile, Rejection};
use std::collections::BTreeMap;
use thiserror::Error;

/// The modelled device.
#[derive(Clone, Debug, PartialEq)]
pub struct MusaOptions {
    /// Multiprocessor count (metadata kernel, split heuristic, persistent grid).
    pub mp: usize,
    /// The memory budget materialising and running the call may take (what the command holds
    /// besides, such as its parsed calls, already held in it).
    pub memory: Budget,
}

impl Default for MusaOptions {
    fn default() -> Self {
        MusaOptions {
            mp: DEFAULT_MP,
            memory: Budget::new(DEFAULT_MEMORY_CAP),
        }
    }
}

/// A metadata tensor SGLang stored under a prefix, and what it was computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedMetadata {
    /// The `get_scheduler_metadata` arguments, when known (a buffer the call spec's context gives
    /// by its values alone has none).
    pub args: Option<MetadataArgsSpec>,
    pub values: Vec<i32>,
    /// The id of the call whose injection computed it; `None` for a buffer the context gives
    /// (cached before the calls at hand).
    pub computed_for: Option<String>,
}

/// `_MATE_NO_MLA_SCHEDULER_METADATA_DICT` (musa-fa3.md §4.5), shared by every call of a process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InjectionCache {
    pub by_prefix: BTreeMap<String, CachedMetadata>,
}

impl InjectionCache {
    /// `call` as the process sees it: its backend (the context the profile reads) holds every
    /// buffer this session stored, with its contents, so the profile checks a reused buffer.
    pub fn applied_to(&self, call: &KvCacheCall) -> KvCacheCall {
        let mut call = call.clone();
        if let Some(backend) = call.context.sglang_backend.as_mut() {
            self.describe_in(backend);
        }
        call
    }

    /// Records in `backend` every buffer this session stored, with its contents.
    pub fn describe_in(&self, backend: &mut SglangBackend) {
        for (prefix, cached) in &self.by_prefix {
            backend.cached_metadata.insert(
                prefix.clone(),
                CachedBuffer {
                    values: Some(cached.values.clone()),
                    metadata_args: cached.args.clone(),
                },
            );
        }
    }
}

/// The tensor a context's cached buffer stands for on a device with `mp` multiprocessors: its
/// values, else what `get_scheduler_metadata` computes from its arguments.
fn context_buffer(buffer: &CachedBuffer, mp: usize) -> Result<Option<CachedMetadata>, MusaError> {
    let values = match (&buffer.values, &buffer.metadata_args) {
        (Some(values), _) => values.clone(),
        (None, Some(args)) => scheduler::get_scheduler_metadata(args, mp)?.to_tensor(),
        (None, None) => return Ok(None),
    };
    Ok(Some(CachedMetadata {
        args: buffer.metadata_args.clone(),
        values,
        computed_for: None,
    }))
}

/// The metadata the forward received.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataUsed {
    /// None passed and no injection: single-tile scheduler, one split.
    None,
    /// The caller's `scheduler_metadata` tensor.
    Passed(Vec<i32>),
    /// Injected by SGLang: freshly computed (`recomputed`) or reused from the prefix's entry.
    Injected {
        prefix: String,
        recomputed: bool,
        metadata: Box<CachedMetadata>,
    },
    /// MLA backend: the `(workspace, is_inited)` tuple (§4.4).
    MlaWorkspace { is_inited: bool },
}

/// What the Python call returns (musa-fa3.md §7).
#[derive(Clone, Debug, PartialEq)]
pub enum Returned {
    /// `return_softmax_lse=False`.
    Out(HostTensor),
    /// fmha path, `return_softmax_lse=True`: `(out, lse, o_accum, lse_accum)`. The accumulators are
    /// uninitialised allocations on the device (only split slots hold meaning), so only their shapes
    /// are given.
    OutLseAccum {
        out: HostTensor,
        lse: HostTensor,
        o_accum_shape: Vec<usize>,
        lse_accum_shape: Vec<usize>,
    },
}

impl Returned {
    pub fn out(&self) -> &HostTensor {
        match self {
            Returned::Out(out) | Returned::OutLseAccum { out, .. } => out,
        }
    }

    pub fn lse(&self) -> Option<&HostTensor> {
        match self {
            Returned::Out(_) => None,
            Returned::OutLseAccum { lse, .. } => Some(lse),
        }
    }
}

/// The result of one call on the modelled stack.
#[derive(Clone, Debug, PartialEq)]
pub struct MusaOutput {
    pub returned: Returned,
    /// The caches after the call when `k`/`v` were appended (updated in place); `None` when the
    /// call left them unchanged.
    pub k_cache: Option<HostTensor>,
    pub v_cache: Option<HostTensor>,
    pub metadata: MetadataUsed,
    /// S_F, the forward's split count.
    pub num_splits: usize,
    /// The profile's hazards.
    pub hazards: Vec<Hazard>,
}

impl MusaOutput {
    /// Judges the returned tensors and the caches against the reference with the tolerance rule
    /// (which reads the input dtype and whether keys were rotated from `ref64`). The call must have
    /// returned its lse.
    pub fn judge(
        self,
        ref64: &RefOutput,
        lowprec: &RefOutput,
    ) -> Result<tolerance::Report, String> {
        let Returned::OutLseAccum { out, lse, .. } = self.returned else {
            return Err("the call did not return its lse (pass return_softmax_lse=True)".into());
        };
        tolerance::judge(
            out.data,
            lse.data,
            self.k_cache.map(|t| t.data),
            self.v_cache.map(|t| t.data),
            ref64,
            lowprec,
        )
        .map_err(|m| m.to_string())
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum MusaError {
    /// The stack raises this exception.
    #[error("{0}")]
    Raises(Rejection),
    #[error(transparent)]
    Materialise(#[from] MaterialiseError),
    /// The kernel path refuses the call (it would read or write out of bounds on the device).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// SGLang reuses the tensor cached under `prefix`, which the context lists but whose contents
    /// are unknown (no call of this session computed it).
    #[error("the metadata cached under {0} is reused, but its contents are unknown")]
    UnknownCachedMetadata(String),
    #[error("injected metadata: {0}")]
    Metadata(#[from] MetadataError),
    /// mate's MLA decode branch (its own kernels and `(workspace, flag)` metadata) has no model on
    /// the kernel path.
    #[error("the MLA decode branch is not modelled by the kernel path")]
    MlaBranch,
}

/// The metadata the wrapper hands to mate for `call` (§4.1–§4.5), updating `cache` when it
/// recomputes. The call must have passed the `musa` profile (which runs the same trigger and
/// raises the injection's exceptions).
pub fn injected_metadata(
    call: &KvCacheCall,
    tensors: &Tensors,
    cache: &mut InjectionCache,
    mp: usize,
) -> Result<MetadataUsed, MusaError> {
    if let Some(t) = tensors.get("scheduler_metadata") {
        return Ok(MetadataUsed::Passed(
            t.ints().into_iter().map(|v| v as i32).collect(),
        ));
    }
    let Some((backend, layer)) = active_backend(call) else {
        return Ok(MetadataUsed::None);
    };
    let update = should_update(backend).map_err(|fail| MusaError::Raises(fail.into_rejection()))?;
    if backend.use_mla {
        return Ok(MetadataUsed::MlaWorkspace { is_inited: !update });
    }
    let prefix = backend.prefix.clone();
    if !update {
        let reused = match cache.by_prefix.get(&prefix) {
            Some(cached) => Some(cached.clone()),
            None => match backend.cached_metadata.get(&prefix) {
                Some(buffer) => context_buffer(buffer, mp)?,
                None => None,
            },
        };
        if let Some(cached) = reused {
            return Ok(MetadataUsed::Injected {
                prefix,
                recomputed: false,
                metadata: Box::new(cached),
            });
        }
        if backend.caches(&prefix) {
            return Err(MusaError::UnknownCachedMetadata(prefix));
        }
    }
    let args = scheduler::sglang_injected_args(call, tensors, layer, backend.max_seqlen_k)
        .map_err(|m| MusaError::Metadata(MetadataError::Rejected(m)))?;
    let values = scheduler::get_scheduler_metadata(&args, mp)?.to_tensor();
    let metadata = CachedMetadata {
        args: Some(args),
        values,
        computed_for: Some(call.id.clone()),
    };
    cache.by_prefix.insert(prefix.clone(), metadata.clone());
    Ok(MetadataUsed::Injected {
        prefix,
        recomputed: true,
        metadata: Box::new(metadata),
    })
}

/// The backend and its recorded layer when the wrapper injects: no metadata passed, a backend,
/// a layer (§4.1).
fn active_backend(call: &KvCacheCall) -> Option<(&SglangBackend, &LayerInfo)> {
    if call
        .passed("scheduler_metadata")
        .is_some_and(|v| !v.is_none())
    {
        return None;
    }
    let backend = call.context.sglang_backend.as_ref()?;
    Some((backend, backend.layer.as_ref()?))
}

/// `flash_attn_with_kvcache(**call)` on the MUSA stack, materialising the call's tensors.
pub fn flash_attn_with_kvcache(
    call: &KvCacheCall,
    cache: &mut InjectionCache,
    options: &MusaOptions,
) -> Result<MusaOutput, MusaError> {
    let tensors = materialise(call, options.memory.left())?;
    flash_attn_with_kvcache_on(call, &tensors, cache, options)
}

/// [`flash_attn_with_kvcache`] on already materialised tensors.
pub fn flash_attn_with_kvcache_on(
    call: &KvCacheCall,
    tensors: &Tensors,
    cache: &mut InjectionCache,
    options: &MusaOptions,
) -> Result<MusaOutput, MusaError> {
    let call = cache.applied_to(call);
    let verdict = MUSA.validate(&call);
    let resolved = match verdict.outcome {
        crate::validate::Outcome::Rejected(rejection) => return Err(MusaError::Raises(rejection)),
        crate::validate::Outcome::Accepted(resolved) => resolved,
    };
    if resolved.mla_decode {
        return Err(MusaError::MlaBranch);
    }
    let metadata = injected_metadata(&call, tensors, cache, options.mp)?;
    let kernel_options = KernelOptions {
        mp: options.mp,
        // A passed tensor is among `tensors`; an injected one is what the wrapper passes on.
        metadata: match &metadata {
            MetadataUsed::Injected { metadata, .. } => {
                MetadataSource::Injected(metadata.values.clone())
            }
            _ => MetadataSource::FromCall,
        },
        // the kernel's buffers come on top of the materialised tensors
        memory_cap: options.memory.left().saturating_sub(host_bytes(tensors)),
        ..KernelOptions::default()
    };
    let output = kernel::run(&call, tensors, &kernel_options)?;
    let return_lse = call
        .bind_canonical()
        .map_err(KernelError::Rejected)?
        .get(Param::ReturnSoftmaxLse)
        .truthy()
        .unwrap_or(false);
    let returned = if !return_lse {
        Returned::Out(output.out)
    } else {
        let (b, h, splits) = (resolved.batch_size, resolved.num_heads, output.num_splits);
        let (batches, rows) = if resolved.varlen_q {
            (1, resolved.total_q)
        } else {
            (b, resolved.seqlen_q)
        };
        Returned::OutLseAccum {
            out: output.out,
            lse: output.lse,
            o_accum_shape: vec![batches, h, splits, rows, resolved.head_size_v],
            lse_accum_shape: vec![batches, h, splits, rows],
        }
    };
    Ok(MusaOutput {
        returned,
        k_cache: output.k_cache,
        v_cache: output.v_cache,
        metadata,
        num_splits: output.num_splits,
        hazards: verdict.hazards,
    })
}

/// The materialised tensors of a call to mate's FA3-compatible wrapper as [`mate_rank`]'s call
/// names them: the `s_aux` tensor is the sink when `sinks` is not given (and is dropped when it
/// is), `cp_tot_seqused_k` goes with the context-parallel arguments.
pub fn rank_tensors(mut tensors: Tensors) -> Tensors {
    let s_aux = tensors.remove("s_aux");
    tensors.remove("cp_tot_seqused_k");
    if let Some(sink) = s_aux.filter(|_| !tensors.contains_key("sinks")) {
        tensors.insert("sinks".to_string(), sink);
    }
    tensors
}

/// A call to mate's FA3-compatible wrapper (profile `mate`) as one rank's call in the canonical
/// signature: the arguments it passes, the sink `_resolve_sink` picks (`sinks`, or `s_aux` when
/// `sinks` is None; interface.py L11-L14) as `sinks`, and its context-parallel arguments apart
/// (world size 1 and rank 0 where not passed). `Err` says why the call has no such form: it does
/// not bind, or a context-parallel argument is not what the kernel takes (ints, an integer
/// tensor of non-negative totals).
pub fn mate_rank(call: &KvCacheCall) -> Result<(KvCacheCall, ContextParallel), String> {
    let args = signature::bind(&signature::MATE_FA3_WRAPPER, call)?;
    let count = |param: Param| {
        let value = args.get(param);
        value
            .as_int()
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| format!("{param}={value} is not a count"))
    };
    let tot_seqused_k = match args.get(Param::CpTotSequsedK) {
        PyValue::None => Vec::new(),
        value => value
            .as_tensor()
            .and_then(|t| t.int_values())
            .and_then(|totals| totals.iter().map(|&t| usize::try_from(t).ok()).collect())
            .ok_or_else(|| {
                format!("cp_tot_seqused_k={value} has no non-negative integer values")
            })?,
    };
    let cp = ContextParallel {
        world_size: count(Param::CpWorldSize)?,
        rank: count(Param::CpRank)?,
        tot_seqused_k,
    };
    let mate_only = [
        Param::SAux,
        Param::CpWorldSize,
        Param::CpRank,
        Param::CpTotSequsedK,
    ];
    let mut keywords: Vec<(String, PyValue)> = signature::MATE_FA3_WRAPPER
        .params
        .iter()
        .zip(&args.params)
        .filter(|((param, _), bound)| bound.was_passed() && !mate_only.contains(param))
        .map(|((param, _), bound)| (param.name().to_string(), bound.value().clone()))
        .collect();
    let s_aux = args.get(Param::SAux);
    if args.get(Param::Sinks).is_none() && !s_aux.is_none() {
        keywords.retain(|(name, _)| name != Param::Sinks.name());
        keywords.push((Param::Sinks.name().to_string(), s_aux.clone()));
    }
    let rank_call = KvCacheCall {
        positional: Vec::new(),
        keywords,
        ..call.clone()
    };
    Ok((rank_call, cp))
}
