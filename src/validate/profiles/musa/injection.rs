//! The SGLang wrapper's scheduler-metadata injection (musa-fa3.md §4) and the metadata chain M it
//! runs when it recomputes (§5.2).

use super::mask::{
    MaskOperandError, WindowBound, ambiguous_values, mask_operands, py_number, seqlen_operand,
    window_pair,
};
use super::state::{Injection, MusaState, fail_if, is_musa};
use crate::call::python::{self, FfiType};
use crate::call::{Dtype, Param, SglangBackend, python_int_from_str};
use crate::mate;
use crate::mate::python::PyNum;
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py::{self, SubscriptSites};
use crate::validate::registry::musa::*;

pub static INJECTION: Layer<MusaState> = Layer {
    name: "metadata injection",
    checks: &[Check {
        name: "inject scheduler_metadata",
        sites: &[
            W_2_K_CACHE_ATTR,
            W_2_K_CACHE_INDEX,
            W_2_CU_SEQLENS_Q_ATTR,
            W_2_CU_SEQLENS_Q_INDEX,
            W_2_PP_PARTITION,
            W_2_PP_COUNT,
            W_2_PP_SUM,
        ],
        run: inject,
    }],
};

pub static METADATA_CHAIN: Layer<MusaState> = Layer {
    name: "metadata chain",
    checks: &[
        Check {
            name: "maybe_contiguous(seqused_k)",
            sites: &[G_1_ATTR, G_1_INDEX],
            run: g1_seqused_k,
        },
        Check {
            name: "window_size[0], window_size[1]",
            sites: &[
                G_1_WINDOW_TYPE,
                G_1_WINDOW_INDEX,
                G_1_WINDOW_KEY,
                G_1_WINDOW_TENSOR_0D,
                G_1_WINDOW_TENSOR_INDEX,
                G_1_WINDOW_SCALAR,
            ],
            run: g1_window,
        },
        Check {
            name: "max_seqlen_q with cu_seqlens_q",
            sites: &[G_2],
            run: |s| fail_if(s.arg(Param::MaxSeqlenQ).is_none()),
        },
        Check {
            name: "cu_seqlens_q shape",
            sites: &[G_4],
            run: |s| fail_if(cu_seqlens_q(s).ndim() != 1),
        },
        Check {
            name: "seqused_k shape",
            sites: &[G_6],
            run: g6_seqused_k_shape,
        },
        Check {
            name: "int32 and contiguous",
            sites: &[G_8_DTYPE, G_8_CONTIGUOUS],
            run: g8_int32_contiguous,
        },
        Check {
            name: "on MUSA",
            sites: &[G_9],
            run: g9_on_musa,
        },
        Check {
            name: "heads divisible",
            sites: &[G_10, G_10_ZERO],
            run: g10_heads,
        },
        Check {
            name: "_resolve_mask",
            sites: &[G_11, G_11_WINDOW_TYPE, G_11_TENSOR_BOOL],
            run: g11_resolve_mask,
        },
        Check {
            name: "_get_fwd_kernel_config",
            sites: &[G_13],
            run: g13_kernel_config,
        },
        Check {
            name: "metadata kernel arguments (tvm-ffi)",
            sites: &[G_14_ARG_TYPE],
            run: g14_arguments,
        },
    ],
};

fn backend(s: &MusaState) -> &SglangBackend {
    s.backend
        .as_ref()
        .expect("injection checks run only with a backend")
}

/// `cu_seqlens_q` once the injection step has dereferenced it (a tensor with at least one dim).
fn cu_seqlens_q(s: &MusaState) -> &crate::call::TensorArg {
    s.tensor(Param::CuSeqlensQ)
        .expect("injection has checked cu_seqlens_q")
}

