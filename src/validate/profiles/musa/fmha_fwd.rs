//! mate v0.2.2 below the SGLang wrapper: `mha_interface.flash_attn_with_kvcache` (§5.3), its MLA
//! branch (§5.4), `_fmha_fwd` (§5.5), the kernel configuration (§5.6), the JIT build (§5.7) and the
//! combine (§5.8). Parameters are named as the SGLang wrapper names them; comments give mate's name
//! where it differs (`k_cache` is mate's `k`, `k` is `k_new`, `cache_seqlens` is `seqused_k`, ...).

use super::injection::{
    MaskOperandError, WindowBound, ambiguous_values, mask_operands, py_number, seqlen_operand,
    window_bound, window_pair,
};
use super::{FwdDims, Injection, MusaState, fail_if, int32_vector, is_musa};
use crate::call::python::{self as pyvalue, Cmp, FfiType};
use crate::call::{Dtype, LseLayout, NumpyScalar, NumpyValue, Param, PyValue, TensorArg};
use crate::mate;
use crate::mate::python::{self, PyNum, Truth, TruthKind};
use crate::validate::Resolved;
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py::{self, SubscriptSites};
use crate::validate::registry::Site;
use crate::validate::registry::musa::*;

pub static MHA_INTERFACE: Layer<MusaState> = Layer {
    name: "mha_interface",
    checks: &[
        Check {
            name: "k_cache contiguous last dim",
            sites: &[K_1_ATTR, K_1_INDEX, K_1],
            run: |s| last_dim_contiguous(s, Param::KCache, [K_1_ATTR, K_1_INDEX, K_1]),
        },
        Check {
            name: "v_cache contiguous last dim",
            sites: &[K_2_ATTR, K_2_INDEX, K_2],
            run: |s| last_dim_contiguous(s, Param::VCache, [K_2_ATTR, K_2_INDEX, K_2]),
        },
        Check {
            name: "None defaults",
            sites: &[],
            run: none_defaults,
        },
        Check {
            name: "softmax_scale default",
            sites: &[K_3_ATTR, K_3_INDEX, K_3_ZERO_POWER],
            run: k3_softmax_scale,
        },
        Check {
            name: "int cache_seqlens",
            sites: &[K_4_OVERFLOW],
            run: k4_int_cache_seqlens,
        },
        Check {
            name: "MLA routing",
            sites: &[K_5_ATTR, K_5_INDEX],
            run: k5_route,
        },
    ],
};

pub static MLA_BRANCH: Layer<MusaState> = Layer {
    name: "MLA decode",
    checks: &[
        Check {
            name: "use_flash_mla_asm",
            sites: &[MLA_1_INDEX],
            run: |s| {
                let qv = s.tensor(Param::Qv).expect("routed by qv's shape");
                py::shape_at(&qv.shape, -2).map(|_| ())
            },
        },
        Check {
            name: "dispatch arguments and their tvm-ffi conversion",
            sites: &[
                MLA_2_METADATA_TYPE,
                MLA_2_METADATA_INDEX,
                MLA_2_METADATA_KEY,
                MLA_2_METADATA_TENSOR_0D,
                MLA_2_METADATA_TENSOR_INDEX,
                MLA_2_METADATA_SCALAR,
                MLA_2_SEQLENS_K,
                MLA_2_BLOCK_TABLE,
                MLA_2_ARG_TYPE,
                MLA_2_IS_INITED,
            ],
            run: mla_arguments,
        },
        Check {
            name: "max_seqlen_q.value()",
            sites: &[MLA_3],
            run: |s| fail_if(s.given(Param::CuSeqlensQ) && !s.given(Param::MaxSeqlenQ)),
        },
        Check {
            name: "workspace",
            sites: &[MLA_4],
            run: |s| {
                let (workspace, _) = mla_workspace_and_flag(s)?;
                fail_if(workspace.is_none())
            },
        },
        Check {
            name: "get_mla_decoding_metadata_impl",
            sites: &[MLA_5_DEVICE, MLA_5_CONTIGUOUS, MLA_5_DTYPE],
            run: mla_metadata,
        },
        Check {
            name: "MLA kernel inputs",
            sites: &[
                MLA_6_DEVICE,
                MLA_6_DTYPE,
                MLA_6_SAME_DTYPE,
                MLA_6_CONTIGUOUS,
                MLA_6_INT32,
                MLA_6_BLOCK_TABLE_STRIDE,
                MLA_6_RANK,
                MLA_6_SHAPE,
                MLA_6_PAGE_SIZE,
                MLA_7_DIM,
                MLA_7_SAME_DTYPE,
                MLA_7_DTYPE,
                MLA_7_HEADDIM_V,
                MLA_7_HEADS,
            ],
            run: mla_kernel,
        },
        Check {
            name: "ignored arguments",
            sites: &[],
            run: mla_ignored,
        },
    ],
};

