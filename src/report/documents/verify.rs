//! `verify --format json`: what a device runner's results in case bundles came to.

use crate::report::json::Document;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub profile: String,
    pub matched: usize,
    pub mismatched: usize,
    pub skipped: usize,
    /// Bundles that could not be read (the run's exit code is then 2). Absent from documents
    /// written before it was added.
    #[serde(default)]
    pub invalid: usize,
    pub cases: Vec<Case>,
}

impl Document for Verification {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The bundle folder's name.
    pub name: String,
    pub outcome: CaseOutcome,
    /// What was checked (matched), what differs (mismatch), the runner's reason (skipped), why
    /// the bundle cannot be read (invalid).
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseOutcome {
    Matched,
    Mismatch,
    Skipped,
    Invalid,
}
