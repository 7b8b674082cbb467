//! The `fa3conform` command line: argument definitions, exit codes, one file per command.

pub mod args;
mod conform;
pub mod exit;
mod run;

pub use args::{Cli, Command};
pub use exit::ExitStatus;

use std::io::Write;

/// Runs a parsed command line, writing results to `out` and diagnostics to stderr.
pub fn run(cli: Cli, out: &mut dyn Write) -> ExitStatus {
    let result = match cli.command {
        Command::Conform(args) => conform::run(&args, out),
        Command::Run(args) => run::run(&args, out),
        Command::Scan(args) => crate::scan::cli::run_scan(&args, out)
            .map(|exit| match exit {
                crate::scan::cli::ScanExit::Clean => ExitStatus::Success,
                crate::scan::cli::ScanExit::Findings => ExitStatus::Failure,
            })
            .map_err(anyhow::Error::from),
        Command::Certify(args) => crate::certify::run_certify(&args, out)
            .map(ExitStatus::from_code)
            .map_err(anyhow::Error::from),
        Command::Explain(args) => crate::explain::run_explain(&args, out)
            .map(ExitStatus::from_code)
            .map_err(anyhow::Error::from),
        Command::Forward(args) => Ok(crate::scheduler::forward::run_forward(&args, out)),
        Command::Export(args) => Ok(crate::bridge::export::run_export(&args, out)),
        Command::Verify(args) => Ok(crate::bridge::verify::run_verify(&args, out)),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitStatus::Error
    })
}

/// Reads a file, or stdin for `-`.
fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context;
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).context("reading stdin")?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    }
}
