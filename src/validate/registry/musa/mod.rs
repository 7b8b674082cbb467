//! Error sites and hazards of the MUSA stack: SGLang's MUSA wrapper V3 (sglang 082898472f) over
//! mate v0.2.2 (3f58cc3e), entered through SGLang's wrapper (`musa.`) or mate's FA3-compatible
//! wrapper (`mate.`). Labels follow musa-fa3.md §5 (`W-`, `G-`, `K-`, `MLA-`, `F-`, `C-`, `J-`,
//! `B-`; `I-` for mate's wrapper, §2.2); a suffix names the Python expression of that check that raises something else than its
//! assert (`.attr`, `.index`, ...). Sites marked "Shadowed" cannot fire first (an earlier site always
//! catches the same defect); they are listed so that `explain` knows them.

#[macro_use]
mod shared;

mod combine;
mod fmha_fwd;
mod hazards;
mod injection;
mod interface;
mod jit;
mod kernel_config;
mod mate_wrapper;
mod mla;
mod sglang;

pub use combine::*;
pub use fmha_fwd::*;
pub use hazards::*;
pub use injection::*;
pub use interface::*;
pub use jit::*;
pub use kernel_config::*;
pub use mate_wrapper::*;
pub use mla::*;
pub use sglang::*;

use super::{HazardDef, Site};

/// Every MUSA error site, layer by layer in the order the stack runs them.
pub(super) fn sites() -> impl Iterator<Item = &'static Site> {
    [
        sglang::WRAPPER_SITES,
        injection::INJECTION_SITES,
        mate_wrapper::MATE_WRAPPER_SITES,
        interface::INTERFACE_SITES,
        mla::MLA_SITES,
        fmha_fwd::FMHA_FWD_SITES,
        kernel_config::KERNEL_CONFIG_SITES,
        jit::JIT_SITES,
        combine::COMBINE_SITES,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// Every MUSA hazard kind.
pub(super) fn hazards() -> impl Iterator<Item = &'static HazardDef> {
    hazards::HAZARDS.iter().copied()
}
