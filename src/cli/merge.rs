//! `fa3conform merge-reports`: the JSON reports of a campaign's shards as one report.

use super::{Outcome, emit};
use crate::report::merge::{self, Merged, Source};
use crate::report::{Format, Report};
use anyhow::Context;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// JSON reports of one kind (`conform`, `certify` or `verify --format json`), one per shard.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, value_parser = super::format::format_parser(Merged::FORMATS),
          default_value = Merged::FORMATS[0].name())]
    pub format: Format,
    /// Write the merged report to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(args: &MergeArgs, out: &mut dyn Write) -> Outcome {
    let sources = args
        .files
        .iter()
        .map(|path| {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {name}"))?;
            let document =
                serde_json::from_str(&text).with_context(|| format!("{name} is not JSON"))?;
            Ok(Source { name, document })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let merged = merge::merge(sources)?;
    emit(&merged, args.format, args.output.as_deref(), out)
}
