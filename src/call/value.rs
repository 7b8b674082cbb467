//! Python values as a caller passes them: None, scalars, sequences, tensors and other objects.

use super::Dtype;
use std::fmt;

/// Where a tensor lives. A spec may leave it open; then it is the native device of the stack being
/// checked (`musa` for the MUSA stack, `cuda` for the CUDA ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Musa,
    Cuda,
    Cpu,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Musa => "musa",
            Device::Cuda => "cuda",
            Device::Cpu => "cpu",
        }
    }

    pub fn from_name(name: &str) -> Option<Device> {
        // torch writes devices as `cuda:0`; the index does not matter to any check modelled here.
        let kind = name.split(':').next().unwrap_or(name);
        match kind {
            "musa" => Some(Device::Musa),
            "cuda" => Some(Device::Cuda),
            "cpu" => Some(Device::Cpu),
            _ => None,
        }
    }
}

/// Element values of a tensor, row-major over its logical shape.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValues {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl TensorValues {
    pub fn len(&self) -> usize {
        match self {
            TensorValues::Int(v) => v.len(),
            TensorValues::Float(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values as integers (floats truncate toward zero, as `tensor.long()` does).
    pub fn to_i64(&self) -> Vec<i64> {
        match self {
            TensorValues::Int(v) => v.clone(),
            TensorValues::Float(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            TensorValues::Int(v) => v.iter().map(|&x| x as f64).collect(),
            TensorValues::Float(v) => v.clone(),
        }
    }
}

/// A tensor argument: metadata always, values when the spec carries them.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorArg {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Strides in elements; `None` means contiguous (torch's default layout).
    pub stride: Option<Vec<usize>>,
    pub device: Option<Device>,
    pub values: Option<TensorValues>,
}

impl TensorArg {
    pub fn new(dtype: Dtype, shape: &[usize]) -> TensorArg {
        TensorArg {
            dtype,
            shape: shape.to_vec(),
            stride: None,
            device: None,
            values: None,
        }
    }

    pub fn with_ints(dtype: Dtype, shape: &[usize], values: Vec<i64>) -> TensorArg {
        TensorArg {
            values: Some(TensorValues::Int(values)),
            ..TensorArg::new(dtype, shape)
        }
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements, `None` when it does not fit in `usize`.
    pub fn numel(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// torch's contiguous strides for `shape`.
    pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
        let mut strides = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
        }
        strides
    }

    pub fn strides(&self) -> Vec<usize> {
        self.stride
            .clone()
            .unwrap_or_else(|| TensorArg::contiguous_strides(&self.shape))
    }

    /// Normalises a Python dimension index (negative counts from the end).
    fn dim_index(&self, dim: isize) -> Option<usize> {
        let n = self.ndim() as isize;
        let i = if dim < 0 { dim + n } else { dim };
        (0..n).contains(&i).then_some(i as usize)
    }

    /// `tensor.shape[dim]`, `None` when out of range.
    pub fn size(&self, dim: isize) -> Option<usize> {
        self.dim_index(dim).map(|i| self.shape[i])
    }

    /// `tensor.stride(dim)`, `None` when out of range.
    pub fn stride_of(&self, dim: isize) -> Option<usize> {
        self.dim_index(dim).map(|i| self.strides()[i])
    }

    /// torch's `is_contiguous()`: dimensions of size 1 may have any stride; empty tensors are contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let strides = self.strides();
        let mut expected = 1usize;
        for (&size, &stride) in self.shape.iter().zip(&strides).rev() {
            if size != 1 {
                if stride != expected {
                    return false;
                }
                expected = expected.saturating_mul(size);
            }
        }
        true
    }

    /// Elements of memory the layout spans (`1 + Σ (size − 1)·stride`; 0 for an empty tensor),
    /// `None` when that overflows.
    pub fn storage_extent(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        self.shape
            .iter()
            .zip(self.strides())
            .try_fold(1usize, |acc, (&size, stride)| {
                acc.checked_add((size - 1).checked_mul(stride)?)
            })
    }

    /// Whether two elements may share one memory location (`expand`'s stride 0, overlapping
    /// strides). `false` is a proof that they do not: the dimensions, ordered by stride, each
    /// step over everything the smaller ones span. A layout this test cannot prove distinct is
    /// treated as aliasing, which is always a faithful description (values follow the memory).
    pub fn aliases(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(self.strides())
            .filter(|(size, _)| **size > 1)
            .map(|(&size, stride)| (stride, size))
            .collect();
        dims.sort_unstable();
        let mut spanned = 1usize;
        for (stride, size) in dims {
            if stride < spanned {
                return true;
            }
            spanned = match stride.checked_mul(size) {
                Some(span) => span,
                None => return false, // larger than any memory: the rest cannot overlap
            };
        }
        false
    }

    /// The memory offset of every element, row-major over the shape.
    pub fn storage_offsets(&self) -> Vec<usize> {
        let strides = self.strides();
        let mut offsets = vec![0usize];
        for (&size, &stride) in self.shape.iter().zip(&strides) {
            offsets = offsets
                .iter()
                .flat_map(|&base| (0..size).map(move |i| base + i * stride))
                .collect();
        }
        offsets
    }

    /// Device after applying the stack's native device to an unspecified one.
    pub fn device_or(&self, native: Device) -> Device {
        self.device.unwrap_or(native)
    }

    /// Integer values, when given.
    pub fn int_values(&self) -> Option<Vec<i64>> {
        self.values.as_ref().map(TensorValues::to_i64)
    }
}

/// The value of a NumPy scalar, by the kind of its dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NumpyValue {
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// A NumPy scalar (`np.int64(3)`, `np.float32(0.5)`, `np.True_`), as a recorder meets them where
/// Python numbers are expected. It is not a Python `int`/`float` (`isinstance` says no, except
/// `np.float64`, a `float` subclass) but compares, converts and tests true like its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NumpyScalar {
    /// The NumPy dtype (its name is `type(x).__name__`).
    pub dtype: Dtype,
    pub value: NumpyValue,
}