/// §4.1–§4.5: whether the wrapper injects, and whether it recomputes through chain M.
fn inject(s: &mut MusaState) -> Result<(), Fail> {
    let active =
        !s.given(Param::SchedulerMetadata) && s.backend.as_ref().is_some_and(|b| b.layer.is_some());
    if !active {
        return Ok(());
    }
    // page_size = k_cache.shape[1] if k_cache is not None else 1 (read, then dropped by layer 2).
    let k_cache = s.arg(Param::KCache);
    if !k_cache.is_none() {
        let shape = py::shape(k_cache).at(W_2_K_CACHE_ATTR)?;
        py::shape_at(shape, 1).at(W_2_K_CACHE_INDEX)?;
    }
    let cu = py::shape(s.arg(Param::CuSeqlensQ)).at(W_2_CU_SEQLENS_Q_ATTR)?;
    let batch = py::int(py::shape_at(cu, -1).at(W_2_CU_SEQLENS_Q_INDEX)?) - 1;
    let b = backend(s);
    let layer_id = i64::from(b.layer.as_ref().expect("active injection").layer_id);
    let update = should_update(b)?;
    let (use_mla, cached) = (b.use_mla, b.caches(&b.prefix));
    let cached_len = b
        .cached_metadata
        .get(&b.prefix)
        .and_then(|buffer| buffer.length())
        .map(|len| len as i64);
    let prefix = b.prefix.clone();
    s.injection = if use_mla {
        Injection::Mla { is_inited: !update }
    } else if update || !cached {
        Injection::Recompute { batch }
    } else {
        Injection::Reuse { len: cached_len }
    };
    let how = match s.injection {
        Injection::Recompute { .. } => "recomputed now",
        Injection::Reuse { .. } => "reused from an earlier layer",
        Injection::Mla { .. } | Injection::Off => "",
    };
    let splits = s.arg(Param::NumSplits).as_int().unwrap_or(0);
    if matches!(s.injection, Injection::Recompute { .. }) && batch > 31 && splits != 1 {
        s.hazard(H_MUSA_METADATA_SPLIT_RACE, &[&batch.to_string()]);
    }
    if let Injection::Mla { is_inited } = s.injection {
        s.hazard(H_MUSA_MLA_TUPLE_METADATA, &[&py_bool(is_inited)]);
    } else {
        s.hazard(
            H_MUSA_METADATA_INJECTED,
            &[how, &prefix, &layer_id.to_string()],
        );
    }
    Ok(())
}

fn py_bool(b: bool) -> String {
    if b { "True" } else { "False" }.to_string()
}

/// §4.3 `should_update` for the backend's recorded layer (`false` without one): the layer is at or
/// before the stage's start layer, or the env override is set. Fails as `get_pp_indices` does.
pub fn should_update(b: &SglangBackend) -> Result<bool, Fail> {
    let layer_id = b.layer.as_ref().map_or(i64::MAX, |l| i64::from(l.layer_id));
    Ok(layer_id <= start_layer_id(b)? || force_update(b.force_update_metadata.as_deref()))
}

/// The first layer this pipeline stage refreshes metadata at (§4.3 steps 2–4).
fn start_layer_id(b: &SglangBackend) -> Result<i64, Fail> {
    let mut start = pp_start_layer(
        b.pp_layer_partition.as_deref(),
        i64::from(b.num_hidden_layers),
        i64::from(b.pp_rank),
        i64::from(b.pp_world_size),
    )?;
    if b.can_run_tbo && b.pp_rank == 0 {
        start += i64::from(b.first_k_dense_replace.unwrap_or(0));
    }
    if let Some(interval) = b.full_attention_interval {
        start += i64::from(interval) - 1;
    }
    Ok(start)
}

/// `get_pp_indices(num_hidden_layers, pp_rank, pp_size)[0]` (sglang distributed/utils.py).
fn pp_start_layer(partition: Option<&str>, layers: i64, rank: i64, size: i64) -> Result<i64, Fail> {
    let Some(text) = partition else {
        let (base, rem) = (layers / size.max(1), layers % size.max(1));
        return Ok(if rank >= size - rem {
            rank * (base + 1) - (size - rem)
        } else {
            rank * base
        });
    };
    let counts: Vec<i64> = text
        .split(',')
        .map(python_int_from_str)
        .collect::<Option<_>>()
        .ok_or_else(|| Fail::with([text.to_string()]).at(W_2_PP_PARTITION))?;
    if counts.len() as i64 != size {
        return Err(Fail::with([counts.len().to_string(), size.to_string()]).at(W_2_PP_COUNT));
    }
    let sum = counts.iter().fold(0i64, |a, &c| a.saturating_add(c));
    if sum != layers {
        return Err(Fail::with([sum.to_string(), layers.to_string()]).at(W_2_PP_SUM));
    }
    Ok(counts
        .iter()
        .take(rank.max(0) as usize)
        .fold(0i64, |a, &c| a.saturating_add(c)))
}

