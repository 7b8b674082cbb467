//! `forward --format json`: what each call of a forward pass received from SGLang's metadata
//! injection, and what is wrong with it.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForwardPass {
    pub id: String,
    pub calls: Vec<Call>,
    /// How many calls are flagged.
    pub flagged: usize,
}

impl Document for ForwardPass {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Call {
    pub call: String,
    /// The backend instance that makes the call (`backend` when the pass has one).
    pub backend: String,
    pub layer_id: u32,
    pub prefix: String,
    /// `accepted`, or `raises <exception>: <message>`.
    pub outcome: String,
    /// Where the forward's metadata came from.
    pub metadata: String,
    /// The call raises, or a finding is a warning or an error.
    pub flagged: bool,
    pub findings: Vec<Finding>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub code: String,
    /// `info`, `warning` or `error`.
    pub severity: String,
    pub message: String,
}
