# FA3M021: imported from a module the scan does not model; its calls are not checked.
from flash_attn_npu_v3 import flash_attn_with_kvcache
from vendor.kernels import flash_attn_with_kvcache as vendor_fa


def decode(q, k_cache, v_cache):
    flash_attn_with_kvcache(q, k_cache, v_cache)
    vendor_fa(q, k_cache, v_cache)