/// `envs.SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA.get()` (`EnvBool`, default False; unknown values warn
/// and give the default).
fn force_update(raw: Option<&str>) -> bool {
    raw.is_some_and(|v| matches!(v.to_lowercase().as_str(), "true" | "1" | "yes" | "y"))
}

fn g1_seqused_k(s: &mut MusaState) -> Result<(), Fail> {
    let v = s.arg(Param::CacheSeqlens);
    if v.is_none() {
        return Ok(());
    }
    let t = py::tensor(v, "stride").at(G_1_ATTR)?;
    py::stride(t, -1, G_1_INDEX, G_1_INDEX)?;
    Ok(())
}

/// `window_size[0]`, `window_size[1]` in `get_scheduler_metadata` (mha_interface.py L1039-L1040).
const G1_WINDOW: SubscriptSites = SubscriptSites {
    not_subscriptable: G_1_WINDOW_TYPE,
    sequence_index: G_1_WINDOW_INDEX,
    key: G_1_WINDOW_KEY,
    zero_dim: G_1_WINDOW_TENSOR_0D,
    tensor_index: G_1_WINDOW_TENSOR_INDEX,
    scalar_index: G_1_WINDOW_SCALAR,
};

fn g1_window(s: &mut MusaState) -> Result<(), Fail> {
    window_pair(s.arg(Param::WindowSize), &G1_WINDOW).map(|_| ())
}

fn g6_seqused_k_shape(s: &mut MusaState) -> Result<(), Fail> {
    let Some(t) = s.tensor(Param::CacheSeqlens) else {
        return Ok(());
    };
    let batch = match s.injection {
        Injection::Recompute { batch } => batch,
        _ => unreachable!("chain M runs only when recomputing"),
    };
    fail_if(t.ndim() != 1 || py::int(t.shape[0]) != batch)
}

fn g8_int32_contiguous(s: &mut MusaState) -> Result<(), Fail> {
    // cache_seqlens was copied by maybe_contiguous when its last stride was not 1.
    let cu = cu_seqlens_q(s);
    fail_if(cu.dtype != Dtype::Int32).at(G_8_DTYPE)?;
    fail_if(cu.stride_of(0) != Some(1)).at(G_8_CONTIGUOUS)?;
    if let Some(t) = s.tensor(Param::CacheSeqlens) {
        fail_if(t.dtype != Dtype::Int32).at(G_8_DTYPE)?;
    }
    Ok(())
}

fn g9_on_musa(s: &mut MusaState) -> Result<(), Fail> {
    let cache_ok = s.tensor(Param::CacheSeqlens).is_none_or(is_musa);
    fail_if(!is_musa(cu_seqlens_q(s)) || !cache_ok)
}

fn layer_heads(s: &MusaState) -> (i64, i64, i64, i64) {
    let l = backend(s).layer.as_ref().expect("active injection");
    (
        l.tp_q_head_num,
        l.tp_k_head_num,
        l.qk_head_dim,
        l.v_head_dim,
    )
}

fn g10_heads(s: &mut MusaState) -> Result<(), Fail> {
    let (hq, hk, _, _) = layer_heads(s);
    fail_if(hk == 0).at(G_10_ZERO)?;
    fail_if(hq.rem_euclid(hk) != 0).at(G_10)
}

/// `_resolve_mask(max_seqlen_q, backend max_seqlen_k, causal, ...)` of the metadata kernel: the
/// window comparisons (L51, L53), `if is_causal` (L56), then `seqlen_k - 1` (L66), which a `None`
/// `max_seqlen_k` fails even without a window, and `seqlen_q - 1` (L68).
fn g11_resolve_mask(s: &mut MusaState) -> Result<(), Fail> {
    let (left, right) = window_pair(s.arg(Param::WindowSize), &G1_WINDOW)?;
    let max_seqlen_k = match backend(s).max_seqlen_k {
        Some(_) => Ok(()),
        None => Err(MaskOperandError::Seqlen("NoneType".to_string())),
    };
    let fail = |e: MaskOperandError| match e {
        MaskOperandError::Seqlen(ty) => Fail::with([ty]).at(G_11),
        MaskOperandError::Window(ty) => Fail::with([ty]).at(G_11_WINDOW_TYPE),
        MaskOperandError::AmbiguousTensor(n) => {
            Fail::with([ambiguous_values(n)]).at(G_11_TENSOR_BOOL)
        }
    };
    mask_operands(
        &left,
        &right,
        max_seqlen_k.clone(),
        seqlen_operand(s.arg(Param::MaxSeqlenQ)),
    )
    .map_err(fail)?;
    py::truth(s.arg(Param::Causal)).at(G_11_TENSOR_BOOL)?;
    max_seqlen_k.map_err(fail)?;
    match seqlen_operand(s.arg(Param::MaxSeqlenQ)) {
        Err(e @ MaskOperandError::Seqlen(_)) => Err(fail(e)),
        _ => Ok(()),
    }
}

