//! The Python and torch expressions checks evaluate, with the exceptions they raise on bad input.
//!
//! A helper that raises one error leaves its site to the check (which names the source line that
//! evaluates the expression); one that raises two takes both sites. Messages are CPython 3.11's and
//! torch's; their templates live in the registry and these helpers only supply the values (type
//! name, attribute, dimension).

use super::engine::Fail;
use super::registry::Site;
use crate::call::python::{self, Form};
use crate::call::{Dtype, PyValue, TensorArg};

/// `x.<attr>` on a value that must be a tensor: `AttributeError: '<type>' object has no attribute '<attr>'`.
pub fn tensor<'a>(v: &'a PyValue, attr: &str) -> Result<&'a TensorArg, Fail> {
    v.as_tensor()
        .ok_or_else(|| Fail::with([v.type_name().to_string(), attr.to_string()]))
}

/// `x.shape`: a tensor's sizes, or a NumPy scalar's `()` (NumPy scalars have a shape and a dtype);
/// anything else raises `AttributeError: '<type>' object has no attribute 'shape'`.
pub fn shape(v: &PyValue) -> Result<&[usize], Fail> {
    match v {
        PyValue::Tensor(t) => Ok(&t.shape),
        PyValue::Numpy(_) => Ok(&[]),
        other => Err(Fail::with([
            other.type_name().to_string(),
            "shape".to_string(),
        ])),
    }
}

/// `x.dtype`: a tensor's torch dtype, or `None` for a NumPy scalar (whose NumPy dtype equals no
/// torch dtype); anything else raises `AttributeError: '<type>' object has no attribute 'dtype'`.
pub fn dtype(v: &PyValue) -> Result<Option<Dtype>, Fail> {
    match v {
        PyValue::Tensor(t) => Ok(Some(t.dtype)),
        PyValue::Numpy(_) => Ok(None),
        other => Err(Fail::with([
            other.type_name().to_string(),
            "dtype".to_string(),
        ])),
    }
}

/// `shape[i]` (a `torch.Size` or a tuple): `IndexError: tuple index out of range`.
pub fn shape_at(shape: &[usize], i: isize) -> Result<usize, Fail> {
    let n = shape.len() as isize;
    let k = if i < 0 { i + n } else { i };
    usize::try_from(k)
        .ok()
        .and_then(|k| shape.get(k).copied())
        .ok_or_else(Fail::new)
}

/// `a, b = shape[-2:]` or `shape[:2]`: `ValueError: not enough values to unpack (expected 2, got n)`.
pub fn unpack_two(shape: &[usize]) -> Result<(), Fail> {
    if shape.len() >= 2 {
        Ok(())
    } else {
        Err(Fail::with([shape.len().to_string()]))
    }
}

/// `x.stride(dim)`: torch's `IndexError` for a dimension out of range. A 0-dim tensor gives
/// `Dimension specified as <dim> but tensor has no dimensions` (site `scalar`), otherwise
/// `Dimension out of range (expected to be in range of [-n, n-1], but got <dim>)` (site `range`).
pub fn stride(
    t: &TensorArg,
    dim: isize,
    scalar: &'static Site,
    range: &'static Site,
) -> Result<usize, Fail> {
    if t.ndim() == 0 {
        return Err(Fail::with([dim.to_string()]).at(scalar));
    }
    t.stride_of(dim).ok_or_else(|| {
        let n = t.ndim() as isize;
        Fail::with([(-n).to_string(), (n - 1).to_string(), dim.to_string()]).at(range)
    })
}

/// The sites of one subscription expression (`window_size[0]`), one per exception Python can raise
/// there ([`python::subscript`]).
pub struct SubscriptSites {
    /// `TypeError: '<type>' object is not subscriptable`
    pub not_subscriptable: &'static Site,
    /// `IndexError: <tuple|list|string> index out of range`
    pub sequence_index: &'static Site,
    /// `KeyError: <key>` (a dict)
    pub key: &'static Site,
    /// `IndexError: invalid index of a 0-dim tensor. ...`
    pub zero_dim: &'static Site,
    /// `IndexError: index <i> is out of bounds for dimension <d> with size <n>`
    pub tensor_index: &'static Site,
    /// `IndexError: invalid index to scalar variable.` (a NumPy scalar)
    pub scalar_index: &'static Site,
}

/// `x[i]`, failing with the site of the exception Python raises.
pub fn subscript(v: &PyValue, i: i64, sites: &SubscriptSites) -> Result<PyValue, Fail> {
    python::subscript(v, i).map_err(|e| {
        let site = match e.form {
            Form::NotSubscriptable => sites.not_subscriptable,
            Form::SequenceIndex => sites.sequence_index,
            Form::Key => sites.key,
            Form::ZeroDimIndex => sites.zero_dim,
            Form::TensorIndex => sites.tensor_index,
            Form::ScalarIndex => sites.scalar_index,
            other => unreachable!("subscription raises no {other:?}"),
        };
        Fail::with(e.args).at(site)
    })
}

