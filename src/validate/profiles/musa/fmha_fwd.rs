//! mate's `_fmha_fwd` (musa-fa3.md §5.5): the asserts on the call's tensors, the sizes it derives,
//! the execution policy and `_resolve_mask`, the scheduler metadata's length, and the parameters an
//! accepted call runs with.

// F-41's m-block hazard compares the call's kernel configuration with the metadata's.
use super::kernel_config::call_config;
use super::mask::{
    MaskOperandError, WindowBound, ambiguous_values, mask_operands, seqlen_operand, window_bound,
};
use super::state::{FwdDims, Injection, MusaState, fail_if, is_musa};
use crate::call::python::{self as pyvalue, Cmp};
use crate::call::{Dtype, LseLayout, Param, PyValue, TensorArg};
use crate::mate;
use crate::mate::python::{self, PyNum};
use crate::validate::Resolved;
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py;
use crate::validate::registry::Site;
use crate::validate::registry::musa::*;

pub static FMHA_FWD: Layer<MusaState> = Layer {
    name: "_fmha_fwd",
    checks: &[
        Check {
            name: "qv unsupported",
            sites: &[F_1],
            run: |s| fail_if(s.given(Param::Qv)),
        },
        Check {
            name: "k_new and v_new together",
            sites: &[F_2],
            run: |s| fail_if(s.given(Param::K) != s.given(Param::V)),
        },
        Check {
            name: "maybe_contiguous",
            sites: &[F_3_ATTR, F_3_INDEX],
            run: f3_maybe_contiguous,
        },
        Check {
            name: "derive sizes",
            sites: &[
                F_4_ATTR, F_4_UNPACK, F_4_INDEX, F_5, F_5_ATTR, F_5_INDEX, F_6_ATTR, F_6_INDEX,
            ],
            run: f4_f7_sizes,
        },
        Check {
            name: "on MUSA",
            sites: &[F_8_ATTR, F_8],
            run: f8_on_musa,
        },
        Check {
            name: "dtypes",
            sites: &[F_9, F_10, F_11],
            run: f9_f11_dtypes,
        },
        Check {
            name: "int32 vectors",
            sites: &[F_12_DTYPE, F_12_CONTIGUOUS, F_12_INDEX],
            run: f12_int32_vectors,
        },
        Check {
            name: "page_table",
            sites: &[F_13_DTYPE, F_13_CONTIGUOUS],
            run: f13_page_table,
        },
        Check {
            name: "kv_batch_idx",
            sites: &[F_14_DEVICE, F_14_DTYPE, F_14_SHAPE, F_14_CONTIGUOUS],
            run: f14_kv_batch_idx,
        },
        Check {
            name: "leftpad_k",
            sites: &[F_15_DEVICE, F_15_DTYPE, F_15_SHAPE, F_15_CONTIGUOUS],
            run: f15_leftpad_k,
        },
        Check {
            name: "learnable_sink",
            sites: &[F_16_SHAPE, F_16_DTYPE],
            run: f16_learnable_sink,
        },
        Check {
            name: "batch_size_k",
            sites: &[F_17],
            run: |s| {
                let d = s.dims;
                fail_if(!s.given(Param::CacheBatchIdx) && d.batch_size_k != d.batch_size)
            },
        },
        Check {
            name: "cache shapes",
            sites: &[F_18_K, F_18_V, F_18_PAGE_TABLE],
            run: f18_cache_shapes,
        },
        Check {
            name: "cu_seqlens_q shape",
            sites: &[F_20],
            run: |s| {
                let bad = s.tensor(Param::CuSeqlensQ).is_some_and(|t| t.ndim() != 1);
                fail_if(bad)
            },
        },
        Check {
            name: "seqused_k shape",
            sites: &[F_22],
            run: |s| {
                let b = s.dims.batch_size;
                let bad = s.seqused_k.as_tensor().is_some_and(|t| !shape_is(t, &[b]));
                fail_if(bad)
            },
        },
        Check {
            name: "appended k/v",
            sites: &[F_23_INDEX, F_23_K, F_23_V, F_24_K, F_24_V, F_25, F_26],
            run: f23_f26_new_kv,
        },
        Check {
            name: "rotary",
            sites: &[
                F_27, F_28, F_29_INDEX, F_29, F_30, F_31, F_32, F_33, F_34_ATTR, F_34_DTYPE,
                F_34_SHAPE,
            ],
            run: f27_f34_rotary,
        },
        Check {
            name: "heads divisible",
            sites: &[F_35_ZERO, F_35],
            run: |s| {
                let d = s.dims;
                fail_if(d.num_head_kv == 0).at(F_35_ZERO)?;
                fail_if(d.num_head.rem_euclid(d.num_head_kv) != 0).at(F_35)
            },
        },
        Check {
            name: "execution policy and mask",
            sites: &[
                F_MASK_CHUNK_TYPE,
                F_MASK_TENSOR_BOOL,
                F_MASK_WINDOW_TYPE,
                F_MASK_SEQLEN_TYPE,
            ],
            run: policy_and_mask,
        },
    ],
};

