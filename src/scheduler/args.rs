//! `get_scheduler_metadata` as callers reach it on MUSA: the FA3-signature arguments
//! ([`MetadataArgsSpec`]), what mate keeps of them ([`to_mate`]), the metadata they give
//! ([`get_scheduler_metadata`]), and the two ways arguments are chosen for a call: the call's own
//! ([`own_args`]) and the ones SGLang's V3 wrapper injects ([`sglang_injected_args`], musa-fa3.md §2.5(a)).

use crate::call::{BoundArgs, Dims, KvCacheCall, LayerInfo, MetadataArgsSpec, Param, PyValue};
use crate::mate::{self, MetadataArgs, SchedulerMetadata};
use crate::tensor::Tensors;
use thiserror::Error;

/// Why `get_scheduler_metadata` gives no tensor for some arguments.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MetadataError {
    /// A check of mate's chain (musa-fa3.md §5.2), with its exact message.
    #[error("{0}")]
    Rejected(String),
    /// Arguments the device would read out of bounds with (mate does not check them).
    #[error("{0}")]
    OutOfBounds(String),
}

/// The largest value an int32 index tensor holds.
const INT32_MAX: i64 = i32::MAX as i64;

fn lengths_ok(values: &[i64]) -> bool {
    values.iter().all(|v| (0..=INT32_MAX).contains(v))
}

/// Checks what mate's `_fmha_get_metadata` checks (G-4, G-6, G-7, G-10, G-13) plus what keeps the
/// model in bounds.
fn check(spec: &MetadataArgsSpec) -> Result<(), MetadataError> {
    let b = spec.batch_size;
    let shape = |v: &Option<Vec<i64>>, len: usize| v.as_ref().is_none_or(|v| v.len() == len);
    let rejected = |m: &str| Err(MetadataError::Rejected(m.to_string()));
    if !shape(&spec.cu_seqlens_q, b + 1) {
        return rejected("cu_seqlens_q must have shape (batch_size + 1,)");
    }
    if spec.cache_seqlens.len() != b {
        return rejected("seqused_k must have shape (batch_size,)");
    }
    if !shape(&spec.cache_leftpad, b) {
        return rejected("leftpad_k must have shape (batch_size,)");
    }
    if spec.num_heads_kv == 0 {
        return rejected("integer modulo by zero");
    }
    if spec.num_heads_q % spec.num_heads_kv != 0 {
        return rejected("num_heads_q must be divisible by num_heads_kv");
    }
    if !shape(&spec.cu_seqlens_k_new, b + 1) {
        return Err(MetadataError::OutOfBounds(format!(
            "cu_seqlens_k_new must have {} entries (mate does not check it; the metadata kernel \
             reads out of bounds)",
            b + 1
        )));
    }
    let vectors = [
        Some(&spec.cache_seqlens),
        spec.cu_seqlens_q.as_ref(),
        spec.cu_seqlens_k_new.as_ref(),
        spec.cache_leftpad.as_ref(),
    ];
    let scalars = [
        spec.max_seqlen_q,
        spec.max_seqlen_k,
        spec.max_seqlen_k_new,
        spec.num_heads_q,
        spec.headdim,
        spec.headdim_v.unwrap_or(0),
    ];
    if !vectors.into_iter().flatten().all(|v| lengths_ok(v))
        || scalars.iter().any(|&s| s as i64 > INT32_MAX)
    {
        return Err(MetadataError::OutOfBounds(
            "lengths, head counts and head dims must lie in [0, 2^31)".into(),
        ));
    }
    Ok(())
}

/// The arguments mate's `_fmha_get_metadata` receives (§2.5(b)–(d)): `page_size`, `qkv_dtype`
/// and `has_softcap` are dropped, `cache_seqlens` becomes `seqused_k`, `sm_margin` `mp_margin`.
pub fn to_mate(spec: &MetadataArgsSpec, mp: usize) -> MetadataArgs {
    let [left, right] = spec.window_size.unwrap_or([-1, -1]);
    MetadataArgs {
        batch: spec.batch_size,
        max_seqlen_q: spec.max_seqlen_q,
        max_seqlen_k: spec.max_seqlen_k,
        num_heads: spec.num_heads_q,
        num_heads_k: spec.num_heads_kv,
        head_dim: spec.headdim,
        head_dim_v: spec.headdim_v.unwrap_or(spec.headdim),
        seqused_q: None,
        seqused_k: Some(spec.cache_seqlens.clone()),
        cu_seqlens_q: spec.cu_seqlens_q.clone(),
        cu_seqlens_k: None,
        cu_seqlens_k_new: spec.cu_seqlens_k_new.clone(),
        leftpad_k: spec.cache_leftpad.clone(),
        max_seqlen_k_new: spec.max_seqlen_k_new,
        is_causal: spec.causal,
        window_left: Some(left),
        window_right: Some(right),
        attention_chunk: spec.attention_chunk,
        num_splits: spec.num_splits,
        pack_gqa: spec.pack_gqa,
        mp,
        mp_margin: spec.sm_margin,
    }
}

/// `flash_attn_3.interface.get_scheduler_metadata(**spec)` on a device with `mp` multiprocessors.
pub fn get_scheduler_metadata(
    spec: &MetadataArgsSpec,
    mp: usize,
) -> Result<SchedulerMetadata, MetadataError> {
    check(spec)?;
    mate::scheduler_metadata(&to_mate(spec, mp)).map_err(|e| MetadataError::Rejected(e.to_string()))
}