/// `scheduler_metadata[0]` and `[1]` (mha_interface.py L942-L943).
const MLA_METADATA: SubscriptSites = SubscriptSites {
    not_subscriptable: MLA_2_METADATA_TYPE,
    sequence_index: MLA_2_METADATA_INDEX,
    key: MLA_2_METADATA_KEY,
    zero_dim: MLA_2_METADATA_TENSOR_0D,
    tensor_index: MLA_2_METADATA_TENSOR_INDEX,
    scalar_index: MLA_2_METADATA_SCALAR,
};

/// The workspace and `is_inited` the dispatch receives: `scheduler_metadata[0]`, `[1]` (`None`
/// gives `(None, False)`), evaluated with the call's other arguments.
fn mla_workspace_and_flag(s: &MusaState) -> Result<(PyValue, PyValue), Fail> {
    match s.injection {
        Injection::Mla { is_inited } => Ok((
            PyValue::tensor(Dtype::Uint8, &[1]),
            PyValue::Bool(is_inited),
        )),
        // A non-MLA backend injected its 1-D metadata tensor: both items are 0-dim tensors.
        Injection::Recompute { .. } | Injection::Reuse { .. } => {
            let item = PyValue::tensor(Dtype::Int32, &[]);
            Ok((item.clone(), item))
        }
        Injection::Off => match s.arg(Param::SchedulerMetadata) {
            PyValue::None => Ok((PyValue::None, PyValue::Bool(false))),
            metadata => Ok((
                py::subscript(metadata, 0, &MLA_METADATA)?,
                py::subscript(metadata, 1, &MLA_METADATA)?,
            )),
        },
    }
}

/// `softmax_scale` as the kernels receive it: the caller's value, or mate's default for `None`.
fn effective_softmax_scale(s: &MusaState) -> PyValue {
    if s.given(Param::SoftmaxScale) {
        s.arg(Param::SoftmaxScale).clone()
    } else {
        PyValue::Float(s.softmax_scale)
    }
}

/// tvm-ffi converts every argument of `dispatch_mla_impl_for_fa_interface` (csrc/mla_pybind.mu
/// L852-L865) before its body runs, in parameter order; q, qv and the caches are tensors by now and
/// #10, #11 are the outputs mate allocates.
fn mla_arguments(s: &mut MusaState) -> Result<(), Fail> {
    let (workspace, is_inited) = mla_workspace_and_flag(s)?;
    let softmax_scale = effective_softmax_scale(s);
    let arguments = [
        (4, &s.seqused_k, FfiType::Tensor),
        (5, s.arg(Param::PageTable), FfiType::Tensor),
        (6, &softmax_scale, FfiType::Float),
        (7, s.arg(Param::Causal), FfiType::Bool),
        (8, s.arg(Param::CuSeqlensQ), FfiType::OptionalTensor),
        (9, s.arg(Param::MaxSeqlenQ), FfiType::OptionalInt),
        (12, &workspace, FfiType::OptionalTensor),
        (13, &is_inited, FfiType::Bool),
    ];
    match pyvalue::first_unconverted(arguments) {
        None => Ok(()),
        Some(4) => Err(Fail::new().at(MLA_2_SEQLENS_K)),
        Some(5) => Err(Fail::new().at(MLA_2_BLOCK_TABLE)),
        Some(13) => Err(Fail::new().at(MLA_2_IS_INITED)),
        Some(i) => Err(Fail::with([i.to_string()]).at(MLA_2_ARG_TYPE)),
    }
}

fn mla_metadata(s: &mut MusaState) -> Result<(), Fail> {
    let (_, is_inited) = mla_workspace_and_flag(s)?;
    // The metadata kernel runs when `is_inited` (converted to a C++ bool) is false.
    if pyvalue::index(&is_inited) != Some(0) {
        return Ok(());
    }
    let seqlens = s.seqused_k.as_tensor().expect("converted");
    fail_if(!is_musa(seqlens)).at(MLA_5_DEVICE)?;
    fail_if(!seqlens.is_contiguous()).at(MLA_5_CONTIGUOUS)?;
    if seqlens.dtype != Dtype::Int32 {
        return Err(Fail::with([seqlens.dtype.torch_name().to_string()]).at(MLA_5_DTYPE));
    }
    Ok(())
}