/// `_fmha_fwd`'s context-parallel asserts (L720–L731), after the mask is resolved. Only the `mate`
/// profile runs them: through SGLang's wrapper the arguments keep their defaults, which pass.
pub static CONTEXT_PARALLEL: Layer<MusaState> = Layer {
    name: "_fmha_fwd context parallelism",
    checks: &[Check {
        name: "cp_world_size, cp_rank, cp_tot_seqused_k",
        sites: &[F_36_TYPE, F_CP_TENSOR_BOOL, F_36, F_37, F_38, F_39],
        run: f36_f39_context_parallel,
    }],
};

/// The scheduler metadata's length (L765–L768), after the context-parallel asserts.
pub static METADATA_LENGTH: Layer<MusaState> = Layer {
    name: "_fmha_fwd metadata length",
    checks: &[Check {
        name: "scheduler_metadata length",
        sites: &[F_41_ATTR, F_41_INDEX, F_41],
        run: f41_metadata,
    }],
};

fn shape_is(t: &TensorArg, expected: &[i64]) -> bool {
    t.ndim() == expected.len() && t.shape.iter().zip(expected).all(|(&a, &b)| py::int(a) == b)
}

/// `maybe_contiguous` on q, k, v, then k_new, v_new (F-3); `None` passes through.
fn f3_maybe_contiguous(s: &mut MusaState) -> Result<(), Fail> {
    let params: &[Param] = if s.given(Param::K) {
        &[Param::Q, Param::KCache, Param::VCache, Param::K, Param::V]
    } else {
        &[Param::Q, Param::KCache, Param::VCache]
    };
    for &param in params {
        let v = s.arg(param);
        if !v.is_none() {
            let t = py::tensor(v, "stride").at(F_3_ATTR)?;
            py::stride(t, -1, F_3_INDEX, F_3_INDEX)?;
        }
    }
    Ok(())
}

