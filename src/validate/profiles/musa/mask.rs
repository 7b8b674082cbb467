//! `_resolve_mask`'s operands as Python sees them (window bounds, `seqlen - 1`), the errors their
//! comparisons raise, and the numbers it hands on: the metadata chain and `_fmha_fwd` both resolve a
//! mask.

use crate::call::python::{self, Arith};
use crate::call::{Dtype, NumpyScalar, NumpyValue, PyValue, TensorArg};
use crate::mate::python::{NumKind, PyNum};
use crate::validate::engine::Fail;
use crate::validate::py::{self, SubscriptSites};

/// A window element as Python sees it: `None`, a number (an int, a float or a one-element tensor),
/// a tensor whose truth value is ambiguous, or something `>=` cannot compare.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum WindowBound {
    None,
    Num(PyNum),
    /// A tensor of this many elements (not 1): `bool()` of its comparison raises.
    AmbiguousTensor(usize),
    Other(String),
}

pub(super) fn window_bound(v: &PyValue) -> WindowBound {
    match v {
        PyValue::None => WindowBound::None,
        PyValue::Float(f) => WindowBound::Num(PyNum {
            value: *f,
            kind: NumKind::Float,
        }),
        PyValue::Tensor(t) => tensor_bound(t),
        // A NumPy scalar compares as its value, giving NumPy bools; the kernel's `int` takes only a
        // NumPy integer.
        PyValue::Numpy(n) => WindowBound::Num(PyNum {
            value: n.as_f64(),
            kind: if matches!(n.value, NumpyValue::Int(_)) {
                NumKind::NumpyInt
            } else {
                NumKind::NumpyOther
            },
        }),
        other => other.as_int().map_or_else(
            || WindowBound::Other(other.type_name().to_string()),
            |i| WindowBound::Num(PyNum::int(i)),
        ),
    }
}

/// A tensor compares like the number of its one element (0 when the spec gives no values).
fn tensor_bound(t: &TensorArg) -> WindowBound {
    match t.numel() {
        Some(1) => WindowBound::Num(PyNum {
            value: python::float(&PyValue::Tensor(t.clone())).unwrap_or(0.0),
            kind: NumKind::Tensor,
        }),
        numel => WindowBound::AmbiguousTensor(numel.unwrap_or(usize::MAX)),
    }
}

/// `window_size` after mate's `None` default, subscripted as `[0]`, `[1]` (both evaluated before
/// the call that takes them).
pub(super) fn window_pair(
    v: &PyValue,
    sites: &SubscriptSites,
) -> Result<(WindowBound, WindowBound), Fail> {
    if v.is_none() {
        let default = WindowBound::Num(PyNum::int(-1));
        return Ok((default.clone(), default));
    }
    let left = window_bound(&py::subscript(v, 0, sites)?);
    let right = window_bound(&py::subscript(v, 1, sites)?);
    Ok((left, right))
}

/// What `seqlen - 1` and the comparison with it raise for a `seqlen` that is not a Python number:
/// `TypeError` for a non-number, the ambiguous truth value for a tensor of other than one element.
pub(super) fn seqlen_operand(seqlen: &PyValue) -> Result<(), MaskOperandError> {
    match python::arith(seqlen, Arith::Sub, &PyValue::Int(1)) {
        Err(_) => Err(MaskOperandError::Seqlen(seqlen.type_name().to_string())),
        Ok(PyValue::Tensor(t)) if t.numel() != Some(1) => Err(MaskOperandError::AmbiguousTensor(
            t.numel().unwrap_or(usize::MAX),
        )),
        Ok(_) => Ok(()),
    }
}

/// Why `_resolve_mask` raises on a window bound.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum MaskOperandError {
    /// `seqlen - 1` on a non-number (its type).
    Seqlen(String),
    /// `bound >= seqlen - 1` on a non-number bound (its type).
    Window(String),
    /// `if` on the comparison of a tensor of this many elements (not 1).
    AmbiguousTensor(usize),
}

/// The errors of `_resolve_mask`'s first two steps, in evaluation order: for each bound that is not
/// `None`, `seqlen - 1` and the comparison with it ([`seqlen_operand`]), then `bound >= ...`, then
/// the `if` on its result.
pub(super) fn mask_operands(
    left: &WindowBound,
    right: &WindowBound,
    seqlen_k: Result<(), MaskOperandError>,
    seqlen_q: Result<(), MaskOperandError>,
) -> Result<(), MaskOperandError> {
    for (bound, seqlen) in [(left, seqlen_k), (right, seqlen_q)] {
        match bound {
            WindowBound::None => continue,
            _ => seqlen?,
        }
        match bound {
            WindowBound::Other(ty) => return Err(MaskOperandError::Window(ty.clone())),
            WindowBound::AmbiguousTensor(n) => return Err(MaskOperandError::AmbiguousTensor(*n)),
            WindowBound::None | WindowBound::Num(_) => {}
        }
    }
    Ok(())
}

/// The end of torch's "Boolean value of Tensor with ... is ambiguous" for `numel` elements.
pub(super) fn ambiguous_values(numel: usize) -> String {
    if numel == 0 {
        "no values"
    } else {
        "more than one value"
    }
    .to_string()
}

/// A number `_resolve_mask` or the chunk reset left, as a kernel call receives it.
pub(super) fn py_number(n: PyNum) -> PyValue {
    match n.kind {
        NumKind::Int => PyValue::Int(n.value as i64),
        NumKind::Float => PyValue::Float(n.value),
        NumKind::Tensor => PyValue::tensor(Dtype::Float32, &[]),
        // Which NumPy integer or float does not matter to tvm-ffi's conversion.
        NumKind::NumpyInt => PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Int64,
            value: NumpyValue::Int(n.value as i64),
        }),
        NumKind::NumpyOther => PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Float64,
            value: NumpyValue::Float(n.value),
        }),
    }
}
