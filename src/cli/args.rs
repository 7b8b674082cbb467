//! Every command and flag, in one place (clap derive).

use crate::conform::Format;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "fa3conform",
    version,
    about = "Conformance and fuzz testing for FlashAttention-3 flash_attn_with_kvcache on MUSA",
    after_help = super::exit::EXIT_CODES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the registered conformance suites (the default campaign when no flag is given).
    Conform(ConformArgs),
}

#[derive(Debug, Args)]
pub struct ConformArgs {
    /// Suites to run (repeatable or comma-separated); all registered suites by default.
    #[arg(long = "suite", value_delimiter = ',')]
    pub suites: Vec<String>,
    /// Campaign seed: the same seed replays the same cases.
    #[arg(long, default_value_t = 20261130)]
    pub seed: u64,
    /// Cases per suite (default: each suite's own, sized so the campaign takes about a minute).
    #[arg(long)]
    pub cases: Option<usize>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<std::path::PathBuf>,
    /// List the registered suites and exit.
    #[arg(long)]
    pub list: bool,
}
