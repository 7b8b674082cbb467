//! The C++ `mha_fwd` of FlashAttention-3 `hopper/`, shared by `fa3`, `fa3-stable` and `sgl-kernel`
//! (whose sgl-flash-attn@f866ec34 copy has the same checks plus a sinks block, sgl-kernel-cuda.md E.2).
//!
//! Modelled device: one Hopper H100 SXM (sm90, 132 SMs); every build feature enabled (upstream:
//! `setup.py` defaults; sgl-kernel: only DISABLE_BACKWARD/DROPOUT/UNEVEN_K/SM8x, none of which
//! touches `mha_fwd`'s checks). Checks that cannot fire under these assumptions or from
//! `flash_attn_with_kvcache` (which always passes `out`, `cu_seqlens_k`, `seqused_q`, `max_seqlen_k`
//! as `None` and fixes the last-dimension stride of q/k/v/k_new/v_new/page_table) are not listed:
//! B.1, B.3, B.9, B.10c, B.12, B.16b, B.19, B.22, B.25, B.26, B.27h, B.29d, B.34 of cuda-fa3.md.
//! Site ids follow that section's numbering (`fa3.B-17a` is the first shape check of B.17).

use super::cuda_state::{Arg, CudaState, Flavour, MhaResolution, MhaSizes, SequsedK, ensure};
use crate::call::python;
use crate::call::{Device, Dtype, LseLayout, Param, PyValue, TensorArg};
use crate::hopper::{
    Fa3Layout, MODELLED_ARCH, MaskResolution, MaskShape, NUM_SM, as_c_int, ceil_div,
    num_splits_heuristic, resolve_mask, round_up_headdim, round_up_headdimv, should_pack_gqa,
    tile_size_fwd_sm90,
};
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::registry::Site;
use crate::validate::registry::cuda::*;
use crate::validate::{Rejection, Resolved};

/// `get_max_headdim()` with every head dimension compiled.
const MAX_HEADDIM: i64 = 256;
/// Stand-in for the build machine's absolute path that `__FILE__` expands to in the stable build
/// (`setup.py:217` passes absolute source paths, so the real prefix is build-dependent).
pub const STABLE_FILE: &str = "<build>/hopper/flash_api_stable.cpp";

fn on_cuda(s: &CudaState, arg: Arg) -> Result<(), Fail> {
    ensure(s.device(arg) == Device::Cuda)
}

fn contiguous(s: &CudaState, arg: Arg) -> Result<(), Fail> {
    ensure(s.is_contiguous(arg))
}

fn dtype_is(s: &CudaState, arg: Arg, dtype: Dtype) -> Result<(), Fail> {
    ensure(s.required(arg).dtype == dtype)
}

fn q_dtype(s: &CudaState) -> Dtype {
    s.required(Arg::Q).dtype
}

/// `CHECK_SHAPE(x, expected...)`. Legacy fails with one message for any difference; the stable
/// build reports the rank, then the first differing dimension (cuda-fa3.md 0.5), which is kept
/// in the state for [`render`].
fn shape(s: &mut CudaState, arg: Arg, expected: &[i64]) -> Result<(), Fail> {
    let t = s.required(arg);
    let name = arg.cpp();
    let detail = if t.ndim() != expected.len() {
        Some(format!(
            "{name} must have {} dimensions, got {}",
            expected.len(),
            t.ndim()
        ))
    } else {
        t.shape
            .iter()
            .zip(expected)
            .enumerate()
            .find(|(_, (actual, want))| **actual as i64 != **want)
            .map(|(i, (actual, want))| {
                format!("{name} dimension {i} must have size {want}, got {actual}")
            })
    };
    match detail {
        None => Ok(()),
        Some(detail) => {
            s.stable_shape_detail = Some(detail);
            Err(Fail::new())
        }
    }
}

/// An integer argument as the operator converted it (`operator.index`, else `int()`): an `int`,
/// a NumPy scalar, or a one-element tensor (whose value the spec must give; without values it
/// counts as -1, i.e. "unbounded").
pub fn op_int(value: &PyValue) -> i64 {
    match value {
        PyValue::Tensor(t) if t.values.is_none() => -1,
        _ => python::index(value)
            .or_else(|| python::float(value).map(|x| x as i64))
            .unwrap_or(0),
    }
}

