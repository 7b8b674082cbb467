//! mate v0.2.2's mask resolution and attention-chunk reset (musa-fa3.md §6.1–§6.2) evaluated on the
//! Python values a caller passes (ints, floats, one-element tensors, with Python's `and`/`or`), as
//! validation must. The integer forms the kernel configuration and the kernel path use
//! ([`super::resolve_mask`], [`super::reset_attention_chunk`]) are these functions on ints.

use super::ResolvedMask;
use std::cmp::Ordering;

/// What a number reaching `_resolve_mask` is in Python: the kernel's `int` parameters accept only
/// ints (Python's or NumPy's), a one-element tensor compares like a number but stays a tensor, and
/// a NumPy scalar's comparisons give NumPy bools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumKind {
    Int,
    Float,
    Tensor,
    /// A NumPy integer.
    NumpyInt,
    /// A NumPy float or bool.
    NumpyOther,
}

/// A Python number (or one-element tensor) and its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PyNum {
    pub value: f64,
    pub kind: NumKind,
}

impl PyNum {
    pub fn int(v: i64) -> Self {
        PyNum {
            value: v as f64,
            kind: NumKind::Int,
        }
    }

    /// `x < y` and friends: a bool, a bool tensor when `x` is a tensor, a NumPy bool when it is a
    /// NumPy scalar.
    fn compare(self, holds: bool) -> Truth {
        let kind = match self.kind {
            NumKind::Int | NumKind::Float => TruthKind::Bool,
            NumKind::Tensor => TruthKind::Tensor,
            NumKind::NumpyInt | NumKind::NumpyOther => TruthKind::Numpy,
        };
        Truth { value: holds, kind }
    }
}

/// What a truth value is in Python: `json.dumps` takes only the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruthKind {
    Bool,
    /// A one-element bool tensor.
    Tensor,
    /// A NumPy bool (`np.True_`).
    Numpy,
}

/// A truth value as Python's `and`/`or` hand it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truth {
    pub value: bool,
    pub kind: TruthKind,
}

impl Truth {
    fn and(self, other: Truth) -> Truth {
        if self.value { other } else { self }
    }

    fn or(self, other: Truth) -> Truth {
        if self.value { self } else { other }
    }
}

/// `_resolve_mask`'s results as Python values: `is_causal`/`is_local` may be tensors and the windows
/// floats or tensors, which the JIT key and the kernel call reject later.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PythonMask {
    pub is_causal: Truth,
    pub is_local: Truth,
    pub window_left: PyNum,
    pub window_right: PyNum,
}

impl PythonMask {
    /// The mask as the kernel receives it, with the chunk it runs with.
    pub fn resolved(&self, attention_chunk: i64) -> ResolvedMask {
        ResolvedMask {
            is_causal: self.is_causal.value,
            is_local: self.is_local.value,
            window_left: self.window_left.value as i64,
            window_right: self.window_right.value as i64,
            attention_chunk,
        }
    }
}

/// Python's `min(a, b)`: `a` unless `b < a`.
fn py_min(a: PyNum, b: PyNum) -> PyNum {
    if b.value < a.value { b } else { a }
}

/// `_resolve_mask(seqlen_q, seqlen_k, is_causal, wl, wr, attention_chunk)` (§6.1) evaluated as
/// Python does; `None` windows are Python `None`. Tensors must hold one element (`bool()` of any
/// other raises before this runs).
pub fn resolve_mask(
    seqlen_q: i64,
    seqlen_k: i64,
    causal: bool,
    wl: Option<PyNum>,
    wr: Option<PyNum>,
    attention_chunk: PyNum,
) -> PythonMask {
    let last_k = PyNum::int(seqlen_k.saturating_sub(1));
    let last_q = PyNum::int(seqlen_q.saturating_sub(1));
    // `if w is None or w >= last: w = -1`; NaN compares false and is kept.
    let below = |last: PyNum| {
        move |w: &PyNum| {
            matches!(
                w.value.partial_cmp(&last.value),
                Some(Ordering::Less) | None
            )
        }
    };
    let mut wl = wl.filter(below(last_k)).unwrap_or(PyNum::int(-1));
    let mut wr = wr.filter(below(last_q)).unwrap_or(PyNum::int(-1));
    if causal {
        wr = PyNum::int(0);
    }
    let chunk = attention_chunk;
    let is_causal = wl
        .compare(wl.value < 0.0)
        .and(wr.compare(wr.value == 0.0))
        .and(chunk.compare(chunk.value == 0.0));
    let is_local = wl
        .compare(wl.value >= 0.0)
        .or(wr.compare(wr.value >= 0.0))
        .or(chunk.compare(chunk.value >= 1.0))
        .and(Truth {
            value: !is_causal.value,
            kind: TruthKind::Bool,
        });
    if wl.value < 0.0 {
        wl = last_k;
    }
    if wr.value < 0.0 {
        wr = last_q;
    }
    if chunk.value > 0.0 {
        let last = PyNum {
            value: chunk.value - 1.0,
            kind: chunk.kind,
        };
        wl = py_min(wl, last);
        wr = py_min(wr, last);
    }
    PythonMask {
        is_causal,
        is_local,
        window_left: wl,
        window_right: wr,
    }
}

