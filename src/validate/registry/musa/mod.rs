//! Error sites and hazards of the MUSA stack: SGLang's MUSA wrapper V3 (sglang 082898472f) over
//! mate v0.2.2 (3f58cc3e). Labels follow musa-fa3.md §5 (`W-`, `G-`, `K-`, `MLA-`, `F-`, `C-`, `J-`,
//! `B-`); a suffix names the Python expression of that check that raises something else than its
//! assert (`.attr`, `.index`, ...). Sites marked "Shadowed" cannot fire first (an earlier site always
//! catches the same defect); they are listed so that `explain` knows them.

macro_rules! sgl {
    ($lines:literal) => {
        concat!(
            "sgl-project/sglang@082898472f python/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py:",
            $lines
        )
    };
}
macro_rules! mate {
    ($path:literal, $lines:literal) => {
        concat!("MooreThreads/mate@3f58cc3e ", $path, ":", $lines)
    };
}
macro_rules! mha {
    ($lines:literal) => {
        mate!("mate/mha_interface.py", $lines)
    };
}
macro_rules! fwd {
    ($lines:literal) => {
        mate!("mate/jit/attention/fmha/fmha_fwd.py", $lines)
    };
}
macro_rules! meta {
    ($lines:literal) => {
        mate!("mate/jit/attention/fmha/fmha_get_metadata.py", $lines)
    };
}

const WRAPPER: &str = "sglang MUSA wrapper V3 flash_attn_with_kvcache";
const INJECTION: &str = "sglang _compute_scheduler_metadata (injection)";
const METADATA: &str = "mate get_scheduler_metadata -> _fmha_get_metadata (injection recompute)";
const MHA: &str = "mate.mha_interface.flash_attn_with_kvcache";
const MLA: &str = "mate MLA decode branch";
const FWD: &str = "mate _fmha_fwd";
const CONFIG: &str = "mate _get_fwd_kernel_config";
const JIT: &str = "mate JIT build";
const COMBINE: &str = "mate _fmha_fwd_combine";

/// CPython 3.11 / torch messages of Python expressions.
const ATTR: &str = "'{}' object has no attribute '{}'";
const TUPLE_INDEX: &str = "tuple index out of range";
const UNPACK: &str = "not enough values to unpack (expected 2, got {})";
const NO_DIMS: &str = "Dimension specified as {} but tensor has no dimensions";
const SUBSCRIPT: &str = "'{}' object is not subscriptable";
const SEQ_INDEX: &str = "{} index out of range";
const MOD_ZERO: &str = "integer modulo by zero";
const ADD_CONFIG: &str = "Add config for headdim {}-{}";
const ON_MUSA: &str = "inputs must be on MUSA device";
/// torch's `bool()` of a tensor that does not hold exactly one element.
const TENSOR_BOOL: &str = "Boolean value of Tensor with {} is ambiguous";
const ZERO_DIM_INDEX: &str = "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number";
const TENSOR_INDEX: &str = "index {} is out of bounds for dimension {} with size {}";
const SCALAR_INDEX: &str = "invalid index to scalar variable.";
/// tvm-ffi's argument conversion (apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h
/// ArgValueWithContext): the function's name and signature and the type names are the installed
/// tvm-ffi's.
const FFI_ARG: &str =
    "Mismatched type on argument #{} when calling: `{*}`. Expected `{*}` but got `{*}`";