/// `mla_with_kvcache` (heads != 128) or `flash_mla_asm` (128 heads), as far as a call can reach:
/// device, dtypes, int32 index tensors, block-table stride, page size.
fn mla_kernel(s: &mut MusaState) -> Result<(), Fail> {
    let qv = s.tensor(Param::Qv).expect("routed");
    let asm = qv.size(-2) == Some(128);
    let [latent, rope] = if asm {
        ["q_nope", "q_pe"]
    } else {
        ["q_latent", "q_rope"]
    };
    let seqlens = s.seqused_k.as_tensor().expect("converted");
    let page_table = s.tensor(Param::PageTable).expect("converted");
    let (q, ckv, kpe) = (
        s.tensor(Param::Q).expect("routed"),
        s.tensor(Param::VCache).expect("K-2"),
        s.tensor(Param::KCache).expect("K-1"),
    );
    let inputs = [
        (latent, qv),
        (rope, q),
        ("ckv", ckv),
        ("kpe", kpe),
        ("seqlens_k", seqlens),
        ("block_table", page_table),
    ];
    if let Some((name, _)) = inputs.iter().find(|(_, t)| !is_musa(t)) {
        return Err(Fail::with([name.to_string(), name.to_string()]).at(MLA_6_DEVICE));
    }
    let fp16_or_bf16 = matches!(qv.dtype, Dtype::Float16 | Dtype::Bfloat16);
    let same_dtype = [q, ckv, kpe].iter().all(|t| t.dtype == qv.dtype);
    let contiguous = |name: &str, t: &TensorArg| -> Result<(), Fail> {
        fail_if_with(!t.is_contiguous(), [name, name]).at(MLA_6_CONTIGUOUS)
    };
    let int32 = |name: &str, t: &TensorArg| -> Result<(), Fail> {
        let dtype = t.dtype.torch_name();
        fail_if_with(t.dtype != Dtype::Int32, [name, dtype, name]).at(MLA_6_INT32)
    };
    let dim = |name: &str, t: &TensorArg, want: usize| -> Result<(), Fail> {
        let (got, want) = (t.ndim().to_string(), want.to_string());
        fail_if_with(got != want, [name, &want, &got, &want, name, &want]).at(MLA_7_DIM)
    };
    // Both kernels check cu_seqlens_q the same way, once they reach it.
    let cu_seqlens_q = |cu: &TensorArg| -> Result<(), Fail> {
        let name = "cu_seqlens_q.value()";
        fail_if_with(!is_musa(cu), [name, name]).at(MLA_6_DEVICE)?;
        contiguous(name, cu)?;
        int32(name, cu)
    };
    let cu = s.tensor(Param::CuSeqlensQ);
    let block_stride = page_table.stride_of(-1).unwrap_or(1);
    if asm {
        contiguous("seqlens_k", seqlens)?;
        int32("seqlens_k", seqlens)?;
        int32("block_table", page_table)?;
        dim("seqlens_k", seqlens, 1)?;
        dim("block_table", page_table, 2)?;
        block_table_stride(block_stride)?;
        let q_rank = if cu.is_some() { 3 } else { 4 };
        dim("q_nope", qv, q_rank)?;
        dim("q_pe", q, q_rank)?;
        if let Some(cu) = cu {
            cu_seqlens_q(cu)?;
        }
        fail_if(!same_dtype).at(MLA_7_SAME_DTYPE)?;
        fail_if(!fp16_or_bf16).at(MLA_7_DTYPE)?;
        let headdim_v = ckv.size(-1).unwrap_or(0).to_string();
        fail_if_with(headdim_v != "512", [headdim_v.as_str()]).at(MLA_7_HEADDIM_V)?;
        let (nope_heads, pe_heads) = (qv.size(-2).unwrap_or(0), q.size(-2).unwrap_or(0));
        fail_if_with(
            nope_heads != pe_heads,
            [
                nope_heads.to_string().as_str(),
                pe_heads.to_string().as_str(),
            ],
        )
        .at(MLA_7_HEADS)?;
        return mla_shapes(s, true);
    }
    fail_if(!fp16_or_bf16).at(MLA_6_DTYPE)?;
    fail_if(!same_dtype).at(MLA_6_SAME_DTYPE)?;
    contiguous("seqlens_k", seqlens)?;
    int32("seqlens_k", seqlens)?;
    int32("block_table", page_table)?;
    block_table_stride(block_stride)?;
    if let Some(cu) = cu {
        cu_seqlens_q(cu)?;
    }
    mla_shapes(s, false)?;
    let page_size = ckv.size(1).unwrap_or(0);
    if page_size != 64 {
        return Err(Fail::with([page_size.to_string()]).at(MLA_6_PAGE_SIZE));
    }
    Ok(())
}

