//! Error sites of mate's FA3-compatible wrapper `flash_attn_3.interface.flash_attn_with_kvcache`
//! (`I-`: interface.py), the first layer of the `mate` profile. The wrapper only binds its
//! arguments and resolves the sink (musa-fa3.md §2.2); every check below it is `musa`'s.

const WRAPPER: &str = "mate FA3 wrapper flash_attn_3.interface.flash_attn_with_kvcache";

sites! { "mate.", MATE_WRAPPER_SITES:
    I_0 = site!(
        "mate.I-0",
        WRAPPER,
        TypeError,
        "flash_attn_with_kvcache() {}",
        mate!("wrappers/flash-attention/flash_attn_3/interface.py", "L175-L212"),
        "the call does not bind to the wrapper's 35-parameter signature (CPython's argument binding)",
        "Causes: a keyword of SGLang's or sgl-kernel's wrapper (`ver`, `score_mod`, `aux_tensors`), \
         mate's own `learnable_sink`, or a misspelt one; too many positional arguments. Fixes: drop \
         `ver` (this is FA3), pass `sinks` (or `s_aux`) for a learnable sink, pass everything after \
         `v_cache` by keyword."
    ),
}
