//! fa3conform: conformance and fuzz testing, with a reference implementation, for FlashAttention-3's
//! `flash_attn_with_kvcache` as it runs on Moore Threads (MUSA) GPUs.

pub mod call;
pub mod certify;
pub mod conform;
pub mod explain;
pub mod numeric;
pub mod spec;
pub mod tensor;
pub mod validate;
