//! Error sites of mate's `_fmha_fwd` (`F-`).

use super::shared::{ATTR, MOD_ZERO, NO_DIMS, ON_MUSA, TENSOR_BOOL, TUPLE_INDEX};

const FWD: &str = "mate _fmha_fwd";

const UNPACK: &str = "not enough values to unpack (expected 2, got {})";

sites! { "musa.", FMHA_FWD_SITES:
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
    F_36 = site!(
        "musa.F-36",
        FWD,
        AssertionError,
        "cp_world_size must be positive, required by downstream unified code path. Use 1 if CP is not enabled.",
        fwd!("L720-L722"),
        "cp_world_size <= 0 (mate's FA3 wrapper forwards the caller's; SGLang's wrapper never passes it)",
        "Fix: cp_world_size is the number of context-parallel ranks, 1 without context parallelism."
    ),
    F_36_TYPE = site!(
        "musa.F-36.type",
        FWD,
        TypeError,
        "'>' not supported between instances of '{}' and '{}'",
        fwd!("L720"),
        "cp_world_size is not a number (`cp_world_size > 0`)",
        "Fix: cp_world_size is an int."
    ),
    F_CP_TENSOR_BOOL = site!(
        "musa.F-cp.tensor-bool",
        FWD,
        RuntimeError,
        TENSOR_BOOL,
        fwd!("L720-L731"),
        "cp_world_size (`assert cp_world_size > 0`) or cp_rank (`cp_rank == 0` in F-37) is a tensor of \
         other than one element: the assert needs the truth value of its elementwise comparison",
        "Fix: cp_world_size and cp_rank are ints."
    ),
    F_37 = site!(
        "musa.F-37",
        FWD,
        AssertionError,
        "When context parallelism is disabled, cp_rank must be zero",
        fwd!("L723-L725"),
        "cp_world_size == 1 and cp_rank != 0",
        "Causes: a rank index passed without the world size. Fix: pass cp_world_size with cp_rank, or \
         neither."
    ),
    F_38 = site!(
        "musa.F-38",
        FWD,
        AssertionError,
        "cp_tot_seqused_k must be provided when context parallelism is enabled.",
        fwd!("L726-L728"),
        "cp_world_size != 1 and cp_tot_seqused_k is None",
        "With context parallelism the kernel needs every sequence's total key count over all ranks \
         (it places the rank's keys at global positions and masks causally against the total). Fix: \
         pass cp_tot_seqused_k, an int32 (batch,) tensor of the global cache_seqlens."
    ),
    F_39 = site!(
        "musa.F-39",
        FWD,
        AssertionError,
        "Local attention (sliding window) is not currently supported with context parallelism (cp_world_size > 1).",
        fwd!("L729-L731"),
        "cp_world_size > 1 and the mask resolves to local (a window, a chunk, or causal with a window)",
        "Fix: drop the window (or attention_chunk) or run without context parallelism."
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
}
