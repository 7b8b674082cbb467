//! `fa3conform scan`: call sites in Python code and what breaks on MUSA.

use super::{Outcome, emit};
use crate::report::{Format, Report, Status};
use crate::scan::emit::specs;
use crate::scan::rules::{self, Rule};
use crate::scan::{self, ScanOptions, ScanReport};
use anyhow::Context;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Clone, Debug, Args)]
pub struct ScanArgs {
    /// Files or directories to scan (directories respect .gitignore).
    #[arg(required_unless_present = "explain")]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_parser = super::format::format_parser(ScanReport::FORMATS),
          default_value = ScanReport::FORMATS[0].name())]
    pub format: Format,
    /// Report only these codes (comma-separated; also codes that are off by default).
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
    /// Parse no file whose tree and analysis could take more bytes than this, with the files
    /// parsed before it.
    #[arg(long, default_value_t = crate::memory::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    /// Print the explanation of a diagnostic code and exit.
    #[arg(long, value_name = "CODE", value_parser = parse_rule)]
    pub explain: Option<Rule>,
}

fn parse_rule(code: &str) -> Result<Rule, String> {
    Rule::from_code(code).ok_or_else(|| format!("unknown scan code `{code}`"))
}

pub fn run(args: &ScanArgs, out: &mut dyn Write) -> Outcome {
    if let Some(rule) = args.explain {
        out.write_all(rules::explain(rule).as_bytes())?;
        return Ok(Status::Success);
    }
    let report = scan::scan(&ScanOptions {
        paths: args.paths.clone(),
        select: args.select.clone(),
        ignore: args.ignore.clone(),
        memory_cap: args.memory_cap,
    })?;
    let status = emit(&report, args.format, None, out)?;
    if let Some(path) = &args.emit_specs {
        let written = std::fs::File::create(path)
            .and_then(|mut file| specs::render(&report.result.calls, &mut file));
        written.with_context(|| format!("writing call specs to {}", path.display()))?;
    }
    Ok(if args.exit_zero && status == Status::Findings {
        Status::Success
    } else {
        status
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
        assert_eq!(args.format, Format::Sarif);
        assert!(args.exit_zero);
        let junit = parse(&["src", "--format", "junit"]).unwrap_err();
        assert!(
            junit.contains("[possible values: human, json, sarif]"),
            "{junit}"
        );
    }

    #[test]
    fn paths_are_required_unless_explaining() {
        assert!(parse(&[]).is_err());
        let args = parse(&["--explain", "FA3M017"]).unwrap();
        assert_eq!(args.explain, Some(Rule::AppendWithoutCacheSeqlens));
        let err = parse(&["x", "--select", "FA3M999"]).unwrap_err();
        assert!(err.contains("unknown scan code `FA3M999`"), "{err}");
    }

    fn scan_fixture(fixture: &str, configure: impl FnOnce(&mut ScanArgs)) -> Status {
        // Unit tests run in the package root.
        let path = format!("tests/scan/fixtures/rules/{fixture}.py");
        let mut args = parse(&[&path]).unwrap();
        configure(&mut args);
        run(&args, &mut Vec::new()).unwrap()
    }

    #[test]
    fn exit_zero_turns_findings_into_success() {
        assert_eq!(scan_fixture("FA3M001", |_| {}), Status::Findings);
        assert_eq!(
            scan_fixture("FA3M001", |a| a.exit_zero = true),
            Status::Success
        );
        assert_eq!(
            scan_fixture("FA3M013", |_| {}),
            Status::Success,
            "a warning"
        );
    }
}