impl NumpyScalar {
    /// The scalar type's `tp_name`, as CPython's `TypeError` and `AttributeError` texts print it
    /// (`type(x).__name__` is the dtype's name; NumPy 2's `np.bool_` is `numpy.bool`).
    pub fn type_name(&self) -> &'static str {
        match self.dtype {
            Dtype::Bool => "numpy.bool",
            Dtype::Int8 => "numpy.int8",
            Dtype::Uint8 => "numpy.uint8",
            Dtype::Int16 => "numpy.int16",
            Dtype::Int32 => "numpy.int32",
            Dtype::Int64 => "numpy.int64",
            Dtype::Float16 => "numpy.float16",
            Dtype::Float32 => "numpy.float32",
            Dtype::Float64 => "numpy.float64",
            // No NumPy scalar type (the spec parser refuses them).
            Dtype::Bfloat16 | Dtype::Float8E4m3fn | Dtype::Float8E5m2 => self.dtype.torch_name(),
        }
    }

    pub fn as_f64(&self) -> f64 {
        match self.value {
            NumpyValue::Bool(b) => f64::from(u8::from(b)),
            NumpyValue::Int(i) => i as f64,
            NumpyValue::Float(x) => x,
        }
    }
}

/// A Python value passed to `flash_attn_with_kvcache`.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<PyValue>),
    List(Vec<PyValue>),
    Tensor(TensorArg),
    /// A dict, its items in insertion order.
    Dict(Vec<(PyValue, PyValue)>),
    Numpy(NumpyScalar),
    /// Any other object, described by its Python type name (`function`, `set`, ...).
    Object(String),
}

impl PyValue {
    /// A tensor argument of `dtype` and `shape`, contiguous, values left to the materialiser.
    pub fn tensor(dtype: Dtype, shape: &[usize]) -> PyValue {
        PyValue::Tensor(TensorArg::new(dtype, shape))
    }

    /// The type's name as CPython's `TypeError` and `AttributeError` messages print it
    /// (`tp_name`: `numpy.int64` for a NumPy scalar, whose `__name__` is `int64`).
    pub fn type_name(&self) -> &str {
        match self {
            PyValue::Numpy(n) => n.type_name(),
            other => other.class_name(),
        }
    }