/// F-4 … F-7: the sizes `_fmha_fwd` derives, with the Python errors of each expression.
fn f4_f7_sizes(s: &mut MusaState) -> Result<(), Fail> {
    let q = py::shape(s.arg(Param::Q)).at(F_4_ATTR)?;
    py::unpack_two(q).at(F_4_UNPACK)?;
    let k = s.tensor(Param::KCache).expect("K-1 checked k_cache");
    let v = s.tensor(Param::VCache).expect("K-2 checked v_cache");
    let mut d = FwdDims {
        num_head: py::int(q[q.len() - 2]),
        head_dim: py::int(q[q.len() - 1]),
        num_head_kv: py::int(py::shape_at(&k.shape, -2).at(F_4_INDEX)?),
        head_dim_v: py::int(v.shape[v.ndim() - 1]),
        ..FwdDims::default()
    };
    if s.given(Param::CuSeqlensQ) {
        fail_if(!s.given(Param::MaxSeqlenQ)).at(F_5)?;
        let cu = py::shape(s.arg(Param::CuSeqlensQ)).at(F_5_ATTR)?;
        d.batch_size = py::int(py::shape_at(cu, 0).at(F_5_INDEX)?) - 1;
        d.seqlen_q = pyvalue::float(s.arg(Param::MaxSeqlenQ)).unwrap_or(0.0) as i64;
        d.total_q = py::int(q[0]);
    } else {
        d.batch_size = py::int(q[0]);
        d.seqlen_q = py::int(q[1]);
        d.total_q = d.batch_size.saturating_mul(d.seqlen_q);
    }
    if s.given(Param::PageTable) {
        let pt = py::shape(s.arg(Param::PageTable)).at(F_6_ATTR)?;
        d.paged = true;
        d.pages_per_seq = py::int(py::shape_at(pt, 1).at(F_6_INDEX)?);
        d.page_size = py::int(k.shape[1]);
        d.seqlen_k = d.pages_per_seq.saturating_mul(d.page_size);
        d.batch_size_k = py::int(pt[0]);
    } else {
        d.page_size = 1;
        d.seqlen_k = py::int(py::shape_at(&k.shape, -3).at(F_6_INDEX)?);
        d.batch_size_k = py::int(k.shape[0]);
    }
    s.dims = d;
    Ok(())
}

/// The device list of F-8, in source order (mate's names in comments).
const DEVICE_LIST: [Param; 14] = [
    Param::Q,
    Param::KCache,        // k
    Param::VCache,        // v
    Param::CuSeqlensQ,    // (cu_seqlens_k is None here)
    Param::CuSeqlensKNew, // (seqused_q is None here)
    Param::CacheSeqlens,  // seqused_k
    Param::PageTable,
    Param::Sinks, // learnable_sink
    Param::K,     // k_new
    Param::V,     // v_new
    Param::RotaryCos,
    Param::RotarySin,
    Param::CacheLeftpad,  // leftpad_k
    Param::CacheBatchIdx, // kv_batch_idx
];

fn f8_on_musa(s: &mut MusaState) -> Result<(), Fail> {
    for param in DEVICE_LIST {
        let v = if param == Param::CacheSeqlens {
            &s.seqused_k
        } else {
            s.arg(param)
        };
        if v.is_none() {
            continue;
        }
        let t = py::tensor(v, "is_musa").at(F_8_ATTR)?;
        fail_if(!is_musa(t)).at(F_8)?;
    }
    Ok(())
}

fn dtype(s: &MusaState, param: Param) -> Option<Dtype> {
    s.tensor(param).map(|t| t.dtype)
}

fn f9_f11_dtypes(s: &mut MusaState) -> Result<(), Fail> {
    let q = dtype(s, Param::Q).expect("F-4 checked q");
    fail_if(!matches!(q, Dtype::Float16 | Dtype::Bfloat16)).at(F_9)?;
    let same = dtype(s, Param::KCache) == Some(q) && dtype(s, Param::VCache) == Some(q);
    fail_if(!same).at(F_10)?;
    if s.given(Param::K) {
        fail_if(dtype(s, Param::K) != Some(q) || dtype(s, Param::V) != Some(q)).at(F_11)?;
    }
    Ok(())
}

fn f12_int32_vectors(s: &mut MusaState) -> Result<(), Fail> {
    for param in [
        Param::CuSeqlensQ,
        Param::CuSeqlensKNew,
        Param::CacheSeqlens,
        Param::CacheLeftpad,
    ] {
        let t = if param == Param::CacheSeqlens {
            s.seqused_k.as_tensor()
        } else {
            s.tensor(param)
        };
        let Some(t) = t else { continue };
        fail_if(t.dtype != Dtype::Int32).at(F_12_DTYPE)?;
        let stride = py::stride(t, 0, F_12_INDEX, F_12_INDEX)?;
        fail_if(stride != 1).at(F_12_CONTIGUOUS)?;
    }
    if s.given(Param::CuSeqlensKNew) && !s.given(Param::K) {
        s.hazard(H_MUSA_CU_SEQLENS_K_NEW_WITHOUT_KV, &[]);
    }
    Ok(())
}

