//! Error sites of mate's `_fmha_fwd_combine` and what follows the kernel (`B-`).

use super::shared::TENSOR_BOOL;

const COMBINE: &str = "mate _fmha_fwd_combine";

sites! { "musa.", COMBINE_SITES:
    B_2 = site!(
        "musa.B-2",
        COMBINE,
        AssertionError,
        "",
        mate!("mate/jit/attention/fmha/fmha_combine.py", "L182"),
        "Shadowed by musa.F-5 (max_seqlen_q None with cu_seqlens_q)",
        "See musa.F-5."
    ),
    B_3 = site!(
        "musa.B-3",
        COMBINE,
        AssertionError,
        "metadata buffer is too small",
        mate!("mate/jit/attention/fmha/fmha_combine.py", "L185"),
        "Shadowed by musa.F-41 (same condition)",
        "See musa.F-41."
    ),
    B_4 = site!(
        "musa.B-4",
        COMBINE,
        AssertionError,
        "tile_n must be multiple of 32",
        mate!("mate/jit/attention/fmha/fmha_combine.py", "L53"),
        "Never fires: tile_n is always 64",
        "-"
    ),
    B_5 = site!(
        "musa.B-5",
        COMBINE,
        ValueError,
        "num_split exceeds max supported splits 128",
        mate!("mate/jit/attention/fmha/fmha_combine.py", "L61-L70"),
        "scheduler_metadata present (no sinks) and num_splits > 128; raised after the forward kernel ran",
        "Appended k/v are already written into the cache when this fires. Fix: num_splits <= 128 (0 = heuristic)."
    ),
    B_6_TENSOR_BOOL = site!(
        "musa.B-6.tensor-bool",
        COMBINE,
        RuntimeError,
        TENSOR_BOOL,
        fwd!("L901"),
        "return_softmax_lse is a tensor of other than one element: `... if return_lse else ...`, after the kernel \
         and the combine ran",
        "Appended k/v are already written into the cache when this fires. Fix: return_softmax_lse is a bool."
    ),
}
