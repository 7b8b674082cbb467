//! Fuzzing support, shared by the cargo-fuzz targets (`fuzz/`), the `conform` suites and
//! `cargo test` replays.
//!
//! As in wasmtime's `crates/fuzzing`: *generators* turn raw bytes into structured cases,
//! *oracles* decide whether a case exposes a bug, and *harness* functions — one per fuzz target —
//! glue the two (a finding is a panic with a reproducible message). Targets are a few lines that
//! call a harness function, so `tests/fuzz_replay.rs` replays every committed corpus and
//! regression file through exactly the code the fuzzer ran.
//!
//! The oracles are built always: the `conform` suites, which the release binary runs, ask them.
//! Generators, harnesses and corpus reading decode fuzz bytes (`arbitrary`) and exist only with
//! the `internal-testing` feature.

#[cfg(feature = "internal-testing")]
pub mod generators;
#[cfg(feature = "internal-testing")]
pub mod harness;
pub mod oracles;

#[cfg(feature = "internal-testing")]
use std::path::{Path, PathBuf};

/// The files of a corpus (or regression) folder with their bytes, in path order.
#[cfg(feature = "internal-testing")]
pub fn read_corpus(dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut paths = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    paths.sort();
    paths
        .into_iter()
        .map(|path| std::fs::read(&path).map(|bytes| (path, bytes)))
        .collect()
}
