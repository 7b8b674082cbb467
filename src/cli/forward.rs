//! `fa3conform forward`: SGLang's metadata injection over a forward pass.

use super::{Outcome, emit};
use crate::forward::{self, ForwardOptions, ForwardReport};
use crate::report::{Format, Report};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// The forward pass (JSON, see `fa3conform::forward`; `-` for stdin).
    pub file: PathBuf,
    #[arg(long, value_parser = super::format::format_parser(ForwardReport::FORMATS),
          default_value = ForwardReport::FORMATS[0].name())]
    pub format: Format,
    /// Multiprocessor count of the modelled MUSA device.
    #[arg(long, default_value_t = crate::mate::DEFAULT_MP)]
    pub mp: usize,
    /// Bytes one call's index tensors (sequence lengths, page tables) may take once materialised.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
}

pub fn run(args: &ForwardArgs, out: &mut dyn Write) -> Outcome {
    let report = forward::forward(&ForwardOptions {
        file: args.file.clone(),
        mp: args.mp,
        memory_cap: args.memory_cap,
    })?;
    emit(&report, args.format, None, out)
}
