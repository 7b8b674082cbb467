//! `run --format json`: the f64 reference's outputs for one call, summarised.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    pub id: String,
    /// Whose conventions the reference followed (`musa`, `sgl-kernel`, `fa3`).
    pub stack: String,
    pub out: ArraySummary,
    pub softmax_lse: ArraySummary,
    /// The caches after an append; `null` when the call appends nothing.
    pub k_cache: Option<ArraySummary>,
    pub v_cache: Option<ArraySummary>,
}

impl Document for Evaluation {
    const SCHEMA_VERSION: u32 = 1;
}

/// An array's shape and its finite values' range and mean (`null` when none is finite).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArraySummary {
    pub shape: Vec<usize>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    pub non_finite: usize,
}
