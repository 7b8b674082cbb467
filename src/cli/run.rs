//! `fa3conform run`: evaluate one call with the reference and summarise the result.

use super::{Outcome, emit};
use crate::reference::Stack;
use crate::report::{Format, Report};
use crate::run::{self, RunOptions, RunReport};
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The call spec (JSON with exactly one call; `-` for stdin).
    pub spec: PathBuf,
    /// Whose conventions apply where the stacks differ (lse of empty KV, softcap sign, sinks).
    #[arg(long, value_parser = stack_parser(), default_value = Stack::Musa.name())]
    pub stack: Stack,
    #[arg(long, value_parser = super::format::format_parser(RunReport::FORMATS),
          default_value = RunReport::FORMATS[0].name())]
    pub format: Format,
    /// Refuse calls whose tensors would take more bytes than this once materialised.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    /// Write `out`, `softmax_lse` (F32) and the caches after an append (cache dtype) to this
    /// safetensors file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `--stack`: the reference's stacks by name.
fn stack_parser() -> impl TypedValueParser<Value = Stack> {
    PossibleValuesParser::new(Stack::ALL.map(Stack::name)).map(|name| {
        Stack::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .expect("every possible value names a stack")
    })
}

pub fn run(args: &RunArgs, out: &mut dyn Write) -> Outcome {
    let report = run::run(&RunOptions {
        spec: args.spec.clone(),
        stack: args.stack,
        memory_cap: args.memory_cap,
        out: args.out.clone(),
    })?;
    emit(&report, args.format, None, out)
}
