//! `fa3conform conform`: run the registered suites.

use super::ExitStatus;
use super::args::ConformArgs;
use crate::conform::{self, Suite};
use anyhow::{Context, bail};
use std::io::Write;

pub fn run(args: &ConformArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let registered = conform::suites();
    if args.list {
        for suite in &registered {
            writeln!(
                out,
                "{:<12} {} (default {} cases)",
                suite.name(),
                suite.description(),
                suite.default_cases()
            )?;
        }
        return Ok(ExitStatus::Success);
    }
    let selected: Vec<&'static dyn Suite> = if args.suites.is_empty() {
        registered
    } else {
        let mut selected = Vec::new();
        for name in &args.suites {
            match registered.iter().find(|s| s.name() == name) {
                Some(suite) => selected.push(*suite),
                None => {
                    let known: Vec<&str> = registered.iter().map(|s| s.name()).collect();
                    bail!("unknown suite `{name}` (registered: {})", known.join(", "));
                }
            }
        }
        selected
    };
    let plan: Vec<(&'static dyn Suite, usize)> = selected
        .iter()
        .map(|s| (*s, args.cases.unwrap_or_else(|| s.default_cases())))
        .collect();
    let progress = conform::progress_bar(plan.iter().map(|(_, n)| *n as u64).sum());
    let reports: Vec<_> = plan
        .iter()
        .map(|(suite, n)| conform::run_suite(*suite, args.seed, *n, &progress))
        .collect();
    progress.finish_and_clear();
    let rendered = conform::render(&reports, args.seed, args.format);
    match &args.output {
        Some(path) => {
            std::fs::write(path, rendered).with_context(|| format!("writing {}", path.display()))?
        }
        None => out.write_all(rendered.as_bytes())?,
    }
    let failed = reports.iter().any(|r| r.failures().next().is_some());
    Ok(if failed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