/// The C++ values torch's casters give the operator (the argument-type check admitted `value`):
/// `float(x)`, `bool(x)`.
fn op_float(value: &PyValue) -> f64 {
    python::float(value).unwrap_or(0.0)
}

fn op_bool(value: &PyValue) -> bool {
    python::truth(value).unwrap_or(false)
}

macro_rules! check {
    ($name:literal, [$($site:expr),*], $run:expr) => {
        Check { name: $name, sites: &[$($site),*], run: $run }
    };
}

/// `mha_fwd` from its first check to the fp8 descales (`flash_api.cpp:L711-L1146`).
pub static MHA_FWD: Layer<CudaState> = Layer {
    name: "mha_fwd",
    checks: &[
        check!("q dtype", [FA3_B_2], |s| ensure(
            q_dtype(s).is_attention_input()
        )),
        check!("k dtype", [FA3_B_4], |s| ensure(
            s.required(Arg::K).dtype == q_dtype(s)
        )),
        check!("v dtype", [FA3_B_5], |s| ensure(
            s.required(Arg::V).dtype == q_dtype(s)
        )),
        check!("q device", [FA3_B_6], |s| on_cuda(s, Arg::Q)),
        check!("k device", [FA3_B_7], |s| on_cuda(s, Arg::K)),
        check!("v device", [FA3_B_8], |s| on_cuda(s, Arg::V)),
        check!("page_table", [FA3_B_10A, FA3_B_10B], |s| {
            if s.has(Arg::PageTable) {
                on_cuda(s, Arg::PageTable).at(FA3_B_10A)?;
                dtype_is(s, Arg::PageTable, Dtype::Int32).at(FA3_B_10B)?;
            }
            Ok(())
        }),
        check!(
            "cu_seqlens_q",
            [FA3_B_11A, FA3_B_11B, FA3_B_11C, FA3_B_11D],
            |s| {
                if s.has(Arg::CuSeqlensQ) {
                    on_cuda(s, Arg::CuSeqlensQ).at(FA3_B_11A)?;
                    contiguous(s, Arg::CuSeqlensQ).at(FA3_B_11B)?;
                    dtype_is(s, Arg::CuSeqlensQ, Dtype::Int32).at(FA3_B_11C)?;
                    ensure(!s.py(Param::MaxSeqlenQ).is_none()).at(FA3_B_11D)?;
                }
                Ok(())
            }
        ),
        check!("derived sizes", [ATEN_DIM_RANGE], derive_sizes),
        check!("batch sizes", [FA3_B_13], |s| {
            let z = &s.sizes;
            ensure(s.has(Arg::KvBatchIdx) || z.batch_size == z.batch_size_k)
        }),
        check!("head size", [FA3_B_14], |s| ensure(
            s.sizes.head_size <= MAX_HEADDIM
        )),
        check!("heads divide", [FA3_B_15], |s| {
            let z = &s.sizes;
            if z.num_heads_k == 0 {
                // Integer division by zero in C++: the process dies, nothing is raised.
                s.hazard(H_CUDA_HEADS_K_ZERO, &[]);
                return Ok(());
            }
            ensure(z.num_heads % z.num_heads_k == 0)
        }),
        check!("different V head dim", [FA3_B_16A, FA3_B_16C], |s| {
            let (d, dv) = (s.sizes.head_size, s.sizes.head_size_v);
            if dv != d {
                ensure((d > 128 && d <= 192 && dv > 96 && dv <= 128) || (d <= 64 && dv <= 512))
                    .at(FA3_B_16A)?;
                // B.16b (`Only Hopper supports different V headdim`) passes on sm90.
                if dv > 256 {
                    ensure(matches!(q_dtype(s), Dtype::Float16 | Dtype::Bfloat16)).at(FA3_B_16C)?;
                }
            }
            Ok(())
        }),
        check!("q shape", [FA3_B_17A, FA3_B_17B, FA3_B_17C], |s| {
            let z = s.sizes.clone();
            if s.has(Arg::CuSeqlensQ) {
                shape(s, Arg::Q, &[z.total_q, z.num_heads, z.head_size]).at(FA3_B_17B)?;
                shape(s, Arg::CuSeqlensQ, &[z.batch_size + 1]).at(FA3_B_17C)
            } else {
                let expected = [z.batch_size, z.seqlen_q, z.num_heads, z.head_size];
                shape(s, Arg::Q, &expected).at(FA3_B_17A)
            }
        }),
        check!(
            "cache shapes",
            [FA3_B_18A, FA3_B_18B, FA3_B_18C, FA3_B_18D, FA3_B_18E],
            |s| {
                let z = s.sizes.clone();
                if s.has(Arg::PageTable) {
                    let k = [z.num_pages, z.page_size, z.num_heads_k, z.head_size];
                    shape(s, Arg::K, &k).at(FA3_B_18C)?;
                    let v = [z.num_pages, z.page_size, z.num_heads_k, z.head_size_v];
                    shape(s, Arg::V, &v).at(FA3_B_18D)?;
                    let pt = [z.batch_size_k, z.max_num_pages_per_seq];
                    shape(s, Arg::PageTable, &pt).at(FA3_B_18E)
                } else {
                    let k = [z.batch_size_k, z.seqlen_k, z.num_heads_k, z.head_size];
                    shape(s, Arg::K, &k).at(FA3_B_18A)?;
                    let v = [z.batch_size_k, z.seqlen_k, z.num_heads_k, z.head_size_v];
                    shape(s, Arg::V, &v).at(FA3_B_18B)
                }
            }
        ),
        check!(
            "seqused_k",
            [FA3_B_20A, FA3_B_20B, FA3_B_20C, FA3_B_20D],
            |s| per_batch_int32(
                s,
                Arg::SequsedK,
                [FA3_B_20A, FA3_B_20B, FA3_B_20C, FA3_B_20D]
            )
        ),
        check!(
            "leftpad_k",
            [FA3_B_21A, FA3_B_21B, FA3_B_21C, FA3_B_21D],
            |s| per_batch_int32(
                s,
                Arg::LeftpadK,
                [FA3_B_21A, FA3_B_21B, FA3_B_21C, FA3_B_21D]
            )
        ),
        check!("head size alignment", [FA3_B_23, FA3_B_24], |s| {
            let alignment = if q_dtype(s) == Dtype::Float8E4m3fn {
                16
            } else {
                8
            };
            let fail = |site| Err(Fail::with([alignment.to_string()]).at(site));
            if s.sizes.head_size % alignment != 0 {
                return fail(FA3_B_23);
            }
            if s.sizes.head_size_v % alignment != 0 {
                return fail(FA3_B_24);
            }
            Ok(())
        }),
        check!(
            "k_new",
            [
                FA3_B_27A,
                FA3_B_27B,
                FA3_B_27C,
                FA3_B_27D1,
                FA3_B_27D2,
                FA3_B_27D3,
                FA3_B_27E,
                FA3_B_27F,
                FA3_B_27G1,
                FA3_B_27G2,
                ATEN_DIM_RANGE,
                FA3_B_27I1,
                FA3_B_27I2,
                FA3_B_27I3,
                FA3_B_27I4,
                FA3_B_27I5
            ],
            check_k_new
        ),
        check!("heuristics", [], |s| {
            resolve(s);
            Ok(())
        }),
        check!(
            "scheduler_metadata",
            [FA3_B_28A, FA3_B_28B, FA3_B_28C, FA3_B_28D],
            |s| {
                if !s.has(Arg::SchedulerMetadata) {
                    return Ok(());
                }
                if !s.resolution.metadata_needed {
                    s.hazard(H_CUDA_SCHEDULER_METADATA_IGNORED, &[]);
                    return Ok(());
                }
                on_cuda(s, Arg::SchedulerMetadata).at(FA3_B_28A)?;
                let size = s.resolution.metadata_size;
                shape(s, Arg::SchedulerMetadata, &[size]).at(FA3_B_28B)?;
                contiguous(s, Arg::SchedulerMetadata).at(FA3_B_28C)?;
                dtype_is(s, Arg::SchedulerMetadata, Dtype::Int32).at(FA3_B_28D)
            }
        ),
        check!(
            "q_v",
            [
                FA3_B_29A,
                FA3_B_29B,
                FA3_B_29C,
                FA3_B_29E,
                FA3_B_29F,
                ATEN_DIM_NO_DIMS,
                FA3_B_29G,
                FA3_B_29H1,
                FA3_B_29H2
            ],
            check_q_v
        ),
        check!(
            "rotary",
            [
                FA3_B_30A,
                FA3_B_30B1,
                FA3_B_30B2,
                ATEN_DIM_RANGE,
                FA3_B_30C,
                FA3_B_30D,
                FA3_B_30E,
                FA3_B_30F,
                FA3_B_30G,
                FA3_B_30H,
                FA3_B_30I1,
                FA3_B_30I2,
                FA3_B_30J,
                FA3_B_30K,
                FA3_B_30L1,
                FA3_B_30L2,
                FA3_B_30L3,
                FA3_B_30L4
            ],
            check_rotary
        ),
        check!("kv_batch_idx", [FA3_B_31A, FA3_B_31B, FA3_B_31C], |s| {
            if s.has(Arg::KvBatchIdx) {
                on_cuda(s, Arg::KvBatchIdx).at(FA3_B_31A)?;
                contiguous(s, Arg::KvBatchIdx).at(FA3_B_31B)?;
                dtype_is(s, Arg::KvBatchIdx, Dtype::Int32).at(FA3_B_31C)?;
            }
            Ok(())
        }),
        check!("num_splits", [FA3_B_32], |s| {
            let n = s.resolution.num_splits;
            ensure(n <= 256)
        }),
        check!(
            "fp8 descales",
            [
                FA3_B_33A,
                FA3_B_33B,
                ATEN_SCALAR_TYPE,
                FA3_B_33C,
                FA3_B_33D,
                FA3_B_33E,
                FA3_B_33F
            ],
            check_descales
        ),
    ],
};

