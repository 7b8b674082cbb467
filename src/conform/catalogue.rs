//! The validation catalogue (`tests/catalog/*.json`: calls reaching every error site of every
//! profile), compiled into the binary so that `conform` runs it wherever the binary is installed.
//! The build script lists the files; `tests/validate_catalog.rs` checks that the list is the folder.

use crate::call::KvCacheCall;
use crate::spec::parse_specs;
use std::sync::OnceLock;

/// Every catalogue file as `(file name, text)`, in name order.
pub const FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));

/// The catalogue's calls, file by file.
pub fn calls() -> &'static [KvCacheCall] {
    static CALLS: OnceLock<Vec<KvCacheCall>> = OnceLock::new();
    CALLS.get_or_init(|| {
        FILES
            .iter()
            .flat_map(|(name, text)| {
                // Checked by the catalogue tests before the binary is built.
                parse_specs(text).unwrap_or_else(|e| panic!("catalogue file {name}: {e}"))
            })
            .collect()
    })
}
