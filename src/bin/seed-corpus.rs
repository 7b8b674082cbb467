//! Writes the committed seed corpora of the fuzz targets (`fuzz/corpus/<target>/`),
//! deterministically: the example and catalogue calls, one small file each, for `call_spec`
//! (libFuzzer mutates small inputs best, and the corpus stays small); seeded byte strings for the
//! byte-driven generators of `validate`, `differential` and `metadata`.
//!
//! `cargo run --features internal-testing --bin seed-corpus`

use fa3conform::spec::{call_to_json, parse_specs};
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
    Ok(())
}
