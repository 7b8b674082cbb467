//! Scheduler metadata on the MUSA stack: the arguments callers compute it with ([`args`]), checks
//! that a buffer describes its call ([`stale`]). SGLang's auto-injection over a whole forward pass
//! is [`crate::forward`], above the modelled MUSA stack it runs calls through.
//!
//! The metadata kernels' own models live with their host code: mate's `_fmha_get_metadata` in
//! [`crate::mate`], FA3's layout and prepare kernel in [`crate::hopper`].

pub mod args;
pub mod stale;

pub use args::{MetadataError, get_scheduler_metadata, own_args, sglang_injected_args, to_mate};
pub use stale::{check_buffer, stale_metadata_findings, stale_metadata_findings_on};
