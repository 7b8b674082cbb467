//! The `--format` flag every command shares.

use crate::report::Format;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// The value parser of a command's `--format`: the formats its report offers
/// ([`crate::report::Report::FORMATS`]; the first is the default).
pub fn format_parser(offered: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(
        offered
            .iter()
            .map(|f| PossibleValue::new(f.name()).help(f.description())),
    )
    .map(|name| Format::from_name(&name).expect("every possible value names a format"))
}
