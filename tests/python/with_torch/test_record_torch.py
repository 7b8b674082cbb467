"""The recorder with real torch tensors: layouts as torch reports them, scalars of every kind,
positional and keyword arguments, and spawn-started worker processes that know their rank."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest
from pathlib import Path

import numpy as np
import torch

from fa3conform import record
from fa3conform.entry_points import EntryPoint

PACKAGE_ROOT = Path(__file__).resolve().parents[3] / "python"
HERE = Path(__file__).resolve().parent


class RecordTorchTest(unittest.TestCase):
    def test_layouts_scalars_and_argument_order_are_recorded_as_passed(self):
        module = types.ModuleType("stack_under_record")
        module.flash_attn_with_kvcache = lambda *args, **kwargs: "out"
        sys.modules[module.__name__] = module
        entry = EntryPoint(module.__name__, "flash_attn_with_kvcache", "test")
        pool = torch.zeros(4, 16, 4, 64, dtype=torch.bfloat16)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "calls.jsonl"
            self.assertEqual(record.install(path, entry_points=[entry]), [entry.name])
            module.flash_attn_with_kvcache(
                torch.zeros(2, 1, 8, 64, dtype=torch.bfloat16),
                pool[:, :, :2],                              # a view: padded token rows
                pool.transpose(1, 2)[:, :2].transpose(1, 2),  # strides torch derives, not row-major
                cache_seqlens=torch.tensor([5, 9], dtype=torch.int32),
                page_table=torch.arange(4, dtype=torch.int32).reshape(2, 2),
                k_descale=torch.ones(1, 1).expand(2, 2),       # SGLang's fp8 descales
                max_seqlen_q=np.int64(1), causal=np.bool_(True),
                softmax_scale=torch.tensor(0.125),             # a 0-d tensor used as a number
                sm_margin=torch.tensor(2, dtype=torch.int64),
                window_size=(-1, -1), return_softmax_lse=True)
            spec = json.loads(path.read_text())
        q, k_cache, v_cache = (p["tensor"] for p in spec["positional"])
        self.assertEqual(q, {"shape": [2, 1, 8, 64], "dtype": "bfloat16", "stride": [512, 512, 64, 1],
                             "device": "cpu"})
        self.assertEqual(k_cache["stride"], [4096, 256, 64, 1])
        self.assertEqual(v_cache["shape"], [4, 16, 2, 64])
        self.assertEqual(v_cache["stride"], [4096, 256, 64, 1])
        args = spec["args"]
        self.assertEqual(list(args), ["cache_seqlens", "page_table", "k_descale", "max_seqlen_q",
                                      "causal", "softmax_scale", "sm_margin", "window_size",
                                      "return_softmax_lse"])
        self.assertEqual(args["cache_seqlens"]["tensor"]["values"], [5, 9])
        self.assertEqual(args["page_table"]["tensor"]["values"], [0, 1, 2, 3])
        self.assertEqual(args["k_descale"]["tensor"], {"shape": [2, 2], "dtype": "float32",
                                                       "stride": [0, 0], "device": "cpu"})
        self.assertEqual(args["max_seqlen_q"], {"numpy": {"dtype": "int64", "value": 1}})
        self.assertEqual(args["causal"], {"numpy": {"dtype": "bool", "value": True}})
        self.assertEqual(args["softmax_scale"]["tensor"],
                         {"shape": [], "dtype": "float32", "stride": [], "device": "cpu", "values": [0.125]})
        self.assertEqual(args["sm_margin"]["tensor"]["values"], [2])

    def test_spawned_workers_record_into_files_named_by_their_rank(self):
        server = textwrap.dedent("""
            import multiprocessing as mp, os, sys
            import torch, torch.distributed as dist

            def worker(rank):
                dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1],
                                        rank=rank, world_size=2)
                from fake_sglang_attention import flash_attn_with_kvcache  # after start-up
                cache = torch.zeros(4, 16, 2, 64, dtype=torch.bfloat16)
                for step in range(3):  # decode steps: one signature per rank
                    flash_attn_with_kvcache(torch.zeros(2, 1, 4, 64, dtype=torch.bfloat16), cache,
                        cache, cache_seqlens=torch.tensor([step + 1, step + 2], dtype=torch.int32),
                        page_table=torch.arange(4, dtype=torch.int32).reshape(2, 2), ver=3)
                dist.destroy_process_group()

            if __name__ == "__main__":
                workers = [mp.get_context("spawn").Process(target=worker, args=(r,)) for r in (0, 1)]
                [w.start() for w in workers]
                [w.join() for w in workers]
                sys.exit(max(w.exitcode for w in workers))
            """)
        with tempfile.TemporaryDirectory() as tmp:
            stack = Path(tmp) / "stack"
            stack.mkdir()
            (stack / "server.py").write_text(server)
            (stack / "fake_sglang_attention.py").write_text(
                "from torch_target import flash_attn_with_kvcache as _impl\n"
                "def flash_attn_with_kvcache(*args, ver=3, **kwargs):\n"
                "    return _impl(*args, ver=ver, **kwargs)\n")
            port = str(29500 + os.getpid() % 1000)
            done = subprocess.run(
                [sys.executable, "-m", "fa3conform.record", "--out", str(Path(tmp) / "calls"),
                 "--entry-point", "fake_sglang_attention:flash_attn_with_kvcache", "--",
                 sys.executable, str(stack / "server.py"), port],
                env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(stack), str(HERE)])),
                cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=300)
            files = sorted(p.name.split("-pid")[0] for p in (Path(tmp) / "calls").glob("calls-*.jsonl"))
            lines = [json.loads(line) for p in sorted((Path(tmp) / "calls").glob("calls-*.jsonl"))
                     for line in p.read_text().splitlines()]
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(files, ["calls-rank0", "calls-rank1"])
        self.assertEqual(len(lines), 2, "one signature per process")
        self.assertEqual([line["args"]["cache_seqlens"]["tensor"]["values"] for line in lines],
                         [[1, 2], [1, 2]])
        self.assertEqual(len({line["id"] for line in lines}), 2, "ids are unique across processes")
        self.assertTrue(all(line["args"]["ver"] == 3 for line in lines))


if __name__ == "__main__":
    unittest.main()
