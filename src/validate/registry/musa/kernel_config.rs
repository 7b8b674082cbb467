//! Error sites of mate's `_get_fwd_kernel_config` (`C-`).

use super::shared::{ADD_CONFIG, TENSOR_BOOL};

const CONFIG: &str = "mate _get_fwd_kernel_config";

sites! { "musa.", KERNEL_CONFIG_SITES:
    C_3 = site!(
        "musa.C-3",
        CONFIG,
        TypeError,
        "unhashable type: '{}'",
        mate!("mate/jit/attention/fmha/fmha_utils.py", "L144-L151"),
        "pack_gqa is unhashable (e.g. a list): _get_fwd_kernel_config is lru_cached",
        "Fix: pack_gqa is None, True or False."
    ),
    C_3_TENSOR_BOOL = site!(
        "musa.C-3.tensor-bool",
        CONFIG,
        RuntimeError,
        TENSOR_BOOL,
        mate!("mate/jit/attention/fmha/fmha_utils.py", "L129"),
        "pack_gqa is a tensor of other than one element: `m * head_ratio if enable_packgqa else m` (_get_tile_m)",
        "Fix: pack_gqa is None, True or False."
    ),
    C_2 = site!(
        "musa.C-2",
        CONFIG,
        AssertionError,
        ADD_CONFIG,
        mate!("mate/jit/attention/fmha/fmha_utils.py", "L145-L193"),
        "the rounded (head_dim, head_dim_v) pair is not one of 64-64, 128-128, 192-128, 192-192, 256-256, 384-384, 512-512",
        "Cause: e.g. q/k dim 64 with v dim 128 (DeepSeek-style dv != d). Message shows rounded dims. Fix: supported pairs only."
    ),
}
