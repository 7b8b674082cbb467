# FA3M002: `ver` is computed, so the gate's outcome is unknown.
from sgl_kernel.flash_attn import flash_attn_with_kvcache


def decode(q, k_cache, v_cache, cu, md, cfg, fa_version):
    flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=cu, scheduler_metadata=md, ver=fa_version)
    flash_attn_with_kvcache(
        q, k_cache, v_cache,
        cu_seqlens_q=cu,
        scheduler_metadata=md,
        ver=cfg.fa_impl_ver,
    )
