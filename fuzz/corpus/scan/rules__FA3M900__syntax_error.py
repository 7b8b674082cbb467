# FA3M900: a syntax error in a file that mentions flash_attn_with_kvcache.
from sgl_kernel.flash_attn import flash_attn_with_kvcache

def broken(q:
    return flash_attn_with_kvcache(q)
