//! `fa3conform conform`: run the registered suites.

use super::{Outcome, emit};
use crate::conform::{self, CampaignReport, ConformOptions};
use crate::partition::Partition;
use crate::report::{Format, Report, Status};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ConformArgs {
    /// Suites to run (repeatable or comma-separated); all registered suites by default.
    #[arg(long = "suite", value_delimiter = ',')]
    pub suites: Vec<String>,
    /// Campaign seed: the same seed replays the same cases.
    #[arg(long, default_value_t = conform::DEFAULT_SEED)]
    pub seed: u64,
    /// Cases per suite (default: each suite's own, sized so the campaign takes about a minute).
    #[arg(long)]
    pub cases: Option<usize>,
    #[arg(long, value_parser = super::format::format_parser(CampaignReport::FORMATS),
          default_value = CampaignReport::FORMATS[0].name())]
    pub format: Format,
    /// Run one shard of the campaign: `count:I/N` takes every N-th case of each suite from the
    /// I-th, `hash:I/N` the cases whose key hashes to shard I (nextest's semantics). The shards'
    /// JSON reports merge with `fa3conform merge-reports`.
    #[arg(long, value_name = "count:I/N|hash:I/N")]
    pub partition: Option<Partition>,
    /// Write the report to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// List the registered suites and exit.
    #[arg(long)]
    pub list: bool,
}

impl ConformArgs {
    fn options(&self) -> ConformOptions {
        ConformOptions {
            suites: self.suites.clone(),
            seed: self.seed,
            cases: self.cases,
            partition: self.partition,
        }
    }
}

pub fn run(args: &ConformArgs, out: &mut dyn Write) -> Outcome {
    if args.list {
        for suite in conform::suites() {
            writeln!(
                out,
                "{:<12} {} (default {} cases)",
                suite.name(),
                suite.description(),
                suite.default_cases()
            )?;
        }
        return Ok(Status::Success);
    }
    let report = conform::run(&args.options())?;
    emit(&report, args.format, args.output.as_deref(), out)
}
