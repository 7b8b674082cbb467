//! Python semantics of the values a caller passes, per operation the stacks' Python code applies
//! to an argument: truth value, comparison and arithmetic, subscription, `json.dumps`, `hash`,
//! `isinstance(x, int)` and `__index__`/`__float__`. Each operation returns the value Python
//! computes or the exception it raises ([`PyError`]: a message [`Form`] and the values that fill
//! it; the registry holds the templates), so that every layer of every stack evaluates an
//! expression one way. Facts are CPython 3.11's, torch 2.x's and NumPy 2's, each run (the tests
//! hold the messages). A tensor whose spec gives no values computes as zeros, as the materialiser
//! fills tensors that are not index arguments.

use super::{Dtype, NumpyScalar, NumpyValue, PyValue, TensorArg, TensorValues};

/// The message forms of the exceptions these operations raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `TypeError: '<op>' not supported between instances of '<a>' and '<b>'`
    Unorderable,
    /// `TypeError: unsupported operand type(s) for <op>: '<a>' and '<b>'`
    UnsupportedOperand,
    /// `RuntimeError: Boolean value of Tensor with <no values|more than one value> is ambiguous`
    AmbiguousTensor,
    /// `TypeError: '<type>' object is not subscriptable`
    NotSubscriptable,
    /// `IndexError: <tuple|list|string> index out of range`
    SequenceIndex,
    /// `IndexError: index <i> is out of bounds for dimension <d> with size <n>`
    TensorIndex,
    /// `IndexError: invalid index of a 0-dim tensor. ...`
    ZeroDimIndex,
    /// `IndexError: invalid index to scalar variable.` (a NumPy scalar)
    ScalarIndex,
    /// `KeyError: <repr(key)>`
    Key,
    /// `TypeError: Object of type <__name__> is not JSON serializable`
    NotJsonSerializable,
    /// `TypeError: keys must be str, int, float, bool or None, not <__name__>`
    JsonKey,
    /// `TypeError: unhashable type: '<type>'`
    Unhashable,
}

/// An exception a Python operation raises: its form and the values its template takes, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyError {
    pub form: Form,
    pub args: Vec<String>,
}

impl PyError {
    fn new(form: Form, args: impl IntoIterator<Item = String>) -> PyError {
        PyError {
            form,
            args: args.into_iter().collect(),
        }
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Ge => ">=",
            Cmp::Gt => ">",
        }
    }

    /// The operator Python tries on the right operand (`a < b` falls back to `b > a`).
    fn reflected(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Ge => Cmp::Le,
            Cmp::Gt => Cmp::Lt,
            same => same,
        }
    }

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Ge => a >= b,
            Cmp::Gt => a > b,
        }
    }
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
}

impl Arith {
    pub fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
        }
    }

    fn int(self, a: i64, b: i64) -> i64 {
        match self {
            Arith::Add => a.saturating_add(b),
            Arith::Sub => a.saturating_sub(b),
            Arith::Mul => a.saturating_mul(b),
        }
    }

    fn float(self, a: f64, b: f64) -> f64 {
        match self {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
        }
    }
}

/// A number's value as arithmetic sees it: an int (a bool is the int 0 or 1) or a float.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn to_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(x) => x,
        }
    }
}

/// A scalar operand: a Python number or a NumPy scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar {
    Python(Number),
    Numpy(NumpyScalar),
}

impl Scalar {
    fn of(v: &PyValue) -> Option<Scalar> {
        match v {
            PyValue::Bool(b) => Some(Scalar::Python(Number::Int(i64::from(*b)))),
            PyValue::Int(i) => Some(Scalar::Python(Number::Int(*i))),
            PyValue::Float(x) => Some(Scalar::Python(Number::Float(*x))),
            PyValue::Numpy(n) => Some(Scalar::Numpy(*n)),
            _ => None,
        }
    }

