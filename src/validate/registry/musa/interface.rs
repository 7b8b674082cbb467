//! Error sites of `mate.mha_interface.flash_attn_with_kvcache` (`K-`), the argument expressions of
//! its `_fmha_fwd(...)` call included.

use super::shared::{
    ATTR, NO_DIMS, SCALAR_INDEX, SEQ_INDEX, SUBSCRIPT, TENSOR_INDEX, TUPLE_INDEX, ZERO_DIM_INDEX,
};

const MHA: &str = "mate.mha_interface.flash_attn_with_kvcache";

sites! { "musa.", INTERFACE_SITES:
    K_1_ATTR = site!(
        "musa.K-1.attr",
        MHA,
        AttributeError,
        ATTR,
        mha!("L903"),
        "`k_cache` is not a tensor (`k_cache.stride(-1)`)",
        "Fix: pass the K cache tensor."
    ),
    K_1_INDEX = site!(
        "musa.K-1.index",
        MHA,
        IndexError,
        NO_DIMS,
        mha!("L903"),
        "`k_cache` is a 0-dim tensor",
        "Fix: k_cache is 4-D."
    ),
    K_1 = site!(
        "musa.K-1",
        MHA,
        AssertionError,
        "k_cache must have contiguous last dimension",
        mha!("L903"),
        "k_cache.stride(-1) != 1 (mate never copies the cache: the kernel appends into it)",
        "Cause: a transposed or sliced cache view. Fix: allocate the cache with a contiguous head dim."
    ),
    K_2_ATTR = site!(
        "musa.K-2.attr",
        MHA,
        AttributeError,
        ATTR,
        mha!("L904"),
        "`v_cache` is not a tensor",
        "Fix: pass the V cache tensor."
    ),
    K_2_INDEX = site!(
        "musa.K-2.index",
        MHA,
        IndexError,
        NO_DIMS,
        mha!("L904"),
        "`v_cache` is a 0-dim tensor",
        "Fix: v_cache is 4-D."
    ),
    K_2 = site!(
        "musa.K-2",
        MHA,
        AssertionError,
        "v_cache must have contiguous last dimension",
        mha!("L904"),
        "v_cache.stride(-1) != 1",
        "Fix: allocate the cache with a contiguous head dim."
    ),
    K_3_ATTR = site!(
        "musa.K-3.attr",
        MHA,
        AttributeError,
        ATTR,
        mha!("L909-L912"),
        "softmax_scale is None and q (or qv) is neither a tensor nor a NumPy scalar (`q.shape[-1]`)",
        "Fix: pass q as a tensor."
    ),
    K_3_INDEX = site!(
        "musa.K-3.index",
        MHA,
        IndexError,
        TUPLE_INDEX,
        mha!("L909-L912"),
        "softmax_scale is None and q (or qv) is a 0-dim tensor or a NumPy scalar (whose shape is `()`)",
        "Fix: q is 3-D or 4-D."
    ),
    K_3_ZERO_POWER = site!(
        "musa.K-3.zero-power",
        MHA,
        ZeroDivisionError,
        "0.0 cannot be raised to a negative power",
        mha!("L909-L912"),
        "softmax_scale is None and the head dim (q.shape[-1], plus qv.shape[-1]) is 0: `0 ** (-0.5)` \
         (CPython 3.11 Objects/floatobject.c float_pow)",
        "Fix: q has a non-empty head dim (or pass softmax_scale explicitly)."
    ),
    K_4_OVERFLOW = site!(
        "musa.K-4.overflow",
        MHA,
        RuntimeError,
        "value cannot be converted to type int without overflow",
        mha!("L913-L917"),
        "int cache_seqlens outside the int32 range: `torch.full(..., cache_seqlens, dtype=torch.int32)` \
         (c10 checked_convert in Scalar::toInt; torch_musa's fill_ converts the value the same way)",
        "Fix: cache_seqlens is a sequence length (fits in int32)."
    ),
    K_5_ATTR = site!(
        "musa.K-5.attr",
        MHA,
        AttributeError,
        ATTR,
        mha!("L919"),
        "qv (or, when qv.shape[-1] == 512, q) is not a tensor (MLA routing test)",
        "Fix: qv is a tensor or None."
    ),
    K_5_INDEX = site!(
        "musa.K-5.index",
        MHA,
        IndexError,
        TUPLE_INDEX,
        mha!("L919"),
        "qv (or q) is a 0-dim tensor (MLA routing test)",
        "Fix: qv is 3-D or 4-D."
    ),
    K_6_WINDOW_TYPE = site!(
        "musa.K-6.window-type",
        MHA,
        TypeError,
        SUBSCRIPT,
        mha!("L972-L973"),
        "`window_size` is not a tuple, list, str, tensor or None (`window_size[0]` in the call of _fmha_fwd)",
        "Fix: window_size is a pair (left, right)."
    ),
    K_6_WINDOW_INDEX = site!(
        "musa.K-6.window-index",
        MHA,
        IndexError,
        SEQ_INDEX,
        mha!("L972-L973"),
        "`window_size` (a tuple, list or str) has fewer than 2 elements",
        "Fix: window_size is a pair (left, right)."
    ),
    K_6_WINDOW_TENSOR_0D = site!(
        "musa.K-6.window-tensor-0d",
        MHA,
        IndexError,
        ZERO_DIM_INDEX,
        mha!("L972-L973"),
        "`window_size` is a 0-dim tensor (`window_size[0]`; torch/csrc/autograd/python_variable_indexing.cpp)",
        "Fix: window_size is a pair of ints (left, right), not a tensor."
    ),
    K_6_WINDOW_TENSOR_INDEX = site!(
        "musa.K-6.window-tensor-index",
        MHA,
        IndexError,
        TENSOR_INDEX,
        mha!("L972-L973"),
        "`window_size` is a tensor with fewer than 2 rows (`window_size[1]`; aten select)",
        "Fix: window_size is a pair of ints (left, right), not a tensor."
    ),
    K_6_WINDOW_KEY = site!(
        "musa.K-6.window-key",
        MHA,
        KeyError,
        "{}",
        mha!("L972-L973"),
        "`window_size` is a dict without the key 0 or 1 (`window_size[0]`, `window_size[1]`)",
        "Fix: window_size is a pair (left, right), not a dict."
    ),
    K_6_WINDOW_SCALAR = site!(
        "musa.K-6.window-scalar",
        MHA,
        IndexError,
        SCALAR_INDEX,
        mha!("L972-L973"),
        "`window_size` is a NumPy scalar (`window_size[0]`)",
        "Fix: window_size is a pair (left, right)."
    ),
}
