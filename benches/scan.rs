//! Scan throughput in bytes of Python per second over synthetic trees.
//!
//! `mixed`: 2000 files (about 20 MB), one in 50 calls `flash_attn_with_kvcache` (an inference
//! engine's shape: the rest is model and utility code, read and searched but not parsed).
//! `all-call`: 200 files that all import and call it, so every byte is parsed with tree-sitter and
//! resolved: the parser-bound worst case.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fa3conform::scan::{Selection, scan_paths};
use fa3conform::tensor::DEFAULT_MEMORY_CAP;
use std::fmt::Write;
use std::path::Path;

/// Functions per file; each is about 400 bytes, so files are about 10 KB.
const FUNCTIONS: usize = 25;

/// Model-like Python: a class with methods, comments, docstrings, literals and nested calls.
fn module_source(seed: usize, calls_attention: bool) -> String {
    let mut s = String::new();
    s.push_str(
        "\"\"\"Synthetic module for the scan benchmark.\"\"\"\nimport math\n\nimport torch\n",
    );
    if calls_attention {
        s.push_str("from sgl_kernel.flash_attn import flash_attn_with_kvcache\n");
    }
    writeln!(s, "\n\nclass Layer{seed}(torch.nn.Module):").unwrap();
    for f in 0..FUNCTIONS {
        writeln!(
            s,
            "    def forward_{f}(self, x, cache=None, *, scale: float = {f}.5):\n        \
             \"\"\"Step {f} of layer {seed}.\"\"\"\n        \
             # Mix the activations; keep shapes as [batch, seq, heads, dim].\n        \
             y = torch.matmul(x, self.weight_{f}.t()) * math.sqrt(scale)\n        \
             if cache is not None and cache.get(\"k{f}\") is not None:\n            \
             y = y + cache[\"k{f}\"][..., :{f}] / (1 + {f})\n        \
             values = [v * 2 for v in range({f}) if v % 3 == 0]\n        \
             return torch.nn.functional.gelu(y) + sum(values), {{\"step\": {f}}}\n"
        )
        .unwrap();
    }
    if calls_attention {
        s.push_str(
            "    def attend(self, q, k_cache, v_cache, seqlens, cu, md):\n        \
             return flash_attn_with_kvcache(\n            \
             q, k_cache, v_cache, cache_seqlens=seqlens, cu_seqlens_q=cu,\n            \
             scheduler_metadata=md, softcap=-1.0, ver=4,\n        )\n",
        );
    }
    s
}

fn write_tree(dir: &Path, files: usize, call_every: usize) -> u64 {
    let mut bytes = 0;
    for i in 0..files {
        let package = dir.join(format!("pkg{}", i % 40));
        std::fs::create_dir_all(&package).unwrap();
        let source = module_source(i, i % call_every == 0);
        bytes += source.len() as u64;
        std::fs::write(package.join(format!("layer_{i}.py")), source).unwrap();
    }
    bytes
}

fn bench_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("scan");
    group.sample_size(10);
    for (name, files, call_every) in [("mixed", 2000, 50), ("all-call", 200, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write_tree(dir.path(), files, call_every);
        let expected_calls = files.div_ceil(call_every);
        let root = [dir.path().to_path_buf()];
        assert_eq!(
            scan_paths(&root, &Selection::default(), DEFAULT_MEMORY_CAP)
                .unwrap()
                .calls
                .len(),
            expected_calls
        );
        group.throughput(Throughput::Bytes(bytes));
        group.bench_function(name, |b| {
            b.iter(|| scan_paths(&root, &Selection::default(), DEFAULT_MEMORY_CAP).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench_scan);
criterion_main!(benches);
