# None of these calls reach a known entry point.
import sgl_kernel


def flash_attn_with_kvcache(q, k, v, ver=3):
    return q


def calls(q, k, v, obj):
    flash_attn_with_kvcache(q, k, v, ver=4)
    obj.flash_attn_with_kvcache(q, k, v, ver=4)
    sgl_kernel.flash_attn_with_kvcache(q, k, v, ver=4)