/// The sinks block sgl-flash-attn@f866ec34 adds after the descales (sgl-kernel-cuda.md E.2).
pub static SINKS: Layer<CudaState> = Layer {
    name: "mha_fwd sinks (sgl-flash-attn)",
    checks: &[check!(
        "sinks",
        [SGL_E3_29A, SGL_E3_29B, SGL_E3_29C, SGL_E3_29D],
        |s| {
            if s.has(Arg::Sinks) {
                dtype_is(s, Arg::Sinks, Dtype::Bfloat16).at(SGL_E3_29A)?;
                on_cuda(s, Arg::Sinks).at(SGL_E3_29B)?;
                let heads = s.sizes.num_heads;
                shape(s, Arg::Sinks, &[heads]).at(SGL_E3_29C)?;
                contiguous(s, Arg::Sinks).at(SGL_E3_29D)?;
            }
            Ok(())
        }
    )],
};

/// The launch: `run_mha_fwd`'s `params.num_splits >= 1`, then the empty-KV fast path.
pub static LAUNCH: Layer<CudaState> = Layer {
    name: "mha_fwd launch",
    checks: &[check!("run_mha_fwd", [FA3_B_35], |s| {
        let z = &s.sizes;
        if z.total_q > 0 && z.total_k + z.total_k_new > 0 && z.num_heads_k > 0 {
            ensure(s.resolution.num_splits >= 1)
        } else {
            if z.total_q > 0 && z.num_heads_k > 0 {
                s.hazard(H_CUDA_EMPTY_KV, &[]);
            }
            Ok(())
        }
    })],
};

