//! The MUSA stack's porter hazards, in the order of musa-fa3.md §8 (numbers in the explanations).

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
    H_MATE_S_AUX_IGNORED = hazard!(
        "H-MATE-S-AUX-IGNORED",
        Warning,
        "sinks and s_aux are both given: mate's FA3 wrapper uses sinks and ignores s_aux",
        mate!(
            "wrappers/flash-attention/flash_attn_3/interface.py",
            "L11-L14"
        ),
        "§2.2: `learnable_sink = sinks if sinks is not None else s_aux`; s_aux is the older name of \
         the same argument. Fix: pass one of them."
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
