from sgl_kernel.flash_attn import *


def decode(q, k, v, md):
    return flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
