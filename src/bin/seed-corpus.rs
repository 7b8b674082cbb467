//! Writes the committed seed corpora of the fuzz targets (`fuzz/corpus/<target>/`),
//! deterministically: the example and catalogue calls, one small file each, for `call_spec`
//! (libFuzzer mutates small inputs best, and the corpus stays small); seeded byte strings for the
//! byte-driven generators of `validate`, `differential` and `metadata`; for `scan`, a small tree in
//! the NUL-separated form of `fuzzing::scan::python_tree` (its other seeds are the scan fixtures
//! themselves, `tests/scan/fixtures/`, which .ci/fuzz-smoke passes as a second corpus folder);
//! for `bundle`, bundles of two small calls as `export` writes them, each with the result a correct
//! device leaves (the call's numbers, or its exception), in the form of
//! `fuzzing::generators::bundle_files`.
//!
//! `cargo run --features internal-testing --bin seed-corpus`

use fa3conform::bridge::bundle::{RESULT_JSON, RESULT_TENSORS, names};
use fa3conform::bridge::{
    Pools, StoredTensor, TensorFile, bundle_for, write_bundle, write_tensor_file,
};
use fa3conform::fuzzing::generators::{BUNDLE_FILES, bundle_bytes};
use fa3conform::spec::{call_to_json, parse_specs};
use fa3conform::validate::profiles;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

const BYTE_SEEDS: usize = 48;
const BYTE_LEN: usize = 384;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("fuzz/corpus");
    let specs = corpus.join("call_spec");
    std::fs::create_dir_all(&specs)?;
    for dir in ["examples", "tests/catalog"] {
        for entry in std::fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            // Forward passes (`forward-*.json`) are another format.
            if name.starts_with("forward-")
                || !(name.ends_with(".json") || name.ends_with(".jsonl"))
            {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let calls = parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for call in calls {
                std::fs::write(
                    specs.join(format!("{}.json", call.id)),
                    call_to_json(&call).to_string(),
                )?;
            }
        }
    }
    // Metadata cases run the kernel several times each: fewer seeds keep the replay test short.
    for (target, seed, count) in [
        ("validate", 1u64, BYTE_SEEDS),
        ("differential", 2, BYTE_SEEDS),
        ("metadata", 3, 8),
    ] {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for i in 0..count {
            let mut bytes = vec![0u8; BYTE_LEN];
            rng.fill_bytes(&mut bytes);
            std::fs::write(dir.join(format!("seed-{i:03}")), bytes)?;
        }
    }
    write_scan_tree(&corpus.join("scan"))?;
    write_bundles(&corpus.join("bundle"))
}

/// Two small decode calls, one accepted and one rejected (`ver=2`): libFuzzer mutates small
/// inputs best.
const BUNDLE_CALLS: [&str; 2] = [
    r#"{"id": "decode", "args": {"q": {"tensor": {"shape": [2, 1, 4, 64], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [2, 32, 2, 64], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [2, 32, 2, 64], "dtype": "bfloat16"}},
        "cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32", "values": [5, 17]}},
        "causal": true, "return_softmax_lse": true}}"#,
    r#"{"id": "decode-ver2", "args": {"q": {"tensor": {"shape": [1, 1, 4, 64], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [1, 16, 2, 64], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [1, 16, 2, 64], "dtype": "bfloat16"}},
        "ver": 2}}"#,
];

fn write_bundles(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let musa = profiles::by_name("musa").expect("the musa profile");
    for text in BUNDLE_CALLS {
        let call = parse_specs(text).expect("the seed calls parse").remove(0);
        let bundle = bundle_for(&call, musa, 1 << 20, Pools::Slim);
        let folder =
            std::env::temp_dir().join(format!("fa3conform-seed-bundle-{}", std::process::id()));
        if folder.exists() {
            std::fs::remove_dir_all(&folder)?;
        }
        std::fs::create_dir_all(&folder)?;
        write_bundle(&folder, &bundle).expect("the bundle is written");
        let result = match &bundle.expected {
            Some(expected) => {
                // `out` in the dtype the stack returns it in, `softmax_lse` in float32.
                let out = expected.tensors[names::OUT].to_host();
                let values: Vec<f64> = out.data.iter().copied().collect();
                let out = StoredTensor::from_values(expected.out_dtype, out.data.shape(), &values);
                let tensors = TensorFile::from([
                    (names::OUT.to_string(), out),
                    (names::LSE.to_string(), expected.tensors[names::LSE].clone()),
                ]);
                write_tensor_file(&folder.join(RESULT_TENSORS), &tensors)
                    .expect("the result tensors are written");
                let types = vec!["Tensor"; expected.returned_values];
                serde_json::json!({"schema_version": 1, "outcome": "returned",
                    "returned": {"tuple": expected.returned_values > 1, "types": types}})
            }
            None => {
                let verdict = bundle.verdict("musa").expect("a musa verdict");
                serde_json::json!({"schema_version": 1, "outcome": "raised",
                    "exception": verdict.exception, "message": verdict.message})
            }
        };
        std::fs::write(folder.join(RESULT_JSON), result.to_string())?;
        let mut files = Vec::new();
        for name in BUNDLE_FILES {
            match std::fs::read(folder.join(name)) {
                Ok(content) => files.push((name, content)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        std::fs::remove_dir_all(&folder)?;
        std::fs::write(dir.join(&call.id), bundle_bytes(&files))?;
    }
    Ok(())
}

/// A tree across the four files of `fuzzing::scan::python_tree`: a re-export through the package,
/// and SGLang's MUSA backend module with its own wrapper.
const SCAN_TREE: [&str; 4] = [
    "from pkg import attention\n\ndef decode(q, k, v):\n    o, lse = attention(q, k, v, ver=4, return_softmax_lse=True)\n",
    "from .attn import attention\n",
    "from sgl_kernel.flash_attn import flash_attn_with_kvcache as attention\n",
    "from flash_attn_interface import flash_attn_with_kvcache as mate_fa\n\n\
     def flash_attn_with_kvcache(q, k_cache, v_cache, ver=3, **kwargs):\n    \
     return mate_fa(q, k_cache, v_cache, **kwargs)\n\n\
     def decode(q, k, v):\n    return flash_attn_with_kvcache(q, k, v)\n",
];

fn write_scan_tree(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("tree-re-export-and-musa-wrapper"),
        SCAN_TREE.join("\0"),
    )
}
