//! `export --format json`: where the bundles went, how many the profile accepts, how many are
//! slim, and the cases written as skipped bundles.

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
    /// Bundles holding only the KV pool rows their call touches.
    pub slim: usize,
    /// Bytes of the tensor files written.
    pub bytes: u64,
    /// Cases written without inputs, and why.
    pub skipped: Vec<Skipped>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    /// The bundle folder's name.
    pub case: String,
    pub reason: String,
}

impl Document for Export {
    const SCHEMA_VERSION: u32 = 1;
}
