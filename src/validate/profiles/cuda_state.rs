//! The per-call state every CUDA layer reads and writes: the bound Python arguments, what the Python
//! layer turned them into (the operator's arguments), and what `mha_fwd` derived from them.
//!
//! One state type serves the Python layers of `fa3`/`fa3-stable`/`sgl-kernel`, the operator-call
//! layer and the shared C++ layer ([`super::mha_fwd`]), so that a profile is just a list of layers.

use crate::call::python::{self, Form};
use crate::call::{BoundArgs, Device, Dtype, Param, PyValue, Signature, TensorArg};
use crate::validate::engine::{Fail, HazardLog};
use crate::validate::py;
use crate::validate::registry::cuda::*;
use crate::validate::{Hazard, Resolved};

/// Which C++ front end raised a `TORCH_CHECK`: the message text differs, the checks do not
/// (cuda-fa3.md §0.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `flash_api.cpp`: `TORCH_CHECK`, whole-shape `CHECK_SHAPE` messages, implicit
    /// `data_ptr<T>()` dtype checks.
    Legacy,
    /// `flash_api_stable.cpp`: `STD_TORCH_CHECK` with the `func, FILE:LINE, ` prefix and
    /// per-dimension `CHECK_SHAPE` messages; no implicit dtype checks.
    Stable,
}

/// A tensor argument of the C++ operator, named as `mha_fwd` names it in its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    Q,
    K,
    V,
    KNew,
    VNew,
    QV,
    CuSeqlensQ,
    CuSeqlensKNew,
    SequsedK,
    PageTable,
    KvBatchIdx,
    LeftpadK,
    RotaryCos,
    RotarySin,
    SeqlensRotary,
    QDescale,
    KDescale,
    VDescale,
    SchedulerMetadata,
    Sinks,
}

