//! The entry points a call site can be written against: every module a porter meets that provides
//! a `flash_attn_with_kvcache`, the signature of its release, and the function the same call reaches
//! on a MUSA machine (docs/spec/entry-points.md).

use crate::call::Signature;
use crate::call::signature::{
    FA2, FA3, MATE_FA3_WRAPPER, MATE_MHA, SGL_KERNEL_0_3_21, SGLANG_DISPATCHER, SGLANG_MUSA,
    VLLM_FLASH_ATTN,
};

/// The function every entry point calls by this name.
pub const FUNCTION: &str = "flash_attn_with_kvcache";

/// The stack a call was written against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryPoint {
    /// CUDA `sgl_kernel.flash_attn` (0.3.21): `ver=4` runs FA4, anything else FA3. On MUSA, SGLang
    /// routes it to its MUSA wrapper.
    SglKernel,
    /// SGLang's dispatcher `sglang.jit_kernel.flash_attention` (later
    /// `sglang.kernels.ops.attention.flash_attention`): `ver` 3 → FA3, 4 → FA4.
    SglangDispatcher,
    /// Upstream FA3 `flash_attn_interface` (`hopper/`); on MUSA the same module name is mate's
    /// FA3-compatible wrapper.
    Fa3,
    /// mate's FA3-compatible wrapper (`flash_attn_3.interface`; mate 0.1.3 shipped it as `flash_attn`).
    MateFa3Wrapper,
    /// mate's own entry point, with `learnable_sink` at position 23.
    Mate,
    /// SGLang's MUSA wrapper (V3).
    SglangMusa,
    /// FlashAttention-2 `flash_attn` (2.6.1 – 2.8.4).
    Fa2,
    /// vLLM's `vllm_flash_attn` (FA2-style, keyword-only `out`, `fa_version`, ...).
    VllmFlashAttn,
}

use EntryPoint::*;

/// The modules that provide an entry point, each with the stacks it may be (several where the name
/// is shared: the call's arguments decide, see [`choose`]).
const MODULES: &[(&str, &[EntryPoint])] = &[
    ("sgl_kernel.flash_attn", &[SglKernel]),
    ("sglang.jit_kernel.flash_attention", &[SglangDispatcher]),
    (
        "sglang.kernels.ops.attention.flash_attention",
        &[SglangDispatcher],
    ),
    ("flash_attn_interface", &[Fa3, MateFa3Wrapper]),
    ("flash_attn_3.flash_attn_interface", &[Fa3]),
    ("hopper.flash_attn_interface", &[Fa3]),
    ("flash_attn_3.interface", &[MateFa3Wrapper]),
    ("mate", &[Mate]),
    ("mate.mha_interface", &[Mate]),
    (
        "sglang.srt.hardware_backend.musa.attention.flashattention_backend",
        &[SglangMusa],
    ),
    ("flash_attn", &[Fa2, MateFa3Wrapper]),
    ("flash_attn.flash_attn_interface", &[Fa2]),
    ("flash_attn.interface", &[MateFa3Wrapper]),
    ("vllm_flash_attn", &[VllmFlashAttn]),
    ("vllm_flash_attn.flash_attn_interface", &[VllmFlashAttn]),
    ("vllm.vllm_flash_attn", &[VllmFlashAttn]),
    (
        "vllm.vllm_flash_attn.flash_attn_interface",
        &[VllmFlashAttn],
    ),
];

/// A module's `flash_attn_with_kvcache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryModule {
    pub module: &'static str,
    pub candidates: &'static [EntryPoint],
}

impl EntryModule {
    /// The entry point `module` provides, if any.
    pub fn of_module(module: &str) -> Option<EntryModule> {
        MODULES
            .iter()
            .find(|(m, _)| *m == module)
            .map(|&(module, candidates)| EntryModule { module, candidates })
    }

    /// The entry point a file is, judged by its path (`.../sgl_kernel/flash_attn.py`), for files
    /// scanned without the packages above them.
    pub fn of_path(path: &std::path::Path) -> Option<EntryModule> {
        let mut parts: Vec<String> = path
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "__init__") {
            parts.pop();
        }
        MODULES
            .iter()
            .find(|(module, _)| {
                let module: Vec<&str> = module.split('.').collect();
                parts.len() >= module.len() && parts[parts.len() - module.len()..] == module[..]
            })
            .map(|&(module, candidates)| EntryModule { module, candidates })
    }

    pub fn qualified_name(&self) -> String {
        format!("{}.{FUNCTION}", self.module)
    }
}

impl EntryPoint {
    pub const ALL: [EntryPoint; 8] = [
        SglKernel,
        SglangDispatcher,
        Fa3,
        MateFa3Wrapper,
        Mate,
        SglangMusa,
        Fa2,
        VllmFlashAttn,
    ];