    /// `type(x).__name__` (what `json.dumps` names in its `TypeError`).
    pub fn class_name(&self) -> &str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::Tuple(_) => "tuple",
            PyValue::List(_) => "list",
            PyValue::Tensor(_) => "Tensor",
            PyValue::Dict(_) => "dict",
            PyValue::Numpy(n) => n.dtype.torch_name(),
            PyValue::Object(name) => name,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, PyValue::None)
    }

    pub fn as_tensor(&self) -> Option<&TensorArg> {
        match self {
            PyValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// `isinstance(x, int)`: true for ints and bools.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            PyValue::Int(i) => Some(*i),
            PyValue::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// A Python number as float (`int`, `bool`, `float` or a NumPy scalar).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            PyValue::Float(f) => Some(*f),
            PyValue::Numpy(n) => Some(n.as_f64()),
            other => other.as_int().map(|i| i as f64),
        }
    }

    /// Python truthiness, where it is defined without calling into an object.
    pub fn truthy(&self) -> Option<bool> {
        match self {
            PyValue::None => Some(false),
            PyValue::Bool(b) => Some(*b),
            PyValue::Int(i) => Some(*i != 0),
            PyValue::Float(f) => Some(*f != 0.0),
            PyValue::Str(s) => Some(!s.is_empty()),
            PyValue::Tuple(v) | PyValue::List(v) => Some(!v.is_empty()),
            PyValue::Dict(items) => Some(!items.is_empty()),
            PyValue::Numpy(n) => Some(n.as_f64() != 0.0),
            PyValue::Tensor(_) | PyValue::Object(_) => None,
        }
    }

    /// Elements of a tuple or list (what `x[0]`, `x[1]` index).
    pub fn as_sequence(&self) -> Option<&[PyValue]> {
        match self {
            PyValue::Tuple(v) | PyValue::List(v) => Some(v),
            _ => None,
        }
    }

    /// Python equality with an int, as `ver != 3` evaluates it (`3.0 == 3`, `True == 1`).
    pub fn eq_int(&self, other: i64) -> bool {
        match self {
            PyValue::Int(i) => *i == other,
            PyValue::Bool(b) => *b as i64 == other,
            PyValue::Float(f) => *f == other as f64,
            PyValue::Numpy(n) => match n.value {
                NumpyValue::Int(i) => i == other,
                _ => n.as_f64() == other as f64,
            },
            _ => false,
        }
    }
}

/// Python's `repr()` of the value (tensors are shown by shape and dtype, not by data).
impl fmt::Display for PyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PyValue::None => f.write_str("None"),
            PyValue::Bool(true) => f.write_str("True"),
            PyValue::Bool(false) => f.write_str("False"),
            PyValue::Int(i) => write!(f, "{i}"),
            PyValue::Float(x) => f.write_str(&python_float_repr(*x)),
            PyValue::Str(s) => write!(f, "'{s}'"),
            PyValue::Tuple(items) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                if items.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            PyValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            PyValue::Tensor(t) => {
                let dims: Vec<String> = t.shape.iter().map(usize::to_string).collect();
                write!(f, "Tensor[{}]({})", t.dtype.torch_name(), dims.join(", "))
            }
            PyValue::Dict(items) => {
                f.write_str("{")?;
                for (i, (key, value)) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{key}: {value}")?;
                }
                f.write_str("}")
            }
            PyValue::Numpy(n) => match n.value {
                // NumPy 2's repr: `np.True_`, `np.int64(3)`, `np.float32(0.5)`.
                NumpyValue::Bool(b) => write!(f, "np.{}_", if b { "True" } else { "False" }),
                NumpyValue::Int(i) => write!(f, "np.{}({i})", n.dtype.torch_name()),
                NumpyValue::Float(x) => {
                    let digits = if n.dtype == Dtype::Float64 {
                        python_float_repr(x)
                    } else {
                        // Shortest digits of the dtype's own precision, as NumPy prints them.
                        python_float_repr(format!("{}", x as f32).parse().unwrap_or(x))
                    };
                    write!(f, "np.{}({digits})", n.dtype.torch_name())
                }
            },
            PyValue::Object(name) => write!(f, "<{name} object>"),
        }
    }
}

/// Python's `int(str)` for decimal literals: surrounding whitespace, an optional sign, single
/// underscores between digits; `None` where Python raises `ValueError`.
pub fn python_int_from_str(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !well_formed {
        return None;
    }
    text.replace('_', "").parse().ok()
}

