//! The `fa3conform` command line: the flags of every command (one file each), their mapping to
//! the commands' own options, the format choice and the exit codes. Commands know nothing of it:
//! each takes its options and hands back a report ([`crate::report::Report`]).

mod args;
mod certify;
mod conform;
mod exit;
mod explain;
mod export;
mod format;
mod forward;
mod merge;
mod run;
mod scan;
mod verify;

pub use args::{Cli, Command};
pub use exit::exit_code;

use crate::report::{self, Format, Report, Status};
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// How a command ended: a status, or an error that makes its input unusable.
type Outcome = anyhow::Result<Status>;

/// Runs a parsed command line, writing results to `out` and diagnostics to stderr.
pub fn run(cli: Cli, out: &mut dyn Write) -> Status {
    let outcome = match cli.command {
        Command::Conform(args) => conform::run(&args, out),
        Command::Run(args) => run::run(&args, out),
        Command::Certify(args) => certify::run(&args, out),
        Command::Explain(args) => explain::run(&args, out),
        Command::Scan(args) => scan::run(&args, out),
        Command::Forward(args) => forward::run(&args, out),
        Command::Export(args) => export::run(&args, out),
        Command::Verify(args) => verify::run(&args, out),
        Command::MergeReports(args) => merge::run(&args, out),
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        Status::InputError
    })
}

/// Writes `report` in `format` to the file `output`, or to `out`; the run ends with the
/// report's status.
fn emit<R: Report>(
    report: &R,
    format: Format,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Outcome {
    match output {
        Some(path) => {
            let mut text = Vec::new();
            report::write(report, format, &mut text)?;
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            // Standard output is line-buffered: a report written through it would take one
            // system call per line (a tenth of certify's time on a large recording).
            let mut out = std::io::BufWriter::new(out);
            report::write(report, format, &mut out)
                .and_then(|()| out.flush())
                .context("writing the report")?
        }
    }
    Ok(report.status())
}
