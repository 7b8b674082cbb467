//! `fa3conform export`: case bundles for a device runner, from a spec file or a suite's cases.

use super::{Outcome, emit};
use crate::bridge::export::{self, ExportOptions, ExportReport};
use crate::call::KvCacheCall;
use crate::conform;
use crate::report::{Format, Report};
use crate::spec::{parse_specs, read_input};
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A registered suite whose cases are calls.
    #[arg(long, required_unless_present = "spec", conflicts_with = "spec")]
    pub suite: Option<String>,
    /// A call-spec file (one object, an array, or JSON lines).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Number of cases (suite: required; spec: the first N calls, all by default).
    #[arg(long)]
    pub cases: Option<usize>,
    /// Suite: the campaign seed (default: conform's). Spec: replaces each call's data seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder the bundles are written to (one subfolder per case).
    #[arg(long)]
    pub out: PathBuf,
    /// The profile whose conventions the expected numbers follow.
    #[arg(long, default_value = "musa")]
    pub profile: String,
    /// Bytes one call's tensors may take once materialised.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    #[arg(long, value_parser = super::format::format_parser(ExportReport::FORMATS),
          default_value = ExportReport::FORMATS[0].name())]
    pub format: Format,
}

impl ExportArgs {
    /// The calls to export: the spec file's (the first `--cases`, with `--seed` as their data
    /// seed), or the suite's cases.
    fn calls(&self) -> anyhow::Result<Vec<KvCacheCall>> {
        if let Some(path) = &self.spec {
            let mut calls = parse_specs(&read_input(path)?)
                .with_context(|| format!("reading {}", path.display()))?;
            calls.truncate(self.cases.unwrap_or(calls.len()));
            if let Some(seed) = self.seed {
                calls.iter_mut().for_each(|c| c.seed = seed);
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
                suite.call(seed, i).with_context(|| {
                    format!(
                        "suite `{name}` checks something other than single calls: nothing to export"
                    )
                })
            })
            .collect()
    }
}

pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Outcome {
    let report = export::export(&ExportOptions {
        calls: args.calls()?,
        out: args.out.clone(),
        profile: args.profile.clone(),
        memory_cap: args.memory_cap,
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
            profile: "musa".into(),
            memory_cap: 1 << 20,
            format: Format::Human,
        }
    }

    #[test]
    fn bad_sources_are_input_errors() {
        let unknown = args(Some("nope"), None).calls().unwrap_err().to_string();
        assert!(
            unknown.starts_with("unknown suite `nope` (registered: "),
            "{unknown}"
        );
        let missing = args(None, Some("no/such/file.json")).calls().unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("reading no/such/file.json: "),
            "{missing}"
        );
        let mut no_cases = args(Some("validation"), None);
        no_cases.cases = None;
        assert_eq!(
            no_cases.calls().unwrap_err().to_string(),
            "--suite needs --cases N"
        );
    }
}