/// Sizes read from the tensors, in source order (each `size()` can raise `IndexError`).
fn derive_sizes(s: &mut CudaState) -> Result<(), Fail> {
    let q = s.required(Arg::Q);
    let varlen_q = s.has(Arg::CuSeqlensQ);
    let paged = s.has(Arg::PageTable);
    let mut z = MhaSizes::default();
    // `q.sizes()[i]` is an unchecked read; q has rank >= 1 here (the wrapper read q.shape[-1]).
    let unchecked = |i: usize| q.shape.get(i).copied().unwrap_or(0) as i64;
    if varlen_q {
        z.batch_size = as_c_int(s.size(Arg::CuSeqlensQ, 0)? - 1);
        z.seqlen_q = as_c_int(op_int(s.py(Param::MaxSeqlenQ)));
        z.total_q = unchecked(0);
    } else {
        z.batch_size = unchecked(0);
        z.seqlen_q = unchecked(1);
        z.total_q = z.batch_size * z.seqlen_q;
    }
    z.num_heads = s.size(Arg::Q, -2)?;
    z.head_size = s.size(Arg::Q, -1)?;
    z.head_size_v = s.size(Arg::V, -1)?;
    if paged {
        z.max_num_pages_per_seq = s.size(Arg::PageTable, 1)?;
        z.num_pages = s.size(Arg::K, 0)?;
        z.page_size = s.size(Arg::K, 1)?;
        z.seqlen_k = z.max_num_pages_per_seq * z.page_size;
    } else {
        z.page_size = 1;
        z.seqlen_k = s.size(Arg::K, 1)?;
    }
    z.total_k = z.batch_size * s.size(Arg::K, 1)?;
    z.num_heads_k = s.size(Arg::K, -2)?;
    z.batch_size_k = if paged {
        s.size(Arg::PageTable, 0)?
    } else {
        s.size(Arg::K, 0)?
    };
    s.sizes = z;
    Ok(())
}