/// Integer values of an index argument: a tensor's materialised values, or an int repeated.
fn index_values(args: &BoundArgs, tensors: &Tensors, name: Param, len: usize) -> Option<Vec<i64>> {
    match args.get(name) {
        PyValue::Tensor(_) => tensors.get(name.name()).map(|t| t.ints()),
        PyValue::None => None,
        v => v.as_int().map(|x| vec![x; len]),
    }
}

fn window(args: &BoundArgs) -> Option<[i64; 2]> {
    match args.get(Param::WindowSize).as_sequence() {
        Some([l, r]) => Some([l.as_int().unwrap_or(-1), r.as_int().unwrap_or(-1)]),
        _ => None,
    }
}

fn int_or(args: &BoundArgs, name: Param, default: i64) -> i64 {
    args.get(name).as_int().unwrap_or(default)
}

/// The `get_scheduler_metadata` arguments that describe `call` itself: what a porter computing
/// metadata for exactly this call passes (cuda-fa3.md's upstream test does the same).
pub fn own_args(call: &KvCacheCall, tensors: &Tensors) -> Result<MetadataArgsSpec, String> {
    let args = call.bind_canonical()?;
    let dims = Dims::of(&args).map_err(|e| e.0)?;
    let b = dims.batch_size;
    let pack_gqa = match args.get(Param::PackGqa) {
        PyValue::None => None,
        v => v.truthy(),
    };
    Ok(MetadataArgsSpec {
        batch_size: b,
        max_seqlen_q: dims.seqlen_q,
        max_seqlen_k: dims.seqlen_k,
        num_heads_q: dims.num_heads,
        num_heads_kv: dims.num_heads_k,
        headdim: dims.head_size,
        cache_seqlens: index_values(&args, tensors, Param::CacheSeqlens, b)
            .unwrap_or_else(|| vec![dims.seqlen_k as i64; b]),
        qkv_dtype: args
            .tensor(Param::Q)
            .map(|t| t.dtype.torch_name().to_string()),
        headdim_v: Some(dims.head_size_v),
        cu_seqlens_q: index_values(&args, tensors, Param::CuSeqlensQ, b + 1),
        cu_seqlens_k_new: if dims.varlen_new {
            index_values(&args, tensors, Param::CuSeqlensKNew, b + 1)
        } else {
            None
        },
        cache_leftpad: index_values(&args, tensors, Param::CacheLeftpad, b),
        page_size: dims.paged.then_some(dims.page_size),
        max_seqlen_k_new: if dims.new_kv && !dims.varlen_new {
            dims.seqlen_new
        } else {
            0
        },
        causal: args.get(Param::Causal).truthy().unwrap_or(false),
        window_size: window(&args),
        attention_chunk: int_or(&args, Param::AttentionChunk, 0),
        has_softcap: args
            .get(Param::Softcap)
            .as_number()
            .is_some_and(|s| s != 0.0),
        num_splits: int_or(&args, Param::NumSplits, 0),
        pack_gqa,
        sm_margin: usize::try_from(int_or(&args, Param::SmMargin, 0)).unwrap_or(0),
    })
}

/// The arguments SGLang's V3 wrapper passes when it recomputes metadata for `call` (sgl L102–L117):
/// head counts and dims from the recorded layer, `max_seqlen_k` from the backend, batch from
/// `cu_seqlens_q`, `page_size = k_cache.shape[1]` (dropped later); never `cache_leftpad`,
/// `max_seqlen_k_new`, `attention_chunk`, `has_softcap`, `pack_gqa`, `sm_margin`.
pub fn sglang_injected_args(
    call: &KvCacheCall,
    tensors: &Tensors,
    layer: &LayerInfo,
    max_seqlen_k: Option<i64>,
) -> Result<MetadataArgsSpec, String> {
    let args = call.bind_canonical()?;
    let cu = args
        .tensor(Param::CuSeqlensQ)
        .ok_or("'NoneType' object has no attribute 'shape'")?;
    let batch = cu.shape.last().copied().unwrap_or(0).saturating_sub(1);
    let dim = |x: i64| usize::try_from(x).unwrap_or(0);
    let max_seqlen_k = max_seqlen_k.unwrap_or(0);
    Ok(MetadataArgsSpec {
        batch_size: batch,
        max_seqlen_q: dim(int_or(&args, Param::MaxSeqlenQ, 0)),
        max_seqlen_k: dim(max_seqlen_k),
        num_heads_q: dim(layer.tp_q_head_num),
        num_heads_kv: dim(layer.tp_k_head_num),
        headdim: dim(layer.qk_head_dim),
        // No cache_seqlens: the metadata kernel takes max_seqlen_k for every sequence (musa-fa3.md
        // §6.8 step 2).
        cache_seqlens: index_values(&args, tensors, Param::CacheSeqlens, batch)
            .unwrap_or_else(|| vec![max_seqlen_k; batch]),
        qkv_dtype: None,
        headdim_v: Some(dim(layer.v_head_dim)),
        cu_seqlens_q: index_values(&args, tensors, Param::CuSeqlensQ, batch + 1),
        cu_seqlens_k_new: index_values(&args, tensors, Param::CuSeqlensKNew, batch + 1),
        cache_leftpad: None,
        page_size: args
            .tensor(Param::KCache)
            .and_then(|t| t.shape.get(1).copied()),
        max_seqlen_k_new: 0,
        causal: args.get(Param::Causal).truthy().unwrap_or(false),
        window_size: window(&args),
        attention_chunk: 0,
        has_softcap: false,
        num_splits: int_or(&args, Param::NumSplits, 0),
        pack_gqa: None,
        sm_margin: 0,
    })
}
