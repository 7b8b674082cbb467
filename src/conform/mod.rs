//! Conformance campaigns: registered suites, each a list of seeded cases that pass or fail.
//!
//! A suite is deterministic in (campaign seed, case index), so any failure is replayed with
//! `fa3conform conform --suite NAME --seed S --cases N` and reported with its case name.

pub mod catalogue;
mod kernel_suite;
mod metadata_suite;
mod reference_suite;
mod report;
mod validation_suite;

pub use report::{Format, render, xml_escape};

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// What one case found.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    /// A short, stable name: the suite's case kind and what makes it distinct.
    pub name: String,
    /// `Err` holds a reproducible failure description (the call as JSON, what differed).
    pub result: Result<(), String>,
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
    pub fn failures(&self) -> impl Iterator<Item = &CaseOutcome> {
        self.cases.iter().filter(|c| c.result.is_err())
    }
}

/// Runs `cases` cases of `suite` in parallel, advancing `progress` as each finishes.
pub fn run_suite(
    suite: &'static dyn Suite,
    seed: u64,
    cases: usize,
    progress: &ProgressBar,
) -> SuiteReport {
    let start = Instant::now();
    progress.set_message(suite.name());
    let outcomes: Vec<CaseOutcome> = (0..cases)
        .into_par_iter()
        .map(|i| {
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

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:>12} [{bar:40}] {pos}/{len} cases ({eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}