/// Python's `repr(float)`: shortest round-trip digits, always with a `.0` or exponent.
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Python switches to exponent notation outside [1e-4, 1e16): `1e-05`, `1e+16`.
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').expect("exponent form");
        let exp: i32 = exp.parse().expect("exponent digits");
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity_follows_torch() {
        let mut t = TensorArg::new(Dtype::Int32, &[4]);
        assert!(t.is_contiguous());
        t.stride = Some(vec![2]);
        assert!(!t.is_contiguous());
        // A single element is contiguous whatever its stride.
        let t = TensorArg {
            stride: Some(vec![7]),
            ..TensorArg::new(Dtype::Int32, &[1])
        };
        assert!(t.is_contiguous());
        let t = TensorArg {
            stride: Some(vec![64, 1]),
            ..TensorArg::new(Dtype::Float32, &[3, 32])
        };
        assert!(!t.is_contiguous());
        assert_eq!(t.stride_of(-1), Some(1));
        assert_eq!(t.stride_of(0), Some(64));
        assert_eq!(t.stride_of(2), None);
    }

    #[test]
    fn layouts_that_alias_are_recognised() {
        let layout = |shape: &[usize], stride: &[usize]| TensorArg {
            stride: Some(stride.to_vec()),
            ..TensorArg::new(Dtype::Float32, shape)
        };
        let expanded = layout(&[3, 2], &[0, 0]);
        assert!(expanded.aliases());
        assert_eq!(expanded.storage_extent(), Some(1));
        assert_eq!(expanded.storage_offsets(), [0; 6]);
        let rows_repeated = layout(&[3, 2], &[0, 1]);
        assert_eq!(rows_repeated.storage_offsets(), [0, 1, 0, 1, 0, 1]);
        assert!(layout(&[2, 2], &[1, 1]).aliases(), "overlapping windows");
        assert!(!layout(&[2, 3], &[4, 1]).aliases(), "padded rows");
        assert!(!layout(&[2, 3], &[1, 2]).aliases(), "transposed");
        assert!(
            !layout(&[1, 3], &[0, 1]).aliases(),
            "a stride-0 dimension of size 1"
        );
        assert_eq!(layout(&[2, 3], &[4, 1]).storage_extent(), Some(7));
        assert_eq!(layout(&[0, 3], &[0, 0]).storage_extent(), Some(0));
    }

    #[test]
    fn python_reprs() {
        assert_eq!(PyValue::Float(3.0).to_string(), "3.0");
        assert_eq!(PyValue::Float(1e-5).to_string(), "1e-05");
        assert_eq!(PyValue::Float(0.125).to_string(), "0.125");
        assert_eq!(PyValue::Tuple(vec![PyValue::Int(-1)]).to_string(), "(-1,)");
        assert_eq!(PyValue::Str("3".into()).to_string(), "'3'");
        assert_eq!(PyValue::Bool(true).to_string(), "True");
    }

    #[test]
    fn numpy_scalars_print_and_compare_like_numpy() {
        let scalar = |dtype, value| PyValue::Numpy(NumpyScalar { dtype, value });
        let three = scalar(Dtype::Int64, NumpyValue::Int(3));
        assert_eq!(three.to_string(), "np.int64(3)");
        assert_eq!(three.type_name(), "numpy.int64");
        assert_eq!(three.class_name(), "int64");
        assert!(three.eq_int(3));
        assert_eq!(three.as_int(), None, "np.int64 is not a Python int");
        assert_eq!(three.as_number(), Some(3.0));
        let tenth = scalar(Dtype::Float32, NumpyValue::Float(f64::from(0.1f32)));
        assert_eq!(tenth.to_string(), "np.float32(0.1)");
        assert_eq!(
            scalar(Dtype::Bool, NumpyValue::Bool(true)).to_string(),
            "np.True_"
        );
        assert_eq!(
            scalar(Dtype::Bool, NumpyValue::Bool(false)).truthy(),
            Some(false)
        );
    }

    #[test]
    fn python_equality_with_int() {
        assert!(PyValue::Float(3.0).eq_int(3));
        assert!(PyValue::Bool(true).eq_int(1));
        assert!(!PyValue::Str("3".into()).eq_int(3));
        assert!(!PyValue::None.eq_int(3));
    }
}
