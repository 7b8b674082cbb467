//! `conform --format json`: a campaign's suites and their cases.

use crate::report::json::Document;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Campaign {
    pub seed: u64,
    /// The shard a `--partition` run holds (`count:2/4`); absent for a whole campaign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    pub suites: Vec<Suite>,
}

impl Document for Campaign {
    /// 2: `skipped` cases, and a message on passed cases that say what they checked.
    const SCHEMA_VERSION: u32 = 2;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    pub suite: String,
    pub description: String,
    pub seconds: f64,
    pub cases: Vec<Case>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The case's index in its suite (`conform --seed S --cases N` replays it as case `index`).
    pub index: usize,
    pub name: String,
    pub outcome: CaseOutcome,
    /// What failed, why the case was skipped, or what a passed case checked (when it says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseOutcome {
    Passed,
    Failed,
    /// Enumerated but not checkable yet (the message says why).
    Skipped,
}
