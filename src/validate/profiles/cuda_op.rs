//! What happens between the Python wrappers and `mha_fwd`: CPython's argument binding, the
//! operator call (torch's argument parsing, then dispatch on the arguments' devices), and the
//! Python steps both wrappers share (default scale, `int` `cache_seqlens`, `window_size[i]`).

use super::cuda_state::{
    Arg, CudaState, OpSchema, OpSource, SchemaParam, SchemaType as T, ensure, python_index,
    python_shape, python_stride_last,
};
use super::mha_fwd::expanded_seqlens;
use crate::call::signature;
use crate::call::{Device, Param, PyValue};
use crate::validate::engine::{Check, Fail, HazardLog, Layer, reject, sites_of};
use crate::validate::registry::cuda::{
    ATEN_DIM_NO_DIMS, ATEN_DIM_RANGE, ATEN_INDEX_0D, ATEN_TENSOR_INDEX, PY_KEY, PY_LIST_INDEX,
    PY_NOT_SUBSCRIPTABLE, PY_SCALAR_INDEX, PY_STR_INDEX, PY_TUPLE_INDEX,
};
use crate::validate::registry::{ANY_TEXT, Site};
use crate::validate::{Exception, Rejection};
use std::borrow::Cow;

/// The sites of a profile: CPython's binding errors, then every layer list's sites in order.
pub fn profile_sites(layer_lists: &[&[&Layer<CudaState>]]) -> Vec<&'static str> {
    let mut sites = vec![
        PY_BINDING_UNEXPECTED_KEYWORD.id,
        PY_BINDING_MULTIPLE_VALUES.id,
        PY_BINDING_MISSING.id,
        PY_BINDING_TOO_MANY.id,
    ];
    for layers in layer_lists {
        for site in sites_of(layers) {
            if !sites.contains(&site) {
                sites.push(site);
            }
        }
    }
    sites
}

/// CPython's binding `TypeError`, filed under the site of its message form.
pub fn binding_rejection(message: String) -> Rejection {
    const FORMS: [(&Site, &str, &str); 4] = [
        (
            PY_BINDING_UNEXPECTED_KEYWORD,
            "flash_attn_with_kvcache() got an unexpected keyword argument '",
            "'",
        ),
        (
            PY_BINDING_MULTIPLE_VALUES,
            "flash_attn_with_kvcache() got multiple values for argument '",
            "'",
        ),
        (PY_BINDING_MISSING, "flash_attn_with_kvcache() missing ", ""),
        (PY_BINDING_TOO_MANY, "flash_attn_with_kvcache() takes ", ""),
    ];
    for (site, prefix, suffix) in FORMS {
        if let Some(rest) = message.strip_prefix(prefix) {
            let arg = rest.strip_suffix(suffix).unwrap_or(rest);
            return reject(site, &[arg.to_string()]);
        }
    }
    // `bind` only produces the four forms above.
    Rejection {
        site: PY_BINDING_UNEXPECTED_KEYWORD.id,
        exception: Exception::TypeError,
        message,
    }
}

/// `softmax_scale = (q.shape[-1] + (qv.shape[-1] if qv is not None else 0)) ** (-0.5)` when the
/// caller passed none (both wrappers, cuda-fa3.md A.4 step 3).
pub fn default_scale(s: &mut CudaState) -> Result<(), Fail> {
    let given = s.py(Param::SoftmaxScale);
    if !given.is_none() {
        // What torch's float caster makes of it (`float(x)`; a one-element tensor too).
        s.softmax_scale = crate::call::python::float(given).unwrap_or(f64::NAN);
        return Ok(());
    }
    let d = python_shape(s.py(Param::Q), -1)?;
    let qv = s.py(Param::Qv);
    let dv = if qv.is_none() {
        0
    } else {
        python_shape(qv, -1)?
    };
    if d + dv == 0 {
        return Err(Fail::new().at(PY_ZERO_POWER));
    }
    s.softmax_scale = ((d + dv) as f64).powf(-0.5);
    Ok(())
}

/// The tensor whose `shape[0]` sizes an `int` `cache_seqlens`.
#[derive(Clone, Copy)]
pub enum SeqlensLength {
    /// Upstream FA3: `q.shape[0]`.
    QRows,
    /// sgl-kernel 0.3.21: `k_cache.shape[0]`.
    CacheRows,
}