/// Fails, its message filled with `args`, when `cond` holds.
fn fail_if_with<const N: usize>(cond: bool, args: [&str; N]) -> Result<(), Fail> {
    if cond {
        Err(Fail::with(args.map(str::to_string)))
    } else {
        Ok(())
    }
}

/// The `expect_shape` checks of the MLA kernels on the tensors a call supplies (`flash_mla_asm`
/// checks the caches with its fixed page size 64).
fn mla_shapes(s: &MusaState, asm: bool) -> Result<(), Fail> {
    let qv = s.tensor(Param::Qv).expect("routed");
    let q = s.tensor(Param::Q).expect("routed");
    let ckv = s.tensor(Param::VCache).expect("K-2");
    let kpe = s.tensor(Param::KCache).expect("K-1");
    let seqlens = s.seqused_k.as_tensor().expect("converted");
    let block_table = s.tensor(Param::PageTable).expect("converted");
    let cu = s.tensor(Param::CuSeqlensQ);
    let size = |t: &TensorArg, d: isize| py::int(t.size(d).unwrap_or(0));
    let batch = cu.map_or(size(qv, 0), |c| size(c, 0) - 1);
    let heads = size(qv, -2);
    let (blocks, page) = (size(ckv, 0), if asm { 64 } else { size(ckv, 1) });
    let cache = |d: i64| -> Vec<i64> {
        if ckv.ndim() == 3 {
            vec![blocks, page, d]
        } else {
            vec![blocks, page, 1, d]
        }
    };
    let mut expected: Vec<(&str, &TensorArg, Vec<i64>)> = Vec::new();
    if !asm {
        let rows = match cu {
            None => vec![batch, size(qv, 1)],
            Some(_) => vec![size(qv, 0)],
        };
        let with = |d: i64| rows.iter().copied().chain([heads, d]).collect::<Vec<_>>();
        expected.push(("q_latent", qv, with(512)));
        expected.push(("q_rope", q, with(64)));
        if let Some(cu) = cu {
            expected.push(("cu_seqlens_q", cu, vec![batch + 1]));
        }
    }
    expected.push(("ckv", ckv, cache(512)));
    expected.push(("kpe", kpe, cache(64)));
    expected.push(("seqlens_k", seqlens, vec![batch]));
    expected.push((
        "block_table",
        block_table,
        vec![batch, size(block_table, 1)],
    ));
    for (name, t, dims) in expected {
        if t.ndim() != dims.len() {
            return Err(Fail::with([
                t.ndim().to_string(),
                dims.len().to_string(),
                name.to_string(),
            ])
            .at(MLA_6_RANK));
        }
        if let Some((dim, (&got, &want))) = t
            .shape
            .iter()
            .zip(&dims)
            .enumerate()
            .find(|(_, (got, want))| py::int(**got) != **want)
        {
            return Err(Fail::with([
                got.to_string(),
                want.to_string(),
                name.to_string(),
                dim.to_string(),
            ])
            .at(MLA_6_SHAPE));
        }
    }
    Ok(())
}

fn block_table_stride(stride: usize) -> Result<(), Fail> {
    if stride == 1 {
        Ok(())
    } else {
        Err(Fail::with([stride.to_string()]).at(MLA_6_BLOCK_TABLE_STRIDE))
    }
}

/// The argument expressions of the `_fmha_fwd(...)` call (mha_interface.py L946–L988).
pub static FMHA_CALL: Layer<MusaState> = Layer {
    name: "_fmha_fwd call",
    checks: &[Check {
        name: "window_size[0], window_size[1]",
        sites: &[
            K_6_WINDOW_TYPE,
            K_6_WINDOW_INDEX,
            K_6_WINDOW_KEY,
            K_6_WINDOW_TENSOR_0D,
            K_6_WINDOW_TENSOR_INDEX,
            K_6_WINDOW_SCALAR,
        ],
        run: k6_window,
    }],
};

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
        Check {
            name: "scheduler_metadata length",
            sites: &[F_41_ATTR, F_41_INDEX, F_41],
            run: f41_metadata,
        },
    ],
};

pub static KERNEL_CONFIG: Layer<MusaState> = Layer {
    name: "kernel config",
    checks: &[
        Check {
            name: "lru_cache key, pack_gqa's truth value",
            sites: &[C_3, C_3_TENSOR_BOOL],
            run: c3_pack_gqa,
        },
        Check {
            name: "supported head dims",
            sites: &[C_2],
            run: c2_kernel_config,
        },
    ],
};

