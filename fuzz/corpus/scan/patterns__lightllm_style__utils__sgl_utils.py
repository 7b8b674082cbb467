# Optional kernels, re-exported for the model code (the pattern of lightllm's utils/sgl_utils.py).
try:
    from sgl_kernel.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache
except ImportError:
    flash_attn_varlen_func = None
    flash_attn_with_kvcache = None
