# One name bound to two entry points: the call is checked against both.
from utils import is_musa

if is_musa():
    from sglang.srt.hardware_backend.musa.attention.flashattention_backend import (
        flash_attn_with_kvcache,
    )
else:
    from sgl_kernel.flash_attn import flash_attn_with_kvcache


def decode(q, k, v, md):
    return flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel, sglang-musa