impl Arg {
    /// The C++ variable name (what `CHECK_*` messages print).
    pub fn cpp(self) -> &'static str {
        match self {
            Arg::Q => "q",
            Arg::K => "k",
            Arg::V => "v",
            Arg::KNew => "k_new",
            Arg::VNew => "v_new",
            Arg::QV => "q_v",
            Arg::CuSeqlensQ => "cu_seqlens_q",
            Arg::CuSeqlensKNew => "cu_seqlens_k_new",
            Arg::SequsedK => "seqused_k",
            Arg::PageTable => "page_table",
            Arg::KvBatchIdx => "kv_batch_idx",
            Arg::LeftpadK => "leftpad_k",
            Arg::RotaryCos => "rotary_cos",
            Arg::RotarySin => "rotary_sin",
            Arg::SeqlensRotary => "seqlens_rotary",
            Arg::QDescale => "q_descale",
            Arg::KDescale => "k_descale",
            Arg::VDescale => "v_descale",
            Arg::SchedulerMetadata => "scheduler_metadata",
            Arg::Sinks => "sinks",
        }
    }

    /// The Python parameter of `flash_attn_with_kvcache` that feeds it.
    pub fn python(self) -> Param {
        match self {
            Arg::Q => Param::Q,
            Arg::K => Param::KCache,
            Arg::V => Param::VCache,
            Arg::KNew => Param::K,
            Arg::VNew => Param::V,
            Arg::QV => Param::Qv,
            Arg::CuSeqlensQ => Param::CuSeqlensQ,
            Arg::CuSeqlensKNew => Param::CuSeqlensKNew,
            Arg::SequsedK => Param::CacheSeqlens,
            Arg::PageTable => Param::PageTable,
            Arg::KvBatchIdx => Param::CacheBatchIdx,
            Arg::LeftpadK => Param::CacheLeftpad,
            Arg::RotaryCos => Param::RotaryCos,
            Arg::RotarySin => Param::RotarySin,
            Arg::SeqlensRotary => Param::RotarySeqlens,
            Arg::QDescale => Param::QDescale,
            Arg::KDescale => Param::KDescale,
            Arg::VDescale => Param::VDescale,
            Arg::SchedulerMetadata => Param::SchedulerMetadata,
            Arg::Sinks => Param::Sinks,
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Sizes `mha_fwd` derives (`flash_api.cpp:L758-775`), as C++ `int`s (held in `i64`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MhaSizes {
    pub batch_size: i64,
    pub seqlen_q: i64,
    pub total_q: i64,
    pub num_heads: i64,
    pub head_size: i64,
    pub head_size_v: i64,
    pub max_num_pages_per_seq: i64,
    pub num_pages: i64,
    pub page_size: i64,
    pub seqlen_k: i64,
    pub total_k: i64,
    pub num_heads_k: i64,
    pub batch_size_k: i64,
    pub seqlen_k_new: i64,
    pub total_k_new: i64,
}

/// The mask and heuristics `mha_fwd` resolved (cuda-fa3.md D.1, D.4–D.6).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MhaResolution {
    pub is_causal: bool,
    pub is_local: bool,
    /// `params.window_size_left/right` after normalisation (D.1).
    pub window_left: i64,
    pub window_right: i64,
    pub attention_chunk: i64,
    pub softcap: f64,
    pub is_varlen: bool,
    pub pagedkv_tma: bool,
    /// `params.num_splits`: a C++ `int`, so a huge requested value wraps.
    pub num_splits: i64,
    pub pack_gqa: bool,
    pub tile_m: i64,
    pub tile_n: i64,
    pub head_size_rounded: i64,
    pub head_size_v_rounded: i64,
    /// Whether the scheduler-metadata block of `mha_fwd` runs, and the size it expects.
    pub metadata_needed: bool,
    pub metadata_size: i64,
}

/// What the Python layer made of `cache_seqlens` (the operator's `seqused_k`).
#[derive(Clone, Debug, PartialEq)]
pub enum SequsedK {
    /// The caller's value, passed through unchanged.
    Passed,
    /// An `int` expanded to an int32 tensor by the wrapper (held as the `Tensor` value).
    Expanded(PyValue),
}

static NOT_A_PARAMETER: PyValue = PyValue::None;

/// The state of one call as it travels through a CUDA profile's layers.
pub struct CudaState {
    pub bound: BoundArgs,
    pub flavour: Flavour,
    /// The operator called from Python (`flash_attn_3::_flash_attn_forward`, `sgl_kernel::fwd`).
    pub op: &'static OpSchema,
    pub seqused_k: SequsedK,
    /// The softmax scale the wrapper passes (it always passes one).
    pub softmax_scale: f64,
    /// `window_size[0]`, `window_size[1]` as the wrapper indexed them.
    pub window: [PyValue; 2],
    /// The `attention_chunk` the operator receives.
    pub attention_chunk: PyValue,
    /// Arguments a `maybe_contiguous` copied (bit per [`Arg`]): they are contiguous afterwards.
    made_contiguous: u32,
    pub sizes: MhaSizes,
    pub resolution: MhaResolution,
    /// The stable build's per-dimension `CHECK_SHAPE` text of the failing check.
    pub stable_shape_detail: Option<String>,
    /// Set by the sgl-kernel FA4 path, which resolves the call differently.
    pub fa4: Option<Box<Resolved>>,
    pub hazards: Vec<Hazard>,
}

impl HazardLog for CudaState {
    fn hazards(&mut self) -> &mut Vec<Hazard> {
        &mut self.hazards
    }
}

impl CudaState {
    pub fn new(bound: BoundArgs, flavour: Flavour, op: &'static OpSchema) -> CudaState {
        CudaState {
            bound,
            flavour,
            op,
            seqused_k: SequsedK::Passed,
            softmax_scale: 0.0,
            window: [PyValue::Int(-1), PyValue::Int(-1)],
            attention_chunk: PyValue::Int(0),
            made_contiguous: 0,
            sizes: MhaSizes::default(),
            resolution: MhaResolution::default(),
            stable_shape_detail: None,
            fa4: None,
            hazards: Vec::new(),
        }
    }

    /// The effective value of a Python parameter.
    pub fn py(&self, param: Param) -> &PyValue {
        self.bound.get(param)
    }

    /// The value the operator receives for `arg`.
    pub fn value(&self, arg: Arg) -> &PyValue {
        match (&self.seqused_k, arg) {
            (SequsedK::Expanded(v), Arg::SequsedK) => v,
            // Upstream's signature has no `sinks`: it is never passed there.
            _ if !self.bound.has_param(arg.python()) => &NOT_A_PARAMETER,
            _ => self.bound.get(arg.python()),
        }
    }

    /// The tensor the operator receives for `arg` (`None` for `None`).
    pub fn tensor(&self, arg: Arg) -> Option<&TensorArg> {
        self.value(arg).as_tensor()
    }

    /// The tensor for an argument that is always present once the Python layer has run.
    pub fn required(&self, arg: Arg) -> &TensorArg {
        self.tensor(arg).expect(
            "the Python layer and the operator schema guarantee q, k_cache, v_cache are tensors",
        )
    }

    pub fn has(&self, arg: Arg) -> bool {
        self.tensor(arg).is_some()
    }

    /// `maybe_contiguous(x)`: `x.contiguous() if x is not None and x.stride(-1) != 1 else x`.
    pub fn maybe_contiguous(&mut self, arg: Arg) -> Result<(), Fail> {
        let value = self.value(arg);
        if value.is_none() {
            return Ok(());
        }
        if python_stride_last(value)? != 1 {
            self.made_contiguous |= arg.bit();
        }
        Ok(())
    }

    /// `x.stride(-1)` as the operator sees it (after any `maybe_contiguous` copy).
    pub fn stride_last(&self, arg: Arg) -> Result<usize, Fail> {
        let t = self.required_or_err(arg);
        if self.made_contiguous & arg.bit() != 0 {
            return Ok(1);
        }
        last_stride(t)
    }

    /// `x.is_contiguous()` as the operator sees it.
    pub fn is_contiguous(&self, arg: Arg) -> bool {
        let t = self.required_or_err(arg);
        // No explicit strides means torch's default (contiguous) layout.
        self.made_contiguous & arg.bit() != 0 || t.stride.is_none() || t.is_contiguous()
    }

    pub fn device(&self, arg: Arg) -> Device {
        self.required_or_err(arg).device_or(Device::Cuda)
    }

    fn required_or_err(&self, arg: Arg) -> &TensorArg {
        self.tensor(arg)
            .expect("C++ checks only inspect tensors the schema check let through")
    }

    /// `x.size(dim)` with ATen's `IndexError` for a dimension out of range.
    pub fn size(&self, arg: Arg, dim: isize) -> Result<i64, Fail> {
        aten_size(self.required(arg), dim)
    }
}

/// `TORCH_CHECK(ok)` (and the Python wrappers' `assert ok`) with a fixed message.
pub fn ensure(ok: bool) -> Result<(), Fail> {
    if ok { Ok(()) } else { Err(Fail::new()) }
}

/// ATen's `size(dim)`: `IndexError` texts verified in cuda-fa3.md §B "Derived sizes".
pub fn aten_size(t: &TensorArg, dim: isize) -> Result<i64, Fail> {
    if let Some(s) = t.size(dim) {
        return Ok(s as i64);
    }
    let n = t.ndim() as i64;
    if n == 0 {
        return Err(Fail::with([dim.to_string()]).at(ATEN_DIM_NO_DIMS));
    }
    Err(Fail::with([(-n).to_string(), (n - 1).to_string(), dim.to_string()]).at(ATEN_DIM_RANGE))
}

/// Python's `x.stride(-1)` on an arbitrary argument value.
pub fn python_stride_last(value: &PyValue) -> Result<usize, Fail> {
    last_stride(python_tensor(value, "stride")?)
}

/// `t.stride(-1)`, without materialising default strides.
fn last_stride(t: &TensorArg) -> Result<usize, Fail> {
    match (&t.stride, t.ndim()) {
        (_, 0) => Err(Fail::with(["-1".to_string()]).at(ATEN_DIM_NO_DIMS)),
        (None, _) => Ok(1),
        (Some(strides), n) => Ok(strides.get(n - 1).copied().unwrap_or(1)),
    }
}

/// Python's `x.shape[index]` on an arbitrary argument value.
pub fn python_shape(value: &PyValue, index: isize) -> Result<usize, Fail> {
    python_tensor(value, "shape")?
        .size(index)
        .ok_or_else(|| Fail::new().at(PY_TUPLE_INDEX))
}

/// The tensor behind `value`, or the `AttributeError` Python raises when reading `attribute`.
pub fn python_tensor<'a>(value: &'a PyValue, attribute: &str) -> Result<&'a TensorArg, Fail> {
    value.as_tensor().ok_or_else(|| {
        Fail::with([value.type_name().to_string(), attribute.to_string()]).at(PY_NO_ATTRIBUTE)
    })
}

