//! fa3conform: conformance and fuzz testing, with a reference implementation, for FlashAttention-3's
//! `flash_attn_with_kvcache` as it runs on Moore Threads (MUSA) GPUs.

pub mod bridge;
pub mod call;
pub mod cases;
pub mod certify;
pub mod cli;
pub mod conform;
pub mod device;
pub mod explain;
pub mod files;
pub mod forward;
pub mod fuzzing;
pub mod hopper;
pub mod kernel;
pub mod mate;
pub mod memory;
pub mod musa;
pub mod numeric;
pub mod parallel;
pub mod partition;
pub mod reference;
pub mod report;
pub mod run;
pub mod scan;
pub mod scheduler;
pub mod spec;
#[cfg(feature = "internal-testing")]
pub mod strategies;
pub mod tensor;
pub mod tolerance;
pub mod validate;
