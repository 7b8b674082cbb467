//! `conform --format json`: a campaign's suites and their cases.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Campaign {
    pub seed: u64,
    pub suites: Vec<Suite>,
}

impl Document for Campaign {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suite {
    pub suite: String,
    pub description: String,
    pub seconds: f64,
    pub cases: Vec<Case>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Case {
    pub name: String,
    pub outcome: CaseOutcome,
    /// What failed (failed cases only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseOutcome {
    Passed,
    Failed,
}
