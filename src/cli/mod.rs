//! The `fa3conform` command line: argument definitions, exit codes, one file per command.

pub mod args;
mod conform;
pub mod exit;

pub use args::{Cli, Command};
pub use exit::ExitStatus;

use std::io::Write;

/// Runs a parsed command line, writing results to `out` and diagnostics to stderr.
pub fn run(cli: Cli, out: &mut dyn Write) -> ExitStatus {
    let result = match cli.command {
        Command::Conform(args) => conform::run(&args, out),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitStatus::Error
    })
}
