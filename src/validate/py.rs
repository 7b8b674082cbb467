//! The Python and torch expressions checks evaluate, with the exceptions they raise on bad input.
//!
//! Each helper takes the error site to report, so a layer can name the source line that evaluates
//! the expression. Messages are CPython 3.11's and torch's; their templates live in the registry and
//! these helpers only supply the values (type name, attribute, dimension).

use super::engine::Fail;
use crate::call::{PyValue, TensorArg};

/// `x.<attr>` on a value that must be a tensor: `AttributeError: '<type>' object has no attribute '<attr>'`.
pub fn tensor<'a>(v: &'a PyValue, attr: &str, site: &'static str) -> Result<&'a TensorArg, Fail> {
    v.as_tensor()
        .ok_or_else(|| Fail::with(site, [v.type_name().to_string(), attr.to_string()]))
}

/// `x.shape[i]` (a `torch.Size`, a tuple): `IndexError: tuple index out of range`.
pub fn shape_at(t: &TensorArg, i: isize, site: &'static str) -> Result<usize, Fail> {
    t.size(i).ok_or_else(|| Fail::new(site))
}

/// `a, b = x.shape[-2:]` or `x.shape[:2]`: `ValueError: not enough values to unpack (expected 2, got n)`.
pub fn unpack_two(t: &TensorArg, site: &'static str) -> Result<(), Fail> {
    if t.ndim() >= 2 {
        Ok(())
    } else {
        Err(Fail::with(site, [t.ndim().to_string()]))
    }
}

/// `x.stride(dim)`: torch's `IndexError` for a dimension out of range. A 0-dim tensor gives
/// `Dimension specified as <dim> but tensor has no dimensions` (site `scalar`), otherwise
/// `Dimension out of range (expected to be in range of [-n, n-1], but got <dim>)` (site `range`).
pub fn stride(
    t: &TensorArg,
    dim: isize,
    scalar: &'static str,
    range: &'static str,
) -> Result<usize, Fail> {
    if t.ndim() == 0 {
        return Err(Fail::with(scalar, [dim.to_string()]));
    }
    t.stride_of(dim).ok_or_else(|| {
        let n = t.ndim() as isize;
        Fail::with(
            range,
            [(-n).to_string(), (n - 1).to_string(), dim.to_string()],
        )
    })
}

/// `x[i]` on a tuple or list (`window_size[0]`): `TypeError: '<type>' object is not subscriptable`
/// (site `type_site`) or `IndexError: <tuple|list> index out of range` (site `index_site`).
pub fn item<'a>(
    v: &'a PyValue,
    i: usize,
    type_site: &'static str,
    index_site: &'static str,
) -> Result<&'a PyValue, Fail> {
    let items = match v {
        PyValue::Tuple(items) | PyValue::List(items) => items,
        other => return Err(Fail::with(type_site, [other.type_name().to_string()])),
    };
    items
        .get(i)
        .ok_or_else(|| Fail::with(index_site, [v.type_name().to_string()]))
}

/// A size as a Python int (saturating where an `i64` cannot hold it).
pub fn int(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Dtype;

    #[test]
    fn stride_errors_follow_torch() {
        let scalar = TensorArg::new(Dtype::Int32, &[]);
        assert_eq!(
            stride(&scalar, -1, "s", "r").unwrap_err(),
            Fail::with("s", ["-1".to_string()])
        );
        let vector = TensorArg::new(Dtype::Int32, &[3]);
        assert_eq!(
            stride(&vector, 1, "s", "r").unwrap_err(),
            Fail::with("r", ["-1".to_string(), "0".to_string(), "1".to_string()])
        );
        assert_eq!(stride(&vector, -1, "s", "r"), Ok(1));
    }

    #[test]
    fn subscript_errors_name_the_type() {
        let int = PyValue::Int(3);
        assert_eq!(
            item(&int, 0, "t", "i").unwrap_err(),
            Fail::with("t", ["int".to_string()])
        );
        let list = PyValue::List(vec![PyValue::Int(-1)]);
        assert_eq!(
            item(&list, 1, "t", "i").unwrap_err(),
            Fail::with("i", ["list".to_string()])
        );
    }
}
