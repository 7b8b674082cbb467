//! Materialised tensors: the values a call's tensors hold, in f64, already rounded to their dtype.
//!
//! Sizes are checked against a memory cap before anything is allocated; tensors the spec gives
//! without values get deterministic data from the call's seed (see [`generate`]).

mod generate;

pub use generate::{RowOrigins, materialise, materialise_index_tensors, materialise_rows};

use crate::call::Dtype;
use ndarray::{ArrayD, IxDyn};
use std::collections::BTreeMap;
use thiserror::Error;

pub use crate::memory::DEFAULT_MEMORY_CAP;

/// A tensor's values, logical (row-major) order; strides do not matter once materialised.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: Dtype,
    pub data: ArrayD<f64>,
}

impl HostTensor {
    pub fn zeros(dtype: Dtype, shape: &[usize]) -> HostTensor {
        HostTensor {
            dtype,
            data: ArrayD::zeros(IxDyn(shape)),
        }
    }

    /// A 1-D tensor of `values` (an index tensor handed on by value, e.g. scheduler metadata).
    pub fn vector(dtype: Dtype, values: impl IntoIterator<Item = f64>) -> HostTensor {
        HostTensor {
            dtype,
            data: ndarray::Array1::from_iter(values).into_dyn(),
        }
    }

    pub fn shape(&self) -> &[usize] {
        self.data.shape()
    }

    /// Values as integers (for index tensors).
    pub fn ints(&self) -> Vec<i64> {
        self.data.iter().map(|&x| x as i64).collect()
    }
}

/// The materialised tensor arguments of one call, by canonical parameter name.
pub type Tensors = BTreeMap<String, HostTensor>;

/// The bytes materialised tensors hold (f64 values), as [`materialise`] counts them against the
/// cap: what a later stage of the same call has left of it.
pub fn host_bytes(tensors: &Tensors) -> usize {
    tensors.values().map(|t| t.data.len() * 8).sum()
}

#[derive(Debug, Error, PartialEq)]
pub enum MaterialiseError {
    #[error(
        "the call's tensors need {needed} bytes once materialised, over the {cap} bytes left of \
         the memory cap (raise it with --memory-cap)"
    )]
    OverCap { needed: u128, cap: usize },
    #[error("{0}")]
    Shape(String),
}
