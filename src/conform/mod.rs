//! Conformance campaigns: registered suites, each a list of seeded cases that pass or fail.
//!
//! A suite is deterministic in (campaign seed, case index), so any failure is replayed with
//! `fa3conform conform --suite NAME --seed S --cases N` and reported with its case name and index.
//! A campaign split with `--partition` runs, in each suite, the cases its shard selects (by case
//! index, or by the key `<suite>-<index>`); the shards' reports merge into the whole campaign's
//! (`fa3conform merge-reports`).

pub mod catalogue;
mod kernel_suite;
mod metadata_suite;
mod reference_suite;
mod report;
mod upstream;
mod validation_suite;

pub use report::CampaignReport;

use crate::partition::Partition;
use indicatif::ProgressBar;
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// The default campaign's seed (`conform` and `export --suite` without `--seed`).
pub const DEFAULT_SEED: u64 = 20261130;

/// What one case found.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    /// The case's index in its suite: with the campaign seed, what replays it.
    pub index: usize,
    /// A short, stable name: the suite's case kind and what makes it distinct.
    pub name: String,
    pub result: CaseResult,
}

/// Whether a case passed, failed or could not be checked.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseResult {
    /// Passed; optionally what was checked (`numerics within tolerance`, ...).
    Passed(Option<String>),
    /// A reproducible failure description (the call as JSON, what differed).
    Failed(String),
    /// The case exists but nothing the tool models can check it yet, and why.
    Skipped(String),
}

impl CaseResult {
    pub fn failure(&self) -> Option<&str> {
        match self {
            CaseResult::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// A check's `Err` is a failure, its `Ok` a pass with nothing more to say.
impl From<Result<(), String>> for CaseResult {
    fn from(result: Result<(), String>) -> CaseResult {
        match result {
            Ok(()) => CaseResult::Passed(None),
            Err(why) => CaseResult::Failed(why),
        }
    }
}

/// A registered suite of conformance cases.
pub trait Suite: Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// Cases run when `--cases` is not given (chosen so the default campaign takes about a minute).
    fn default_cases(&self) -> usize;
    /// Runs case `index` of a campaign seeded with `seed`.
    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome;
    /// The call case `index` checks, for suites whose cases are single calls (`export` writes
    /// them as device bundles); `None` for suites that check something else.
    fn call(&self, _seed: u64, _index: usize) -> Option<crate::call::KvCacheCall> {
        None
    }
}

/// Every suite `conform` knows, in the order they run by default.
pub fn suites() -> Vec<&'static dyn Suite> {
    vec![
        &reference_suite::ReferenceSuite,
        &kernel_suite::KERNEL,
        &validation_suite::VALIDATION,
        &metadata_suite::METADATA,
        &upstream::UPSTREAM,
    ]
}

/// The results of one suite.
#[derive(Clone, Debug)]
pub struct SuiteReport {
    pub suite: &'static str,
    pub description: &'static str,
    pub cases: Vec<CaseOutcome>,
    pub elapsed: Duration,
}

impl SuiteReport {
    pub fn skipped(&self) -> usize {
        let skipped = |c: &&CaseOutcome| matches!(c.result, CaseResult::Skipped(_));
        self.cases.iter().filter(skipped).count()
    }

    pub fn failures(&self) -> impl Iterator<Item = &CaseOutcome> {
        self.cases.iter().filter(|c| c.result.failure().is_some())
    }
}

/// The key a suite's case is hashed by under a `hash:I/N` partition.
pub fn partition_key(suite: &str, index: usize) -> String {
    format!("{suite}-{index}")
}

/// The indices of the first `cases` cases of `suite` that `partition` selects (all without one).
pub fn selected_cases(suite: &str, cases: usize, partition: Option<&Partition>) -> Vec<usize> {
    (0..cases)
        .filter(|&i| partition.is_none_or(|p| p.selects(i, &partition_key(suite, i))))
        .collect()
}

/// Runs the cases `indices` of `suite` in parallel, advancing `progress` as each finishes.
pub fn run_suite(
    suite: &'static dyn Suite,
    seed: u64,
    indices: &[usize],
    progress: &ProgressBar,
) -> SuiteReport {
    let start = Instant::now();
    progress.set_message(suite.name());
    let outcomes: Vec<CaseOutcome> = indices
        .par_iter()
        .map(|&i| {
            let outcome = suite.run_case(seed, i);
            progress.inc(1);
            outcome
        })
        .collect();
    SuiteReport {
        suite: suite.name(),
        description: suite.description(),
        cases: outcomes,
        elapsed: start.elapsed(),
    }
}

/// What `conform` runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConformOptions {
    /// Suite names; empty for every registered suite.
    pub suites: Vec<String>,
    /// The campaign seed: the same seed replays the same cases.
    pub seed: u64,
    /// Cases per suite; `None` for each suite's own default.
    pub cases: Option<usize>,
    /// The shard to run; `None` for the whole campaign.
    pub partition: Option<Partition>,
}

/// A suite name no suite has.
#[derive(Debug, thiserror::Error)]
#[error("unknown suite `{name}` (registered: {registered})")]
pub struct UnknownSuite {
    pub name: String,
    pub registered: String,
}

/// The registered suite called `name`.
pub fn suite_named(name: &str) -> Result<&'static dyn Suite, UnknownSuite> {
    let registered = suites();
    registered
        .iter()
        .find(|s| s.name() == name)
        .copied()
        .ok_or_else(|| UnknownSuite {
            name: name.to_string(),
            registered: registered
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Runs a campaign, with a progress bar on stderr.
pub fn run(options: &ConformOptions) -> Result<CampaignReport, UnknownSuite> {
    let selected: Vec<&'static dyn Suite> = if options.suites.is_empty() {
        suites()
    } else {
        options
            .suites
            .iter()
            .map(|name| suite_named(name))
            .collect::<Result<_, _>>()?
    };
    let plan: Vec<(&'static dyn Suite, Vec<usize>)> = selected
        .into_iter()
        .map(|s| {
            let cases = options.cases.unwrap_or_else(|| s.default_cases());
            (
                s,
                selected_cases(s.name(), cases, options.partition.as_ref()),
            )
        })
        .collect();
    let progress = crate::report::progress_bar(plan.iter().map(|(_, i)| i.len() as u64).sum());
    let reports = plan
        .iter()
        .map(|(suite, indices)| run_suite(*suite, options.seed, indices, &progress))
        .collect();
    progress.finish_and_clear();
    Ok(CampaignReport {
        seed: options.seed,
        partition: options.partition,
        suites: reports,
    })
}