/// `if cache_seqlens is not None and isinstance(cache_seqlens, int)`: `torch.full((n,), value,
/// dtype=torch.int32, device=k_cache.device)`.
pub fn expand_int_seqlens(s: &mut CudaState, length: SeqlensLength) -> Result<(), Fail> {
    let Some(value) = s.py(Param::CacheSeqlens).as_int() else {
        return Ok(());
    };
    let (name, source) = match length {
        SeqlensLength::QRows => ("q.shape[0]", Param::Q),
        SeqlensLength::CacheRows => ("k_cache.shape[0]", Param::KCache),
    };
    let n = python_shape(s.py(source), 0)?;
    if i32::try_from(value).is_err() {
        return Err(Fail::new().at(ATEN_FULL_OVERFLOW));
    }
    let device = s.py(Param::KCache).as_tensor().and_then(|t| t.device);
    let expanded = expanded_seqlens(n, value, device);
    if python_batch(s) != Some(n) {
        s.hazard(
            H_CUDA_INT_SEQLENS_EXPANDED,
            &[&value.to_string(), &n.to_string(), name],
        );
    }
    s.seqused_k = expanded;
    Ok(())
}

/// The batch size `mha_fwd` will derive, when the Python values already tell it.
fn python_batch(s: &CudaState) -> Option<usize> {
    match s.py(Param::CuSeqlensQ) {
        PyValue::None => s.py(Param::Q).as_tensor()?.size(0),
        cu => cu.as_tensor()?.size(0)?.checked_sub(1),
    }
}

/// What `window_size[i]` can raise: Python's indexing of a non-sequence or a short sequence,
/// torch's of a tensor ([`python_index`]).
pub const WINDOW_INDEX_SITES: &[&Site] = &[
    PY_NOT_SUBSCRIPTABLE,
    PY_TUPLE_INDEX,
    PY_LIST_INDEX,
    PY_STR_INDEX,
    PY_KEY,
    PY_SCALAR_INDEX,
    ATEN_TENSOR_INDEX,
    ATEN_INDEX_0D,
    ATEN_DIM_NO_DIMS,
    ATEN_DIM_RANGE,
];

/// `window_size[0]`, `window_size[1]` as the wrapper evaluates them for the operator call.
pub fn index_window(s: &mut CudaState) -> Result<(), Fail> {
    let window = s.py(Param::WindowSize);
    let left = python_index(window, 0)?;
    let right = python_index(window, 1)?;
    s.window = [left, right];
    Ok(())
}

/// The value the operator receives for its `index`-th parameter.
fn op_value(s: &CudaState, index: usize) -> Cow<'_, PyValue> {
    match s.op.params[index].source {
        OpSource::Tensor(arg) => Cow::Borrowed(s.value(arg)),
        OpSource::Python(param) => Cow::Borrowed(s.py(param)),
        OpSource::AlwaysNone => Cow::Owned(PyValue::None),
        OpSource::SoftmaxScale => match s.py(Param::SoftmaxScale) {
            PyValue::None => Cow::Owned(PyValue::Float(s.softmax_scale)),
            given => Cow::Borrowed(given),
        },
        OpSource::WindowLeft => Cow::Borrowed(&s.window[0]),
        OpSource::WindowRight => Cow::Borrowed(&s.window[1]),
        OpSource::AttentionChunk => Cow::Borrowed(&s.attention_chunk),
    }
}

/// torch's argument parser: each argument against its schema type, in schema order. The
/// message names the argument's index in the schema and Python's `repr` of the value.
fn argument_types(s: &mut CudaState) -> Result<(), Fail> {
    for (index, param) in s.op.params.iter().enumerate() {
        let value = op_value(s, index);
        if !param.ty.accepts(&value) {
            return Err(Fail::with([
                s.op.name.to_string(),
                param.ty.display().to_string(),
                param.name.to_string(),
                value.type_name().to_string(),
                index.to_string(),
                determined_repr(&value).unwrap_or_else(|| ANY_TEXT.to_string()),
                s.op.declaration(),
            ]));
        }
    }
    Ok(())
}

/// Python's `repr()` of `value` where the value alone decides it: not for tensors (their repr
/// prints the data), objects (an address), NumPy scalars (NumPy 1 and 2 differ) or strings that
/// need quoting rules beyond plain single quotes.
fn determined_repr(value: &PyValue) -> Option<String> {
    let determined = |v: &PyValue| determined_repr(v).is_some();
    match value {
        PyValue::Tensor(_) | PyValue::Object(_) | PyValue::Numpy(_) => None,
        PyValue::Str(text)
            if text
                .chars()
                .any(|c| c == '\'' || c == '\\' || !(' '..='~').contains(&c)) =>
        {
            None
        }
        PyValue::Tuple(items) | PyValue::List(items) if !items.iter().all(determined) => None,
        PyValue::Dict(items) if !items.iter().all(|(k, v)| determined(k) && determined(v)) => None,
        _ => Some(value.to_string()),
    }
}