    fn number(self) -> Number {
        match self {
            Scalar::Python(n) => n,
            Scalar::Numpy(n) => match n.value {
                NumpyValue::Bool(b) => Number::Int(i64::from(b)),
                NumpyValue::Int(i) => Number::Int(i),
                NumpyValue::Float(x) => Number::Float(x),
            },
        }
    }
}

/// `bool(x)`, as `if x:`, `not x`, `x and y` and `x or y` evaluate it.
pub fn truth(v: &PyValue) -> Result<bool, PyError> {
    Ok(match v {
        PyValue::None => false,
        PyValue::Str(s) => !s.is_empty(),
        PyValue::Tuple(items) | PyValue::List(items) => !items.is_empty(),
        PyValue::Dict(items) => !items.is_empty(),
        PyValue::Tensor(t) => tensor_item(t)? != 0.0,
        // Functions and other objects define no `__bool__` or `__len__`: always true.
        PyValue::Object(_) => true,
        scalar => Scalar::of(scalar).expect("numbers").number().to_f64() != 0.0,
    })
}

/// The one value of a tensor that Python reads as a number (`bool()`, `int()`, `float()`).
fn tensor_item(t: &TensorArg) -> Result<f64, PyError> {
    match t.numel() {
        Some(1) => Ok(tensor_values(t).first().copied().unwrap_or(0.0)),
        Some(0) => Err(PyError::new(Form::AmbiguousTensor, ["no values".into()])),
        _ => Err(PyError::new(
            Form::AmbiguousTensor,
            ["more than one value".into()],
        )),
    }
}

/// A tensor's values, zeros where the spec gives none.
fn tensor_values(t: &TensorArg) -> Vec<f64> {
    t.values
        .as_ref()
        .map(TensorValues::to_f64)
        .unwrap_or_else(|| vec![0.0; t.numel().unwrap_or(0).min(1 << 20)])
}

/// A tensor like `t` with `dtype` and `values`.
fn tensor_like(t: &TensorArg, dtype: Dtype, values: Vec<f64>) -> PyValue {
    let values = if dtype.is_floating_point() {
        TensorValues::Float(values)
    } else {
        TensorValues::Int(values.iter().map(|&x| x as i64).collect())
    };
    PyValue::Tensor(TensorArg {
        dtype,
        shape: t.shape.clone(),
        stride: None,
        device: t.device,
        values: Some(values),
    })
}

/// `a <op> b`.
pub fn compare(a: &PyValue, op: Cmp, b: &PyValue) -> Result<PyValue, PyError> {
    match (a, b) {
        (PyValue::Tensor(t), other) | (other, PyValue::Tensor(t)) => {
            let tensor_first = matches!(a, PyValue::Tensor(_));
            let op = if tensor_first { op } else { op.reflected() };
            let rhs = match other {
                PyValue::Tensor(u) => Operand::Tensor(u),
                v => match Scalar::of(v) {
                    Some(s) => Operand::Number(s.number().to_f64()),
                    None if matches!(op, Cmp::Eq | Cmp::Ne) => {
                        // torch compares with a non-number by identity: never equal.
                        return Ok(PyValue::Bool(op == Cmp::Ne));
                    }
                    None => return Err(unorderable(a, op_as_written(op, tensor_first), b)),
                },
            };
            let values = elementwise(t, rhs, |x, y| f64::from(u8::from(op.holds(x, y))))?;
            Ok(tensor_like(t, Dtype::Bool, values))
        }
        _ => match (Scalar::of(a), Scalar::of(b)) {
            (Some(x), Some(y)) => {
                let holds = op.holds(x.number().to_f64(), y.number().to_f64());
                let numpy = matches!(x, Scalar::Numpy(_)) || matches!(y, Scalar::Numpy(_));
                Ok(if numpy {
                    PyValue::Numpy(NumpyScalar {
                        dtype: Dtype::Bool,
                        value: NumpyValue::Bool(holds),
                    })
                } else {
                    PyValue::Bool(holds)
                })
            }
            _ if matches!(op, Cmp::Eq | Cmp::Ne) => Ok(PyValue::Bool((op == Cmp::Ne) != (a == b))),
            _ => Err(unorderable(a, op, b)),
        },
    }
}

