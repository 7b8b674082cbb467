//! `explain --list --format json`: every error site, with its message template and how the
//! template stands for `str(exc)`.

use super::MessageMatch;
use crate::report::json::Document;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteList {
    /// In registry order.
    pub sites: Vec<Site>,
}

impl Document for SiteList {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Site {
    /// `musa.W-1`
    pub id: String,
    /// The profiles whose checks can raise it.
    pub profiles: Vec<String>,
    pub layer: String,
    pub exception: String,
    /// `str(exc)` with `{}` placeholders; empty for a bare `assert`.
    pub template: String,
    pub message_match: MessageMatch,
    /// `repo@commit path:Lx-Ly`
    pub citation: String,
}