    /// Short name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            SglKernel => "sgl-kernel",
            SglangDispatcher => "sglang-dispatcher",
            Fa3 => "fa3",
            MateFa3Wrapper => "mate-fa3-wrapper",
            Mate => "mate",
            SglangMusa => "sglang-musa",
            Fa2 => "fa2",
            VllmFlashAttn => "vllm-flash-attn",
        }
    }

    /// The release whose signature [`EntryPoint::written_for`] is.
    pub fn release(self) -> &'static str {
        match self {
            SglKernel => "sgl-kernel 0.3.21",
            SglangDispatcher => "SGLang's jit_kernel dispatcher (sgl-kernel 0.4.4 signature)",
            Fa3 => "FlashAttention-3 hopper/ (0251105a)",
            MateFa3Wrapper => "mate's FA3-compatible wrapper (v0.2.2)",
            Mate => "mate.mha_interface (v0.2.2)",
            SglangMusa => "SGLang's MUSA wrapper V3 (082898472f)",
            Fa2 => "FlashAttention-2 2.6.1-2.8.4",
            VllmFlashAttn => "vLLM's vllm_flash_attn (8e1b01d5)",
        }
    }

    /// The signature the author wrote the call for.
    pub fn written_for(self) -> &'static Signature {
        match self {
            SglKernel => &SGL_KERNEL_0_3_21,
            SglangDispatcher => &SGLANG_DISPATCHER,
            Fa3 => &FA3,
            MateFa3Wrapper => &MATE_FA3_WRAPPER,
            Mate => &MATE_MHA,
            SglangMusa => &SGLANG_MUSA,
            Fa2 => &FA2,
            VllmFlashAttn => &VLLM_FLASH_ATTN,
        }
    }

    /// The function the same call reaches on MUSA, and how reports name it.
    pub fn on_musa(self) -> (&'static str, &'static Signature) {
        match self {
            SglKernel | SglangDispatcher | SglangMusa => ("the SGLang MUSA wrapper", &SGLANG_MUSA),
            Fa3 | MateFa3Wrapper | Fa2 | VllmFlashAttn => ("mate's FA3 wrapper", &MATE_FA3_WRAPPER),
            Mate => ("mate.mha_interface", &MATE_MHA),
        }
    }

    /// The positional order the author most likely assumed, and how reports name it: the stack's
    /// own, except for mate's entry point, which porters call with FA3's order (musa-fa3.md hazard 13).
    pub fn expected_order(self) -> (&'static str, &'static Signature) {
        match self {
            Mate => ("FA3", &FA3),
            other => (other.name(), other.written_for()),
        }
    }

    /// Whether the call reaches the SGLang MUSA wrapper, with its `ver` gate and metadata injection.
    pub fn via_sglang_wrapper(self) -> bool {
        matches!(self, SglKernel | SglangDispatcher | SglangMusa)
    }

    /// Whether `ver` selects FA4 on CUDA (`ver=4`).
    pub fn selects_fa4_with_ver(self) -> bool {
        matches!(self, SglKernel | SglangDispatcher)
    }
}

/// The stack a call of `entry` was written for: the first candidate whose signature the call's
/// keywords fit (`binds`), else the first.
pub fn choose(entry: &EntryModule, binds: impl Fn(&'static Signature) -> bool) -> EntryPoint {
    entry
        .candidates
        .iter()
        .copied()
        .find(|s| binds(s.written_for()))
        .unwrap_or(entry.candidates[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_stack_has_a_module_and_modules_are_listed_once() {
        for stack in EntryPoint::ALL {
            assert!(
                MODULES.iter().any(|(_, c)| c.contains(&stack)),
                "{stack:?} has no module"
            );
        }
        for (i, (module, _)) in MODULES.iter().enumerate() {
            assert!(
                MODULES[i + 1..].iter().all(|(m, _)| m != module),
                "{module} listed twice"
            );
        }
    }

    #[test]
    fn files_are_known_by_their_path() {
        let musa =
            Path::new("src/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py");
        assert_eq!(
            EntryModule::of_path(musa).map(|e| e.module),
            Some("sglang.srt.hardware_backend.musa.attention.flashattention_backend")
        );
        assert_eq!(
            EntryModule::of_path(Path::new("x/flash_attn/__init__.py")).map(|e| e.candidates),
            Some(&[Fa2, MateFa3Wrapper][..])
        );
        assert_eq!(EntryModule::of_path(Path::new("x/attention.py")), None);
    }

    #[test]
    fn shared_names_are_decided_by_the_signature() {
        let flash_attn = EntryModule::of_module("flash_attn").unwrap();
        assert_eq!(choose(&flash_attn, |s| std::ptr::eq(s, &FA2)), Fa2);
        assert_eq!(
            choose(&flash_attn, |s| std::ptr::eq(s, &MATE_FA3_WRAPPER)),
            MateFa3Wrapper
        );
        assert_eq!(choose(&flash_attn, |_| false), Fa2);
    }
}
