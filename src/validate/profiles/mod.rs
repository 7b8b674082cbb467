//! The profiles, one file per stack; layers shared by two profiles live in their own file.

mod musa;
mod musa_config;
mod musa_mate;
mod musa_sglang;

pub use musa::{MUSA, MusaProfile};

use super::Profile;

/// Every profile, in the order `certify` shows them.
pub fn all() -> Vec<&'static dyn Profile> {
    vec![&MUSA]
}

/// The profile named `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Profile> {
    all().into_iter().find(|p| p.name() == name)
}
