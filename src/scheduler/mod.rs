//! Scheduler metadata on the MUSA stack and its CUDA counterpart: the arguments callers compute it
//! with ([`args`]), checks that a buffer describes its call ([`stale`]), SGLang's auto-injection
//! over a whole forward pass ([`forward`]) and FA3's (CUDA) layout and size rule ([`fa3`]).
//!
//! mate's own metadata model (the `_fmha_get_metadata` kernel) lives in [`crate::mate`].

pub mod args;
pub mod fa3;
pub mod forward;
pub mod stale;

pub use args::{MetadataError, get_scheduler_metadata, own_args, sglang_injected_args, to_mate};
pub use stale::{check_buffer, stale_metadata_findings, stale_metadata_findings_on};