sites! { "musa.", SITES:
    // ---- SGLang wrapper ------------------------------------------------------------------------
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
    W_2_K_CACHE_ATTR = site!(
        "musa.W-2.k_cache.attr",
        INJECTION,
        AttributeError,
        ATTR,
        sgl!("L166"),
        "injection runs and `k_cache` is neither None, a tensor nor a NumPy scalar: `k_cache.shape[1]` (page_size)",
        "Only when injection is active (a backend ran a layer, scheduler_metadata None). Fix: pass a tensor cache."
    ),
    W_2_K_CACHE_INDEX = site!(
        "musa.W-2.k_cache.index",
        INJECTION,
        IndexError,
        TUPLE_INDEX,
        sgl!("L166"),
        "injection runs and `k_cache` has fewer than 2 dimensions (`k_cache.shape[1]`; a NumPy scalar's shape is `()`)",
        "Fix: pass the 4-D cache (num_blocks, page_size, h_k, d)."
    ),
    W_2_CU_SEQLENS_Q_ATTR = site!(
        "musa.W-2.cu_seqlens_q.attr",
        INJECTION,
        AttributeError,
        ATTR,
        sgl!("L60"),
        "injection runs and `cu_seqlens_q` is neither a tensor nor a NumPy scalar: `cu_seqlens_q.shape[-1] - 1` (batch_size)",
        "Causes: the fixed-length convention (4-D q without cu_seqlens_q) once any SGLang attention layer has \
         run in the process. Fixes: pass cu_seqlens_q with 3-D q, or pass an explicit scheduler_metadata \
         (disables injection), or call mate's flash_attn_interface directly."
    ),
    W_2_CU_SEQLENS_Q_INDEX = site!(
        "musa.W-2.cu_seqlens_q.index",
        INJECTION,
        IndexError,
        TUPLE_INDEX,
        sgl!("L60"),
        "injection runs and `cu_seqlens_q` is a 0-dim tensor or a NumPy scalar (whose shape is `()`)",
        "Fix: cu_seqlens_q is the 1-D int32 prefix sum of length batch+1."
    ),
    W_2_PP_PARTITION = site!(
        "musa.W-2.pp.partition",
        INJECTION,
        ValueError,
        "Invalid partition string: {}",
        "sgl-project/sglang@1107be11 python/sglang/srt/distributed/utils.py:L74-L79",
        "injection runs and env SGLANG_PP_LAYER_PARTITION is not a comma-separated list of ints (get_pp_indices)",
        "Fix: set SGLANG_PP_LAYER_PARTITION to per-stage layer counts, e.g. `16,15,15,15`, or unset it."
    ),
    W_2_PP_COUNT = site!(
        "musa.W-2.pp.count",
        INJECTION,
        ValueError,
        "len(partitions)={} does not match pp_size={}.",
        "sgl-project/sglang@1107be11 python/sglang/srt/distributed/utils.py:L80-L81",
        "injection runs and SGLANG_PP_LAYER_PARTITION has another number of entries than PP stages",
        "Fix: one count per pipeline stage."
    ),
    W_2_PP_SUM = site!(
        "musa.W-2.pp.sum",
        INJECTION,
        ValueError,
        "sum(partitions)={} does not match num_hidden_layers={}.",
        "sgl-project/sglang@1107be11 python/sglang/srt/distributed/utils.py:L82-L83",
        "injection runs and the SGLANG_PP_LAYER_PARTITION counts do not add up to the model's layers",
        "Fix: the counts must sum to num_hidden_layers."
    ),
    // ---- metadata chain M (injection recomputes) -----------------------------------------------
    G_1_ATTR = site!(
        "musa.G-1.attr",
        METADATA,
        AttributeError,
        ATTR,
        mha!("L1021-L1022"),
        "injection recomputes and `cache_seqlens` is not a tensor: `maybe_contiguous(seqused_k)` calls `.stride`",
        "Causes: an int cache_seqlens (accepted by FA3 and by mate without injection) reaches the metadata \
         chain before mate's int->tensor conversion. Fix: pass cache_seqlens as an int32 tensor of shape (batch,)."
    ),
    G_1_INDEX = site!(
        "musa.G-1.index",
        METADATA,
        IndexError,
        NO_DIMS,
        mha!("L1021-L1022"),
        "injection recomputes and `cache_seqlens` is a 0-dim tensor (`stride(-1)`)",
        "Fix: cache_seqlens must be 1-D (batch,)."
    ),
    G_1_WINDOW_TYPE = site!(
        "musa.G-1.window-type",
        METADATA,
        TypeError,
        SUBSCRIPT,
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` is not a tuple/list/None (`window_size[0]` in the call of _fmha_get_metadata)",
        "Fix: window_size is a pair (left, right); (-1, -1) for no window."
    ),
    G_1_WINDOW_INDEX = site!(
        "musa.G-1.window-index",
        METADATA,
        IndexError,
        SEQ_INDEX,
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` has fewer than 2 elements",
        "Fix: window_size is a pair (left, right)."
    ),
    G_1_WINDOW_KEY = site!(
        "musa.G-1.window-key",
        METADATA,
        KeyError,
        "{}",
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` is a dict without the key 0 or 1",
        "Fix: window_size is a pair (left, right), not a dict."
    ),
    G_1_WINDOW_TENSOR_0D = site!(
        "musa.G-1.window-tensor-0d",
        METADATA,
        IndexError,
        ZERO_DIM_INDEX,
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` is a 0-dim tensor (`window_size[0]`)",
        "Fix: window_size is a pair of ints (left, right), not a tensor."
    ),
    G_1_WINDOW_TENSOR_INDEX = site!(
        "musa.G-1.window-tensor-index",
        METADATA,
        IndexError,
        TENSOR_INDEX,
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` is a tensor with fewer than 2 rows (`window_size[1]`)",
        "Fix: window_size is a pair of ints (left, right), not a tensor."
    ),
    G_1_WINDOW_SCALAR = site!(
        "musa.G-1.window-scalar",
        METADATA,
        IndexError,
        SCALAR_INDEX,
        mha!("L1039-L1040"),
        "injection recomputes and `window_size` is a NumPy scalar (`window_size[0]`)",
        "Fix: window_size is a pair (left, right)."
    ),
    G_2 = site!(
        "musa.G-2",
        METADATA,
        AssertionError,
        "",
        meta!("L273-L274"),
        "injection recomputes, cu_seqlens_q given and max_seqlen_q is None",
        "Fix: pass max_seqlen_q with cu_seqlens_q."
    ),
    G_4 = site!(
        "musa.G-4",
        METADATA,
        AssertionError,
        "cu_seqlens_q must have shape (batch_size + 1,)",
        meta!("L280-L283"),
        "injection recomputes and cu_seqlens_q is not 1-D (batch_size is taken from its last dim)",
        "Fix: cu_seqlens_q is 1-D (batch+1,)."
    ),
    G_6 = site!(
        "musa.G-6",
        METADATA,
        AssertionError,
        "seqused_k must have shape (batch_size,)",
        meta!("L288-L290"),
        "injection recomputes and cache_seqlens does not have shape (cu_seqlens_q.shape[-1]-1,)",
        "Fix: one cache length per sequence of cu_seqlens_q."
    ),
    G_8_DTYPE = site!(
        "musa.G-8.dtype",
        METADATA,
        AssertionError,
        "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, leftpad_k must be int32",
        meta!("L295-L308"),
        "injection recomputes and cu_seqlens_q or cache_seqlens is not int32",
        "Cause: int64 index tensors (torch default). Fix: `.to(torch.int32)`."
    ),
    G_8_CONTIGUOUS = site!(
        "musa.G-8.contiguous",
        METADATA,
        AssertionError,
        "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, leftpad_k must be contiguous",
        meta!("L295-L308"),
        "injection recomputes and cu_seqlens_q has stride(0) != 1 (cache_seqlens was already copied by maybe_contiguous)",
        "Fix: `.contiguous()` the index tensor."
    ),
    G_9 = site!(
        "musa.G-9",
        METADATA,
        AssertionError,
        ON_MUSA,
        meta!("L310-L319"),
        "injection recomputes and cu_seqlens_q or cache_seqlens is not on a MUSA device",
        "Fix: move index tensors to the MUSA device."
    ),
    G_10 = site!(
        "musa.G-10",
        METADATA,
        AssertionError,
        "num_heads_q must be divisible by num_heads_kv",
        meta!("L321-L323"),
        "injection recomputes and the backend's current layer has tp_q_head_num % tp_k_head_num != 0",
        "The head counts come from the backend's last layer, not from the call."
    ),
    G_10_ZERO = site!(
        "musa.G-10.zero",
        METADATA,
        ZeroDivisionError,
        MOD_ZERO,
        meta!("L321-L323"),
        "injection recomputes and the backend's current layer has tp_k_head_num == 0",
        "Backend state is inconsistent; the call's tensors are not consulted."
    ),
    G_11 = site!(
        "musa.G-11",
        METADATA,
        TypeError,
        "unsupported operand type(s) for -: '{}' and 'int'",
        meta!("L338-L345"),
        "injection recomputes and _resolve_mask subtracts 1 from a non-number: the backend's _current_max_seqlen_k \
         is None (left window not None), or max_seqlen_q is not a number (right window not None)",
        "Backend state without max_seqlen_k cannot be fixed by the call except by passing scheduler_metadata; \
         max_seqlen_q must be an int."
    ),
    G_11_WINDOW_TYPE = site!(
        "musa.G-11.window-type",
        METADATA,
        TypeError,
        "'>=' not supported between instances of '{}' and 'int'",
        meta!("L338-L345"),
        "injection recomputes and a window_size element is not a number or None (_resolve_mask)",
        "Fix: window_size elements are ints."
    ),
    G_11_TENSOR_BOOL = site!(
        "musa.G-11.tensor-bool",
        METADATA,
        RuntimeError,
        TENSOR_BOOL,
        meta!("L338-L345"),
        "injection recomputes and a window_size element is a tensor of other than one element: \
         `if window_size_left >= max_seqlen_k - 1` (_resolve_mask)",
        "Fix: window_size elements are ints."
    ),
    G_13 = site!(
        "musa.G-13",
        METADATA,
        AssertionError,
        ADD_CONFIG,
        meta!("L356-L372"),
        "injection recomputes and the backend layer's (qk_head_dim, v_head_dim), rounded, is not a supported pair",
        "The dims come from the backend's current layer (e.g. 64-128). Supported rounded pairs: 64-64, 128-128, \
         192-128, 192-192, 256-256, 384-384, 512-512."
    ),
    G_14_ARG_TYPE = site!(
        "musa.G-14.arg-type",
        METADATA,
        TypeError,
        pattern FFI_ARG,
        meta!("L398-L423"),
        "injection recomputes and tvm-ffi cannot convert an argument of the metadata kernel \
         (csrc/templates/attention/fmha/fmha_get_metadata.j2 L16-L41), in parameter order: #5 max_seqlen_q, \
         #13/#14 the window _resolve_mask left (a float or tensor window survives it), #20 num_splits need an int \
         (Python or NumPy), #12 cu_seqlens_k_new a tensor or None; the signature and type names in the message \
         are the installed tvm-ffi's",
        "Fix: max_seqlen_q, window_size and num_splits are Python ints."
    ),
    // ---- mate.mha_interface ----------------------------------------------------------------------
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
    // ---- MLA branch ----------------------------------------------------------------------------
    MLA_1_INDEX = site!(
        "musa.MLA-1.index",
        MLA,
        IndexError,
        TUPLE_INDEX,
        mha!("L924"),
        "MLA-shaped call (qv last dim 512, q last dim 64) with a 1-D qv (`qv.shape[-2]`)",
        "Fix: qv is (batch, seqlen, heads, 512) or (total_q, heads, 512)."
    ),
    MLA_2_METADATA_TYPE = site!(
        "musa.MLA-2.metadata-type",
        MLA,
        TypeError,
        SUBSCRIPT,
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is not None and not subscriptable (`scheduler_metadata[0]`, \
         evaluated before the dispatch converts its arguments)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), or None under SGLang injection."
    ),
    MLA_2_METADATA_INDEX = site!(
        "musa.MLA-2.metadata-index",
        MLA,
        IndexError,
        SEQ_INDEX,
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is a tuple, list or str of fewer than 2 items",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_KEY = site!(
        "musa.MLA-2.metadata-key",
        MLA,
        KeyError,
        "{}",
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is a dict without the key 0 or 1",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), not a dict."
    ),
    MLA_2_METADATA_TENSOR_0D = site!(
        "musa.MLA-2.metadata-tensor-0d",
        MLA,
        IndexError,
        ZERO_DIM_INDEX,
        mha!("L942"),
        "MLA-shaped call whose scheduler_metadata is a 0-dim tensor (`scheduler_metadata[0]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_TENSOR_INDEX = site!(
        "musa.MLA-2.metadata-tensor-index",
        MLA,
        IndexError,
        TENSOR_INDEX,
        mha!("L943"),
        "MLA-shaped call whose scheduler_metadata is a tensor with one row (`scheduler_metadata[1]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_SCALAR = site!(
        "musa.MLA-2.metadata-scalar",
        MLA,
        IndexError,
        SCALAR_INDEX,
        mha!("L942"),
        "MLA-shaped call whose scheduler_metadata is a NumPy scalar (`scheduler_metadata[0]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_SEQLENS_K = site!(
        "musa.MLA-2.seqlens_k",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #4 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with cache_seqlens None: the C++ parameter seqlens_k is a non-optional tensor \
         (tvm-ffi argument conversion: apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext; \
         the function name and signature and tvm-ffi's type names are the installed version's, {*} in the message)",
        "Fix: the MLA decode kernel needs cache_seqlens as an int32 tensor."
    ),
    MLA_2_BLOCK_TABLE = site!(
        "musa.MLA-2.block_table",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #5 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with page_table None: the C++ parameter block_table is a non-optional tensor \
         (tvm-ffi argument conversion: apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext; \
         the function name and signature and tvm-ffi's type names are the installed version's, {*} in the message)",
        "Fix: the MLA decode kernel needs a paged cache (page size 64) with page_table."
    ),
    MLA_3 = site!(
        "musa.MLA-3",
        MLA,
        RuntimeError,
        "Back optional access",
        mate!("csrc/mla_pybind.mu", "L866-L871"),
        "MLA-shaped varlen call (cu_seqlens_q given) without max_seqlen_q: `max_seqlen_q.value()` on an empty Optional",
        "Fix: pass max_seqlen_q with cu_seqlens_q."
    ),
    MLA_2_IS_INITED = site!(
        "musa.MLA-2.is_inited",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #13 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with a scheduler_metadata that is not a (workspace, bool) pair: `scheduler_metadata[1]` \
         is passed for the C++ `bool is_inited` (tvm-ffi argument conversion as for MLA-2; UNVERIFIED, not executed)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), or None under SGLang injection."
    ),
    MLA_2_ARG_TYPE = site!(
        "musa.MLA-2.arg-type",
        MLA,
        TypeError,
        pattern FFI_ARG,
        mha!("L929-L944"),
        "MLA-shaped call where tvm-ffi cannot convert an argument of dispatch_mla_impl_for_fa_interface \
         (csrc/mla_pybind.mu L852-L865), in parameter order: #6 softmax_scale (double: a number, not a NumPy bool \
         or a tensor), #7 causal (bool: an int or bool), #8 cu_seqlens_q (Optional tensor), #9 max_seqlen_q \
         (Optional int), #12 the workspace `scheduler_metadata[0]` (Optional tensor); the signature and type names in \
         the message are the installed tvm-ffi's",
        "Fix: softmax_scale a float, causal a bool, cu_seqlens_q a tensor, max_seqlen_q an int."
    ),
    MLA_4 = site!(
        "musa.MLA-4",
        MLA,
        RuntimeError,
        "Check failed: (workspace.has_value()) is false: workspace must be provided",
        mate!("csrc/mla_pybind.mu", "L874"),
        "MLA-shaped call without scheduler_metadata and no MLA injection (workspace = None)",
        "mate's MLA decode needs the (workspace, is_inited) pair SGLang's MLA backend injects. Fix: pass \
         scheduler_metadata=(torch.empty(128 << 20, dtype=torch.uint8, device='musa'), False)."
    ),
    MLA_5_DEVICE = site!(
        "musa.MLA-5.device",
        MLA,
        RuntimeError,
        "Check failed: (seqlens_k.value().device().device_type == kDLExtDev) is false: seqlens_k.value() must be a MUSA tensor",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed (is_inited False) and cache_seqlens is not on a MUSA device",
        "Fix: cache_seqlens on the MUSA device."
    ),
    MLA_5_CONTIGUOUS = site!(
        "musa.MLA-5.contiguous",
        MLA,
        RuntimeError,
        "Check failed: (seqlens_k.value().IsContiguous()) is false: seqlens_k.value() must be contiguous",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed and cache_seqlens is not contiguous",
        "Fix: `.contiguous()`."
    ),
    MLA_5_DTYPE = site!(
        "musa.MLA-5.dtype",
        MLA,
        RuntimeError,
        "Check failed: seqlens_k.value().dtype() == dl_int32 ({} vs. int32) : Inconsistency of Tensor type: seqlens_k.value()",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed and cache_seqlens is not int32 (an int cache_seqlens was expanded to int32)",
        "Fix: `.to(torch.int32)`."
    ),
    MLA_6_DEVICE = site!(
        "musa.MLA-6.device",
        MLA,
        RuntimeError,
        "Check failed: ({}.device().device_type == kDLExtDev) is false: {} must be a MUSA tensor",
        mate!("csrc/mla_pybind.mu", "L325-L332"),
        "an MLA kernel input (qv, q, v_cache, k_cache, cache_seqlens, page_table as q_latent/q_nope, q_rope/q_pe, ckv, \
         kpe, seqlens_k, block_table) is not on a MUSA device (mla_with_kvcache; flash_mla_asm.mu L489-L496 for 128 heads)",
        "Fix: every MLA input on the MUSA device."
    ),
    MLA_6_DTYPE = site!(
        "musa.MLA-6.dtype",
        MLA,
        RuntimeError,
        "Check failed: (is_bf16_or_fp16_dtype(q_type)) is false: mla only supports fp16 and bf16",
        mate!("csrc/mla_pybind.mu", "L346"),
        "mla_with_kvcache (heads != 128): qv is not float16/bfloat16",
        "Fix: fp16/bf16 MLA inputs."
    ),
    MLA_6_SAME_DTYPE = site!(
        "musa.MLA-6.same-dtype",
        MLA,
        RuntimeError,
        "Check failed: (dtype_equal(q_rope.dtype(), q_type) && dtype_equal(ckv.dtype(), q_type) && dtype_equal(kpe.dtype(), q_type)) is false: input tensor dtypes must match",
        mate!("csrc/mla_pybind.mu", "L347-L349"),
        "mla_with_kvcache: q, v_cache or k_cache dtype differs from qv's",
        "Fix: one dtype for all MLA inputs."
    ),
    MLA_6_CONTIGUOUS = site!(
        "musa.MLA-6.contiguous",
        MLA,
        RuntimeError,
        "Check failed: ({}.IsContiguous()) is false: {} must be contiguous",
        mate!("csrc/mla_pybind.mu", "L351-L364"),
        "MLA kernel: cache_seqlens (seqlens_k, with reused metadata) or a varlen cu_seqlens_q is not contiguous \
         (mla_with_kvcache; flash_mla_asm.mu L510, L527)",
        "Fix: `.contiguous()`."
    ),
    MLA_6_INT32 = site!(
        "musa.MLA-6.int32",
        MLA,
        RuntimeError,
        "Check failed: {}.dtype() == dl_int32 ({} vs. int32) : Inconsistency of Tensor type: {}",
        mate!("csrc/mla_pybind.mu", "L354-L355"),
        "MLA kernel: cache_seqlens (seqlens_k, with reused metadata) or page_table (block_table) is not int32",
        "Fix: `.to(torch.int32)`."
    ),
    MLA_6_BLOCK_TABLE_STRIDE = site!(
        "musa.MLA-6.block-table-stride",
        MLA,
        RuntimeError,
        "Check failed: block_table.stride(-1) == 1 ({} vs. 1) : block_table must have contiguous last dimension",
        mate!("csrc/mla_pybind.mu", "L358"),
        "MLA kernel: page_table.stride(-1) != 1",
        "Fix: `.contiguous()`."
    ),
    MLA_6_RANK = site!(
        "musa.MLA-6.rank",
        MLA,
        RuntimeError,
        "Check failed: tensor.ndim() == static_cast<int32_t>(expected.size()) ({} vs. {}) : {} has unexpected rank",
        mate!("csrc/tvm_ffi_utils.hpp", "L77-L84"),
        "an MLA kernel input has the wrong rank (expect_shape; mla_with_kvcache L375-L392, flash_mla_asm L575-L597)",
        "Fix: q/qv 4-D (batch, seqlen, heads, d) or 3-D with cu_seqlens_q; caches (pages, 64, 1, d); cache_seqlens (batch,)."
    ),
    MLA_6_SHAPE = site!(
        "musa.MLA-6.shape",
        MLA,
        RuntimeError,
        "Check failed: tensor.size(dim) == value ({} vs. {}) : {} has unexpected shape at dim {}",
        mate!("csrc/tvm_ffi_utils.hpp", "L77-L84"),
        "an MLA kernel input has a wrong size (expect_shape), e.g. an int cache_seqlens expanded to the page count",
        "Fix: cache_seqlens (batch,), page_table (batch, pages), caches (pages, 64, 1, 512/64), q heads equal to qv heads."
    ),
    MLA_6_PAGE_SIZE = site!(
        "musa.MLA-6.page-size",
        MLA,
        RuntimeError,
        "Check failed: page_size == 64 ({} vs. 64) : page size only supports 64",
        mate!("csrc/mla_pybind.mu", "L404"),
        "mla_with_kvcache: the paged cache's page size (v_cache.shape[1]) is not 64",
        "mate's MLA kernel supports page size 64 only. Fix: allocate the MLA KV pool with page_size=64."
    ),
    MLA_7_DIM = site!(
        "musa.MLA-7.dim",
        MLA,
        RuntimeError,
        "Check failed: {}.ndim() == {} ({} vs. {}) : {} must be a {}D tensor",
        mate!("csrc/flash_mla_asm.mu", "L517-L532"),
        "flash_mla_asm (128 heads): cache_seqlens not 1-D, page_table not 2-D, or q/qv not 4-D (3-D with cu_seqlens_q)",
        "Fix: qv (batch, seqlen, 128, 512) and q (batch, seqlen, 128, 64), or 3-D with cu_seqlens_q."
    ),
    MLA_7_SAME_DTYPE = site!(
        "musa.MLA-7.same-dtype",
        MLA,
        RuntimeError,
        "Check failed: (dtype_equal(q_nope.dtype(), q_pe.dtype()) && dtype_equal(q_nope.dtype(), ckv.dtype()) && dtype_equal(q_nope.dtype(), kpe.dtype())) is false: q_nope, q_pe, ckv and kpe must have the same dtype",
        mate!("csrc/flash_mla_asm.mu", "L539-L541"),
        "flash_mla_asm (128 heads): q, v_cache or k_cache dtype differs from qv's",
        "Fix: one dtype for all MLA inputs."
    ),
    MLA_7_DTYPE = site!(
        "musa.MLA-7.dtype",
        MLA,
        RuntimeError,
        "Check failed: (is_bf16_or_fp16_dtype(q_nope.dtype())) is false: flash_mla_asm only supports fp16 and bf16",
        mate!("csrc/flash_mla_asm.mu", "L542"),
        "flash_mla_asm (128 heads): MLA inputs are not float16/bfloat16",
        "Fix: fp16/bf16 MLA inputs."
    ),
    // ---- _fmha_fwd -----------------------------------------------------------------------------
    MLA_7_HEADDIM_V = site!(
        "musa.MLA-7.headdim-v",
        MLA,
        RuntimeError,
        "Check failed: args.headdim_v == 512 ({} vs. 512) : flash_mla_asm() headdim_v must be 512",
        mate!("csrc/flash_mla_asm.mu", "L563"),
        "flash_mla_asm (128 heads): v_cache's last dim is not 512 (routing looked at qv only)",
        "Fix: the latent cache (v_cache) has last dim 512."
    ),
    MLA_7_HEADS = site!(
        "musa.MLA-7.heads",
        MLA,
        RuntimeError,
        "Check failed: q_nope.size(-2) == q_pe.size(-2) ({} vs. {}) : q_nope and q_pe head counts must match",
        mate!("csrc/flash_mla_asm.mu", "L567"),
        "flash_mla_asm (128 heads): q has another head count than qv",
        "Fix: q (rope part) and qv (latent part) have the same heads."
    ),
    F_1 = site!(
        "musa.F-1",
        FWD,
        AssertionError,
        "qv parameter is not supported yet",
        fwd!("L481"),
        "qv given but the call is not MLA-shaped (qv last dim 512 with q last dim 64)",
        "mate supports qv only for MLA decode. Fix: drop qv, or use the MLA shapes (q 64 + qv 512, page size 64)."
    ),
    F_2 = site!(
        "musa.F-2",
        FWD,
        AssertionError,
        "k_new and v_new must be provided together",
        fwd!("L482-L484"),
        "exactly one of k, v given",
        "Fix: pass both k and v to append, or neither."
    ),
    F_3_ATTR = site!(
        "musa.F-3.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L487-L489"),
        "q, k or v is neither None nor a tensor (`maybe_contiguous` calls `.stride`)",
        "Fix: pass tensors."
    ),
    F_3_INDEX = site!(
        "musa.F-3.index",
        FWD,
        IndexError,
        NO_DIMS,
        fwd!("L487-L489"),
        "q, k or v is a 0-dim tensor (`stride(-1)`)",
        "Fix: pass 3-D/4-D tensors."
    ),
    F_4_ATTR = site!(
        "musa.F-4.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L492"),
        "q is None (with an explicit softmax_scale): `q.shape[-2:]`",
        "Fix: pass q."
    ),
    F_4_UNPACK = site!(
        "musa.F-4.unpack",
        FWD,
        ValueError,
        UNPACK,
        fwd!("L492"),
        "q has fewer than 2 dimensions (a NumPy scalar has none): `num_head, head_dim = q.shape[-2:]`",
        "Fix: q is (batch, seqlen, heads, d) or (total_q, heads, d)."
    ),
    F_4_INDEX = site!(
        "musa.F-4.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L493"),
        "k_cache is 1-D: `k.shape[-2]`",
        "Fix: k_cache is 4-D."
    ),
    F_5 = site!(
        "musa.F-5",
        FWD,
        AssertionError,
        "",
        fwd!("L501"),
        "cu_seqlens_q given and max_seqlen_q is None",
        "Fix: pass max_seqlen_q (the longest query) with cu_seqlens_q."
    ),
    F_5_ATTR = site!(
        "musa.F-5.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L502"),
        "cu_seqlens_q is neither a tensor nor a NumPy scalar: `cu_seqlens_q.shape[0]`",
        "Fix: cu_seqlens_q is an int32 tensor."
    ),
    F_5_INDEX = site!(
        "musa.F-5.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L502"),
        "cu_seqlens_q is a 0-dim tensor or a NumPy scalar (whose shape is `()`)",
        "Fix: cu_seqlens_q is 1-D (batch+1,)."
    ),
    F_6_ATTR = site!(
        "musa.F-6.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L507"),
        "page_table is neither a tensor nor a NumPy scalar: `page_table.shape[1]`",
        "Fix: page_table is an int32 tensor."
    ),
    F_6_INDEX = site!(
        "musa.F-6.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L507-L512"),
        "page_table has fewer than 2 dims (`page_table.shape[1]`; a NumPy scalar's shape is `()`), or a non-paged k_cache has fewer than 3 (`k.shape[-3]`)",
        "Fix: page_table is (batch, pages_per_seq); a non-paged cache is (batch, seqlen_k, h_k, d)."
    ),
    F_8_ATTR = site!(
        "musa.F-8.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L521-L541"),
        "one of q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k_new, cache_seqlens, page_table, sinks, k, v, \
         rotary_cos, rotary_sin, cache_leftpad, cache_batch_idx is neither None nor a tensor (`.is_musa`)",
        "Fix: pass tensors (a float cache_seqlens is not converted; only ints are)."
    ),
    F_8 = site!(
        "musa.F-8",
        FWD,
        AssertionError,
        ON_MUSA,
        fwd!("L521-L541"),
        "a tensor argument of the device list is not on a MUSA device (`.is_musa`, installed by torch_musa)",
        "Causes: CPU or CUDA tensors from ported code; int cache_seqlens expanded on a CPU k_cache. Fix: `.to('musa')`."
    ),
    F_9 = site!(
        "musa.F-9",
        FWD,
        AssertionError,
        "inputs must be float16 or bfloat16",
        fwd!("L543-L545"),
        "q.dtype is not float16/bfloat16",
        "Causes: fp8 KV paths (SGLang casts q to kv_cache_dtype), float32 tests. mate has no fp8 attention; \
         descales are ignored. Fix: fp16/bf16 q and caches."
    ),
    F_10 = site!(
        "musa.F-10",
        FWD,
        AssertionError,
        "inputs must have the same dtype",
        fwd!("L546"),
        "q, k_cache, v_cache dtypes differ",
        "Fix: one dtype for q and both caches."
    ),
    F_11 = site!(
        "musa.F-11",
        FWD,
        AssertionError,
        "k_new and v_new must have the same dtype as q, k and v",
        fwd!("L547-L550"),
        "k/v dtypes differ from q's",
        "Fix: cast the appended k, v to q's dtype."
    ),
    F_12_DTYPE = site!(
        "musa.F-12.dtype",
        FWD,
        AssertionError,
        "cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q, seqused_k, leftpad_k must be int32",
        fwd!("L552-L566"),
        "cu_seqlens_q, cu_seqlens_k_new, cache_seqlens or cache_leftpad is not int32 (checked in that order)",
        "Cause: int64 index tensors (torch's default). Fix: `.to(torch.int32)`. cu_seqlens_k_new is checked even without k/v."
    ),
    F_12_CONTIGUOUS = site!(
        "musa.F-12.contiguous",
        FWD,
        AssertionError,
        "cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q, seqused_k, leftpad_k must be contiguous",
        fwd!("L552-L566"),
        "one of those has stride(0) != 1",
        "Upstream FA3 copies such views; mate rejects them. Fix: `.contiguous()`."
    ),
    F_12_INDEX = site!(
        "musa.F-12.index",
        FWD,
        IndexError,
        NO_DIMS,
        fwd!("L552-L566"),
        "one of those is a 0-dim tensor (`stride(0)`)",
        "Fix: 1-D index tensors."
    ),
    F_13_DTYPE = site!(
        "musa.F-13.dtype",
        FWD,
        AssertionError,
        "page_table must be int32",
        fwd!("L570"),
        "page_table is not int32",
        "Fix: `.to(torch.int32)`."
    ),
    F_13_CONTIGUOUS = site!(
        "musa.F-13.contiguous",
        FWD,
        AssertionError,
        "page_table must be contiguous",
        fwd!("L571"),
        "page_table.stride(-1) != 1",
        "Upstream copies; mate rejects. Fix: `.contiguous()`."
    ),
    F_14_DEVICE = site!(
        "musa.F-14.device",
        FWD,
        AssertionError,
        "kv_batch_idx must be on MUSA device",
        fwd!("L574"),
        "Shadowed by musa.F-8 (cache_batch_idx is in its device list)",
        "See musa.F-8."
    ),
    F_14_DTYPE = site!(
        "musa.F-14.dtype",
        FWD,
        AssertionError,
        "kv_batch_idx must be int32",
        fwd!("L575"),
        "cache_batch_idx is not int32",
        "Fix: `.to(torch.int32)`."
    ),
    F_14_SHAPE = site!(
        "musa.F-14.shape",
        FWD,
        AssertionError,
        "kv_batch_idx must have shape (batch_size,)",
        fwd!("L576-L578"),
        "cache_batch_idx shape is not (batch_size,)",
        "Fix: one cache row per sequence."
    ),
    F_14_CONTIGUOUS = site!(
        "musa.F-14.contiguous",
        FWD,
        AssertionError,
        "kv_batch_idx must be contiguous",
        fwd!("L579"),
        "cache_batch_idx.stride(0) != 1",
        "Upstream copies; mate rejects. Fix: `.contiguous()`."
    ),
    F_15_DEVICE = site!(
        "musa.F-15.device",
        FWD,
        AssertionError,
        "leftpad_k must be on MUSA device",
        fwd!("L582"),
        "Shadowed by musa.F-8",
        "See musa.F-8."
    ),
    F_15_DTYPE = site!(
        "musa.F-15.dtype",
        FWD,
        AssertionError,
        "leftpad_k must be int32",
        fwd!("L583"),
        "Shadowed by musa.F-12.dtype",
        "See musa.F-12.dtype."
    ),
    F_15_SHAPE = site!(
        "musa.F-15.shape",
        FWD,
        AssertionError,
        "leftpad_k must have shape (batch_size,)",
        fwd!("L584-L586"),
        "cache_leftpad shape is not (batch_size,)",
        "Fix: one left padding per sequence."
    ),
    F_15_CONTIGUOUS = site!(
        "musa.F-15.contiguous",
        FWD,
        AssertionError,
        "leftpad_k must be contiguous",
        fwd!("L587"),
        "Shadowed by musa.F-12.contiguous",
        "See musa.F-12.contiguous."
    ),
    F_16_SHAPE = site!(
        "musa.F-16.shape",
        FWD,
        AssertionError,
        "",
        fwd!("L590"),
        "sinks (learnable_sink) shape is not (num_heads,)",
        "Fix: one sink logit per query head."
    ),
    F_16_DTYPE = site!(
        "musa.F-16.dtype",
        FWD,
        AssertionError,
        "learnable_sink must be bfloat16",
        fwd!("L591"),
        "sinks is not bfloat16",
        "Cause: float32 sinks (accepted upstream). Fix: `.to(torch.bfloat16)`."
    ),
    F_17 = site!(
        "musa.F-17",
        FWD,
        AssertionError,
        "batch_size must equal batch_size_k when kv_batch_idx is None",
        fwd!("L594-L597"),
        "no cache_batch_idx and the cache's batch (page_table.shape[0] or k_cache.shape[0]) differs from q's batch",
        "Causes: a 3-D cache, a cache with spare rows. Fix: pass cache_batch_idx or size the cache to the batch."
    ),
    F_18_K = site!(
        "musa.F-18.k",
        FWD,
        AssertionError,
        "",
        fwd!("L601-L604"),
        "k_cache shape is not (batch_k, seqlen_k, h_k, d) / (num_pages, page_size, h_k, d); d is q's head dim",
        "Causes: q/k head dims differ, a 5-D cache. Fix: match q's head dim."
    ),
    F_18_V = site!(
        "musa.F-18.v",
        FWD,
        AssertionError,
        "",
        fwd!("L602-L605"),
        "v_cache shape differs from k_cache's (except its head dim)",
        "Fix: v_cache like k_cache."
    ),
    F_18_PAGE_TABLE = site!(
        "musa.F-18.page_table",
        FWD,
        AssertionError,
        "",
        fwd!("L606"),
        "page_table is not 2-D (batch_k, pages_per_seq)",
        "Fix: page_table is (batch, pages_per_seq)."
    ),
    F_20 = site!(
        "musa.F-20",
        FWD,
        AssertionError,
        "cu_seqlens_q must have shape (batch_size + 1,)",
        fwd!("L617-L620"),
        "cu_seqlens_q is not 1-D",
        "Fix: cu_seqlens_q is (batch+1,)."
    ),
    F_22 = site!(
        "musa.F-22",
        FWD,
        AssertionError,
        "seqused_k must have shape (batch_size,)",
        fwd!("L625-L627"),
        "cache_seqlens shape is not (batch_size,) (an int cache_seqlens becomes length k_cache.shape[0])",
        "Causes: int cache_seqlens with a paged cache (pages != batch). Fix: pass an int32 tensor (batch,)."
    ),
    F_23_INDEX = site!(
        "musa.F-23.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L631"),
        "k is 1-D without cu_seqlens_k_new (`k_new.shape[1]`)",
        "Fix: k is (batch, seqlen_new, h_k, d)."
    ),
    F_23_K = site!(
        "musa.F-23.k",
        FWD,
        AssertionError,
        "k_new must have shape (batch_size, seqlen_k_new, num_head_kv, head_dim)",
        fwd!("L632-L634"),
        "k is not (batch, seqlen_new, h_k, d)",
        "Fix: match q's batch and the cache's heads/dim."
    ),
    F_23_V = site!(
        "musa.F-23.v",
        FWD,
        AssertionError,
        "v_new must have shape (batch_size, seqlen_k_new, num_head_kv, head_dim_v)",
        fwd!("L635-L637"),
        "v is not (batch, seqlen_new, h_k, dv)",
        "Fix: match k and v_cache's head dim."
    ),
    F_24_K = site!(
        "musa.F-24.k",
        FWD,
        AssertionError,
        "packed k_new must have shape (total_k_new, num_head_kv, head_dim)",
        fwd!("L640-L642"),
        "cu_seqlens_k_new given and k is not (total_new, h_k, d)",
        "Fix: packed k is 3-D."
    ),
    F_24_V = site!(
        "musa.F-24.v",
        FWD,
        AssertionError,
        "packed v_new must have shape (total_k_new, num_head_kv, head_dim_v)",
        fwd!("L643-L645"),
        "cu_seqlens_k_new given and v is not (total_new, h_k, dv)",
        "Fix: packed v is 3-D."
    ),
    F_25 = site!(
        "musa.F-25",
        FWD,
        AssertionError,
        "cu_seqlens_k_new must have shape (batch_size + 1,)",
        fwd!("L646-L648"),
        "k, v and cu_seqlens_k_new given and cu_seqlens_k_new is not (batch+1,)",
        "Fix: one prefix entry per sequence plus one."
    ),
    F_26 = site!(
        "musa.F-26",
        FWD,
        AssertionError,
        "cu_seqlens_k_new[-1] must equal total_k_new",
        fwd!("L649-L652"),
        "cu_seqlens_k_new's last value differs from k.shape[0]",
        "Fix: the prefix sum ends at the packed row count."
    ),
    F_27 = site!(
        "musa.F-27",
        FWD,
        AssertionError,
        "If rotary cos/sin are provided, new key / value to be appended to KV cache must also be provided",
        fwd!("L656-L658"),
        "rotary_cos given without k/v",
        "Rotary is applied only to appended keys. Fix: pass k, v or drop rotary."
    ),
    F_28 = site!(
        "musa.F-28",
        FWD,
        AssertionError,
        "If rotary cos is provided, rotary sin must also be provided",
        fwd!("L659-L661"),
        "rotary_cos given without rotary_sin",
        "Fix: pass both."
    ),
    F_29_INDEX = site!(
        "musa.F-29.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L662"),
        "rotary_cos is 1-D (`rotary_cos.shape[1]`)",
        "Fix: rotary_cos is (seqlen_ro, rotary_dim / 2)."
    ),
    F_29 = site!(
        "musa.F-29",
        FWD,
        AssertionError,
        "rotary_dim must be <= headdim",
        fwd!("L663"),
        "2 * rotary_cos.shape[1] > head dim",
        "Fix: rotary_cos second dim is rotary_dim / 2."
    ),
    F_30 = site!(
        "musa.F-30",
        FWD,
        AssertionError,
        "Only rotary dimensions divisible by 16 are currently supported",
        fwd!("L664-L666"),
        "rotary_dim % 16 != 0",
        "Fix: rotary_dim a multiple of 16."
    ),
    F_31 = site!(
        "musa.F-31",
        FWD,
        AssertionError,
        "cos/sin seqlen must be at least the seqlen of KV cache",
        fwd!("L668-L672"),
        "paged call and rotary_cos.shape[0] < pages_per_seq * page_size",
        "Fix: cos/sin tables cover the cache capacity."
    ),
    F_32 = site!(
        "musa.F-32",
        FWD,
        AssertionError,
        "rotary_cos must have the same dtype as query",
        fwd!("L673-L675"),
        "rotary_cos/rotary_sin dtype differs from q's",
        "Fix: cast cos/sin to q's dtype."
    ),
    F_33 = site!(
        "musa.F-33",
        FWD,
        AssertionError,
        "",
        fwd!("L676"),
        "rotary_cos and rotary_sin shapes differ or are not (seqlen_ro, rotary_dim / 2)",
        "Fix: equal 2-D tables."
    ),
    F_34_ATTR = site!(
        "musa.F-34.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L679"),
        "rotary_seqlens (with rotary_cos) is neither a tensor nor a NumPy scalar (`.dtype`)",
        "Fix: an int32 tensor (batch,)."
    ),
    F_34_DTYPE = site!(
        "musa.F-34.dtype",
        FWD,
        AssertionError,
        "seqlens_rotary must have dtype torch.int32",
        fwd!("L679-L681"),
        "rotary_seqlens is not int32 (a NumPy scalar's dtype is a NumPy dtype, never torch.int32)",
        "Fix: `.to(torch.int32)`."
    ),
    F_34_SHAPE = site!(
        "musa.F-34.shape",
        FWD,
        AssertionError,
        "",
        fwd!("L682"),
        "rotary_seqlens shape is not (batch_size,)",
        "Fix: one rotary offset per sequence."
    ),
    F_35 = site!(
        "musa.F-35",
        FWD,
        AssertionError,
        "num_head must be divisible by num_head_kv",
        fwd!("L684"),
        "q heads not a multiple of the cache's KV heads",
        "Fix: GQA needs h % h_k == 0."
    ),
    F_35_ZERO = site!(
        "musa.F-35.zero",
        FWD,
        ZeroDivisionError,
        MOD_ZERO,
        fwd!("L684"),
        "the cache has 0 KV heads (`k.shape[-2] == 0`)",
        "Fix: a cache with heads."
    ),
    F_MASK_TENSOR_BOOL = site!(
        "musa.F-mask.tensor-bool",
        FWD,
        RuntimeError,
        TENSOR_BOOL,
        fwd!("L696-L717"),
        "attention_chunk (`if attention_chunk > 0`) or a window_size element (`if window_size_left >= seqlen_k - 1`, \
         _resolve_mask) is a tensor of other than one element",
        "Fix: attention_chunk and the window_size elements are ints."
    ),
    F_MASK_WINDOW_TYPE = site!(
        "musa.F-mask.window-type",
        FWD,
        TypeError,
        "'>=' not supported between instances of '{}' and 'int'",
        fwd!("L709-L717"),
        "a window_size element is not a number or None (_resolve_mask)",
        "Fix: window_size elements are ints."
    ),
    F_MASK_SEQLEN_TYPE = site!(
        "musa.F-mask.seqlen-type",
        FWD,
        TypeError,
        "unsupported operand type(s) for -: '{}' and 'int'",
        fwd!("L710-L717"),
        "cu_seqlens_q given, max_seqlen_q is not a number and the right window is not None (_resolve_mask computes max_seqlen_q - 1)",
        "Fix: max_seqlen_q is an int (the longest query)."
    ),
    F_MASK_CHUNK_TYPE = site!(
        "musa.F-mask.chunk-type",
        FWD,
        TypeError,
        "'>' not supported between instances of '{}' and 'int'",
        fwd!("L696"),
        "attention_chunk is not a number or None (`attention_chunk > 0`)",
        "Fix: attention_chunk is an int (0 = off)."
    ),
    F_41_ATTR = site!(
        "musa.F-41.attr",
        FWD,
        AttributeError,
        ATTR,
        fwd!("L765-L768"),
        "scheduler_metadata (passed or injected) is not a tensor, e.g. the MLA (workspace, flag) tuple injected by an \
         MLA backend into a non-MLA call",
        "Causes: an MLA backend was the last constructed backend; a non-MLA call then gets its tuple. Fix: pass \
         scheduler_metadata explicitly (a tensor) or call mate directly."
    ),
    F_41_INDEX = site!(
        "musa.F-41.index",
        FWD,
        IndexError,
        TUPLE_INDEX,
        fwd!("L766"),
        "scheduler_metadata is a 0-dim tensor or a NumPy scalar (`shape[0]` of `()`)",
        "Fix: mate metadata is 1-D int32 of length 4*batch."
    ),
    F_41 = site!(
        "musa.F-41",
        FWD,
        AssertionError,
        "metadata buffer is too small",
        fwd!("L765-L768"),
        "no sinks and scheduler_metadata.shape[0] < 4 * batch_size",
        "Causes: metadata computed for a smaller batch (injected or cached), upstream-format metadata. Fix: \
         compute metadata with mate's get_scheduler_metadata for this call's batch."
    ),
    // ---- kernel configuration ------------------------------------------------------------------
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
    J_1_JSON = site!(
        "musa.J-1.json",
        JIT,
        TypeError,
        "Object of type {} is not JSON serializable",
        fwd!("L33-L35"),
        "a value JSON cannot write reached the kernel's compile-time dict (`json.dumps(config, sort_keys=True)` in \
         _fmha_fwd_encode, called at fmha_fwd.py L837; the first such key in sorted order is named): \
         `has_attention_chunk` (`attention_chunk > 0` on a tensor or NumPy scalar: a tensor or `numpy.bool`, named \
         `bool`), `has_softcap` (`softcap != 0.0`, likewise), `is_causal`/`is_local` (a one-element tensor window \
         handed on by `and`/`or` in _resolve_mask), `is_packgqa` (pack_gqa itself when not None: a function, a \
         tensor, a NumPy scalar) or `is_rotary_interleaved` (a falsy rotary_interleaved itself)",
        "Fix: window_size, attention_chunk and softcap are Python numbers, pack_gqa and rotary_interleaved bools."
    ),
    J_1_HASH = site!(
        "musa.J-1.hash",
        JIT,
        TypeError,
        "unhashable type: '{}'",
        fwd!("L53-L56"),
        "the compile-time dict holds an unhashable value: `is_rotary_interleaved` is `rotary_interleaved and \
         rotary_cos is not None`, which is rotary_interleaved itself when it is falsy (an empty dict or list); \
         `_load_fmha_fwd_module` is functools.cached on the dict's items",
        "Fix: rotary_interleaved is a bool."
    ),
    J_1_TENSOR_BOOL = site!(
        "musa.J-1.tensor-bool",
        JIT,
        RuntimeError,
        TENSOR_BOOL,
        fwd!("L831"),
        "rotary_interleaved is a tensor of other than one element: `is_rotary_interleaved and rotary_cos is not None` \
         in the compile-time dict",
        "Fix: rotary_interleaved is a bool."
    ),
    J_1 = site!(
        "musa.J-1",
        JIT,
        RuntimeError,
        prefix "Ninja build failed.",
        mate!("mate/jit/cpp_ext.py", "L320-L324"),
        "k/v appended without any of cu_seqlens_q, cache_seqlens, cache_leftpad: static_assert \"AppendKV is only \
         supported with Varlen\" (include/mate/attention/fmha/seqlen.hpp L36); run_ninja raises \"Ninja build failed.\" \
         followed, when the build is not verbose (run_ninja captures the output), by \" Ninja output:\\n\" and the compiler's log",
        "Fix: pass cache_seqlens (the current lengths) when appending k/v; upstream FA3 rejects this call up front."
    ),
    J_3_ARG_TYPE = site!(
        "musa.J-3.arg-type",
        JIT,
        TypeError,
        pattern FFI_ARG,
        fwd!("L843-L885"),
        "the forward kernel's typed parameters (csrc/templates/attention/fmha/fwd_kern.j2 L20-L63) reject a value: \
         #11 max_seqlen_q (with cu_seqlens_q), #24/#25 the resolved window, #26 attention_chunk, #28 sm_margin, \
         #29 num_splits need an int (Python or NumPy; a float or tensor survives _resolve_mask unchanged unless \
         replaced); #22 softmax_scale, #27 softcap need a number (not a NumPy bool); #18 rotary_seqlens (without \
         rotary_cos nothing reads it before) and #19-#21 q/k/v_descale need a tensor or None (tvm-ffi argument \
         conversion, apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext: the signature \
         and the expected/actual type names are the installed version's, {*} in the message; conversions checked \
         in parameter order)",
        "Fix: pass Python ints for window_size, attention_chunk, max_seqlen_q, sm_margin and num_splits, and \
         tensors (or None) for rotary_seqlens and the descales."
    ),
    // ---- combine -------------------------------------------------------------------------------
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

