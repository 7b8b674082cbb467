//! mate's MLA decode branch (musa-fa3.md §5.4): the dispatch's arguments and their conversion, the
//! metadata kernel, the two MLA kernels' input checks, the arguments the branch drops, and the
//! parameters an accepted call runs with.

use super::state::{Injection, MusaState, effective_softmax_scale, fail_if, is_musa};
use crate::call::python::{self as pyvalue, FfiType};
use crate::call::{Dtype, LseLayout, Param, PyValue, TensorArg};
use crate::validate::Resolved;
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py::{self, SubscriptSites};
use crate::validate::registry::musa::*;

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
    // the branch's kernel knows no ranks: it attends the rank's keys at local positions
    lost.extend(s.cp.given());
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

/// The parameters of an accepted MLA-decode call (§6.12, §7).
pub(super) fn resolved(s: &MusaState) -> Resolved {
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
