//! `fa3conform certify`: each profile's verdict on call specs, hazards and numerics.

use super::{Outcome, emit};
use crate::call::Device;
use crate::certify::{self, CertifyOptions, CertifyReport};
use crate::report::{Format, Report};
use crate::spec::parse_device_as;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Clone, Debug, Args)]
pub struct CertifyArgs {
    /// Call spec files (JSON object, array or JSON lines), folders of recordings (their call
    /// files merged, repeated calls once); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Profiles to show (repeatable or comma-separated); default: all.
    #[arg(long = "profile", value_delimiter = ',')]
    pub profiles: Vec<String>,
    #[arg(long, value_parser = super::format::format_parser(CertifyReport::FORMATS),
          default_value = CertifyReport::FORMATS[0].name())]
    pub format: Format,
    /// Also run each call the `musa` profile accepts on the modelled MUSA stack (the kernel path,
    /// with the metadata it would get) and compare it with the f64 reference under the tolerance
    /// rule; a difference fails certification.
    #[arg(long)]
    pub numerics: bool,
    /// Refuse spec files larger than this many bytes and, with `--numerics`, calls whose tensors
    /// would take more.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
    /// Multiprocessor count of the modelled MUSA device (the scheduler metadata, the split
    /// heuristic and, with `--numerics`, the persistent grid depend on it).
    #[arg(long, default_value_t = crate::mate::DEFAULT_MP)]
    pub mp: usize,
    /// Certify calls recorded on CPU as the calls they stand for on this device (musa or cuda):
    /// every CPU tensor is taken to be on it.
    #[arg(long, value_name = "DEVICE", value_parser = parse_device_as)]
    pub device_as: Option<Device>,
}

pub fn run(args: &CertifyArgs, out: &mut dyn Write) -> Outcome {
    let report = certify::certify(&CertifyOptions {
        files: args.files.clone(),
        profiles: args.profiles.clone(),
        numerics: args.numerics,
        memory_cap: args.memory_cap,
        mp: args.mp,
        device_as: args.device_as,
    })?;
    emit(&report, args.format, None, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        certify: CertifyArgs,
    }

    #[test]
    fn arguments_parse_as_documented() {
        let cli = Cli::try_parse_from([
            "certify",
            "--profile",
            "musa,sgl-kernel",
            "--profile",
            "fa3",
            "--format",
            "junit",
            "a.json",
            "-",
        ])
        .unwrap();
        assert_eq!(cli.certify.profiles, ["musa", "sgl-kernel", "fa3"]);
        assert_eq!(cli.certify.format, Format::Junit);
        assert_eq!(
            cli.certify.files,
            [PathBuf::from("a.json"), PathBuf::from("-")]
        );
        assert!(Cli::try_parse_from(["certify"]).is_err());
        let defaults = Cli::try_parse_from(["certify", "a.json"]).unwrap();
        assert_eq!(defaults.certify.format, Format::Human);
        let sarif = Cli::try_parse_from(["certify", "--format", "sarif", "a.json"])
            .err()
            .expect("certify offers no SARIF")
            .to_string();
        assert!(
            sarif.contains("[possible values: human, json, junit]"),
            "{sarif}"
        );
    }
}
