"""An SGLang-shaped server for the porter's loop test: a launcher process that starts one
scheduler per tensor-parallel rank with the ``spawn`` method (as SGLang does); each scheduler joins
a gloo process group, holds a paged KV pool of 1.5M tokens (``--page-size 64``) and runs a few
prefill and decode steps through ``sglang.jit_kernel.flash_attention.flash_attn_with_kvcache``
(tests/python/with_torch/sglang/, SGLang's dispatcher with a kernel that only allocates outputs).

    python server.py PORT

The pool lives on the ``meta`` device: the recorder reads shapes, strides and index tensors, never
float data, so a pool of any size costs nothing here. One layer uses an fp8 KV cache with
SGLang's expanded descales (``k_scale.expand(b, heads_k)``); one decode batch has 3 requests.
"""

import multiprocessing as mp
import sys

POOL_TOKENS = 1_500_000
PAGE = 64
HEADS, HEADS_K, HEAD_DIM = 16, 8, 128


def scheduler(tp_rank: int, tp_size: int, port: str):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=tp_rank,
                            world_size=tp_size)
    from sglang.jit_kernel.flash_attention import flash_attn_with_kvcache  # as SGLang's backend does

    heads, heads_k = HEADS // tp_size, HEADS_K // tp_size
    pages = POOL_TOKENS // PAGE

    def pool(dtype):
        return torch.empty(pages, PAGE, heads_k, HEAD_DIM, dtype=dtype, device="meta")

    k_pool, v_pool = pool(torch.bfloat16), pool(torch.bfloat16)
    k_fp8, v_fp8 = pool(torch.float8_e4m3fn), pool(torch.float8_e4m3fn)
    generator = torch.Generator().manual_seed(7)

    def page_table(lengths, width):
        table = torch.zeros(len(lengths), width, dtype=torch.int32)
        for row, length in enumerate(lengths):
            used = -(-length // PAGE)
            table[row, :used] = torch.randperm(pages, generator=generator)[:used].to(torch.int32)
        return table

    def q(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, heads, HEAD_DIM, dtype=dtype, device="meta")

    # Prefill of two requests (extend: the KV was written to the pool before the call).
    lengths = [700, 1100]
    cu = torch.tensor([0, 700, 1800], dtype=torch.int32)
    flash_attn_with_kvcache(q(1800), k_pool, v_pool,
                            cache_seqlens=torch.tensor(lengths, dtype=torch.int32),
                            page_table=page_table(lengths, 32), cu_seqlens_q=cu,
                            max_seqlen_q=1100, causal=True, return_softmax_lse=True)
    # Decode steps: 4 requests, then 3 (one finished).
    for lengths in ([701, 1101, 400, 950], [702, 1102, 401, 951], [703, 1103, 402]):
        flash_attn_with_kvcache(q(len(lengths), 1), k_pool, v_pool,
                                cache_seqlens=torch.tensor(lengths, dtype=torch.int32),
                                page_table=page_table(lengths, 32), causal=True)
    # A layer with an fp8 KV cache: q cast to fp8, descales expanded as SGLang does.
    lengths = [701, 1101, 400, 950]
    k_scale = torch.tensor([[0.5]])
    flash_attn_with_kvcache(q(4, 1, dtype=torch.float8_e4m3fn), k_fp8, v_fp8,
                            cache_seqlens=torch.tensor(lengths, dtype=torch.int32),
                            page_table=page_table(lengths, 32), causal=True,
                            q_descale=k_scale.expand(4, heads_k), k_descale=k_scale.expand(4, heads_k),
                            v_descale=k_scale.expand(4, heads_k))
    dist.destroy_process_group()


if __name__ == "__main__":
    port, tp_size = sys.argv[1], 2
    workers = [mp.get_context("spawn").Process(target=scheduler, args=(rank, tp_size, port))
               for rank in range(tp_size)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    sys.exit(max(worker.exitcode for worker in workers))
