//! The Python and torch expressions checks evaluate, with the exceptions they raise on bad input.
//!
//! A helper that raises one error leaves its site to the check (which names the source line that
//! evaluates the expression); one that raises two takes both sites. Messages are CPython 3.11's and
//! torch's; their templates live in the registry and these helpers only supply the values (type
//! name, attribute, dimension).

use super::engine::Fail;
use super::registry::Site;
use crate::call::{PyValue, TensorArg};
use std::borrow::Cow;

/// `x.<attr>` on a value that must be a tensor: `AttributeError: '<type>' object has no attribute '<attr>'`.
pub fn tensor<'a>(v: &'a PyValue, attr: &str) -> Result<&'a TensorArg, Fail> {
    v.as_tensor()
        .ok_or_else(|| Fail::with([v.type_name().to_string(), attr.to_string()]))
}

/// `x.shape[i]` (a `torch.Size`, a tuple): `IndexError: tuple index out of range`.
pub fn shape_at(t: &TensorArg, i: isize) -> Result<usize, Fail> {
    t.size(i).ok_or_else(Fail::new)
}

/// `a, b = x.shape[-2:]` or `x.shape[:2]`: `ValueError: not enough values to unpack (expected 2, got n)`.
pub fn unpack_two(t: &TensorArg) -> Result<(), Fail> {
    if t.ndim() >= 2 {
        Ok(())
    } else {
        Err(Fail::with([t.ndim().to_string()]))
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

/// `x[i]` on a tuple, list or str (`window_size[0]`): `TypeError: '<type>' object is not
/// subscriptable` (site `type_site`) or `IndexError: <tuple|list|string> index out of range` (site
/// `index_site`). A str item is the one-character str.
pub fn item<'a>(
    v: &'a PyValue,
    i: usize,
    type_site: &'static Site,
    index_site: &'static Site,
) -> Result<Cow<'a, PyValue>, Fail> {
    let out_of_range = |sequence: &str| Fail::with([sequence.to_string()]).at(index_site);
    match v {
        PyValue::Tuple(items) | PyValue::List(items) => items
            .get(i)
            .map(Cow::Borrowed)
            .ok_or_else(|| out_of_range(v.type_name())),
        PyValue::Str(text) => text
            .chars()
            .nth(i)
            .map(|c| Cow::Owned(PyValue::Str(c.to_string())))
            .ok_or_else(|| out_of_range("string")),
        other => Err(Fail::with([other.type_name().to_string()]).at(type_site)),
    }
}

/// A size as a Python int (saturating where an `i64` cannot hold it).
pub fn int(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Dtype;
    use crate::validate::registry::cuda::{
        ATEN_DIM_NO_DIMS as S, ATEN_DIM_RANGE as R, PY_NOT_SUBSCRIPTABLE as T, PY_TUPLE_INDEX as I,
    };

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
    fn subscript_errors_name_the_type() {
        let int = PyValue::Int(3);
        assert_eq!(
            item(&int, 0, T, I).unwrap_err(),
            Fail::with(["int".to_string()]).at(T)
        );
        let list = PyValue::List(vec![PyValue::Int(-1)]);
        assert_eq!(
            item(&list, 1, T, I).unwrap_err(),
            Fail::with(["list".to_string()]).at(I)
        );
        // 'ab'[1] is 'b'; 'a'[1] is "string index out of range".
        let two = PyValue::Str("ab".into());
        assert_eq!(*item(&two, 1, T, I).unwrap(), PyValue::Str("b".into()));
        assert_eq!(
            item(&PyValue::Str("a".into()), 1, T, I).unwrap_err(),
            Fail::with(["string".to_string()]).at(I)
        );
    }
}