/// Python's `x[i]` for `i` in 0 and 1, as `window_size[0]` evaluates it: CPython's and NumPy's
/// subscription ([`python::subscript`]: a dict's `KeyError`, a NumPy scalar's `IndexError`), torch's
/// for a tensor.
pub fn python_index(value: &PyValue, index: usize) -> Result<PyValue, Fail> {
    if let PyValue::Tensor(t) = value {
        return tensor_element(t, index);
    }
    python::subscript(value, py::int(index)).map_err(|e| match e.form {
        // Each sequence's message is a site of its own, with no value in it.
        Form::SequenceIndex => Fail::new().at(match e.args.first().map(String::as_str) {
            Some("tuple") => PY_TUPLE_INDEX,
            Some("list") => PY_LIST_INDEX,
            _ => PY_STR_INDEX,
        }),
        Form::Key => Fail::with(e.args).at(PY_KEY),
        Form::ScalarIndex => Fail::new().at(PY_SCALAR_INDEX),
        _ => Fail::with(e.args).at(PY_NOT_SUBSCRIPTABLE),
    })
}

/// `t[i]` of a 1-D tensor: a 0-d tensor holding the element (its value when the spec gave values).
fn tensor_element(t: &TensorArg, index: usize) -> Result<PyValue, Fail> {
    // Python indexing of a 0-d tensor fails before any size is read.
    if t.ndim() == 0 {
        return Err(Fail::new().at(ATEN_INDEX_0D));
    }
    let len = aten_size(t, 0)? as usize;
    if index >= len {
        return Err(
            Fail::with([index.to_string(), "0".to_string(), len.to_string()]).at(ATEN_TENSOR_INDEX),
        );
    }
    let mut element = TensorArg::new(t.dtype, &t.shape[1..]);
    element.device = t.device;
    element.values = t.values.as_ref().and_then(|v| {
        let per = element.numel().unwrap_or(0).max(1);
        let all = v.to_i64();
        (all.len() >= (index + 1) * per)
            .then(|| crate::call::TensorValues::Int(all[index * per..(index + 1) * per].to_vec()))
    });
    Ok(PyValue::Tensor(element))
}

