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
    /// Evaluate one call spec with the f64 reference and summarise the outputs.
    Run(RunArgs),
    /// Certify call specs: each profile's verdict, the hazards, and a compatibility summary.
    Certify(crate::certify::CertifyArgs),
    /// Explain an error message, error site id, hazard code or scan code.
    Explain(crate::explain::ExplainArgs),
    /// Find flash_attn_with_kvcache call sites in Python code and report what breaks on MUSA.
    Scan(crate::scan::cli::ScanArgs),
    /// Emulate SGLang's scheduler-metadata injection over a forward pass and flag every call whose
    /// injected metadata does not describe it.
    Forward(crate::scheduler::forward::ForwardArgs),
    /// Write case bundles (call, inputs, expected outputs and verdicts) for a device runner.
    Export(crate::bridge::export::ExportArgs),
    /// Compare a device runner's results in case bundles with the expected verdicts and outputs.
    Verify(crate::bridge::verify::VerifyArgs),
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

/// A stack whose conventions the reference follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StackArg {
    Musa,
    SglKernel,
    Fa3,
}

impl From<StackArg> for crate::reference::Stack {
    fn from(stack: StackArg) -> Self {
        match stack {
            StackArg::Musa => crate::reference::Stack::Musa,
            StackArg::SglKernel => crate::reference::Stack::SglKernel,
            StackArg::Fa3 => crate::reference::Stack::Fa3,
        }
    }
}

/// Output formats of commands that print a summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TextOrJson {
    Human,
    Json,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The call spec (JSON with exactly one call; `-` for stdin).
    pub spec: std::path::PathBuf,
    /// Whose conventions apply where the stacks differ (lse of empty KV, softcap sign, sinks).
    #[arg(long, value_enum, default_value_t = StackArg::Musa)]
    pub stack: StackArg,
    #[arg(long, value_enum, default_value_t = TextOrJson::Human)]
    pub format: TextOrJson,
    /// Refuse calls whose tensors would take more bytes than this once materialised.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    /// Write `out`, `softmax_lse` (F32) and the caches after an append (cache dtype) to this
    /// safetensors file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}