/// The operator as the source wrote it, for a tensor compared from the right.
fn op_as_written(op: Cmp, tensor_first: bool) -> Cmp {
    if tensor_first { op } else { op.reflected() }
}

/// `'<op>' not supported between instances of ...`. A NumPy scalar hands the comparison to the
/// Python number of its value, so the message names `int` or `float`, and with the NumPy scalar on
/// the right it is NumPy that raises, for the reflected operator.
fn unorderable(a: &PyValue, op: Cmp, b: &PyValue) -> PyError {
    let (op, left, right) = match (a, b) {
        (PyValue::Numpy(_), _) => (op, numpy_as_python(a), b.type_name().to_string()),
        (_, PyValue::Numpy(_)) => (
            op.reflected(),
            numpy_as_python(b),
            a.type_name().to_string(),
        ),
        _ => (op, a.type_name().to_string(), b.type_name().to_string()),
    };
    PyError::new(Form::Unorderable, [op.symbol().to_string(), left, right])
}

fn numpy_as_python(v: &PyValue) -> String {
    match v {
        PyValue::Numpy(n) if n.dtype.is_floating_point() => "float".into(),
        PyValue::Numpy(_) => "int".into(),
        other => other.type_name().into(),
    }
}

enum Operand<'a> {
    Tensor(&'a TensorArg),
    Number(f64),
}

/// `f` over a tensor and a number or a second tensor (broadcast when one has a single element).
fn elementwise(
    t: &TensorArg,
    rhs: Operand<'_>,
    f: impl Fn(f64, f64) -> f64,
) -> Result<Vec<f64>, PyError> {
    let xs = tensor_values(t);
    Ok(match rhs {
        Operand::Number(y) => xs.iter().map(|&x| f(x, y)).collect(),
        Operand::Tensor(u) => {
            let ys = tensor_values(u);
            match (xs.len(), ys.len()) {
                (n, m) if n == m => xs.iter().zip(&ys).map(|(&x, &y)| f(x, y)).collect(),
                (_, 1) => xs.iter().map(|&x| f(x, ys[0])).collect(),
                (1, _) => ys.iter().map(|&y| f(xs[0], y)).collect(),
                // Broadcasting other shapes is not modelled: no stack compares such tensors.
                _ => xs
                    .iter()
                    .map(|&x| f(x, ys.first().copied().unwrap_or(0.0)))
                    .collect(),
            }
        }
    })
}

/// `a <op> b` for `+`, `-`, `*`.
pub fn arith(a: &PyValue, op: Arith, b: &PyValue) -> Result<PyValue, PyError> {
    let operand_error = || {
        let name = |v: &PyValue| match v {
            // NumPy hands a failing operation to the Python number of its value.
            PyValue::Numpy(_) => numpy_as_python(v),
            other => other.type_name().to_string(),
        };
        PyError::new(
            Form::UnsupportedOperand,
            [op.symbol().to_string(), name(a), name(b)],
        )
    };
    match (a, b) {
        (PyValue::Tensor(t), other) | (other, PyValue::Tensor(t)) => {
            let tensor_first = matches!(a, PyValue::Tensor(_));
            let rhs = match other {
                PyValue::Tensor(u) => Operand::Tensor(u),
                v => Operand::Number(Scalar::of(v).ok_or_else(operand_error)?.number().to_f64()),
            };
            let float = t.dtype.is_floating_point()
                || matches!(rhs, Operand::Number(_))
                    && matches!(
                        Scalar::of(other).map(Scalar::number),
                        Some(Number::Float(_))
                    );
            let values = elementwise(t, rhs, |x, y| {
                let (x, y) = if tensor_first { (x, y) } else { (y, x) };
                op.float(x, y)
            })?;
            Ok(tensor_like(
                t,
                if float && !t.dtype.is_floating_point() {
                    Dtype::Float32
                } else {
                    t.dtype
                },
                values,
            ))
        }
        _ => {
            let (x, y) = (
                Scalar::of(a).ok_or_else(operand_error)?,
                Scalar::of(b).ok_or_else(operand_error)?,
            );
            let value = match (x.number(), y.number()) {
                (Number::Int(i), Number::Int(j)) => Number::Int(op.int(i, j)),
                (m, n) => Number::Float(op.float(m.to_f64(), n.to_f64())),
            };
            Ok(match (x, y) {
                // NumPy 2 keeps the scalar's type against a Python int; a bool takes part as the
                // int64 it becomes, an integer meeting a float gives a float64.
                (Scalar::Numpy(n), _) | (_, Scalar::Numpy(n)) => PyValue::Numpy(match value {
                    Number::Int(i) => NumpyScalar {
                        dtype: if n.dtype == Dtype::Bool {
                            Dtype::Int64
                        } else {
                            n.dtype
                        },
                        value: NumpyValue::Int(i),
                    },
                    Number::Float(x) => NumpyScalar {
                        dtype: if n.dtype.is_floating_point() {
                            n.dtype
                        } else {
                            Dtype::Float64
                        },
                        value: NumpyValue::Float(x),
                    },
                }),
                _ => match value {
                    Number::Int(i) => PyValue::Int(i),
                    Number::Float(x) => PyValue::Float(x),
                },
            })
        }
    }
}

