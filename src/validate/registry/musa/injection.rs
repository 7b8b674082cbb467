//! Error sites of the SGLang wrapper's metadata injection (`W-2`) and of the metadata chain M it runs
//! when it recomputes (`G-`).

use super::shared::{
    ADD_CONFIG, ATTR, FFI_ARG, MOD_ZERO, NO_DIMS, ON_MUSA, SCALAR_INDEX, SEQ_INDEX, SUBSCRIPT,
    TENSOR_BOOL, TENSOR_INDEX, TUPLE_INDEX, ZERO_DIM_INDEX,
};

const INJECTION: &str = "sglang _compute_scheduler_metadata (injection)";
const METADATA: &str = "mate get_scheduler_metadata -> _fmha_get_metadata (injection recompute)";

sites! { "musa.", INJECTION_SITES:
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
}
