//! Verbatim upstream error text that scan diagnostics quote.
//!
//! To be replaced by lookups in the validation error-site registry (`crate::validate::registry`) once it
//! is merged: until then this file is the only place the scanner spells an upstream message, each with
//! the site it comes from (see /work/shared/spec/musa-fa3.md).

/// One exception an upstream stack raises, as Python shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpstreamError {
    /// The Python exception class.
    pub exception: &'static str,
    /// The message, verbatim; for [`UpstreamError::message_is_prefix`] only its start is fixed.
    pub message: &'static str,
    pub message_is_prefix: bool,
    /// `repo@commit path:line` of the raising code, with the spec's site id.
    pub site: &'static str,
}

impl UpstreamError {
    /// `ValueError: Only ver=3 ...`, the way a traceback's last line reads (`...` marks a prefix).
    pub fn quoted(&self) -> String {
        let ellipsis = if self.message_is_prefix { " ..." } else { "" };
        format!("{}: {}{ellipsis}", self.exception, self.message)
    }
}

const fn exact(
    exception: &'static str,
    message: &'static str,
    site: &'static str,
) -> UpstreamError {
    UpstreamError {
        exception,
        message,
        message_is_prefix: false,
        site,
    }
}

/// The SGLang MUSA wrapper's `ver` gate, its first statement (musa-fa3.md §3, W-1).
pub const VER_GATE: UpstreamError = exact(
    "ValueError",
    "Only ver=3 is supported for MUSA FA3.",
    "sglang@082898472f flashattention_backend.py L159-L160 (W-1)",
);

/// mate's fmha path rejects any `qv` (the MLA branch takes only q 64 / qv 512) (F-1).
pub const QV_NOT_SUPPORTED: UpstreamError = exact(
    "AssertionError",
    "qv parameter is not supported yet",
    "mate@3f58cc3e mate/jit/attention/fmha/fmha_fwd.py L481 (F-1)",
);

/// mate's dtype check: fp8 inputs fail here; descale tensors are never read (F-9).
pub const FP16_BF16_ONLY: UpstreamError = exact(
    "AssertionError",
    "inputs must be float16 or bfloat16",
    "mate@3f58cc3e mate/jit/attention/fmha/fmha_fwd.py L543-L545 (F-9)",
);

/// `cache_seqlens` (as `seqused_k`) must have one entry per batch row (F-22).
pub const SEQUSED_K_SHAPE: UpstreamError = exact(
    "AssertionError",
    "seqused_k must have shape (batch_size,)",
    "mate@3f58cc3e mate/jit/attention/fmha/fmha_fwd.py L625-L627 (F-22)",
);

/// Metadata injection hands an int `cache_seqlens` to `maybe_contiguous` (musa-fa3.md §4.6, G-1).
pub const INT_CACHE_SEQLENS_IN_METADATA: UpstreamError = exact(
    "AttributeError",
    "'int' object has no attribute 'stride'",
    "mate@3f58cc3e mate/mha_interface.py L1021-L1022 (G-1)",
);

/// Metadata injection derives the batch size from `cu_seqlens_q` (musa-fa3.md §4.2).
pub const NO_CU_SEQLENS_Q_IN_METADATA: UpstreamError = exact(
    "AttributeError",
    "'NoneType' object has no attribute 'shape'",
    "sglang@082898472f flashattention_backend.py L60 (W-2)",
);

/// The combine kernel's split limit, raised after the forward kernel ran (B-5).
pub const NUM_SPLITS_OVER_128: UpstreamError = exact(
    "ValueError",
    "num_split exceeds max supported splits 128",
    "mate@3f58cc3e mate/jit/attention/fmha/fmha_combine.py L193, L61-L70 (B-5)",
);

/// The JIT build of a kernel whose static_assert fails (new KV without any varlen input, hazard 19).
pub const NINJA_BUILD_FAILED: UpstreamError = UpstreamError {
    exception: "RuntimeError",
    message: "Ninja build failed.",
    message_is_prefix: true,
    site: "mate@3f58cc3e mate/jit/cpp_ext.py L320-L324, seqlen.hpp L36 (J-1)",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_marks_prefixes() {
        assert_eq!(
            VER_GATE.quoted(),
            "ValueError: Only ver=3 is supported for MUSA FA3."
        );
        assert_eq!(
            NINJA_BUILD_FAILED.quoted(),
            "RuntimeError: Ninja build failed. ..."
        );
    }
}
