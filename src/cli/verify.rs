//! `fa3conform verify`: judge a device runner's results in case bundles.

use super::{Outcome, emit};
use crate::bridge::verify::{self, VerifyOptions, VerifyReport};
use crate::report::{Format, Report};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A bundle folder, or a folder of bundle folders, after `python -m fa3conform.run`.
    pub dir: PathBuf,
    /// The profile whose verdicts and numerics the results must match.
    #[arg(long, default_value = "musa")]
    pub profile: String,
    #[arg(long, value_parser = super::format::format_parser(VerifyReport::FORMATS),
          default_value = VerifyReport::FORMATS[0].name())]
    pub format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Bytes one tensor file may take once decoded.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
}

pub fn run(args: &VerifyArgs, out: &mut dyn Write) -> Outcome {
    let report = verify::verify(&VerifyOptions {
        dir: args.dir.clone(),
        profile: args.profile.clone(),
        memory_cap: args.memory_cap,
    })?;
    emit(&report, args.format, args.output.as_deref(), out)
}