/// `x[i]` for an int `i`.
pub fn subscript(v: &PyValue, i: i64) -> Result<PyValue, PyError> {
    let sequence = |len: usize, what: &str| {
        let n = i64::try_from(len).unwrap_or(i64::MAX);
        let k = if i < 0 { i + n } else { i };
        if (0..n).contains(&k) {
            Ok(k as usize)
        } else {
            Err(PyError::new(Form::SequenceIndex, [what.to_string()]))
        }
    };
    match v {
        PyValue::Tuple(items) | PyValue::List(items) => {
            Ok(items[sequence(items.len(), v.type_name())?].clone())
        }
        PyValue::Str(text) => {
            let chars: Vec<char> = text.chars().collect();
            Ok(PyValue::Str(
                chars[sequence(chars.len(), "string")?].to_string(),
            ))
        }
        PyValue::Dict(items) => items
            .iter()
            .find(|(k, _)| dict_key_eq(k, i))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| PyError::new(Form::Key, [i.to_string()])),
        PyValue::Tensor(t) => tensor_row(t, i),
        PyValue::Numpy(_) => Err(PyError::new(Form::ScalarIndex, [])),
        other => Err(PyError::new(
            Form::NotSubscriptable,
            [other.type_name().to_string()],
        )),
    }
}

/// A dict key equal to the int `i` (`0 == False == 0.0`).
fn dict_key_eq(key: &PyValue, i: i64) -> bool {
    Scalar::of(key).is_some_and(|s| s.number().to_f64() == i as f64)
}

/// `t[i]`: the `i`-th slice along the first dimension.
fn tensor_row(t: &TensorArg, i: i64) -> Result<PyValue, PyError> {
    let Some(&rows) = t.shape.first() else {
        return Err(PyError::new(Form::ZeroDimIndex, []));
    };
    let n = i64::try_from(rows).unwrap_or(i64::MAX);
    let k = if i < 0 { i + n } else { i };
    if !(0..n).contains(&k) {
        return Err(PyError::new(
            Form::TensorIndex,
            [i.to_string(), "0".to_string(), rows.to_string()],
        ));
    }
    let shape = t.shape[1..].to_vec();
    let row_len: usize = shape.iter().product();
    let start = k as usize * row_len;
    let values = t.values.as_ref().map(|v| match v {
        TensorValues::Int(v) => TensorValues::Int(v[start..start + row_len].to_vec()),
        TensorValues::Float(v) => TensorValues::Float(v[start..start + row_len].to_vec()),
    });
    Ok(PyValue::Tensor(TensorArg {
        shape,
        stride: None,
        values,
        ..t.clone()
    }))
}

