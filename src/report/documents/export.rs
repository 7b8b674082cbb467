//! `export --format json`: where the bundles went and how many the profile accepts.

use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Export {
    /// The folder holding one bundle folder per case.
    pub out: String,
    /// The profile whose conventions the expected numbers follow.
    pub profile: String,
    pub bundles: usize,
    pub accepted: usize,
    pub rejected: usize,
}

impl Document for Export {
    const SCHEMA_VERSION: u32 = 1;
}
