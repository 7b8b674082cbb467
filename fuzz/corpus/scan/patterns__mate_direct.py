# mate's own entry point: `learnable_sink` sits at position 23, and `sinks` is not its name.
import mate


def decode(q, k_cache, v_cache, seqlens, page_table, sinks):
    out = mate.flash_attn_with_kvcache(  # call: mate
        q, k_cache, v_cache, cache_seqlens=seqlens, page_table=page_table, causal=True,
        sinks=sinks,  # expect: FA3M003
    )
    return out