/// `json.dumps(x)`: whether it serialises (tuples and lists as arrays, dicts with str, int, float,
/// bool or None keys, NumPy's `float64` as the float it subclasses).
pub fn json_dumps(v: &PyValue) -> Result<(), PyError> {
    match v {
        PyValue::None
        | PyValue::Bool(_)
        | PyValue::Int(_)
        | PyValue::Float(_)
        | PyValue::Str(_) => Ok(()),
        PyValue::Numpy(n) if n.dtype == Dtype::Float64 => Ok(()),
        PyValue::Tuple(items) | PyValue::List(items) => items.iter().try_for_each(json_dumps),
        PyValue::Dict(items) => items.iter().try_for_each(|(k, v)| {
            match k {
                PyValue::None
                | PyValue::Bool(_)
                | PyValue::Int(_)
                | PyValue::Float(_)
                | PyValue::Str(_) => {}
                PyValue::Numpy(n) if n.dtype == Dtype::Float64 => {}
                other => {
                    return Err(PyError::new(
                        Form::JsonKey,
                        [other.class_name().to_string()],
                    ));
                }
            }
            json_dumps(v)
        }),
        other => Err(PyError::new(
            Form::NotJsonSerializable,
            [other.class_name().to_string()],
        )),
    }
}

/// `hash(x)` (a `functools.cache` key): lists and dicts, and tuples holding one, are unhashable.
pub fn hash(v: &PyValue) -> Result<(), PyError> {
    match v {
        PyValue::List(_) | PyValue::Dict(_) => {
            Err(PyError::new(Form::Unhashable, [v.type_name().to_string()]))
        }
        PyValue::Object(name) if matches!(name.as_str(), "set" | "bytearray") => {
            Err(PyError::new(Form::Unhashable, [name.clone()]))
        }
        PyValue::Tuple(items) => items.iter().try_for_each(hash),
        _ => Ok(()),
    }
}

/// `isinstance(x, int)`: ints and bools (not NumPy integers).
pub fn is_int(v: &PyValue) -> bool {
    matches!(v, PyValue::Int(_) | PyValue::Bool(_))
}

/// `operator.index(x)`: ints, bools and NumPy integers (not `np.bool_`, not tensors of more than
/// one element; a one-element integer tensor converts).
pub fn index(v: &PyValue) -> Option<i64> {
    match v {
        PyValue::Int(i) => Some(*i),
        PyValue::Bool(b) => Some(i64::from(*b)),
        PyValue::Numpy(NumpyScalar {
            value: NumpyValue::Int(i),
            ..
        }) => Some(*i),
        PyValue::Tensor(t) if !t.dtype.is_floating_point() && t.dtype != Dtype::Bool => {
            tensor_item(t).ok().map(|x| x as i64)
        }
        _ => None,
    }
}

/// `float(x)`: numbers, NumPy scalars and one-element tensors (`__float__`).
pub fn float(v: &PyValue) -> Option<f64> {
    match v {
        PyValue::Tensor(t) => tensor_item(t).ok(),
        other => Scalar::of(other).map(|s| s.number().to_f64()),
    }
}

/// A parameter type of a function mate exports through tvm-ffi, as its argument conversion sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfiType {
    /// `int`, `int64_t`.
    Int,
    /// `bool`: converted as an integer is.
    Bool,
    /// `double`.
    Float,
    /// `ffi::TensorView`.
    Tensor,
    /// `ffi::Optional<int64_t>`.
    OptionalInt,
    /// `ffi::Optional<ffi::TensorView>`.
    OptionalTensor,
}

/// Whether tvm-ffi converts `v` to a parameter of type `ty` (apache-tvm-ffi, as the shadow oracle
/// runs it on mate's signatures): an integer or bool parameter takes Python ints and bools and NumPy
/// integers; a double also Python and NumPy floats; none of them a NumPy bool, a str or a tensor
/// (not even one element); a tensor parameter takes any tensor; an Optional also `None`.
pub fn ffi_converts(v: &PyValue, ty: FfiType) -> bool {
    let integer = match v {
        PyValue::Int(_) | PyValue::Bool(_) => true,
        PyValue::Numpy(n) => matches!(n.value, NumpyValue::Int(_)),
        _ => false,
    };
    let float = matches!(v, PyValue::Float(_))
        || matches!(v, PyValue::Numpy(n) if n.dtype.is_floating_point());
    let tensor = matches!(v, PyValue::Tensor(_));
    match ty {
        FfiType::Int | FfiType::Bool => integer,
        FfiType::Float => integer || float,
        FfiType::Tensor => tensor,
        FfiType::OptionalInt => v.is_none() || integer,
        FfiType::OptionalTensor => v.is_none() || tensor,
    }
}