pub static JIT_BUILD: Layer<MusaState> = Layer {
    name: "JIT build",
    checks: &[
        Check {
            name: "JIT key",
            sites: &[J_1_TENSOR_BOOL, J_1_JSON, J_1_HASH],
            run: j1_compile_key,
        },
        Check {
            name: "AppendKV needs varlen",
            sites: &[J_1],
            run: |s| {
                let varlen = s.given(Param::CuSeqlensQ)
                    || !s.seqused_k.is_none()
                    || s.given(Param::CacheLeftpad);
                fail_if(s.given(Param::K) && !varlen)
            },
        },
        Check {
            name: "tvm-ffi argument conversion",
            sites: &[J_3_ARG_TYPE],
            run: j3_arguments,
        },
    ],
};

/// `_get_fwd_kernel_config` is lru_cached (hashes pack_gqa), then `_get_tile_m` reads
/// `m * head_ratio if enable_packgqa else m` (fmha_utils.py L129) when pack_gqa is not None.
fn c3_pack_gqa(s: &mut MusaState) -> Result<(), Fail> {
    let pack_gqa = s.arg(Param::PackGqa);
    pyvalue::hash(pack_gqa).map_err(|e| Fail::with(e.args).at(C_3))?;
    if !pack_gqa.is_none() {
        py::truth(pack_gqa).at(C_3_TENSOR_BOOL)?;
    }
    Ok(())
}

/// A truth value `_resolve_mask` handed on: a bool, or a one-element bool tensor.
fn truth_value(t: Truth) -> PyValue {
    match t.kind {
        TruthKind::Bool => PyValue::Bool(t.value),
        TruthKind::Tensor => PyValue::tensor(Dtype::Bool, &[]),
        TruthKind::Numpy => PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Bool,
            value: NumpyValue::Bool(t.value),
        }),
    }
}

/// `attention_chunk` as the compile-time dict reads it: the fixed-length reset's int 0, else the
/// caller's value (`None` is 0).
fn attention_chunk_value(s: &MusaState) -> PyValue {
    let given = s.arg(Param::AttentionChunk);
    let reset = s.chunk.value == 0.0 && pyvalue::float(given).is_some_and(|c| c != 0.0);
    if reset || given.is_none() {
        PyValue::Int(0)
    } else {
        given.clone()
    }
}

/// The forward kernel's compile-time dict (fmha_fwd.py L806-L839): building it evaluates
/// `rotary_interleaved and rotary_cos is not None` (L831), `_fmha_fwd_encode` JSON-dumps it with
/// sorted keys (L35) and `_load_fmha_fwd_module` hashes its items (L56). Only the entries below can
/// hold something other than a Python bool or int; they are listed in sorted key order.
fn j1_compile_key(s: &mut MusaState) -> Result<(), Fail> {
    let mask = s.mask.expect("resolved before the JIT build");
    let interleaved = s.arg(Param::RotaryInterleaved);
    let is_rotary_interleaved = if py::truth(interleaved).at(J_1_TENSOR_BOOL)? {
        PyValue::Bool(s.given(Param::RotaryCos))
    } else {
        interleaved.clone()
    };
    let compared = |v: &PyValue, op: Cmp, rhs: PyValue| {
        pyvalue::compare(v, op, &rhs).expect("policy_and_mask has compared these with numbers")
    };
    let is_packgqa = match s.arg(Param::PackGqa) {
        PyValue::None => PyValue::Bool(s.config.is_some_and(|c| c.pack_gqa)),
        given => given.clone(),
    };
    let entries = [
        compared(&attention_chunk_value(s), Cmp::Gt, PyValue::Int(0)), // has_attention_chunk
        compared(s.arg(Param::Softcap), Cmp::Ne, PyValue::Float(0.0)), // has_softcap
        truth_value(mask.is_causal),
        truth_value(mask.is_local),
        is_packgqa,
        is_rotary_interleaved,
    ];
    for value in &entries {
        pyvalue::json_dumps(value).map_err(|e| Fail::with(e.args).at(J_1_JSON))?;
    }
    for value in &entries {
        pyvalue::hash(value).map_err(|e| Fail::with(e.args).at(J_1_HASH))?;
    }
    Ok(())
}

