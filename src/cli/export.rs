//! `fa3conform export`: case bundles for a device runner, from a spec file or a suite's cases.

use super::{Outcome, emit};
use crate::bridge::export::{self, ExportOptions, ExportReport, Pools};
use crate::call::{Device, KvCacheCall};
use crate::conform;
use crate::memory::Budget;
use crate::partition::Partition;
use crate::report::{Format, Report};
use crate::spec::{cpu_tensors_on, parse_device_as, read_calls};
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A registered suite whose cases are calls.
    #[arg(long, required_unless_present = "spec", conflicts_with = "spec")]
    pub suite: Option<String>,
    /// A call-spec file (one object, an array, or JSON lines), or a folder of recordings.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Number of cases (suite: required; spec: the first N calls, all by default).
    #[arg(long)]
    pub cases: Option<usize>,
    /// Suite: the campaign seed (default: conform's). Spec: replaces each call's data seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder the bundles are written to (one subfolder per case, named by its id). It must be
    /// empty or absent, unless `--force` replaces the bundles it holds.
    #[arg(long)]
    pub out: PathBuf,
    /// Remove the bundles `--out` already holds (and their results) before exporting.
    #[arg(long)]
    pub force: bool,
    /// Store whole KV pools instead of the pages (cache rows) each call can read or write.
    #[arg(long)]
    pub whole_pools: bool,
    /// Export calls recorded on CPU as the calls they stand for on this device (musa or cuda):
    /// every CPU tensor is taken to be on it (as `certify --device-as`).
    #[arg(long, value_name = "DEVICE", value_parser = parse_device_as)]
    pub device_as: Option<Device>,
    /// Export one shard of the cases, for a fleet of runners: `count:I/N` takes every N-th case
    /// from the I-th, `hash:I/N` the cases whose bundle name hashes to shard I. Bundles keep the
    /// names a whole export gives them, so the shards' verify reports merge.
    #[arg(long, value_name = "count:I/N|hash:I/N")]
    pub partition: Option<Partition>,
    /// The profile whose conventions the expected numbers follow.
    #[arg(long, default_value = "musa")]
    pub profile: String,
    /// Bytes a spec file may hold, and one call's tensors once materialised.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    #[arg(long, value_parser = super::format::format_parser(ExportReport::FORMATS),
          default_value = ExportReport::FORMATS[0].name())]
    pub format: Format,
}

impl ExportArgs {
    /// The calls to export: the spec file's or recordings' (the first `--cases`, with `--seed` as
    /// their data seed, on `--device-as`), or the suite's cases (named `<suite>-<seed>-<index>`
    /// unless the suite names them).
    fn calls(&self, budget: &mut Budget) -> anyhow::Result<Vec<KvCacheCall>> {
        if let Some(path) = &self.spec {
            let mut calls = read_calls(std::slice::from_ref(path), budget)?.into_calls()?;
            calls.truncate(self.cases.unwrap_or(calls.len()));
            for call in &mut calls {
                if let Some(seed) = self.seed {
                    call.seed = seed;
                }
                if let Some(device) = self.device_as {
                    cpu_tensors_on(call, device);
                }
            }
            return Ok(calls);
        }
        let name = self.suite.as_deref().unwrap_or_default();
        let suite = conform::suite_named(name)?;
        let Some(cases) = self.cases else {
            bail!("--suite needs --cases N")
        };
        let seed = self.seed.unwrap_or(conform::DEFAULT_SEED);
        (0..cases)
            .map(|i| {
                let mut call = suite.call(seed, i).with_context(|| {
                    format!(
                        "suite `{name}` checks something other than single calls: nothing to export"
                    )
                })?;
                if call.id.is_empty() {
                    call.id = format!("{name}-{seed}-{i}");
                }
                Ok(call)
            })
            .collect()
    }
}

pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Outcome {
    let mut budget = Budget::new(args.memory_cap);
    let report = export::export(&ExportOptions {
        calls: args.calls(&mut budget)?,
        partition: args.partition,
        out: args.out.clone(),
        force: args.force,
        pools: if args.whole_pools {
            Pools::Whole
        } else {
            Pools::Slim
        },
        profile: args.profile.clone(),
        // each bundle gets what the calls leave
        memory_cap: budget.left(),
    })?;
    emit(&report, args.format, None, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(suite: Option<&str>, spec: Option<&str>) -> ExportArgs {
        ExportArgs {
            suite: suite.map(str::to_string),
            spec: spec.map(PathBuf::from),
            cases: Some(1),
            seed: None,
            out: PathBuf::from("unused"),
            force: false,
            whole_pools: false,
            device_as: None,
            partition: None,
            profile: "musa".into(),
            memory_cap: 1 << 20,
            format: Format::Human,
        }
    }

    #[test]
    fn bad_sources_are_input_errors() {
        let unknown = args(Some("nope"), None)
            .calls(&mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            unknown.starts_with("unknown suite `nope` (registered: "),
            "{unknown}"
        );
        let missing = args(None, Some("no/such/file.json"))
            .calls(&mut Budget::new(1 << 20))
            .unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("reading no/such/file.json: "),
            "{missing}"
        );
        let mut no_cases = args(Some("validation"), None);
        no_cases.cases = None;
        assert_eq!(
            no_cases
                .calls(&mut Budget::new(1 << 20))
                .unwrap_err()
                .to_string(),
            "--suite needs --cases N"
        );
    }
}