/// One parameter of an operator schema.
pub struct SchemaParam {
    pub name: &'static str,
    pub ty: SchemaType,
    /// The default as torch prints it in the schema (`=None`, `=0.`), if the schema has one.
    pub default: Option<&'static str>,
    /// Where the Python layer takes the value from.
    pub source: OpSource,
}

impl SchemaParam {
    /// This parameter with a default, written as torch prints it.
    pub const fn with_default(self, default: &'static str) -> SchemaParam {
        SchemaParam {
            default: Some(default),
            ..self
        }
    }
}

/// The schema types of the two operators' parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaType {
    Tensor,
    OptionalTensor,
    Int,
    OptionalInt,
    Float,
    OptionalFloat,
    Bool,
    OptionalBool,
}

impl SchemaType {
    /// How torch's argument parser names the type in its error message.
    pub fn display(self) -> &'static str {
        match self {
            SchemaType::Tensor => "Tensor",
            SchemaType::OptionalTensor => "Optional[Tensor]",
            SchemaType::Int => "int",
            SchemaType::OptionalInt => "Optional[int]",
            SchemaType::Float => "float",
            SchemaType::OptionalFloat => "Optional[float]",
            SchemaType::Bool => "bool",
            SchemaType::OptionalBool => "Optional[bool]",
        }
    }

    /// How the schema writes the type (`FunctionSchema`'s printer); `symbolic_ints` for a schema
    /// whose ints are `SymInt`.
    pub fn schema_name(self, symbolic_ints: bool) -> &'static str {
        match self {
            SchemaType::Tensor => "Tensor",
            SchemaType::OptionalTensor => "Tensor?",
            SchemaType::Int if symbolic_ints => "SymInt",
            SchemaType::OptionalInt if symbolic_ints => "SymInt?",
            SchemaType::Int => "int",
            SchemaType::OptionalInt => "int?",
            SchemaType::Float => "float",
            SchemaType::OptionalFloat => "float?",
            SchemaType::Bool => "bool",
            SchemaType::OptionalBool => "bool?",
        }
    }

    /// Whether torch's argument parser converts `value` for a parameter of this type. Tensors and
    /// `None` for optional types as written; numbers through pybind11's casters with conversion
    /// on (cuda-fa3.md A.5, as corrected 2026-12-01 against torch 2.15):
    /// - `bool`: `None` (as False) and any object whose type defines `__bool__` (`nb_bool`; the
    ///   caster never falls back to a length), which must succeed: numbers, NumPy scalars,
    ///   one-element tensors;
    /// - `float`: `PyFloat_AsDouble`, i.e. `__float__` or `__index__`: numbers, NumPy scalars,
    ///   one-element tensors;
    /// - `int`: never a `float` instance (a Python float, `np.float64`); otherwise `__index__`,
    ///   and failing that `int()` of any number (`PyNumber_Long`): ints, bools, NumPy scalars
    ///   (`np.float32` truncated), one-element tensors of any dtype.
    pub fn accepts(self, value: &PyValue) -> bool {
        let defines_number_slots = matches!(
            value,
            PyValue::Bool(_)
                | PyValue::Int(_)
                | PyValue::Float(_)
                | PyValue::Numpy(_)
                | PyValue::Tensor(_)
        );
        let float_instance = matches!(value, PyValue::Float(_))
            || matches!(value, PyValue::Numpy(n) if n.dtype == Dtype::Float64);
        match (self, value) {
            (
                SchemaType::OptionalTensor
                | SchemaType::OptionalInt
                | SchemaType::OptionalFloat
                | SchemaType::Bool
                | SchemaType::OptionalBool,
                PyValue::None,
            ) => true,
            (SchemaType::Tensor | SchemaType::OptionalTensor, v) => v.as_tensor().is_some(),
            (SchemaType::Bool | SchemaType::OptionalBool, v) => {
                defines_number_slots && python::truth(v).is_ok()
            }
            (SchemaType::Float | SchemaType::OptionalFloat, v) => python::float(v).is_some(),
            (SchemaType::Int | SchemaType::OptionalInt, v) => {
                !float_instance && defines_number_slots && python::float(v).is_some()
            }
        }
    }
}

