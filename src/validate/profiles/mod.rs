//! The profiles, one file per stack; layers shared by two profiles live in their own file.

mod cuda_op;
pub mod cuda_state;
pub mod fa3;
pub mod mha_fwd;
mod musa;
pub mod sgl_kernel;

pub use musa::should_update;
pub use musa::{MATE, MUSA, MateProfile, MusaProfile};

use super::Profile;

/// Every profile: [`defaults`], then `mate`.
pub fn all() -> Vec<&'static dyn Profile> {
    let mut all = defaults();
    all.push(&MATE);
    all
}

/// The profiles `certify`, `export` and the catalogue's snapshots show when none is named, in
/// that order: one per stack a call is written for. `mate`, the MUSA stack entered below `musa`'s
/// wrapper, is shown where it is named.
pub fn defaults() -> Vec<&'static dyn Profile> {
    vec![&MUSA, &sgl_kernel::SGL_KERNEL, &fa3::FA3, &fa3::FA3_STABLE]
}

/// The profile named `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Profile> {
    all().into_iter().find(|p| p.name() == name)
}
