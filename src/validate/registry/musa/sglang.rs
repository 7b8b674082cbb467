//! Error sites of the SGLang MUSA wrapper V3's own checks (the `ver` gate).

use super::shared::TENSOR_BOOL;

const WRAPPER: &str = "sglang MUSA wrapper V3 flash_attn_with_kvcache";

sites! { "musa.", WRAPPER_SITES:
    W_0 = site!(
        "musa.W-0",
        WRAPPER,
        TypeError,
        "flash_attn_with_kvcache() {}",
        sgl!("L122-L157"),
        "the call does not bind to the wrapper's 34-parameter signature (CPython's argument binding)",
        "Causes: an FA3-only keyword (`s_aux`, `cp_world_size`) or a misspelt one; too many positional \
         arguments. Fix: use the wrapper's keywords (`sinks`, not `s_aux`); pass everything after `v_cache` \
         by keyword."
    ),
    W_1 = site!(
        "musa.W-1",
        WRAPPER,
        ValueError,
        "Only ver=3 is supported for MUSA FA3.",
        sgl!("L159-L160"),
        "`ver != 3` (Python `!=`: 3.0 passes; \"3\", None, True, 2, 4 raise); the first statement of the wrapper",
        "Causes: code ported from sgl-kernel passes ver=2 (FA2-style) or ver=4 (FA4); sgl-kernel accepted any \
         ver != 4 silently as FA3. Fixes: pass ver=3 or omit it; for FA2 behaviour use the non-FA3 MUSA \
         attention path instead of this wrapper; audit ported code for a hard-coded ver=2."
    ),
    W_1_TENSOR_BOOL = site!(
        "musa.W-1.tensor-bool",
        WRAPPER,
        RuntimeError,
        TENSOR_BOOL,
        sgl!("L159"),
        "`ver` is a tensor of other than one element: `if ver != 3` needs the truth value of the elementwise comparison",
        "Fix: pass ver=3 (a Python int) or omit it."
    ),
}