/// `bool(v)` as an `if`, `and` or `or` evaluates it; a tensor of other than one element fails
/// (torch's "Boolean value of Tensor with ... is ambiguous").
pub fn truth(v: &PyValue) -> Result<bool, Fail> {
    python::truth(v).map_err(|e| Fail::with(e.args))
}

/// A size as a Python int (saturating where an `i64` cannot hold it).
pub fn int(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Dtype;
    use crate::validate::registry::cuda::{ATEN_DIM_NO_DIMS as S, ATEN_DIM_RANGE as R};

    #[test]
    fn stride_errors_follow_torch() {
        let scalar = TensorArg::new(Dtype::Int32, &[]);
        assert_eq!(
            stride(&scalar, -1, S, R).unwrap_err(),
            Fail::with(["-1".to_string()]).at(S)
        );
        let vector = TensorArg::new(Dtype::Int32, &[3]);
        assert_eq!(
            stride(&vector, 1, S, R).unwrap_err(),
            Fail::with(["-1".to_string(), "0".to_string(), "1".to_string()]).at(R)
        );
        assert_eq!(stride(&vector, -1, S, R), Ok(1));
    }

    #[test]
    fn a_numpy_scalar_has_an_empty_shape_and_a_numpy_dtype() {
        use crate::call::{NumpyScalar, NumpyValue};
        let three = PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Int64,
            value: NumpyValue::Int(3),
        });
        // np.int64(3).shape[-1] raises IndexError, as a 0-d tensor's does.
        assert_eq!(shape(&three), Ok(&[][..]));
        assert_eq!(shape_at(shape(&three).unwrap(), -1), Err(Fail::new()));
        assert_eq!(unpack_two(&[]), Err(Fail::with(["0".to_string()])));
        assert_eq!(dtype(&three), Ok(None));
        let matrix = PyValue::Tensor(TensorArg::new(Dtype::Int32, &[2, 5]));
        assert_eq!(shape_at(shape(&matrix).unwrap(), -1), Ok(5));
        assert_eq!(shape_at(shape(&matrix).unwrap(), -3), Err(Fail::new()));
        assert_eq!(dtype(&matrix), Ok(Some(Dtype::Int32)));
        assert_eq!(
            dtype(&PyValue::Int(3)),
            Err(Fail::with(["int".to_string(), "dtype".to_string()]))
        );
        assert_eq!(
            shape(&PyValue::None),
            Err(Fail::with(["NoneType".to_string(), "shape".to_string()]))
        );
    }

    #[test]
    fn subscript_errors_name_the_site_of_their_form() {
        use crate::validate::registry::musa::{
            K_6_WINDOW_INDEX, K_6_WINDOW_KEY, K_6_WINDOW_SCALAR, K_6_WINDOW_TENSOR_0D,
            K_6_WINDOW_TENSOR_INDEX, K_6_WINDOW_TYPE,
        };
        let sites = SubscriptSites {
            not_subscriptable: K_6_WINDOW_TYPE,
            sequence_index: K_6_WINDOW_INDEX,
            key: K_6_WINDOW_KEY,
            zero_dim: K_6_WINDOW_TENSOR_0D,
            tensor_index: K_6_WINDOW_TENSOR_INDEX,
            scalar_index: K_6_WINDOW_SCALAR,
        };
        let fail = |v: PyValue, i: i64| subscript(&v, i, &sites).unwrap_err();
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            fail(PyValue::Int(3), 0),
            Fail::with(args(&["int"])).at(K_6_WINDOW_TYPE)
        );
        assert_eq!(
            fail(PyValue::List(vec![PyValue::Int(-1)]), 1),
            Fail::with(args(&["list"])).at(K_6_WINDOW_INDEX)
        );
        assert_eq!(
            fail(PyValue::Str("a".into()), 1),
            Fail::with(args(&["string"])).at(K_6_WINDOW_INDEX)
        );
        assert_eq!(
            fail(PyValue::Dict(vec![(PyValue::Int(0), PyValue::Int(-1))]), 1),
            Fail::with(args(&["1"])).at(K_6_WINDOW_KEY)
        );
        let scalar = PyValue::Tensor(TensorArg::new(Dtype::Int32, &[]));
        assert_eq!(fail(scalar, 0), Fail::new().at(K_6_WINDOW_TENSOR_0D));
        let one = PyValue::Tensor(TensorArg::new(Dtype::Int32, &[1]));
        assert_eq!(
            fail(one, 1),
            Fail::with(args(&["1", "0", "1"])).at(K_6_WINDOW_TENSOR_INDEX)
        );
        // 'ab'[1] is 'b'.
        assert_eq!(
            subscript(&PyValue::Str("ab".into()), 1, &sites),
            Ok(PyValue::Str("b".into()))
        );
    }
}
