"""The torch stand-in, except that a decode batch of 3 requests kills the process (a segfault, as
a device fault ends one): the runner must record that against the case and go on."""

import ctypes

from torch_target import flash_attn_with_kvcache as attend


def flash_attn_with_kvcache(q, k_cache, v_cache, *args, **kwargs):
    if q.dim() == 4 and q.shape[0] == 3:
        ctypes.string_at(0)
    return attend(q, k_cache, v_cache, *args, **kwargs)
