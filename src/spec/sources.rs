//! Where call specs come from: files, standard input (`-`), and folders of recorded call files.
//!
//! A folder stands for the `*.jsonl` and `*.json` files directly in it, in name order: what
//! `python -m fa3conform.record --out DIR` writes, one file per process. Recorded calls (those with
//! a `recorded` note) that are the same call — every process of a tensor-parallel server records
//! the same decode step — are kept once, the first in file order; hand-written specs are all kept.

use super::{SpecError, call_to_json, parse_each};
use crate::call::{Device, KvCacheCall};
use crate::files::FileError;
use crate::memory::Budget;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// Calls read from the sources, in order.
#[derive(Debug, Default)]
pub struct CallSet {
    pub calls: Vec<KvCacheCall>,
    /// Calls that could not be read (a bad JSON line, an invalid array element), in file order;
    /// the other calls of their file are in `calls`.
    pub invalid: Vec<InvalidCall>,
    /// Files read (a folder counts its files).
    pub files: usize,
    /// Recorded calls dropped as repeats of an earlier one.
    pub duplicates: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path}: {error}")]
    Spec { path: String, error: SpecError },
}

/// One call of a file that could not be read; `error.path` starts with its line (`line 3`) or
/// array element (`[2]`) when the file holds several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {error}")]
pub struct InvalidCall {
    pub file: String,
    pub error: SpecError,
}

impl CallSet {
    /// The calls, or the first call that could not be read: for commands that take all calls or
    /// none.
    pub fn into_calls(self) -> Result<Vec<KvCacheCall>, SourceError> {
        match self.invalid.into_iter().next() {
            Some(InvalidCall { file, error }) => Err(SourceError::Spec { path: file, error }),
            None => Ok(self.calls),
        }
    }
}

fn read_error(path: &Path, e: impl std::fmt::Display) -> SourceError {
    SourceError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The call files of a folder, in name order.
fn folder_files(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_error(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("jsonl" | "json")
                )
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(read_error(
            dir,
            "a folder with no call files (*.jsonl, *.json) in it",
        ));
    }
    Ok(files)
}

/// What makes two recorded calls the same call: everything but the id and the recorder's note,
/// as the 128-bit XXH3 digest of its JSON form (streamed into the hasher, never into a string:
/// the digest is on certify's hot path).
fn identity(call: &KvCacheCall) -> u128 {
    let mut json = call_to_json(call);
    if let Some(obj) = json.as_object_mut() {
        obj.remove("id");
        obj.remove("recorded");
    }
    let mut digest = Digest(Xxh3::new());
    serde_json::to_writer(&mut digest, &json).expect("a hasher takes every write");
    digest.0.digest128()
}

/// A hasher as an `io::Write`, for serde_json's writer.
struct Digest(Xxh3);

impl io::Write for Digest {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads every source in order: files, `-` for standard input, folders of call files. A call that
/// cannot be read is kept in [`CallSet::invalid`] and the others are still read; a source that
/// cannot be read at all, holds no call specs or does not fit in `budget`, is the error. The
/// calls stay held in `budget` at the bound on their files' parsed form (the text is released).
pub fn read_calls(sources: &[PathBuf], budget: &mut Budget) -> Result<CallSet, SourceError> {
    let mut set = CallSet::default();
    let mut seen = HashSet::new();
    for source in sources {
        let files = if source.is_dir() {
            folder_files(source)?
        } else {
            vec![source.clone()]
        };
        for file in files {
            let text = super::read_json_text(&file, budget)?;
            let name = file.display().to_string();
            let calls = parse_each(&text).map_err(|error| SourceError::Spec {
                path: name.clone(),
                error,
            })?;
            budget.release(text.len() as u128);
            set.files += 1;
            for call in calls {
                match call {
                    Err(error) => set.invalid.push(InvalidCall {
                        file: name.clone(),
                        error,
                    }),
                    Ok(call) if call.recorded.is_some() && !seen.insert(identity(&call)) => {
                        set.duplicates += 1;
                    }
                    Ok(call) => set.calls.push(call),
                }
            }
        }
    }
    Ok(set)
}

/// `--device-as`: the call as the device call it stands for when it was recorded on CPU (a test
/// run, a CPU dry run of a server): every tensor on `cpu` goes to `device`.
pub fn cpu_tensors_on(call: &mut KvCacheCall, device: Device) {
    for (_, t) in call.tensors_mut() {
        if t.device == Some(Device::Cpu) {
            t.device = Some(device);
        }
    }
}

/// Parses `--device-as`: an accelerator a CPU recording stands for.
pub fn parse_device_as(name: &str) -> Result<Device, String> {
    match Device::from_name(name) {
        Some(Device::Cpu) | None => Err(format!("expected musa or cuda, not `{name}`")),
        Some(device) => Ok(device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, batch: usize, recorded: bool) -> String {
        let note = if recorded {
            r#", "recorded": {"entry": "m:f"}"#
        } else {
            ""
        };
        format!(
            r#"{{"id": "{id}", "args": {{"q": {{"tensor": {{"shape": [{batch}, 1, 8, 64], "dtype": "bfloat16"}}}}}}{note}}}"#
        )
    }

    #[test]
    fn a_folder_of_recordings_is_merged_and_repeats_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, lines: &[String]| {
            std::fs::write(dir.path().join(name), lines.join("\n") + "\n").unwrap()
        };
        write(
            "calls-tp0-pid1.jsonl",
            &[line("tp0-1", 2, true), line("tp0-2", 3, true)],
        );
        write(
            "calls-tp1-pid2.jsonl",
            &[line("tp1-1", 2, true), line("tp1-2", 4, true)],
        );
        std::fs::write(dir.path().join("notes.txt"), "not a call file").unwrap();
        let set = read_calls(&[dir.path().to_path_buf()], &mut Budget::new(1 << 20)).unwrap();
        let ids: Vec<&str> = set.calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["tp0-1", "tp0-2", "tp1-2"]);
        assert_eq!((set.files, set.duplicates), (2, 1));

        // Hand-written specs are never merged.
        let hand = dir.path().join("hand.json");
        std::fs::write(
            &hand,
            format!("[{}, {}]", line("a", 2, false), line("b", 2, false)),
        )
        .unwrap();
        assert_eq!(
            read_calls(&[hand], &mut Budget::new(1 << 20))
                .unwrap()
                .calls
                .len(),
            2
        );
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_calls(&[dir.path().to_path_buf()], &mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with(": a folder with no call files (*.jsonl, *.json) in it"),
            "{err}"
        );
        std::fs::write(dir.path().join("calls.jsonl"), "").unwrap();
        let err = read_calls(&[dir.path().to_path_buf()], &mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("calls.jsonl: no call specs: the input is empty"),
            "{err}"
        );
    }
}
