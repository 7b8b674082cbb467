//! The upstream errors scan diagnostics quote. Each names an error site of the `musa` profile; the
//! text comes from the validation error-site registry, so no message is spelled twice.

use crate::validate::engine::reject;
use crate::validate::registry::Site;
use crate::validate::registry::musa::{
    B_5, F_1, F_9, F_22, G_1_ATTR, J_1, W_1, W_2_CU_SEQLENS_Q_ATTR,
};

/// An error site of the MUSA stack, with the values its message template needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpstreamError {
    pub site: &'static Site,
    args: &'static [&'static str],
    /// Only the start of the message is fixed (the rest is, e.g., a build log).
    message_is_prefix: bool,
}

impl UpstreamError {
    const fn exact(site: &'static Site, args: &'static [&'static str]) -> UpstreamError {
        UpstreamError {
            site,
            args,
            message_is_prefix: false,
        }
    }

    /// `ValueError: Only ver=3 ...`, the way a traceback's last line reads (`...` marks a prefix).
    pub fn quoted(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|a| a.to_string()).collect();
        let rejection = reject(self.site, &args);
        let ellipsis = if self.message_is_prefix { " ..." } else { "" };
        format!("{rejection}{ellipsis}")
    }
}

/// The SGLang MUSA wrapper's `ver` gate, its first statement (musa-fa3.md §3).
pub const VER_GATE: UpstreamError = UpstreamError::exact(W_1, &[]);

/// mate's fmha path rejects any `qv` (the MLA branch takes only q 64 / qv 512).
pub const QV_NOT_SUPPORTED: UpstreamError = UpstreamError::exact(F_1, &[]);

/// mate's dtype check: fp8 inputs fail here; descale tensors are never read.
pub const FP16_BF16_ONLY: UpstreamError = UpstreamError::exact(F_9, &[]);

/// `cache_seqlens` (as `seqused_k`) must have one entry per batch row.
pub const SEQUSED_K_SHAPE: UpstreamError = UpstreamError::exact(F_22, &[]);

/// Metadata injection hands an int `cache_seqlens` to `maybe_contiguous` (musa-fa3.md §4.6).
pub const INT_CACHE_SEQLENS_IN_METADATA: UpstreamError =
    UpstreamError::exact(G_1_ATTR, &["int", "stride"]);

/// Metadata injection derives the batch size from `cu_seqlens_q` (musa-fa3.md §4.2).
pub const NO_CU_SEQLENS_Q_IN_METADATA: UpstreamError =
    UpstreamError::exact(W_2_CU_SEQLENS_Q_ATTR, &["NoneType", "shape"]);

/// The combine kernel's split limit, raised after the forward kernel ran.
pub const NUM_SPLITS_OVER_128: UpstreamError = UpstreamError::exact(B_5, &[]);

/// The JIT build of a kernel whose static_assert fails (new KV without any varlen input).
pub const NINJA_BUILD_FAILED: UpstreamError = UpstreamError {
    site: J_1,
    args: &[],
    message_is_prefix: true,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_come_from_the_registry() {
        assert_eq!(
            VER_GATE.quoted(),
            "ValueError: Only ver=3 is supported for MUSA FA3."
        );
        assert_eq!(
            NINJA_BUILD_FAILED.quoted(),
            "RuntimeError: Ninja build failed. ..."
        );
        assert_eq!(
            NO_CU_SEQLENS_Q_IN_METADATA.quoted(),
            "AttributeError: 'NoneType' object has no attribute 'shape'"
        );
        for quoted in [
            QV_NOT_SUPPORTED,
            FP16_BF16_ONLY,
            SEQUSED_K_SHAPE,
            INT_CACHE_SEQLENS_IN_METADATA,
            NUM_SPLITS_OVER_128,
        ]
        .map(|e| e.quoted())
        {
            assert!(!quoted.contains("{}"), "{quoted}");
        }
    }
}