/// The fwd's attention-chunk reset for fixed-length calls (§6.2): a chunk covering the whole key
/// range is no chunk (the int 0).
pub fn reset_chunk(
    attention_chunk: PyNum,
    fixed_length: bool,
    seqlen_q: i64,
    seqlen_k: i64,
) -> PyNum {
    let c = attention_chunk.value;
    if c > 0.0 && fixed_length && seqlen_q <= seqlen_k && c >= seqlen_k as f64 {
        PyNum::int(0)
    } else {
        attention_chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(
        seqlen_q: i64,
        seqlen_k: i64,
        causal: bool,
        wl: Option<i64>,
        wr: Option<i64>,
        chunk: i64,
    ) -> ResolvedMask {
        let (wl, wr) = (wl.map(PyNum::int), wr.map(PyNum::int));
        resolve_mask(seqlen_q, seqlen_k, causal, wl, wr, PyNum::int(chunk)).resolved(chunk)
    }

    #[test]
    fn mask_resolution() {
        // (-1, 0) without causal is causal.
        let m = ints(4, 100, false, Some(-1), Some(0), 0);
        assert_eq!(
            (m.is_causal, m.is_local, m.window_left, m.window_right),
            (true, false, 99, 0)
        );
        // seqlen_q 1 turns wr = 0 into -1 and then seqlen_q.saturating_sub(1) = 0: no mask.
        let m = ints(1, 100, false, Some(-1), Some(0), 0);
        assert_eq!((m.is_causal, m.is_local), (false, false));
        let m = ints(8, 100, true, Some(16), None, 0);
        assert_eq!(
            (m.is_causal, m.is_local, m.window_left, m.window_right),
            (false, true, 16, 0)
        );
        let m = ints(8, 100, false, None, None, 32);
        assert_eq!((m.is_local, m.window_left, m.window_right), (true, 31, 7));
        let chunk = PyNum::int(128);
        assert_eq!(reset_chunk(chunk, true, 8, 100), PyNum::int(0));
        assert_eq!(reset_chunk(chunk, false, 8, 100), chunk);
    }

    #[test]
    fn python_values_survive_resolution() {
        let float = |value| PyNum {
            value,
            kind: NumKind::Float,
        };
        let tensor = |value| PyNum {
            value,
            kind: NumKind::Tensor,
        };
        // (1.5, -1) with 64 keys: 1.5 is kept, the right side becomes the int seqlen_q - 1.
        let r = resolve_mask(
            1,
            64,
            false,
            Some(float(1.5)),
            Some(PyNum::int(-1)),
            PyNum::int(0),
        );
        assert_eq!((r.window_left, r.window_right), (float(1.5), PyNum::int(0)));
        // A float at or past the last key is replaced by an int.
        let r = resolve_mask(1, 64, false, Some(float(100.0)), None, PyNum::int(0));
        assert_eq!(r.window_left, PyNum::int(63));
        // min(63, inf - 1) keeps the int 63.
        let r = resolve_mask(1, 64, false, None, None, float(f64::INFINITY));
        assert_eq!(
            (r.window_left, r.window_right),
            (PyNum::int(63), PyNum::int(0))
        );
        // tensor(4) < 0 is tensor(False): `and` hands the tensor on as is_causal.
        let r = resolve_mask(
            16,
            64,
            false,
            Some(tensor(4.0)),
            Some(tensor(0.0)),
            PyNum::int(0),
        );
        assert_eq!(
            r.is_causal,
            Truth {
                value: false,
                kind: TruthKind::Tensor
            }
        );
        // `tensor(True) and not is_causal` hands on the bool.
        assert_eq!(
            r.is_local,
            Truth {
                value: true,
                kind: TruthKind::Bool
            }
        );
        // np.int64(4) < 0 is np.False_, which `and` hands on; `not` makes a Python bool.
        let numpy = PyNum {
            value: 4.0,
            kind: NumKind::NumpyInt,
        };
        let r = resolve_mask(16, 64, false, Some(numpy), None, PyNum::int(0));
        assert_eq!(
            (r.is_causal, r.is_local),
            (
                Truth {
                    value: false,
                    kind: TruthKind::Numpy
                },
                Truth {
                    value: true,
                    kind: TruthKind::Bool
                }
            )
        );
        assert_eq!(r.window_left, numpy);
    }
}