/// The kernel's typed parameters (fwd_kern.j2 L20–L63) that a caller's value can reach, converted
/// by tvm-ffi in parameter order (mcc is clang-based; C++ leaves the order of the conversions open).
fn j3_arguments(s: &mut MusaState) -> Result<(), Fail> {
    let mask = s.mask.expect("resolved before the kernel call");
    let max_seqlen_q = if s.given(Param::CuSeqlensQ) {
        s.arg(Param::MaxSeqlenQ).clone()
    } else {
        PyValue::Int(s.dims.seqlen_q)
    };
    let softmax_scale = effective_softmax_scale(s);
    let (left, right, chunk) = (
        py_number(mask.window_left),
        py_number(mask.window_right),
        py_number(s.chunk),
    );
    let num_splits = if s.given(Param::Sinks) {
        PyValue::Int(-1)
    } else {
        s.arg(Param::NumSplits).clone()
    };
    let arguments = [
        (11, &max_seqlen_q, FfiType::Int),
        (18, s.arg(Param::RotarySeqlens), FfiType::OptionalTensor),
        (19, s.arg(Param::QDescale), FfiType::OptionalTensor),
        (20, s.arg(Param::KDescale), FfiType::OptionalTensor),
        (21, s.arg(Param::VDescale), FfiType::OptionalTensor),
        (22, &softmax_scale, FfiType::Float),
        (24, &left, FfiType::Int),
        (25, &right, FfiType::Int),
        (26, &chunk, FfiType::Int),
        (27, s.arg(Param::Softcap), FfiType::Float),
        (28, s.arg(Param::SmMargin), FfiType::Int),
        (29, &num_splits, FfiType::Int),
    ];
    match pyvalue::first_unconverted(arguments) {
        Some(index) => Err(Fail::with([index.to_string()])),
        None => Ok(()),
    }
}

pub static COMBINE: Layer<MusaState> = Layer {
    name: "combine",
    checks: &[
        Check {
            name: "max_seqlen_q (shadowed)",
            sites: &[B_2],
            run: |s| fail_if(s.given(Param::CuSeqlensQ) && !s.given(Param::MaxSeqlenQ)),
        },
        Check {
            name: "metadata length (shadowed)",
            sites: &[B_3],
            run: |_| Ok(()), // same condition as F-41, which has passed
        },
        Check {
            name: "tile_n multiple of 32",
            sites: &[B_4],
            run: |s| fail_if(s.config.is_some_and(|c| c.tile_n % 32 != 0)),
        },
        Check {
            name: "max splits",
            sites: &[B_5],
            run: b5_max_splits,
        },
        Check {
            name: "`if return_lse` (after the kernel ran)",
            sites: &[B_6_TENSOR_BOOL],
            run: |s| py::truth(s.arg(Param::ReturnSoftmaxLse)).map(|_| ()),
        },
    ],
};

fn shape_is(t: &TensorArg, expected: &[i64]) -> bool {
    t.ndim() == expected.len() && t.shape.iter().zip(expected).all(|(&a, &b)| py::int(a) == b)
}

