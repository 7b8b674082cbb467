//! The `scan` command: arguments and the library entry point the CLI calls.

use super::emit::{self, Summary};
use super::rules::{self, Rule};
use super::{ScanError, scan_paths};
use crate::validate::Severity;
use std::io::{self, Write};
use std::path::PathBuf;

/// Output formats of `scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScanFormat {
    /// Diagnostics with source lines and carets.
    Human,
    /// One JSON object (versioned by `schema_version`).
    Json,
    /// SARIF 2.1.0, for code-scanning UIs.
    Sarif,
}

/// Find `flash_attn_with_kvcache` call sites in Python code and report what breaks on MUSA.
#[derive(Clone, Debug, clap::Args)]
pub struct ScanArgs {
    /// Files or directories to scan (directories respect .gitignore).
    #[arg(required_unless_present = "explain")]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = ScanFormat::Human)]
    pub format: ScanFormat,
    /// Report only these codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_rule, value_name = "CODES")]
    pub select: Vec<Rule>,
    /// Do not report these codes (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_rule, value_name = "CODES")]
    pub ignore: Vec<Rule>,
    /// Exit 0 even when errors are found.
    #[arg(long)]
    pub exit_zero: bool,
    /// Write a JSON call-spec skeleton for every call site to FILE.
    #[arg(long, value_name = "FILE")]
    pub emit_specs: Option<PathBuf>,
    /// Print the explanation of a diagnostic code and exit.
    #[arg(long, value_name = "CODE", value_parser = parse_rule)]
    pub explain: Option<Rule>,
}

fn parse_rule(code: &str) -> Result<Rule, String> {
    Rule::from_code(code).ok_or_else(|| format!("unknown scan code `{code}`"))
}

/// How `scan` ended when it ran to completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanExit {
    /// No error-level finding was reported (or `--exit-zero`): exit code 0.
    Clean,
    /// At least one error-level finding was reported: exit code 1.
    Findings,
}

impl ScanExit {
    pub fn code(self) -> u8 {
        match self {
            ScanExit::Clean => 0,
            ScanExit::Findings => 1,
        }
    }
}

/// Why `scan` could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScanCommandError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("writing {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

/// Runs `scan` with `args`, writing the report to `out`.
pub fn run_scan(args: &ScanArgs, out: &mut dyn Write) -> Result<ScanExit, ScanCommandError> {
    let io_err = |what: &str| {
        let what = what.to_string();
        move |source| ScanCommandError::Io { what, source }
    };
    if let Some(rule) = args.explain {
        out.write_all(rules::explain(rule).as_bytes())
            .map_err(io_err("the explanation"))?;
        return Ok(ScanExit::Clean);
    }
    let result = scan_paths(&args.paths)?;
    let reported: Vec<_> = result
        .diagnostics
        .iter()
        .filter(|d| args.select.is_empty() || args.select.contains(&d.rule))
        .filter(|d| !args.ignore.contains(&d.rule))
        .collect();
    let summary = Summary::of(&result, &reported);
    let render = match args.format {
        ScanFormat::Human => emit::human::render,
        ScanFormat::Json => emit::json::render,
        ScanFormat::Sarif => emit::sarif::render,
    };
    render(&reported, &summary, out).map_err(io_err("the report"))?;
    if let Some(path) = &args.emit_specs {
        let what = format!("call specs to {}", path.display());
        let mut file = std::fs::File::create(path).map_err(io_err(&what))?;
        emit::specs::render(&result.calls, &mut file).map_err(io_err(&what))?;
    }
    let failed = reported.iter().any(|d| d.severity() == Severity::Error);
    Ok(if failed && !args.exit_zero {
        ScanExit::Findings
    } else {
        ScanExit::Clean
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        scan: ScanArgs,
    }

    fn parse(args: &[&str]) -> Result<ScanArgs, String> {
        Cli::try_parse_from(std::iter::once("scan").chain(args.iter().copied()))
            .map(|cli| cli.scan)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn codes_lists_and_formats_parse() {
        let args = parse(&[
            "src",
            "--select",
            "FA3M001,fa3m004",
            "--ignore=FA3M010",
            "--format",
            "sarif",
            "--exit-zero",
        ])
        .unwrap();
        assert_eq!(args.paths, [PathBuf::from("src")]);
        assert_eq!(args.select, [Rule::VerNotThree, Rule::PositionalRebinds]);
        assert_eq!(args.ignore, [Rule::InjectedMetadata]);
        assert_eq!(args.format, ScanFormat::Sarif);
        assert!(args.exit_zero);
    }

    #[test]
    fn paths_are_required_unless_explaining() {
        assert!(parse(&[]).is_err());
        let args = parse(&["--explain", "FA3M017"]).unwrap();
        assert_eq!(args.explain, Some(Rule::AppendWithoutCacheSeqlens));
        let err = parse(&["x", "--select", "FA3M999"]).unwrap_err();
        assert!(err.contains("unknown scan code `FA3M999`"), "{err}");
    }
}
