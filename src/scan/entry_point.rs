//! The entry points a call site can be written against (each the `flash_attn_with_kvcache` of one
//! stack's module), the modules each is imported from, and the function the same call reaches on a
//! MUSA machine.

use crate::call::Signature;
use crate::call::signature::{FA3, MATE_FA3_WRAPPER, MATE_MHA, SGL_KERNEL_0_3_21, SGLANG_MUSA};

/// The function every stack calls by this name.
pub const FUNCTION: &str = "flash_attn_with_kvcache";

/// The entry point a call was written against, known from the module it was imported from. Reports
/// name it as the call's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryPoint {
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

impl EntryPoint {
    pub const ALL: [EntryPoint; 5] = [
        EntryPoint::SglKernel,
        EntryPoint::Fa3,
        EntryPoint::MateFa3Wrapper,
        EntryPoint::Mate,
        EntryPoint::SglangMusa,
    ];

    /// Short name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            EntryPoint::SglKernel => "sgl-kernel",
            EntryPoint::Fa3 => "fa3",
            EntryPoint::MateFa3Wrapper => "mate-fa3-wrapper",
            EntryPoint::Mate => "mate",
            EntryPoint::SglangMusa => "sglang-musa",
        }
    }

    /// Modules that export this stack's `flash_attn_with_kvcache`.
    pub fn modules(self) -> &'static [&'static str] {
        match self {
            EntryPoint::SglKernel => &["sgl_kernel.flash_attn"],
            EntryPoint::Fa3 => &["flash_attn_interface"],
            EntryPoint::MateFa3Wrapper => &["flash_attn_3.interface"],
            EntryPoint::Mate => &["mate", "mate.mha_interface"],
            EntryPoint::SglangMusa => {
                &["sglang.srt.hardware_backend.musa.attention.flashattention_backend"]
            }
        }
    }

    /// The stack whose module is `module`, if any.
    pub fn from_module(module: &str) -> Option<EntryPoint> {
        EntryPoint::ALL
            .into_iter()
            .find(|s| s.modules().contains(&module))
    }

    /// The signature the author wrote the call for.
    pub fn written_for(self) -> &'static Signature {
        match self {
            EntryPoint::SglKernel => &SGL_KERNEL_0_3_21,
            EntryPoint::Fa3 => &FA3,
            EntryPoint::MateFa3Wrapper => &MATE_FA3_WRAPPER,
            EntryPoint::Mate => &MATE_MHA,
            EntryPoint::SglangMusa => &SGLANG_MUSA,
        }
    }

    /// The function the same call reaches on MUSA, and how reports name it.
    pub fn on_musa(self) -> (&'static str, &'static Signature) {
        match self {
            EntryPoint::SglKernel | EntryPoint::SglangMusa => {
                ("the SGLang MUSA wrapper", &SGLANG_MUSA)
            }
            EntryPoint::Fa3 | EntryPoint::MateFa3Wrapper => {
                ("mate's FA3 wrapper", &MATE_FA3_WRAPPER)
            }
            EntryPoint::Mate => ("mate.mha_interface", &MATE_MHA),
        }
    }

    /// The positional order the author most likely assumed, and how reports name it: the stack's
    /// own, except for mate's entry point, which porters call with FA3's order (musa-fa3.md hazard 13).
    pub fn expected_order(self) -> (&'static str, &'static Signature) {
        match self {
            EntryPoint::Mate => ("FA3", &FA3),
            other => (other.name(), other.written_for()),
        }
    }

    /// Whether the call reaches the SGLang MUSA wrapper, with its `ver` gate and metadata injection.
    pub fn via_sglang_wrapper(self) -> bool {
        matches!(self, EntryPoint::SglKernel | EntryPoint::SglangMusa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_unambiguous() {
        for stack in EntryPoint::ALL {
            for module in stack.modules() {
                assert_eq!(EntryPoint::from_module(module), Some(stack), "{module}");
            }
        }
        assert_eq!(EntryPoint::from_module("flash_attn"), None);
    }
}