/// The number of the first argument tvm-ffi refuses (`Mismatched type on argument #<i>`): the
/// arguments are `(position, value, type)` in parameter order, the order the refusals are reported in.
pub fn first_unconverted<'a>(
    args: impl IntoIterator<Item = (usize, &'a PyValue, FfiType)>,
) -> Option<usize> {
    args.into_iter()
        .find(|(_, v, ty)| !ffi_converts(v, *ty))
        .map(|(i, _, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np(dtype: Dtype, value: NumpyValue) -> PyValue {
        PyValue::Numpy(NumpyScalar { dtype, value })
    }

    fn ints(shape: &[usize], values: &[i64]) -> PyValue {
        PyValue::Tensor(TensorArg::with_ints(Dtype::Int64, shape, values.to_vec()))
    }

    fn err(form: Form, args: &[&str]) -> PyError {
        PyError::new(form, args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn truth_of_tensors_needs_one_element() {
        assert_eq!(truth(&ints(&[], &[4])), Ok(true));
        assert_eq!(truth(&ints(&[1], &[0])), Ok(false));
        assert_eq!(
            truth(&ints(&[2], &[0, 1])),
            Err(err(Form::AmbiguousTensor, &["more than one value"]))
        );
        assert_eq!(
            truth(&ints(&[0], &[])),
            Err(err(Form::AmbiguousTensor, &["no values"]))
        );
        assert_eq!(truth(&PyValue::Dict(vec![])), Ok(false));
        assert_eq!(truth(&PyValue::Object("function".into())), Ok(true));
        assert_eq!(truth(&np(Dtype::Bool, NumpyValue::Bool(true))), Ok(true));
    }

    #[test]
    fn comparisons_follow_python_torch_and_numpy() {
        // tensor([0, 1]) >= 1 is tensor([False, True]); its truth value is ambiguous.
        let t = compare(&ints(&[2], &[0, 1]), Cmp::Ge, &PyValue::Int(1)).unwrap();
        assert_eq!(
            t.as_tensor().unwrap().values,
            Some(TensorValues::Int(vec![0, 1]))
        );
        assert_eq!(t.as_tensor().unwrap().dtype, Dtype::Bool);
        assert_eq!(
            compare(&PyValue::None, Cmp::Ge, &PyValue::Int(1)),
            Err(err(Form::Unorderable, &[">=", "NoneType", "int"]))
        );
        assert_eq!(
            compare(&PyValue::Dict(vec![]), Cmp::Ge, &PyValue::Int(1)),
            Err(err(Form::Unorderable, &[">=", "dict", "int"]))
        );
        assert_eq!(
            compare(&ints(&[], &[3]), Cmp::Ge, &PyValue::None),
            Err(err(Form::Unorderable, &[">=", "Tensor", "NoneType"]))
        );
        // NumPy hands the failing comparison to a Python int, reflected when on the right.
        let three = np(Dtype::Int64, NumpyValue::Int(3));
        assert_eq!(
            compare(&three, Cmp::Ge, &PyValue::None),
            Err(err(Form::Unorderable, &[">=", "int", "NoneType"]))
        );
        assert_eq!(
            compare(&PyValue::None, Cmp::Ge, &three),
            Err(err(Form::Unorderable, &["<=", "int", "NoneType"]))
        );
        assert_eq!(
            compare(&three, Cmp::Ne, &PyValue::Int(3)),
            Ok(np(Dtype::Bool, NumpyValue::Bool(false)))
        );
        // Equality never raises: a function is not 3.
        assert_eq!(
            compare(
                &PyValue::Object("function".into()),
                Cmp::Ne,
                &PyValue::Int(3)
            ),
            Ok(PyValue::Bool(true))
        );
        assert_eq!(
            compare(&ints(&[2], &[3, 1]), Cmp::Ne, &PyValue::Int(3))
                .unwrap()
                .as_tensor()
                .unwrap()
                .values,
            Some(TensorValues::Int(vec![0, 1]))
        );
    }

    #[test]
    fn arithmetic_follows_python_torch_and_numpy() {
        assert_eq!(
            arith(&PyValue::None, Arith::Sub, &PyValue::Int(1)),
            Err(err(Form::UnsupportedOperand, &["-", "NoneType", "int"]))
        );
        assert_eq!(
            arith(&PyValue::Int(1), Arith::Sub, &PyValue::Dict(vec![])),
            Err(err(Form::UnsupportedOperand, &["-", "int", "dict"]))
        );
        assert_eq!(
            arith(&ints(&[], &[3]), Arith::Sub, &PyValue::None),
            Err(err(Form::UnsupportedOperand, &["-", "Tensor", "NoneType"]))
        );
        assert_eq!(
            arith(
                &np(Dtype::Int64, NumpyValue::Int(3)),
                Arith::Sub,
                &PyValue::None
            ),
            Err(err(Form::UnsupportedOperand, &["-", "int", "NoneType"]))
        );
        let t = arith(&ints(&[], &[4]), Arith::Sub, &PyValue::Int(1)).unwrap();
        assert_eq!(truth(&t), Ok(true));
        assert_eq!(t.as_tensor().unwrap().shape, Vec::<usize>::new());
        assert_eq!(
            arith(
                &np(Dtype::Int32, NumpyValue::Int(9)),
                Arith::Sub,
                &PyValue::Int(1)
            ),
            Ok(np(Dtype::Int32, NumpyValue::Int(8)))
        );
        assert_eq!(
            arith(&PyValue::Int(9), Arith::Sub, &PyValue::Bool(true)),
            Ok(PyValue::Int(8))
        );
    }

    #[test]
    fn subscription_errors_name_what_python_names() {
        assert_eq!(
            subscript(&PyValue::Dict(vec![]), 0),
            Err(err(Form::Key, &["0"]))
        );
        let pair = PyValue::Dict(vec![
            (PyValue::Int(0), PyValue::Int(-1)),
            (PyValue::Int(1), PyValue::Int(0)),
        ]);
        assert_eq!(subscript(&pair, 1), Ok(PyValue::Int(0)));
        assert_eq!(
            subscript(&ints(&[], &[3]), 0),
            Err(err(Form::ZeroDimIndex, &[]))
        );
        assert_eq!(
            subscript(&ints(&[1], &[3]), 1),
            Err(err(Form::TensorIndex, &["1", "0", "1"]))
        );
        assert_eq!(subscript(&ints(&[2], &[5, 6]), 1), Ok(ints(&[], &[6])));
        assert_eq!(
            subscript(&PyValue::Str("x".into()), 1),
            Err(err(Form::SequenceIndex, &["string"]))
        );
        assert_eq!(
            subscript(&PyValue::Tuple(vec![]), 0),
            Err(err(Form::SequenceIndex, &["tuple"]))
        );
        assert_eq!(
            subscript(&PyValue::Bool(true), 0),
            Err(err(Form::NotSubscriptable, &["bool"]))
        );
        assert_eq!(
            subscript(&np(Dtype::Int64, NumpyValue::Int(3)), 0),
            Err(err(Form::ScalarIndex, &[]))
        );
    }

    #[test]
    fn json_and_hash_as_the_compile_key_needs() {
        assert_eq!(
            json_dumps(&PyValue::Object("function".into())),
            Err(err(Form::NotJsonSerializable, &["function"]))
        );
        assert_eq!(
            json_dumps(&ints(&[1], &[1])),
            Err(err(Form::NotJsonSerializable, &["Tensor"]))
        );
        assert_eq!(
            json_dumps(&np(Dtype::Int64, NumpyValue::Int(3))),
            Err(err(Form::NotJsonSerializable, &["int64"]))
        );
        assert_eq!(
            json_dumps(&np(Dtype::Bool, NumpyValue::Bool(true))),
            Err(err(Form::NotJsonSerializable, &["bool"]))
        );
        assert_eq!(
            json_dumps(&np(Dtype::Float64, NumpyValue::Float(1.5))),
            Ok(())
        );
        assert_eq!(json_dumps(&PyValue::Float(f64::NAN)), Ok(()));
        assert_eq!(
            json_dumps(&PyValue::Dict(vec![(
                PyValue::Tuple(vec![]),
                PyValue::Int(1)
            )])),
            Err(err(Form::JsonKey, &["tuple"]))
        );
        assert_eq!(
            hash(&PyValue::Dict(vec![])),
            Err(err(Form::Unhashable, &["dict"]))
        );
        assert_eq!(
            hash(&PyValue::Tuple(vec![
                PyValue::Int(1),
                PyValue::List(vec![])
            ])),
            Err(err(Form::Unhashable, &["list"]))
        );
        assert_eq!(hash(&ints(&[2], &[0, 1])), Ok(()));
    }

    #[test]
    fn tvm_ffi_conversion_per_parameter_type() {
        let np_int = np(Dtype::Uint8, NumpyValue::Int(1));
        let np_float = np(Dtype::Float32, NumpyValue::Float(0.5));
        let np_bool = np(Dtype::Bool, NumpyValue::Bool(true));
        let scalar_tensor = ints(&[], &[1]);
        for v in [&PyValue::Int(1), &PyValue::Bool(true), &np_int] {
            assert!(ffi_converts(v, FfiType::Int), "{v}");
            assert!(ffi_converts(v, FfiType::Bool), "{v}");
            assert!(ffi_converts(v, FfiType::Float), "{v}");
        }
        for v in [&PyValue::Float(1.0), &np_float] {
            assert!(!ffi_converts(v, FfiType::Int), "{v}");
            assert!(ffi_converts(v, FfiType::Float), "{v}");
        }
        for ty in [
            FfiType::Int,
            FfiType::Bool,
            FfiType::Float,
            FfiType::OptionalInt,
        ] {
            assert!(!ffi_converts(&np_bool, ty));
            assert!(!ffi_converts(&scalar_tensor, ty));
            assert!(!ffi_converts(&PyValue::Str("1".into()), ty));
        }
        assert!(!ffi_converts(&PyValue::None, FfiType::Int));
        assert!(ffi_converts(&PyValue::None, FfiType::OptionalInt));
        assert!(ffi_converts(&PyValue::None, FfiType::OptionalTensor));
        assert!(!ffi_converts(&PyValue::None, FfiType::Tensor));
        assert!(ffi_converts(&scalar_tensor, FfiType::OptionalTensor));
        assert!(!ffi_converts(&PyValue::Float(1.0), FfiType::OptionalTensor));
        let args = [
            (4, &scalar_tensor, FfiType::Tensor),
            (6, &np_bool, FfiType::Float),
            (7, &PyValue::None, FfiType::Bool),
        ];
        assert_eq!(first_unconverted(args), Some(6));
    }

    #[test]
    fn conversions_to_numbers() {
        assert_eq!(index(&np(Dtype::Int64, NumpyValue::Int(3))), Some(3));
        assert_eq!(index(&np(Dtype::Bool, NumpyValue::Bool(true))), None);
        assert_eq!(index(&ints(&[2], &[1, 2])), None);
        assert_eq!(index(&ints(&[], &[3])), Some(3));
        assert!(!is_int(&np(Dtype::Int64, NumpyValue::Int(3))));
        assert!(is_int(&PyValue::Bool(true)));
        assert_eq!(
            float(&np(Dtype::Float32, NumpyValue::Float(1.5))),
            Some(1.5)
        );
    }
}