fn f13_page_table(s: &mut MusaState) -> Result<(), Fail> {
    let Some(pt) = s.tensor(Param::PageTable) else {
        return Ok(());
    };
    fail_if(pt.dtype != Dtype::Int32).at(F_13_DTYPE)?;
    fail_if(pt.stride_of(-1) != Some(1)).at(F_13_CONTIGUOUS)
}

/// The four asserts mate runs on `kv_batch_idx` and `leftpad_k` (F-14, F-15).
fn batch_vector(s: &MusaState, param: Param, sites: [&'static Site; 4]) -> Result<(), Fail> {
    let Some(t) = s.tensor(param) else {
        return Ok(());
    };
    let [device, int32, shape, contiguous] = sites;
    fail_if(!is_musa(t)).at(device)?;
    fail_if(t.dtype != Dtype::Int32).at(int32)?;
    fail_if(!shape_is(t, &[s.dims.batch_size])).at(shape)?;
    fail_if(t.stride_of(0) != Some(1)).at(contiguous)
}

fn f14_kv_batch_idx(s: &mut MusaState) -> Result<(), Fail> {
    batch_vector(
        s,
        Param::CacheBatchIdx,
        [F_14_DEVICE, F_14_DTYPE, F_14_SHAPE, F_14_CONTIGUOUS],
    )
}

fn f15_leftpad_k(s: &mut MusaState) -> Result<(), Fail> {
    batch_vector(
        s,
        Param::CacheLeftpad,
        [F_15_DEVICE, F_15_DTYPE, F_15_SHAPE, F_15_CONTIGUOUS],
    )
}

fn f16_learnable_sink(s: &mut MusaState) -> Result<(), Fail> {
    let Some(sink) = s.tensor(Param::Sinks) else {
        return Ok(());
    };
    fail_if(!shape_is(sink, &[s.dims.num_head])).at(F_16_SHAPE)?;
    fail_if(sink.dtype != Dtype::Bfloat16).at(F_16_DTYPE)
}

fn f18_cache_shapes(s: &mut MusaState) -> Result<(), Fail> {
    let d = s.dims;
    let k = s.tensor(Param::KCache).expect("K-1 checked k_cache");
    let v = s.tensor(Param::VCache).expect("K-2 checked v_cache");
    let (rows, seq) = if d.paged {
        (py::int(k.shape[0]), d.page_size)
    } else {
        (d.batch_size_k, d.seqlen_k)
    };
    fail_if(!shape_is(k, &[rows, seq, d.num_head_kv, d.head_dim])).at(F_18_K)?;
    fail_if(!shape_is(v, &[rows, seq, d.num_head_kv, d.head_dim_v])).at(F_18_V)?;
    if d.paged {
        let pt = s.tensor(Param::PageTable).expect("paged");
        fail_if(!shape_is(pt, &[d.batch_size_k, d.pages_per_seq])).at(F_18_PAGE_TABLE)?;
    }
    Ok(())
}

fn f23_f26_new_kv(s: &mut MusaState) -> Result<(), Fail> {
    let (Some(k), Some(v)) = (s.tensor(Param::K), s.tensor(Param::V)) else {
        return Ok(());
    };
    let d = s.dims;
    match s.tensor(Param::CuSeqlensKNew) {
        None => {
            let seqlen_new = py::int(py::shape_at(&k.shape, 1).at(F_23_INDEX)?);
            let rows = [d.batch_size, seqlen_new, d.num_head_kv];
            fail_if(!shape_is(k, &[rows[0], rows[1], rows[2], d.head_dim])).at(F_23_K)?;
            fail_if(!shape_is(v, &[rows[0], rows[1], rows[2], d.head_dim_v])).at(F_23_V)?;
        }
        Some(cu) => {
            let total = py::int(k.shape[0]);
            fail_if(!shape_is(k, &[total, d.num_head_kv, d.head_dim])).at(F_24_K)?;
            fail_if(!shape_is(v, &[total, d.num_head_kv, d.head_dim_v])).at(F_24_V)?;
            fail_if(!shape_is(cu, &[d.batch_size + 1])).at(F_25)?;
            // `.item()` needs the values; a spec without them gets consistent generated ones.
            let last = cu.int_values().and_then(|vals| vals.last().copied());
            fail_if(last.is_some_and(|l| l != total)).at(F_26)?;
        }
    }
    Ok(())
}

fn f27_f34_rotary(s: &mut MusaState) -> Result<(), Fail> {
    let Some(cos) = s.tensor(Param::RotaryCos) else {
        if s.given(Param::RotarySin) {
            s.hazard(H_MUSA_ROTARY_SIN_IGNORED, &[]);
        }
        return Ok(());
    };
    fail_if(!s.given(Param::K)).at(F_27)?;
    let sin = s.tensor(Param::RotarySin);
    fail_if(sin.is_none()).at(F_28)?;
    let sin = sin.expect("checked");
    let rotary_dim = py::int(py::shape_at(&cos.shape, 1).at(F_29_INDEX)?).saturating_mul(2);
    let d = s.dims;
    fail_if(rotary_dim > d.head_dim).at(F_29)?;
    fail_if(rotary_dim % 16 != 0).at(F_30)?;
    let seqlen_ro = py::int(cos.shape[0]);
    fail_if(d.paged && seqlen_ro < d.seqlen_k).at(F_31)?;
    let q = dtype(s, Param::Q);
    fail_if(Some(cos.dtype) != q || Some(sin.dtype) != q).at(F_32)?;
    fail_if(cos.shape != sin.shape || !shape_is(cos, &[seqlen_ro, rotary_dim / 2])).at(F_33)?;
    let seqlens = s.arg(Param::RotarySeqlens);
    if !seqlens.is_none() {
        // A NumPy scalar has a dtype too: a NumPy one, which `== torch.int32` is not.
        let dtype = py::dtype(seqlens).at(F_34_ATTR)?;
        match seqlens {
            PyValue::Tensor(t) if dtype == Some(Dtype::Int32) => {
                fail_if(!shape_is(t, &[d.batch_size])).at(F_34_SHAPE)?;
            }
            _ => return Err(Fail::new().at(F_34_DTYPE)),
        }
    }
    let noncontiguous: Vec<&str> = [("rotary_cos", cos), ("rotary_sin", sin)]
        .into_iter()
        .filter(|(_, t)| !t.is_contiguous())
        .map(|(n, _)| n)
        .collect();
    if !noncontiguous.is_empty() {
        s.hazard(H_MUSA_ROTARY_NONCONTIGUOUS, &[&noncontiguous.join(" and ")]);
    }
    Ok(())
}

/// L687–L717: the sink policy, attention-chunk reset and `_resolve_mask`, plus what the kernel
/// silently does with the remaining arguments.
fn policy_and_mask(s: &mut MusaState) -> Result<(), Fail> {
    let metadata_present = s.given(Param::SchedulerMetadata) || s.injection != Injection::Off;
    s.num_splits = s.arg(Param::NumSplits).as_int().unwrap_or(0);
    s.has_metadata = metadata_present;
    if s.given(Param::Sinks) {
        let discarded = match (metadata_present, s.num_splits) {
            (true, _) => Some("the scheduler_metadata".to_string()),
            (false, 0) => None,
            (false, n) => Some(format!("num_splits={n}")),
        };
        if let Some(what) = discarded {
            s.hazard(H_MUSA_SINKS_DISABLE_SPLITS, &[&what]);
        }
        s.num_splits = -1;
        s.has_metadata = false;
    }
    // `if attention_chunk > 0` compares it as a number (a one-element tensor included).
    let chunk = match window_bound(s.arg(Param::AttentionChunk)) {
        WindowBound::None => PyNum::int(0),
        WindowBound::Num(n) => n,
        WindowBound::AmbiguousTensor(numel) => {
            return Err(Fail::with([ambiguous_values(numel)]).at(F_MASK_TENSOR_BOOL));
        }
        WindowBound::Other(ty) => return Err(Fail::with([ty]).at(F_MASK_CHUNK_TYPE)),
    };
    // Without cu_seqlens_q, seqlen_q is q.shape[1]; with it, the caller's max_seqlen_q.
    let seqlen_q = if s.given(Param::CuSeqlensQ) {
        seqlen_operand(s.arg(Param::MaxSeqlenQ))
    } else {
        Ok(())
    };
    let (left, right) = &s.window_bounds;
    mask_operands(left, right, Ok(()), seqlen_q.clone()).map_err(|e| match e {
        MaskOperandError::Seqlen(ty) => Fail::with([ty]).at(F_MASK_SEQLEN_TYPE),
        MaskOperandError::Window(ty) => Fail::with([ty]).at(F_MASK_WINDOW_TYPE),
        MaskOperandError::AmbiguousTensor(n) => {
            Fail::with([ambiguous_values(n)]).at(F_MASK_TENSOR_BOOL)
        }
    })?;
    let number = |b: &WindowBound| match b {
        WindowBound::Num(n) => Some(*n),
        _ => None,
    };
    let (left, right) = (number(left), number(right));
    let d = s.dims;
    let fixed = [
        Param::CuSeqlensQ,
        Param::CuSeqlensKNew,
        Param::CacheLeftpad,
        Param::PageTable,
        Param::K,
    ]
    .iter()
    .all(|&p| !s.given(p))
        && s.seqused_k.is_none();
    s.chunk = python::reset_chunk(chunk, fixed, d.seqlen_q, d.seqlen_k);
    s.attention_chunk = s.chunk.value as i64;
    let causal = py::truth(s.arg(Param::Causal)).at(F_MASK_TENSOR_BOOL)?;
    // L68: `seqlen_q - 1` replaces a negative (or None-defaulted) right window.
    if let Err(MaskOperandError::Seqlen(ty)) = seqlen_q {
        return Err(Fail::with([ty]).at(F_MASK_SEQLEN_TYPE));
    }
    s.mask = Some(python::resolve_mask(
        d.seqlen_q, d.seqlen_k, causal, left, right, s.chunk,
    ));
    kernel_hazards(s);
    Ok(())
}

/// F-36 … F-39 with Python's semantics: `>` may raise, `or`/`and` short-circuit, and an assert
/// takes the truth value of a tensor comparison (which raises unless it holds one element).
fn f36_f39_context_parallel(s: &mut MusaState) -> Result<(), Fail> {
    let cp = &s.cp;
    let equality = |v: &PyValue, op: Cmp, rhs: i64| {
        pyvalue::compare(v, op, &PyValue::Int(rhs)).expect("`==` and `!=` compare anything")
    };
    let world_over = |rhs: i64| {
        pyvalue::compare(&cp.world_size, Cmp::Gt, &PyValue::Int(rhs))
            .map_err(|e| Fail::with(e.args.into_iter().skip(1)).at(F_36_TYPE))
    };
    let truth = |v: &PyValue| py::truth(v).at(F_CP_TENSOR_BOOL);
    fail_if(!truth(&world_over(0)?)?).at(F_36)?;
    let enabled = truth(&equality(&cp.world_size, Cmp::Ne, 1))?;
    fail_if(!enabled && !truth(&equality(&cp.rank, Cmp::Eq, 0))?).at(F_37)?;
    fail_if(enabled && cp.tot_seqused_k.is_none()).at(F_38)?;
    // `> 1` cannot raise once `> 0` has not: F-36.type is the only type error.
    let is_local = s.mask.expect("resolved before").is_local.value;
    fail_if(is_local && truth(&world_over(1)?)?).at(F_39)
}

/// Arguments the forward kernel accepts and ignores or reinterprets (§8.4, §8.6, §8.19, §8.22, §8.23).
fn kernel_hazards(s: &mut MusaState) {
    let descales: Vec<&str> = [Param::QDescale, Param::KDescale, Param::VDescale]
        .into_iter()
        .filter(|&p| s.given(p))
        .map(Param::name)
        .collect();
    if !descales.is_empty() {
        s.hazard(H_MUSA_DESCALE_IGNORED, &[&descales.join(", ")]);
    }
    if let Some(cap) = s.arg(Param::Softcap).as_number().filter(|&c| c < 0.0) {
        s.hazard(
            H_MUSA_SOFTCAP_NEGATIVE,
            &[&crate::call::python_float_repr(cap)],
        );
    }
    let margin = s.arg(Param::SmMargin).as_int().unwrap_or(0);
    if margin != 0 {
        s.hazard(H_MUSA_SM_MARGIN, &[&margin.to_string()]);
    }
    if !s.has_metadata && !s.given(Param::Sinks) && !matches!(s.num_splits, 0 | 1) {
        s.hazard(H_MUSA_NUM_SPLITS_IGNORED, &[&s.num_splits.to_string()]);
    }
    if s.has_metadata && s.num_splits > 0 {
        s.hazard(H_MUSA_NUM_SPLITS_UNCLAMPED, &[&s.num_splits.to_string()]);
    }
    let append_without_lengths =
        s.given(Param::K) && s.seqused_k.is_none() && !s.given(Param::CacheLeftpad);
    if append_without_lengths && s.given(Param::CuSeqlensQ) {
        s.hazard(H_MUSA_APPEND_BEYOND_CAPACITY, &[]);
    }
}

fn f41_metadata(s: &mut MusaState) -> Result<(), Fail> {
    if !s.has_metadata {
        return Ok(());
    }
    let needed = s.dims.batch_size.saturating_mul(4);
    match s.injection {
        Injection::Off => {
            let shape = py::shape(s.arg(Param::SchedulerMetadata)).at(F_41_ATTR)?;
            let len = py::int(py::shape_at(shape, 0).at(F_41_INDEX)?);
            fail_if(len < needed).at(F_41)?;
            s.hazard(H_MUSA_METADATA_UNCHECKED, &[]);
        }
        Injection::Mla { .. } => {
            return Err(Fail::with(["tuple".to_string(), "shape".to_string()]).at(F_41_ATTR));
        }
        Injection::Recompute { batch } => {
            fail_if(batch.saturating_mul(4) < needed).at(F_41)?;
            metadata_m_blocks(s);
        }
        Injection::Reuse { len } => {
            fail_if(len.is_some_and(|len| len < needed)).at(F_41)?;
        }
    }
    if s.injection != Injection::Off {
        metadata_blind_spots(s);
    }
    Ok(())
}

/// §4.7.8: call arguments the injected metadata was not computed from.
fn metadata_blind_spots(s: &mut MusaState) {
    let mut unseen: Vec<&str> = Vec::new();
    if !s.arg(Param::PackGqa).is_none() {
        unseen.push("pack_gqa");
    }
    if s.attention_chunk != 0 {
        unseen.push("attention_chunk");
    }
    if s.given(Param::CacheLeftpad) {
        unseen.push("cache_leftpad");
    }
    if !s.arg(Param::SmMargin).eq_int(0) {
        unseen.push("sm_margin");
    }
    if s.given(Param::K) && !s.given(Param::CuSeqlensKNew) {
        unseen.push("the appended k/v length");
    }
    if !unseen.is_empty() {
        s.hazard(H_MUSA_METADATA_IGNORES_ARGS, &[&unseen.join(", ")]);
    }
}

/// m-blocks for `rows` query rows: `ceil(rows * (packed ? ratio : 1) / tile_m)`.
fn m_blocks(rows: i64, ratio: i64, config: &mate::KernelConfig) -> i64 {
    let packed = if config.pack_gqa {
        rows.saturating_mul(ratio)
    } else {
        rows
    };
    let tile = py::int(config.tile_m);
    packed.saturating_add(tile - 1) / tile
}

/// §6.11 (iii) for recomputed metadata, on the longest query (`max_seqlen_q`): the metadata's
/// m-block count must cover the call's.
fn metadata_m_blocks(s: &mut MusaState) {
    let (Some(b), Ok(call)) = (s.backend.as_ref(), call_config(s)) else {
        return;
    };
    let Some(layer) = b.layer.as_ref() else {
        return;
    };
    let m = s.dims.seqlen_q;
    let meta_ratio = layer
        .tp_q_head_num
        .checked_div(layer.tp_k_head_num)
        .unwrap_or(0);
    let dims = |d: i64| usize::try_from(d).unwrap_or(0);
    let Ok(meta) = mate::kernel_config(
        dims(layer.qk_head_dim),
        dims(layer.v_head_dim),
        m,
        meta_ratio,
        None,
    ) else {
        return;
    };
    let call_ratio = s.dims.num_head.checked_div(s.dims.num_head_kv).unwrap_or(0);
    let (scheduled, needed) = (
        m_blocks(m, meta_ratio, &meta),
        m_blocks(m, call_ratio, &call),
    );
    if scheduled < needed {
        s.hazard(
            H_MUSA_METADATA_M_BLOCKS,
            &[&scheduled.to_string(), &m.to_string(), &needed.to_string()],
        );
    }
}

fn to_usize(x: i64) -> usize {
    usize::try_from(x).unwrap_or(0)
}

/// The parameters an accepted fmha call runs with.
pub(super) fn resolved(s: &MusaState) -> Resolved {
    let d = &s.dims;
    let varlen_q = s.given(Param::CuSeqlensQ);
    let mask = s
        .mask
        .expect("an accepted fmha call has resolved its mask")
        .resolved(s.attention_chunk);
    let config = s
        .config
        .expect("an accepted fmha call has a kernel configuration");
    Resolved {
        batch_size: to_usize(d.batch_size),
        seqlen_q: to_usize(d.seqlen_q),
        total_q: to_usize(d.total_q),
        seqlen_k: to_usize(d.seqlen_k),
        num_heads: to_usize(d.num_head),
        num_heads_k: to_usize(d.num_head_kv),
        head_size: to_usize(d.head_dim),
        head_size_v: to_usize(d.head_dim_v),
        head_size_rounded: config.head_dim_rounded,
        head_size_v_rounded: config.head_dim_v_rounded,
        paged: d.paged,
        page_size: to_usize(d.page_size),
        varlen_q,
        is_causal: mask.is_causal,
        is_local: mask.is_local,
        window_left: mask.window_left,
        window_right: mask.window_right,
        attention_chunk: s.attention_chunk,
        softcap: s.arg(Param::Softcap).as_number().unwrap_or(0.0),
        softmax_scale: s.softmax_scale,
        num_splits: if s.has_metadata { s.num_splits } else { 1 },
        pack_gqa: config.pack_gqa,
        tile_m: config.tile_m,
        tile_n: config.tile_n,
        lse_layout: if varlen_q {
            LseLayout::HeadTotal
        } else {
            LseLayout::BatchHeadSeq
        },
        mla_decode: false,
    }
}
