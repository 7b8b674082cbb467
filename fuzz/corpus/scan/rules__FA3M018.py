# FA3M018: unpacked arguments hide what is passed; rules on present literals still apply.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def forward(q, k_cache, v_cache, args, kwargs):
    flash_attn_with_kvcache(q, k_cache, v_cache, **kwargs)
    flash_attn_with_kvcache(*args, ver=4)