/// The dispatcher picks the highest backend among all tensor arguments (CUDA outranks CPU; a
/// `musa` tensor is a PrivateUse1 tensor to torch, which outranks CUDA). Both operators register
/// a CUDA kernel only (cuda-fa3.md A.5; sglang@b5493f65b sgl-kernel/csrc/flash_extension.cc).
fn dispatch(s: &mut CudaState) -> Result<(), Fail> {
    let tensor_params = s.op.params.iter().enumerate();
    let devices = tensor_params.filter_map(|(index, param)| {
        if !matches!(param.source, OpSource::Tensor(_)) {
            return None;
        }
        op_value(s, index)
            .as_tensor()
            .map(|t| t.device_or(Device::Cuda))
    });
    let highest = devices.max_by_key(|d| match d {
        Device::Cpu => 0,
        Device::Cuda => 1,
        Device::Musa => 2,
    });
    let backend = match highest {
        None | Some(Device::Cuda) => return Ok(()),
        Some(Device::Cpu) => "CPU",
        Some(Device::Musa) => "PrivateUse1",
    };
    Err(Fail::with([s.op.name.to_string(), backend.to_string()]))
}

/// Calling the operator from Python: argument parsing, then dispatch.
pub static OP_CALL: Layer<CudaState> = Layer {
    name: "operator call",
    checks: &[
        Check {
            name: "argument types",
            sites: &[TORCH_OP_ARG_TYPE],
            run: argument_types,
        },
        Check {
            name: "dispatch",
            sites: &[TORCH_NO_KERNEL],
            run: dispatch,
        },
    ],
};

const fn p(name: &'static str, ty: T, source: OpSource) -> SchemaParam {
    SchemaParam {
        name,
        ty,
        default: None,
        source,
    }
}

use crate::validate::registry::cuda::*;
use OpSource::{AlwaysNone, Python, Tensor as Tn};

/// `flash_attn_3::_flash_attn_forward`, the `torch.library.custom_op` upstream's wrapper calls
/// (`flash_attn_interface.py:L59-95`; schema inferred from the annotations, defaults from the
/// Python defaults).
pub static FA3_CUSTOM_OP: OpSchema = OpSchema {
    name: "flash_attn_3::_flash_attn_forward",
    signature: &signature::FA3,
    params: &[
        p("q", T::Tensor, Tn(Arg::Q)),
        p("k", T::Tensor, Tn(Arg::K)),
        p("v", T::Tensor, Tn(Arg::V)),
        p("k_new", T::OptionalTensor, Tn(Arg::KNew)).with_default("None"),
        p("v_new", T::OptionalTensor, Tn(Arg::VNew)).with_default("None"),
        p("qv", T::OptionalTensor, Tn(Arg::QV)).with_default("None"),
        p("out_", T::OptionalTensor, AlwaysNone).with_default("None"),
        p("cu_seqlens_q", T::OptionalTensor, Tn(Arg::CuSeqlensQ)).with_default("None"),
        p("cu_seqlens_k", T::OptionalTensor, AlwaysNone).with_default("None"),
        p(
            "cu_seqlens_k_new",
            T::OptionalTensor,
            Tn(Arg::CuSeqlensKNew),
        )
        .with_default("None"),
        p("seqused_q", T::OptionalTensor, AlwaysNone).with_default("None"),
        p("seqused_k", T::OptionalTensor, Tn(Arg::SequsedK)).with_default("None"),
        p("max_seqlen_q", T::OptionalInt, Python(Param::MaxSeqlenQ)).with_default("None"),
        p("max_seqlen_k", T::OptionalInt, AlwaysNone).with_default("None"),
        p("page_table", T::OptionalTensor, Tn(Arg::PageTable)).with_default("None"),
        p("kv_batch_idx", T::OptionalTensor, Tn(Arg::KvBatchIdx)).with_default("None"),
        p("leftpad_k", T::OptionalTensor, Tn(Arg::LeftpadK)).with_default("None"),
        p("rotary_cos", T::OptionalTensor, Tn(Arg::RotaryCos)).with_default("None"),
        p("rotary_sin", T::OptionalTensor, Tn(Arg::RotarySin)).with_default("None"),
        p("seqlens_rotary", T::OptionalTensor, Tn(Arg::SeqlensRotary)).with_default("None"),
        p("q_descale", T::OptionalTensor, Tn(Arg::QDescale)).with_default("None"),
        p("k_descale", T::OptionalTensor, Tn(Arg::KDescale)).with_default("None"),
        p("v_descale", T::OptionalTensor, Tn(Arg::VDescale)).with_default("None"),
        p("softmax_scale", T::OptionalFloat, OpSource::SoftmaxScale).with_default("None"),
        p("causal", T::Bool, Python(Param::Causal)).with_default("False"),
        p("window_size_left", T::Int, OpSource::WindowLeft).with_default("-1"),
        p("window_size_right", T::Int, OpSource::WindowRight).with_default("-1"),
        p("attention_chunk", T::Int, OpSource::AttentionChunk).with_default("0"),
        p("softcap", T::Float, Python(Param::Softcap)).with_default("0."),
        p(
            "rotary_interleaved",
            T::Bool,
            Python(Param::RotaryInterleaved),
        )
        .with_default("True"),
        p(
            "scheduler_metadata",
            T::OptionalTensor,
            Tn(Arg::SchedulerMetadata),
        )
        .with_default("None"),
        p("num_splits", T::Int, Python(Param::NumSplits)).with_default("1"),
        p("pack_gqa", T::OptionalBool, Python(Param::PackGqa)).with_default("None"),
        p("sm_margin", T::Int, Python(Param::SmMargin)).with_default("0"),
    ],
    returns: "(Tensor, Tensor, Tensor, Tensor)",
    symbolic_ints: true,
};