// Porter hazards of musa-fa3.md §8 (numbers in the explanations).
hazards! { HAZARDS:
    H_MUSA_SCORE_MOD_DROPPED = hazard!(
        "H-MUSA-SCORE-MOD-DROPPED",
        Error,
        "score_mod is accepted and silently ignored by the SGLang MUSA wrapper",
        sgl!("L154-L157"),
        "§8.15: the wrapper never reads score_mod; V4/V5 raise NotImplementedError. The attention is computed without it."
    ),
    H_MUSA_AUX_TENSORS_DROPPED = hazard!(
        "H-MUSA-AUX-TENSORS-DROPPED",
        Error,
        "aux_tensors is accepted and silently ignored by the SGLang MUSA wrapper",
        sgl!("L154-L157"),
        "§8.15: never read by the wrapper."
    ),
    H_MUSA_SINKS_RENAMED = hazard!(
        "H-MUSA-SINKS-RENAMED",
        Info,
        "sinks is forwarded as mate's learnable_sink (must be bfloat16, shape (num_heads,))",
        mate!(
            "wrappers/flash-attention/flash_attn_3/interface.py",
            "L11-L14"
        ),
        "§8.14, §2.2: `learnable_sink = sinks if sinks is not None else s_aux`."
    ),
    H_MUSA_SINKS_DISABLE_SPLITS = hazard!(
        "H-MUSA-SINKS-DISABLE-SPLITS",
        Warning,
        "sinks make mate discard {}: the kernel runs one split and no combine",
        fwd!("L687-L690"),
        "§6.5, §8.14: a FIXME in mate disables splitting with learnable_sink; metadata given or injected is discarded."
    ),
    H_MUSA_INT_CACHE_SEQLENS_EXPANDED = hazard!(
        "H-MUSA-INT-CACHE-SEQLENS-EXPANDED",
        Warning,
        "int cache_seqlens={} becomes an int32 tensor of length k_cache.shape[0]={} (upstream FA3 uses q.shape[0]={})",
        mha!("L913-L917"),
        "§8.3: for a paged cache k_cache.shape[0] is the page count."
    ),
    H_MUSA_NUM_SPLITS_IGNORED = hazard!(
        "H-MUSA-NUM-SPLITS-IGNORED",
        Warning,
        "num_splits={} is ignored without scheduler_metadata: the kernel runs 1 split",
        mate!("csrc/templates/attention/fmha/fwd_kern.j2", "L97-L99"),
        "§8.4: no split-KV parallelism for direct mate calls."
    ),
    H_MUSA_DESCALE_IGNORED = hazard!(
        "H-MUSA-DESCALE-IGNORED",
        Warning,
        "{} accepted and ignored: mate has no fp8 attention",
        fwd!("L843"),
        "§8.6: descale tensors are passed to the kernel and unused."
    ),
    H_MUSA_WINDOW_NONE = hazard!(
        "H-MUSA-WINDOW-NONE",
        Info,
        "window_size=None is accepted as (-1, -1); upstream raises TypeError",
        mha!("L905-L906"),
        "§8.27."
    ),
    H_MUSA_CHUNK_NONE = hazard!(
        "H-MUSA-CHUNK-NONE",
        Info,
        "attention_chunk=None is accepted as 0; upstream raises TypeError",
        mha!("L907-L908"),
        "§8.27."
    ),
    H_MUSA_SOFTCAP_NEGATIVE = hazard!(
        "H-MUSA-SOFTCAP-NEGATIVE",
        Error,
        "softcap={} enables softcapping on MUSA (softcap != 0.0); upstream ignores softcap <= 0",
        fwd!("L809"),
        "§8.23: negative softcap changes the results."
    ),
    H_MUSA_ROTARY_NONCONTIGUOUS = hazard!(
        "H-MUSA-ROTARY-NONCONTIGUOUS",
        Error,
        "{} is not contiguous: mate neither copies nor checks it and reads it with row stride rotary_dim/2",
        mate!("csrc/templates/attention/fmha/fwd_kern.j2", "L358-L362"),
        "§8.18: silently wrong rotary embedding; upstream raises `rotary_cos must be contiguous`."
    ),
    H_MUSA_ROTARY_SIN_IGNORED = hazard!(
        "H-MUSA-ROTARY-SIN-IGNORED",
        Warning,
        "rotary_sin without rotary_cos is silently ignored",
        fwd!("L655"),
        "§5.5 F-28: only rotary_cos switches rotary on."
    ),
    H_MUSA_METADATA_INJECTED = hazard!(
        "H-MUSA-METADATA-INJECTED",
        Warning,
        "scheduler_metadata=None: the SGLang wrapper injects metadata {} (prefix {}, layer {}); it describes the backend's state, not necessarily this call",
        sgl!("L162-L177"),
        "§4.1-§4.7, §8.1: cached per prefix and reused by later layers; computed from backend max_seqlen_k and layer heads/dims."
    ),
    H_MUSA_METADATA_IGNORES_ARGS = hazard!(
        "H-MUSA-METADATA-IGNORES-ARGS",
        Warning,
        "injected metadata never sees {} of this call: its split counts and order may not fit",
        sgl!("L97-L116"),
        "§4.7.8, §6.11: the metadata is computed from the backend's layer and max_seqlen_k, not from these."
    ),
    H_MUSA_METADATA_M_BLOCKS = hazard!(
        "H-MUSA-METADATA-M-BLOCKS",
        Error,
        "injected metadata schedules {} m-block(s) for max_seqlen_q={} but this call needs {}: query rows beyond them are never computed",
        fwd!("L765-L776"),
        "§6.11 (iii) and example 1: the metadata resolves pack-GQA and tile_m from the layer's heads with pack_gqa=None; a call whose pack_gqa, head ratio or dims differ needs more m-blocks."
    ),
    H_MUSA_METADATA_UNCHECKED = hazard!(
        "H-MUSA-METADATA-UNCHECKED",
        Warning,
        "scheduler_metadata is only checked for length >= 4*batch; dtype, device, layout and contents are trusted",
        fwd!("L765-L768"),
        "§8.2: stale or upstream-format metadata is mis-sliced silently."
    ),
    H_MUSA_MLA_TUPLE_METADATA = hazard!(
        "H-MUSA-MLA-TUPLE-METADATA",
        Warning,
        "an MLA backend injects (workspace, is_inited={}); the MLA kernel reuses scheduling data when is_inited",
        sgl!("L85-L94"),
        "§4.4, §4.7.4: one workspace per process, shared by every layer and backend."
    ),
    H_MUSA_CU_SEQLENS_K_NEW_WITHOUT_KV = hazard!(
        "H-MUSA-CU-SEQLENS-K-NEW-WITHOUT-KV",
        Warning,
        "cu_seqlens_k_new without k/v is validated (dtype, contiguity) but ignored by the kernel",
        fwd!("L552-L566"),
        "§8.24; with injection the metadata adds its lengths to cache_seqlens."
    ),
    H_MUSA_SM_MARGIN = hazard!(
        "H-MUSA-SM-MARGIN",
        Info,
        "sm_margin={} only lowers the split heuristic's MP count; the grid still uses every MP",
        mate!("csrc/templates/attention/fmha/fwd_kern.j2", "L452"),
        "§8.22."
    ),
    H_MUSA_MLA_ROUTED = hazard!(
        "H-MUSA-MLA-ROUTED",
        Warning,
        "qv last dim 512 with q last dim 64 routes to mate's MLA decode kernel (2-tuple return, lse (b, s, h) for 4-D q)",
        mha!("L919-L945"),
        "§6.12, §8.7, §8.8."
    ),
    H_MUSA_MLA_IGNORED = hazard!(
        "H-MUSA-MLA-IGNORED",
        Error,
        "the MLA branch ignores {}",
        mha!("L929-L944"),
        "§6.12: none of these reach dispatch_mla_impl_for_fa_interface."
    ),
    H_MUSA_MLA_SCHEDULING_IGNORED = hazard!(
        "H-MUSA-MLA-SCHEDULING-IGNORED",
        Info,
        "the MLA branch schedules the call itself and ignores {}",
        mha!("L929-L944"),
        "§6.12: pack_gqa, num_splits and sm_margin do not reach dispatch_mla_impl_for_fa_interface; they only choose how the work is scheduled, so the results are those of the MLA kernel's own schedule."
    ),
    H_MUSA_HEADDIM_ROUNDED = hazard!(
        "H-MUSA-HEADDIM-ROUNDED",
        Info,
        "head dims {}-{} run the {}-{} kernel",
        mate!("mate/jit/attention/fmha/fmha_utils.py", "L76-L105"),
        "§6.3: dims are padded to the kernel's template dims."
    ),
    H_MUSA_HEADDIM_OVER_512 = hazard!(
        "H-MUSA-HEADDIM-OVER-512",
        Error,
        "head dim {} > 512 is accepted and runs a 512-dim kernel",
        mate!("mate/jit/attention/fmha/fmha_utils.py", "L76-L105"),
        "§8.20: no upper bound in _roundup_headdim (behaviour UNVERIFIED)."
    ),
    H_MUSA_APPEND_BEYOND_CAPACITY = hazard!(
        "H-MUSA-APPEND-BEYOND-CAPACITY",
        Error,
        "k/v appended without cache_seqlens or cache_leftpad: new keys are written after the full cache capacity",
        mate!("include/mate/attention/fmha/seqlen.hpp", "L34-L145"),
        "§8.19: upstream FA3 requires cache_seqlens with k/v."
    ),
    H_MUSA_KV_WRITTEN_BEFORE_ERROR = hazard!(
        "H-MUSA-KV-WRITTEN-BEFORE-ERROR",
        Error,
        "the forward kernel already appended k/v into the cache when this error is raised",
        mate!("mate/jit/attention/fmha/fmha_combine.py", "L61-L70"),
        "§8.5: B-5 fires after the kernel."
    ),
    H_MUSA_ASSERTION_ERROR = hazard!(
        "H-MUSA-ASSERTION-ERROR",
        Info,
        "mate raises AssertionError where upstream FA3 raises RuntimeError; `except RuntimeError` misses it and `python -O` removes the check",
        fwd!("L481-L768"),
        "§8.9, §8.10: mate validates with Python asserts."
    ),
    H_MUSA_METADATA_SPLIT_RACE = hazard!(
        "H-MUSA-METADATA-SPLIT-RACE",
        Info,
        "metadata for {} sequences (> 31) is computed with splitting on; the split-reduction loop's unsynchronised flags may vary split counts between runs",
        mate!("include/mate/attention/fmha/metadata.hpp", "L365-L369"),
        "§6.8 step 3c, §8.25 (UNVERIFIED whether it manifests)."
    ),
    H_MUSA_NUM_SPLITS_UNCLAMPED = hazard!(
        "H-MUSA-NUM-SPLITS-UNCLAMPED",
        Warning,
        "num_splits={} with metadata is used unclamped by the forward kernel",
        mate!("csrc/templates/attention/fmha/fwd_kern.j2", "L288-L291"),
        "§6.6: only the combine limits splits (128)."
    ),
}
