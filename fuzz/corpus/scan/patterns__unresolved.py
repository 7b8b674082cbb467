# A vendor build the scan does not model: it says so instead of staying silent.
from flash_attn_npu_v3 import flash_attn_with_kvcache  # expect: FA3M021


def decode(q, k_cache, v_cache, seqlens):
    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens)