/// `sgl_kernel::fwd` (sglang@b5493f65b sgl-kernel/csrc/flash_extension.cc:L25-L61: no
/// defaults), called positionally.
pub static SGL_FWD_OP: OpSchema = OpSchema {
    name: "sgl_kernel::fwd",
    signature: &signature::SGL_KERNEL_0_3_21,
    params: &[
        p("q", T::Tensor, Tn(Arg::Q)),
        p("k", T::Tensor, Tn(Arg::K)),
        p("v", T::Tensor, Tn(Arg::V)),
        p("k_new", T::OptionalTensor, Tn(Arg::KNew)),
        p("v_new", T::OptionalTensor, Tn(Arg::VNew)),
        p("q_v", T::OptionalTensor, Tn(Arg::QV)),
        p("out", T::OptionalTensor, AlwaysNone),
        p("cu_seqlens_q", T::OptionalTensor, Tn(Arg::CuSeqlensQ)),
        p("cu_seqlens_k", T::OptionalTensor, AlwaysNone),
        p(
            "cu_seqlens_k_new",
            T::OptionalTensor,
            Tn(Arg::CuSeqlensKNew),
        ),
        p("seqused_q", T::OptionalTensor, AlwaysNone),
        p("seqused_k", T::OptionalTensor, Tn(Arg::SequsedK)),
        p("max_seqlen_q", T::OptionalInt, Python(Param::MaxSeqlenQ)),
        p("max_seqlen_k", T::OptionalInt, AlwaysNone),
        p("page_table", T::OptionalTensor, Tn(Arg::PageTable)),
        p("kv_batch_idx", T::OptionalTensor, Tn(Arg::KvBatchIdx)),
        p("leftpad_k", T::OptionalTensor, Tn(Arg::LeftpadK)),
        p("rotary_cos", T::OptionalTensor, Tn(Arg::RotaryCos)),
        p("rotary_sin", T::OptionalTensor, Tn(Arg::RotarySin)),
        p("seqlens_rotary", T::OptionalTensor, Tn(Arg::SeqlensRotary)),
        p("q_descale", T::OptionalTensor, Tn(Arg::QDescale)),
        p("k_descale", T::OptionalTensor, Tn(Arg::KDescale)),
        p("v_descale", T::OptionalTensor, Tn(Arg::VDescale)),
        p("softmax_scale", T::OptionalFloat, OpSource::SoftmaxScale),
        p("is_causal", T::Bool, Python(Param::Causal)),
        p("window_size_left", T::Int, OpSource::WindowLeft),
        p("window_size_right", T::Int, OpSource::WindowRight),
        p("attention_chunk", T::Int, OpSource::AttentionChunk),
        p("softcap", T::Float, Python(Param::Softcap)),
        p(
            "is_rotary_interleaved",
            T::Bool,
            Python(Param::RotaryInterleaved),
        ),
        p(
            "scheduler_metadata",
            T::OptionalTensor,
            Tn(Arg::SchedulerMetadata),
        ),
        p("num_splits", T::Int, Python(Param::NumSplits)),
        p("pack_gqa", T::OptionalBool, Python(Param::PackGqa)),
        p("sm_margin", T::Int, Python(Param::SmMargin)),
        p("sinks", T::OptionalTensor, Tn(Arg::Sinks)),
    ],
    returns: "(Tensor, Tensor, Tensor, Tensor)",
    symbolic_ints: false,
};

/// The arguments a wrapper's `maybe_contiguous` calls touch, in source order.
pub fn maybe_contiguous_all(s: &mut CudaState, args: &[Arg]) -> Result<(), Fail> {
    args.iter().try_for_each(|&arg| s.maybe_contiguous(arg))
}

/// `assert x.stride(-1) == 1` of a Python wrapper (the stride itself can raise).
pub fn assert_last_stride(s: &CudaState, param: Param) -> Result<(), Fail> {
    ensure(python_stride_last(s.py(param))? == 1)
}