fn g13_kernel_config(s: &mut MusaState) -> Result<(), Fail> {
    let (hq, hk, d, dv) = layer_heads(s);
    let m = s.arg(Param::MaxSeqlenQ).as_number().unwrap_or(0.0) as i64;
    mate::kernel_config(
        to_dim(d),
        to_dim(dv),
        m,
        hq.checked_div(hk).unwrap_or(0),
        None,
    )
    .map(|_| ())
    .map_err(|e| Fail::with([e.head_dim.to_string(), e.head_dim_v.to_string()]))
}

/// tvm-ffi converts the metadata kernel's arguments (fmha_get_metadata.py L398, parameters in
/// fmha_get_metadata.j2 L16-L41) in parameter order; those a caller's value reaches are
/// `max_seqlen_q` (#5), `cu_seqlens_k_new` (#12), the resolved window (#13, #14) and `num_splits`
/// (#20). The others are the layer's ints, tensors checked above and mate's own values.
fn g14_arguments(s: &mut MusaState) -> Result<(), Fail> {
    let (left, right) = window_pair(s.arg(Param::WindowSize), &G1_WINDOW)?;
    let number = |b: &WindowBound| match b {
        WindowBound::Num(n) => Some(*n),
        _ => None,
    };
    let max_seqlen_q = s.arg(Param::MaxSeqlenQ);
    let mask = mate::python::resolve_mask(
        python::float(max_seqlen_q).unwrap_or(0.0) as i64,
        backend(s).max_seqlen_k.unwrap_or(0),
        python::truth(s.arg(Param::Causal)).unwrap_or(false),
        number(&left),
        number(&right),
        PyNum::int(0),
    );
    let (left, right) = (py_number(mask.window_left), py_number(mask.window_right));
    let arguments = [
        (5, max_seqlen_q, FfiType::Int),
        (12, s.arg(Param::CuSeqlensKNew), FfiType::OptionalTensor),
        (13, &left, FfiType::Int),
        (14, &right, FfiType::Int),
        (20, s.arg(Param::NumSplits), FfiType::Int),
    ];
    match python::first_unconverted(arguments) {
        Some(index) => Err(Fail::with([index.to_string()])),
        None => Ok(()),
    }
}

fn to_dim(d: i64) -> usize {
    usize::try_from(d).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pp_partition_follows_get_pp_indices() {
        // 10 layers over 4 stages: 2, 2, 3, 3 -> starts 0, 2, 4, 7.
        let starts: Vec<i64> = (0..4)
            .map(|r| pp_start_layer(None, 10, r, 4).unwrap())
            .collect();
        assert_eq!(starts, [0, 2, 4, 7]);
        assert_eq!(pp_start_layer(Some("3, 7"), 10, 1, 2), Ok(3));
        assert_eq!(
            pp_start_layer(Some("3,x"), 10, 1, 2).unwrap_err(),
            Fail::with(["3,x".to_string()]).at(W_2_PP_PARTITION)
        );
        assert_eq!(
            pp_start_layer(Some("10"), 10, 0, 2).unwrap_err(),
            Fail::with(["1".to_string(), "2".to_string()]).at(W_2_PP_COUNT)
        );
        assert_eq!(
            pp_start_layer(Some("4,4"), 10, 0, 2).unwrap_err(),
            Fail::with(["8".to_string(), "10".to_string()]).at(W_2_PP_SUM)
        );
        assert_eq!(python_int_from_str("1_0"), Some(10));
        assert_eq!(python_int_from_str(""), None);
        assert_eq!(python_int_from_str("3.0"), None);
    }

    #[test]
    fn env_bool_parsing() {
        assert!(force_update(Some("TRUE")));
        assert!(force_update(Some("y")));
        assert!(!force_update(Some("")));
        assert!(!force_update(Some("on")));
        assert!(!force_update(None));
    }
}