/// `assert x.stride(-1) == 1, "<name> must have contiguous last dimension"` (K-1, K-2).
fn last_dim_contiguous(
    s: &mut MusaState,
    param: Param,
    [attr, index, assert]: [&'static Site; 3],
) -> Result<(), Fail> {
    let t = py::tensor(s.arg(param), "stride").at(attr)?;
    let stride = py::stride(t, -1, index, index)?;
    fail_if(stride != 1).at(assert)
}

fn none_defaults(s: &mut MusaState) -> Result<(), Fail> {
    if s.args.bound(Param::WindowSize).was_passed() && s.arg(Param::WindowSize).is_none() {
        s.hazard(H_MUSA_WINDOW_NONE, &[]);
    }
    if s.args.bound(Param::AttentionChunk).was_passed() && s.arg(Param::AttentionChunk).is_none() {
        s.hazard(H_MUSA_CHUNK_NONE, &[]);
    }
    Ok(())
}

/// `x.shape[-1]` of q or qv, with the sites of the expression that reads it.
fn last_dim(v: &PyValue, attr: &'static Site, index: &'static Site) -> Result<usize, Fail> {
    let shape = py::shape(v).at(attr)?;
    py::shape_at(shape, -1).at(index)
}

fn k3_softmax_scale(s: &mut MusaState) -> Result<(), Fail> {
    // `if softmax_scale is None:` — any other value is kept (the kernel's conversion judges it).
    if s.given(Param::SoftmaxScale) {
        s.softmax_scale = pyvalue::float(s.arg(Param::SoftmaxScale)).unwrap_or(f64::NAN);
        return Ok(());
    }
    let mut dim = last_dim(s.arg(Param::Q), K_3_ATTR, K_3_INDEX)?;
    if s.given(Param::Qv) {
        dim += last_dim(s.arg(Param::Qv), K_3_ATTR, K_3_INDEX)?;
    }
    // Python's `0 ** -0.5` raises instead of returning inf.
    fail_if(dim == 0).at(K_3_ZERO_POWER)?;
    s.softmax_scale = (dim as f64).powf(-0.5);
    Ok(())
}

/// `isinstance(cache_seqlens, int)` → `torch.full((k_cache.shape[0],), ...)` on k_cache's device.
fn k4_int_cache_seqlens(s: &mut MusaState) -> Result<(), Fail> {
    let Some(value) = s.arg(Param::CacheSeqlens).as_int() else {
        return Ok(());
    };
    // torch.full(..., dtype=torch.int32) converts the fill value with an overflow check.
    fail_if(i32::try_from(value).is_err())?;
    let k_cache = s.tensor(Param::KCache).expect("K-1 checked k_cache");
    let rows = k_cache.shape[0];
    let device = k_cache.device;
    let q_batch = s
        .tensor(Param::Q)
        .and_then(|q| q.size(0))
        .map_or("?".to_string(), |b| b.to_string());
    s.seqused_k = PyValue::Tensor(int32_vector(rows, device));
    s.hazard(
        H_MUSA_INT_CACHE_SEQLENS_EXPANDED,
        &[&value.to_string(), &rows.to_string(), &q_batch],
    );
    Ok(())
}

fn k5_route(s: &mut MusaState) -> Result<(), Fail> {
    if !s.given(Param::Qv) {
        return Ok(());
    }
    let qv_dim = last_dim(s.arg(Param::Qv), K_5_ATTR, K_5_INDEX)?;
    s.mla = qv_dim == 512 && last_dim(s.arg(Param::Q), K_5_ATTR, K_5_INDEX)? == 64;
    if s.mla {
        s.hazard(H_MUSA_MLA_ROUTED, &[]);
    }
    Ok(())
}

/// Whether an argument still has (a value equivalent to) its default.
type IsDefault = fn(&PyValue) -> bool;

/// Arguments the MLA branch never passes on (§6.12), among those the call set.
fn mla_ignored(s: &mut MusaState) -> Result<(), Fail> {
    // Arguments whose meaning is lost (an error) and ones that only schedule the work.
    const IGNORED: [Param; 12] = [
        Param::K,
        Param::V,
        Param::RotaryCos,
        Param::RotarySin,
        Param::CacheBatchIdx,
        Param::CacheLeftpad,
        Param::CuSeqlensKNew,
        Param::QDescale,
        Param::KDescale,
        Param::VDescale,
        Param::Sinks,
        Param::RotarySeqlens,
    ];
    let lost_defaults: [(Param, IsDefault); 3] = [
        (Param::WindowSize, |v| v.is_none() || is_no_window(v)),
        (Param::AttentionChunk, |v| v.is_none() || v.eq_int(0)),
        (Param::Softcap, |v| v.eq_int(0)),
    ];
    let scheduling_defaults: [(Param, IsDefault); 2] = [
        (Param::NumSplits, |v| v.eq_int(0)),
        (Param::SmMargin, |v| v.eq_int(0)),
    ];
    let not_default = |defaults: &[(Param, IsDefault)]| -> Vec<&'static str> {
        defaults
            .iter()
            .filter(|(p, is_default)| !is_default(s.arg(*p)))
            .map(|(p, _)| p.name())
            .collect()
    };
    let mut lost: Vec<&str> = IGNORED
        .into_iter()
        .filter(|&p| s.given(p))
        .map(Param::name)
        .collect();
    lost.extend(not_default(&lost_defaults));
    let mut scheduling: Vec<&str> = s
        .given(Param::PackGqa)
        .then_some("pack_gqa")
        .into_iter()
        .collect();
    scheduling.extend(not_default(&scheduling_defaults));
    if !lost.is_empty() {
        s.hazard(H_MUSA_MLA_IGNORED, &[&lost.join(", ")]);
    }
    if !scheduling.is_empty() {
        s.hazard(H_MUSA_MLA_SCHEDULING_IGNORED, &[&scheduling.join(", ")]);
    }
    Ok(())
}

fn is_no_window(v: &PyValue) -> bool {
    v.as_sequence()
        .is_some_and(|w| w.len() == 2 && w.iter().all(|x| x.eq_int(-1)))
}

/// `window_size[0]`, `window_size[1]` in the call of `_fmha_fwd` (mha_interface.py L972-L973).
const K6_WINDOW: SubscriptSites = SubscriptSites {
    not_subscriptable: K_6_WINDOW_TYPE,
    sequence_index: K_6_WINDOW_INDEX,
    key: K_6_WINDOW_KEY,
    zero_dim: K_6_WINDOW_TENSOR_0D,
    tensor_index: K_6_WINDOW_TENSOR_INDEX,
    scalar_index: K_6_WINDOW_SCALAR,
};