/// `seqused_k` / `leftpad_k`: dtype first, then device, contiguity, shape (B.20, B.21).
fn per_batch_int32(s: &mut CudaState, arg: Arg, sites: [&'static Site; 4]) -> Result<(), Fail> {
    if !s.has(arg) {
        return Ok(());
    }
    dtype_is(s, arg, Dtype::Int32).at(sites[0])?;
    on_cuda(s, arg).at(sites[1])?;
    contiguous(s, arg).at(sites[2])?;
    let b = s.sizes.batch_size;
    shape(s, arg, &[b]).at(sites[3])
}

fn check_k_new(s: &mut CudaState) -> Result<(), Fail> {
    if !s.has(Arg::KNew) {
        if s.has(Arg::VNew) {
            s.hazard(H_CUDA_V_WITHOUT_K, &[]);
        }
        if s.has(Arg::CuSeqlensKNew) {
            s.hazard(H_CUDA_CU_SEQLENS_K_NEW_WITHOUT_K, &[]);
        }
        return Ok(());
    }
    ensure(s.has(Arg::VNew)).at(FA3_B_27A)?;
    ensure(s.has(Arg::SequsedK)).at(FA3_B_27B)?;
    ensure(s.sizes.seqlen_q <= s.sizes.seqlen_k).at(FA3_B_27C)?;
    let varlen_new = s.has(Arg::CuSeqlensKNew);
    if varlen_new {
        on_cuda(s, Arg::CuSeqlensKNew).at(FA3_B_27D1)?;
        contiguous(s, Arg::CuSeqlensKNew).at(FA3_B_27D2)?;
        dtype_is(s, Arg::CuSeqlensKNew, Dtype::Int32).at(FA3_B_27D3)?;
    }
    let q_type = q_dtype(s);
    dtype_is(s, Arg::KNew, q_type).at(FA3_B_27E)?;
    dtype_is(s, Arg::VNew, q_type).at(FA3_B_27F)?;
    on_cuda(s, Arg::KNew).at(FA3_B_27G1)?;
    on_cuda(s, Arg::VNew).at(FA3_B_27G2)?;
    // B.27h (last-dimension strides) cannot fail: both wrappers made k/v contiguous.
    let z = s.sizes.clone();
    if varlen_new {
        let total = s.size(Arg::KNew, 0)?;
        s.sizes.total_k_new = total;
        shape(s, Arg::KNew, &[total, z.num_heads_k, z.head_size]).at(FA3_B_27I3)?;
        shape(s, Arg::VNew, &[total, z.num_heads_k, z.head_size_v]).at(FA3_B_27I4)?;
        shape(s, Arg::CuSeqlensKNew, &[z.batch_size + 1]).at(FA3_B_27I5)
    } else {
        let seqlen_new = s.size(Arg::KNew, 1)?;
        s.sizes.seqlen_k_new = seqlen_new;
        s.sizes.total_k_new = z.batch_size * seqlen_new;
        let k = [z.batch_size, seqlen_new, z.num_heads_k, z.head_size];
        shape(s, Arg::KNew, &k).at(FA3_B_27I1)?;
        let v = [z.batch_size, seqlen_new, z.num_heads_k, z.head_size_v];
        shape(s, Arg::VNew, &v).at(FA3_B_27I2)
    }
}

fn check_q_v(s: &mut CudaState) -> Result<(), Fail> {
    if !s.has(Arg::QV) {
        return Ok(());
    }
    let z = s.sizes.clone();
    ensure(z.head_size <= 64).at(FA3_B_29A)?;
    ensure(z.head_size_v >= 256).at(FA3_B_29B)?;
    let q_type = q_dtype(s);
    ensure(matches!(q_type, Dtype::Float16 | Dtype::Bfloat16)).at(FA3_B_29C)?;
    // B.29d (`params.arch == 90`) passes on sm90.
    dtype_is(s, Arg::QV, q_type).at(FA3_B_29E)?;
    on_cuda(s, Arg::QV).at(FA3_B_29F)?;
    // q_v is not passed through maybe_contiguous by either wrapper.
    ensure(s.stride_last(Arg::QV)? == 1).at(FA3_B_29G)?;
    if s.has(Arg::CuSeqlensQ) {
        let expected = [z.total_q, z.num_heads, z.head_size_v];
        shape(s, Arg::QV, &expected).at(FA3_B_29H2)
    } else {
        let expected = [z.batch_size, z.seqlen_q, z.num_heads, z.head_size_v];
        shape(s, Arg::QV, &expected).at(FA3_B_29H1)
    }
}

fn check_rotary(s: &mut CudaState) -> Result<(), Fail> {
    if !s.has(Arg::RotaryCos) {
        if s.has(Arg::RotarySin) {
            s.hazard(H_CUDA_ROTARY_IGNORED, &["rotary_sin"]);
        }
        if s.has(Arg::SeqlensRotary) {
            s.hazard(H_CUDA_ROTARY_SEQLENS_UNUSED, &[]);
        }
        return Ok(());
    }
    ensure(s.has(Arg::KNew)).at(FA3_B_30A)?;
    on_cuda(s, Arg::RotaryCos).at(FA3_B_30B1)?;
    contiguous(s, Arg::RotaryCos).at(FA3_B_30B2)?;
    let rotary_dim = as_c_int(s.size(Arg::RotaryCos, 1)? * 2);
    ensure(rotary_dim <= s.sizes.head_size).at(FA3_B_30C)?;
    ensure(rotary_dim % 16 == 0).at(FA3_B_30D)?;
    let seqlen_ro = s.size(Arg::RotaryCos, 0)?;
    if s.has(Arg::PageTable) {
        ensure(seqlen_ro >= s.sizes.seqlen_k).at(FA3_B_30E)?;
    }
    shape(s, Arg::RotaryCos, &[seqlen_ro, rotary_dim / 2]).at(FA3_B_30F)?;
    let q_type = q_dtype(s);
    dtype_is(s, Arg::RotaryCos, q_type).at(FA3_B_30G)?;
    ensure(s.has(Arg::RotarySin)).at(FA3_B_30H)?;
    on_cuda(s, Arg::RotarySin).at(FA3_B_30I1)?;
    contiguous(s, Arg::RotarySin).at(FA3_B_30I2)?;
    shape(s, Arg::RotarySin, &[seqlen_ro, rotary_dim / 2]).at(FA3_B_30J)?;
    dtype_is(s, Arg::RotarySin, q_type).at(FA3_B_30K)?;
    if s.has(Arg::SeqlensRotary) {
        on_cuda(s, Arg::SeqlensRotary).at(FA3_B_30L1)?;
        contiguous(s, Arg::SeqlensRotary).at(FA3_B_30L2)?;
        dtype_is(s, Arg::SeqlensRotary, Dtype::Int32).at(FA3_B_30L3)?;
        let b = s.sizes.batch_size;
        shape(s, Arg::SeqlensRotary, &[b]).at(FA3_B_30L4)?;
    }
    Ok(())
}

fn check_descales(s: &mut CudaState) -> Result<(), Fail> {
    let descales = [
        (Arg::QDescale, FA3_B_33A, FA3_B_33B),
        (Arg::KDescale, FA3_B_33C, FA3_B_33D),
        (Arg::VDescale, FA3_B_33E, FA3_B_33F),
    ];
    if q_dtype(s) != Dtype::Float8E4m3fn {
        for (arg, _, _) in descales {
            if s.has(arg) {
                s.hazard(H_CUDA_DESCALE_IGNORED, &[arg.python().name()]);
            }
        }
        return Ok(());
    }
    let expected = [s.sizes.batch_size, s.sizes.num_heads_k];
    for (arg, device_site, shape_site) in descales {
        if !s.has(arg) {
            continue;
        }
        on_cuda(s, arg).at(device_site)?;
        shape(s, arg, &expected).at(shape_site)?;
        // `data_ptr<float>()`: an implicit dtype check of the legacy build only (cuda-fa3.md 0.6).
        let dtype = s.required(arg).dtype;
        if s.flavour == Flavour::Legacy && dtype != Dtype::Float32 {
            return Err(
                Fail::with(["Float".to_string(), dtype.aten_name().to_string()])
                    .at(ATEN_SCALAR_TYPE),
            );
        }
    }
    Ok(())
}

/// Window/causal resolution (D.1), tiles (D.3), paged-KV TMA (D.4), splits (D.5), pack_gqa (D.6)
/// and the scheduler-metadata size (C.3), for the modelled sm90 device.
fn resolve(s: &mut CudaState) {
    let z = s.sizes.clone();
    let paged = s.has(Arg::PageTable);
    let MaskResolution {
        is_causal,
        is_local,
        window_left: wl,
        window_right: wr,
        attention_chunk: chunk,
    } = resolve_mask(
        MaskShape {
            seqlen_q: z.seqlen_q,
            seqlen_k: z.seqlen_k,
            head_size: z.head_size,
            paged,
        },
        op_bool(s.py(Param::Causal)),
        op_int(&s.window[0]),
        op_int(&s.window[1]),
        op_int(&s.attention_chunk),
    );
    let mut window_left = if wl < 0 { z.seqlen_k - 1 } else { wl };
    let mut window_right = if wr < 0 { z.seqlen_q - 1 } else { wr };
    if chunk > 0 {
        window_left = window_left.min(chunk - 1);
        window_right = window_right.min(chunk - 1);
    }
    let softcap = op_float(s.py(Param::Softcap));
    if softcap < 0.0 {
        s.hazard(H_CUDA_SOFTCAP_NEGATIVE, &[]);
    }
    let is_varlen = s.has(Arg::CuSeqlensQ) || s.has(Arg::SequsedK) || s.has(Arg::LeftpadK);
    let elt = if q_dtype(s) == Dtype::Float8E4m3fn {
        1
    } else {
        2
    };
    let d_rounded = round_up_headdim(z.head_size);
    let dv_rounded = if z.head_size_v == z.head_size {
        d_rounded
    } else {
        round_up_headdimv(z.head_size_v)
    };
    let group = if z.num_heads_k > 0 {
        z.num_heads / z.num_heads_k
    } else {
        0
    };
    let has_softcap = softcap > 0.0;
    let pagedkv_tma = paged && !s.has(Arg::LeftpadK) && !s.has(Arg::KNew) && {
        let (bm, bn) = tile_size_fwd_sm90(
            d_rounded,
            dv_rounded,
            is_causal,
            is_local,
            elt,
            false,
            has_softcap,
        );
        bn > 0 && z.page_size % bn == 0 && z.seqlen_q * group > bm
    };
    let paged_non_tma = paged && !pagedkv_tma;
    let (tile_m, tile_n) = tile_size_fwd_sm90(
        d_rounded,
        dv_rounded,
        is_causal,
        is_local,
        elt,
        paged_non_tma,
        has_softcap,
    );
    let requested = op_int(s.py(Param::NumSplits));
    let num_sm = as_c_int(NUM_SM - op_int(s.py(Param::SmMargin)));
    let num_splits = if requested <= 0 {
        let seqlen_k_loaded = if is_local {
            0.max(z.seqlen_k.min(window_right + window_left + 1 + tile_m))
        } else {
            z.seqlen_k
        };
        let n_blocks = ceil_div(seqlen_k_loaded, tile_n);
        let m_blocks = ceil_div(z.seqlen_q * group, tile_m);
        let kv_bytes = as_c_int(z.seqlen_k * (z.head_size + z.head_size_v) * elt);
        let total_m = if is_varlen { 1 } else { z.batch_size } * z.num_heads_k * m_blocks;
        num_splits_heuristic(
            total_m,
            num_sm,
            n_blocks,
            m_blocks,
            kv_bytes,
            is_causal || is_local,
            128,
        )
    } else {
        as_c_int(requested)
    };
    let pack_gqa = match s.py(Param::PackGqa) {
        PyValue::None => {
            paged_non_tma
                || num_splits > 1
                || (z.num_heads != z.num_heads_k
                    && (s.has(Arg::CuSeqlensQ) || should_pack_gqa(z.seqlen_q, group, tile_m)))
        }
        explicit => op_bool(explicit),
    };
    // A batch below 0 (`cu_seqlens_q` of size 0) rounds to 0 like 0 does.
    let layout = Fa3Layout::of_mha_fwd(
        usize::try_from(z.batch_size).unwrap_or(0),
        is_causal,
        is_local,
        is_varlen,
        num_splits,
        MODELLED_ARCH,
    );
    s.resolution = MhaResolution {
        is_causal,
        is_local,
        window_left,
        window_right,
        attention_chunk: chunk,
        softcap,
        is_varlen,
        pagedkv_tma,
        num_splits,
        pack_gqa,
        tile_m,
        tile_n,
        head_size_rounded: d_rounded,
        head_size_v_rounded: dv_rounded,
        metadata_needed: layout.read_by_mha_fwd(),
        metadata_size: layout.size() as i64,
    };
}

/// What an accepted call resolves to.
pub fn resolved(s: &CudaState) -> Resolved {
    let z = &s.sizes;
    let r = &s.resolution;
    let varlen_q = s.has(Arg::CuSeqlensQ);
    Resolved {
        batch_size: z.batch_size.max(0) as usize,
        seqlen_q: z.seqlen_q.max(0) as usize,
        total_q: z.total_q.max(0) as usize,
        seqlen_k: z.seqlen_k.max(0) as usize,
        num_heads: z.num_heads.max(0) as usize,
        num_heads_k: z.num_heads_k.max(0) as usize,
        head_size: z.head_size.max(0) as usize,
        head_size_v: z.head_size_v.max(0) as usize,
        head_size_rounded: r.head_size_rounded as usize,
        head_size_v_rounded: r.head_size_v_rounded as usize,
        paged: s.has(Arg::PageTable),
        page_size: z.page_size.max(0) as usize,
        varlen_q,
        is_causal: r.is_causal,
        is_local: r.is_local,
        window_left: r.window_left,
        window_right: r.window_right,
        attention_chunk: r.attention_chunk,
        softcap: r.softcap,
        softmax_scale: s.softmax_scale,
        num_splits: r.num_splits,
        pack_gqa: r.pack_gqa,
        tile_m: r.tile_m as usize,
        tile_n: r.tile_n as usize,
        lse_layout: if varlen_q {
            LseLayout::HeadTotal
        } else {
            LseLayout::BatchHeadSeq
        },
        mla_decode: false,
    }
}

/// The text Python sees for a rejection by this layer: the legacy message as is; the stable
/// build's `"<func>, <FILE>:<LINE>, <message>"` with its own `CHECK_SHAPE` wording.
pub fn render(s: &CudaState, mut rejection: Rejection) -> Rejection {
    if s.flavour == Flavour::Stable {
        if let Some(location) = crate::validate::registry::cuda::stable_location(rejection.site) {
            let body = match (&s.stable_shape_detail, location.default_message) {
                (_, true) => String::new(),
                (Some(detail), false) => detail.clone(),
                (None, false) => rejection.message,
            };
            rejection.message = format!(
                "{}, {}:{}, {}",
                location.function, STABLE_FILE, location.line, body
            );
        }
    }
    rejection
}

/// A tensor the wrapper builds from an `int` `cache_seqlens`: `torch.full((n,), value,
/// dtype=torch.int32, device=k_cache.device)`. Values are kept up to 65536 entries (enough for
/// every check; the reference materialises its own).
pub fn expanded_seqlens(n: usize, value: i64, device: Option<Device>) -> SequsedK {
    let mut t = TensorArg::with_ints(Dtype::Int32, &[n], vec![value; n.min(1 << 16)]);
    if n > 1 << 16 {
        t.values = None;
    }
    t.device = device;
    SequsedK::Expanded(PyValue::Tensor(t))
}
