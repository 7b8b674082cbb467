# FA3M009: an int cache_seqlens with a paged cache is expanded to the page count on MUSA.
from sgl_kernel.flash_attn import flash_attn_with_kvcache as sgl_fa
from flash_attn_interface import flash_attn_with_kvcache as fa3


def paged(q, k_pages, v_pages, pt, cu, md):
    sgl_fa(q, k_pages, v_pages, cache_seqlens=128, page_table=pt, cu_seqlens_q=cu, scheduler_metadata=md)
    fa3(q, k_pages, v_pages, cache_seqlens=256, page_table=pt)
    # Not reported: no page table.
    fa3(q, k_pages, v_pages, cache_seqlens=256)
