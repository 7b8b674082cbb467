//! The stacks a call site can be written against, the module each is imported from, and the function
//! the same call reaches on a MUSA machine.

use crate::call::Signature;
use crate::call::signature::{FA3, MATE_FA3_WRAPPER, MATE_MHA, SGL_KERNEL_0_3_21, SGLANG_MUSA};

/// The function every stack calls by this name.
pub const FUNCTION: &str = "flash_attn_with_kvcache";

/// The stack a call was written against, known from the module it was imported from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stack {
    /// CUDA `sgl_kernel.flash_attn` (0.3.21); on MUSA SGLang routes it to its MUSA wrapper.
    SglKernel,
    /// CUDA upstream `flash_attn_interface` (FA3 `hopper/`); on MUSA the same module name is mate's
    /// FA3-compatible wrapper (mate: wrappers/flash-attention/flash_attn_interface.py).
    Fa3,
    /// mate's FA3-compatible wrapper imported by its package name.
    MateFa3Wrapper,
    /// mate's own entry point, with `learnable_sink` at position 23.
    Mate,
    /// SGLang's MUSA wrapper (V3).
    SglangMusa,
}

impl Stack {
    pub const ALL: [Stack; 5] = [
        Stack::SglKernel,
        Stack::Fa3,
        Stack::MateFa3Wrapper,
        Stack::Mate,
        Stack::SglangMusa,
    ];

    /// Short name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Stack::SglKernel => "sgl-kernel",
            Stack::Fa3 => "fa3",
            Stack::MateFa3Wrapper => "mate-fa3-wrapper",
            Stack::Mate => "mate",
            Stack::SglangMusa => "sglang-musa",
        }
    }

    /// Modules that export this stack's `flash_attn_with_kvcache`.
    pub fn modules(self) -> &'static [&'static str] {
        match self {
            Stack::SglKernel => &["sgl_kernel.flash_attn"],
            Stack::Fa3 => &["flash_attn_interface"],
            Stack::MateFa3Wrapper => &["flash_attn_3.interface"],
            Stack::Mate => &["mate", "mate.mha_interface"],
            Stack::SglangMusa => {
                &["sglang.srt.hardware_backend.musa.attention.flashattention_backend"]
            }
        }
    }

    /// The stack whose module is `module`, if any.
    pub fn from_module(module: &str) -> Option<Stack> {
        Stack::ALL
            .into_iter()
            .find(|s| s.modules().contains(&module))
    }

    /// The signature the author wrote the call for.
    pub fn written_for(self) -> &'static Signature {
        match self {
            Stack::SglKernel => &SGL_KERNEL_0_3_21,
            Stack::Fa3 => &FA3,
            Stack::MateFa3Wrapper => &MATE_FA3_WRAPPER,
            Stack::Mate => &MATE_MHA,
            Stack::SglangMusa => &SGLANG_MUSA,
        }
    }

    /// The function the same call reaches on MUSA, and how reports name it.
    pub fn on_musa(self) -> (&'static str, &'static Signature) {
        match self {
            Stack::SglKernel | Stack::SglangMusa => ("the SGLang MUSA wrapper", &SGLANG_MUSA),
            Stack::Fa3 | Stack::MateFa3Wrapper => ("mate's FA3 wrapper", &MATE_FA3_WRAPPER),
            Stack::Mate => ("mate.mha_interface", &MATE_MHA),
        }
    }

    /// The positional order the author most likely assumed, and how reports name it: the stack's
    /// own, except for mate's entry point, which porters call with FA3's order (musa-fa3.md hazard 13).
    pub fn expected_order(self) -> (&'static str, &'static Signature) {
        match self {
            Stack::Mate => ("FA3", &FA3),
            other => (other.name(), other.written_for()),
        }
    }

    /// Whether the call reaches the SGLang MUSA wrapper, with its `ver` gate and metadata injection.
    pub fn via_sglang_wrapper(self) -> bool {
        matches!(self, Stack::SglKernel | Stack::SglangMusa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_unambiguous() {
        for stack in Stack::ALL {
            for module in stack.modules() {
                assert_eq!(Stack::from_module(module), Some(stack), "{module}");
            }
        }
        assert_eq!(Stack::from_module("flash_attn"), None);
    }
}