/// Where an operator argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpSource {
    Tensor(Arg),
    /// A Python parameter passed through unchanged.
    Python(Param),
    /// Always `None` from `flash_attn_with_kvcache`.
    AlwaysNone,
    SoftmaxScale,
    WindowLeft,
    WindowRight,
    AttentionChunk,
}

/// An operator as the dispatcher sees it: qualified name and parameters in schema order.
pub struct OpSchema {
    pub name: &'static str,
    /// The Python signature whose bound arguments feed the operator.
    pub signature: &'static Signature,
    pub params: &'static [SchemaParam],
    /// The return type as the schema prints it.
    pub returns: &'static str,
    /// The schema's ints are `SymInt`: `torch.library.custom_op` infers an `int` annotation as
    /// `SymInt` (torch 2.15, run), a schema written in C++ says `int`.
    pub symbolic_ints: bool,
}

impl OpSchema {
    /// The schema as torch prints it (`FunctionSchema`'s `operator<<`): the `Declaration:` line
    /// of its argument errors. The printer normalises the declaration's spacing and literals
    /// (`0.0` prints as `0.`), so it is the same text whatever the source's layout; checked
    /// against torch 2.15 on both operators' schemas.
    pub fn declaration(&self) -> String {
        let params = self.params.iter().map(|p| {
            let ty = p.ty.schema_name(self.symbolic_ints);
            match p.default {
                Some(default) => format!("{ty} {}={default}", p.name),
                None => format!("{ty} {}", p.name),
            }
        });
        format!(
            "{}({}) -> {}",
            self.name,
            params.collect::<Vec<_>>().join(", "),
            self.returns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{NumpyScalar, NumpyValue, TensorValues};

    /// cuda-fa3.md A.5 as corrected: what torch 2.15 converted or refused on the exact schemas
    /// and, for the NumPy scalars, on a `torch.library` operator with the same slot types (2026-12-02).
    #[test]
    fn torch_casters_convert_what_pybind11_converts() {
        use PyValue::{Bool, Float, Int, List, None as PyNone, Str};
        use SchemaType as T;
        let np = |dtype, value| PyValue::Numpy(NumpyScalar { dtype, value });
        let tensor = |dtype, shape: &[usize], value: f64| {
            let mut t = TensorArg::new(dtype, shape);
            let n = t.numel().unwrap();
            t.values = Some(TensorValues::Float(vec![value; n]));
            PyValue::Tensor(t)
        };
        let cases = [
            (T::Bool, PyNone, true),                             // causal=None (run)
            (T::Bool, Float(0.0), true),                         // causal=0.0 (run)
            (T::Bool, Float(1.5), true),                         // (run)
            (T::Bool, tensor(Dtype::Float32, &[1], 1.0), true),  // one element (run)
            (T::Bool, tensor(Dtype::Float32, &[2], 1.0), false), // __bool__ raises
            (T::Bool, Str("yes".into()), false),                 // no nb_bool
            (T::Bool, List(vec![Int(1)]), false),                // no nb_bool
            (
                T::OptionalBool,
                np(Dtype::Bool, NumpyValue::Bool(true)),
                true,
            ),
            (T::Float, tensor(Dtype::Float32, &[], 0.1), true), // softmax_scale (run)
            (T::Float, Int(1), true),
            (T::Float, PyNone, false),
            (T::Float, Str("0.1".into()), false), // no __float__
            (T::OptionalFloat, PyNone, true),
            (T::Int, Bool(true), true),  // num_splits=True (run)
            (T::Int, Float(1.0), false), // a float (run)
            (T::Int, np(Dtype::Int64, NumpyValue::Int(1)), true), // __index__ (run)
            (T::Int, np(Dtype::Float64, NumpyValue::Float(1.0)), false), // a float subclass
            (T::Int, np(Dtype::Float32, NumpyValue::Float(1.5)), true), // int() (run)
            (T::Int, tensor(Dtype::Float32, &[], 3.0), true), // int() of a 0-d tensor
            (T::Int, PyNone, false),
            (T::OptionalInt, PyNone, true),
        ];
        for (slot, value, accepted) in cases {
            assert_eq!(slot.accepts(&value), accepted, "{slot:?} {value:?}");
        }
    }

    #[test]
    fn window_subscription_raises_what_python_raises() {
        let fail = |v: PyValue, i: usize| python_index(&v, i).unwrap_err();
        // flash_attn_interface.py's window_size[0] on a dict looks the key up.
        let one_key = PyValue::Dict(vec![(PyValue::Int(0), PyValue::Int(-1))]);
        assert_eq!(python_index(&one_key, 0), Ok(PyValue::Int(-1)));
        assert_eq!(fail(one_key, 1), Fail::with(["1".to_string()]).at(PY_KEY));
        let scalar = PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Int64,
            value: NumpyValue::Int(-1),
        });
        assert_eq!(fail(scalar, 0), Fail::new().at(PY_SCALAR_INDEX));
        assert_eq!(
            fail(PyValue::List(vec![PyValue::Int(-1)]), 1),
            Fail::new().at(PY_LIST_INDEX)
        );
        assert_eq!(
            fail(PyValue::Tuple(vec![]), 0),
            Fail::new().at(PY_TUPLE_INDEX)
        );
        assert_eq!(
            fail(PyValue::Str("a".into()), 1),
            Fail::new().at(PY_STR_INDEX)
        );
        assert_eq!(
            fail(PyValue::None, 0),
            Fail::with(["NoneType".to_string()]).at(PY_NOT_SUBSCRIPTABLE)
        );
    }
}
