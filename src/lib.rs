//! fa3conform: conformance and fuzz testing, with a reference implementation, for FlashAttention-3's
//! `flash_attn_with_kvcache` as it runs on Moore Threads (MUSA) GPUs.

pub mod bridge;
pub mod call;
pub mod cli;
pub mod conform;
#[cfg(feature = "internal-testing")]
pub mod fuzzing;
pub mod numeric;
pub mod reference;
pub mod spec;
pub mod tensor;
pub mod tolerance;
pub mod validate;
