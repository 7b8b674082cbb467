//! The command line's top level (clap derive); each command's flags live in its own file.

use clap::{Parser, Subcommand};

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
    Conform(super::conform::ConformArgs),
    /// Evaluate one call spec with the f64 reference and summarise the outputs.
    Run(super::run::RunArgs),
    /// Certify call specs: each profile's verdict, the hazards, and a compatibility summary.
    Certify(super::certify::CertifyArgs),
    /// Explain an error message, error site id, hazard code or scan code.
    Explain(super::explain::ExplainArgs),
    /// Find flash_attn_with_kvcache call sites in Python code and report what breaks on MUSA.
    Scan(super::scan::ScanArgs),
    /// Emulate SGLang's scheduler-metadata injection over a forward pass and flag every call whose
    /// injected metadata does not describe it.
    Forward(super::forward::ForwardArgs),
    /// Write case bundles (call, inputs, expected outputs and verdicts) for a device runner.
    Export(super::export::ExportArgs),
    /// Compare a device runner's results in case bundles with the expected verdicts and outputs.
    Verify(super::verify::VerifyArgs),
    /// Merge the JSON reports of a campaign's shards (conform --partition, verify, certify) into
    /// the report one run would have written; shards of different campaigns are refused.
    MergeReports(super::merge::MergeArgs),
}