fn k6_window(s: &mut MusaState) -> Result<(), Fail> {
    s.window_bounds = window_pair(s.arg(Param::WindowSize), &K6_WINDOW)?;
    Ok(())
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

/// The call's `pack_gqa` as the kernel config reads it (truthiness; `None` = heuristic).
fn pack_gqa(s: &MusaState) -> Option<bool> {
    match s.arg(Param::PackGqa) {
        PyValue::None => None,
        v => Some(v.truthy().unwrap_or(true)),
    }
}

/// The call's own kernel configuration (`Err`: the unsupported rounded head-dim pair).
fn call_config(s: &MusaState) -> Result<mate::KernelConfig, mate::UnsupportedHeadDims> {
    let d = s.dims;
    mate::kernel_config(
        usize::try_from(d.head_dim).unwrap_or(0),
        usize::try_from(d.head_dim_v).unwrap_or(0),
        d.seqlen_q,
        d.num_head.checked_div(d.num_head_kv).unwrap_or(0),
        pack_gqa(s),
    )
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

fn c2_kernel_config(s: &mut MusaState) -> Result<(), Fail> {
    let d = s.dims;
    let (hd, hdv) = (d.head_dim as usize, d.head_dim_v as usize);
    let config = call_config(s)
        .map_err(|e| Fail::with([e.head_dim.to_string(), e.head_dim_v.to_string()]))?;
    let over = [hd, hdv].into_iter().find(|&x| x > 512);
    if let Some(dim) = over {
        s.hazard(H_MUSA_HEADDIM_OVER_512, &[&dim.to_string()]);
    } else if (config.head_dim_rounded, config.head_dim_v_rounded) != (hd, hdv) {
        s.hazard(
            H_MUSA_HEADDIM_ROUNDED,
            &[
                &hd.to_string(),
                &hdv.to_string(),
                &config.head_dim_rounded.to_string(),
                &config.head_dim_v_rounded.to_string(),
            ],
        );
    }
    s.config = Some(config);
    Ok(())
}

fn b5_max_splits(s: &mut MusaState) -> Result<(), Fail> {
    if s.has_metadata && s.num_splits > 128 {
        if s.given(Param::K) {
            s.hazard(H_MUSA_KV_WRITTEN_BEFORE_ERROR, &[]);
        }
        return Err(Fail::new());
    }
    Ok(())
}

/// The parameters of an accepted MLA-decode call (§6.12, §7).
pub(super) fn mla_resolved(s: &MusaState) -> Resolved {
    let q = s.tensor(Param::Q).expect("routed by q's shape");
    let qv = s.tensor(Param::Qv).expect("routed by qv's shape");
    let varlen = s.given(Param::CuSeqlensQ);
    let v_cache = s.tensor(Param::VCache).expect("K-2 checked v_cache");
    let heads = qv.size(-2).unwrap_or(0);
    let heads_k = if v_cache.ndim() == 4 {
        v_cache.shape[2]
    } else {
        1
    };
    let batch = s.seqused_k.as_tensor().and_then(|t| t.size(0)).unwrap_or(0);
    let seqlen_q = if varlen {
        s.arg(Param::MaxSeqlenQ).as_int().unwrap_or(0).max(0) as usize
    } else {
        qv.size(1).unwrap_or(0)
    };
    let page_size = s.tensor(Param::KCache).and_then(|k| k.size(1)).unwrap_or(0);
    let pages_per_seq = s
        .tensor(Param::PageTable)
        .and_then(|p| p.size(1))
        .unwrap_or(0);
    let seqlen_k = pages_per_seq * page_size;
    Resolved {
        batch_size: batch,
        seqlen_q,
        total_q: if varlen { q.shape[0] } else { batch * seqlen_q },
        seqlen_k,
        num_heads: heads,
        num_heads_k: heads_k,
        head_size: 64,
        head_size_v: 512,
        head_size_rounded: 64,
        head_size_v_rounded: 512,
        paged: true,
        page_size,
        varlen_q: varlen,
        is_causal: s.arg(Param::Causal).truthy().unwrap_or(true),
        is_local: false,
        window_left: -1,
        window_right: -1,
        attention_chunk: 0,
        softcap: 0.0,
        softmax_scale: s.softmax_scale,
        num_splits: 0,
        pack_gqa: false,
        tile_m: 0,
        tile_n: 0,
        lse_layout: if varlen {
            LseLayout::HeadTotal
        } else {
            LseLayout::BatchSeqHead
        },
        mla_decode: true,
    }
}
