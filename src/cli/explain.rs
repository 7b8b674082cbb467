//! `fa3conform explain`: what raises a message, a site, a hazard or a scan code; or every site.

use super::{Outcome, emit};
use crate::explain::{self, SiteList};
use crate::report::{Format, Report};
use clap::Args;
use std::io::Write;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// An error message as Python printed it, a site id or a hazard code.
    #[arg(
        required_unless_present = "list",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub message: Option<String>,
    /// List every error site: id, profiles, exception, message template and how it matches `str(exc)`.
    #[arg(long, conflicts_with = "message")]
    pub list: bool,
    /// The format of `--list`.
    #[arg(long, requires = "list", value_parser = super::format::format_parser(SiteList::FORMATS),
          default_value = SiteList::FORMATS[0].name())]
    pub format: Format,
}

pub fn run(args: &ExplainArgs, out: &mut dyn Write) -> Outcome {
    match &args.message {
        Some(message) => {
            let found = explain::explain(message);
            out.write_all(explain::render(&found).as_bytes())?;
            Ok(found.status())
        }
        None => emit(&explain::list(), args.format, None, out),
    }
}
