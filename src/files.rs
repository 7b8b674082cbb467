//! Files a user names, read and written defensively: a read takes at most a cap's worth of bytes
//! whatever the file is (a size reported by the file system is no bound: `/dev/zero` and pipes
//! report 0), and a write never goes through a symbolic link.

use crate::memory::{Budget, OverBudget};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// A file that could not be read or written; `path` is `<stdin>` for standard input. The
/// message says it all: the I/O error is part of it, not a source under it.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {path}: {error}")]
    Read { path: String, error: io::Error },
    #[error(
        "reading {path}: more than {cap} bytes, over the memory cap (raise it with --memory-cap)"
    )]
    OverCap { path: String, cap: usize },
    #[error("reading {path}: not UTF-8 text ({error})")]
    NotText {
        path: String,
        error: std::string::FromUtf8Error,
    },
    #[error("reading {path}: {over}")]
    OverBudget { path: String, over: OverBudget },
    #[error("writing {path}: {error}")]
    Write { path: PathBuf, error: io::Error },
    #[error("writing {path}: it is a symbolic link, and fa3conform writes through none")]
    Symlink { path: PathBuf },
}

/// At most `cap` bytes of `reader`, named `name` in errors: one byte past the cap is read, and
/// reaching it is the error.
pub fn read_bounded(reader: impl Read, name: &str, cap: usize) -> Result<Vec<u8>, FileError> {
    read_bounded_into(Vec::new(), reader, name, cap)
}

/// [`read_bounded`] appending to `bytes`, which may hold the capacity the input is expected to
/// need: a vector that grows by doubling holds twice its contents for a while, which a cap on the
/// process's memory would count.
fn read_bounded_into(
    mut bytes: Vec<u8>,
    reader: impl Read,
    name: &str,
    cap: usize,
) -> Result<Vec<u8>, FileError> {
    reader
        .take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::Read {
            path: name.to_string(),
            error,
        })?;
    if bytes.len() > cap {
        return Err(FileError::OverCap {
            path: name.to_string(),
            cap,
        });
    }
    Ok(bytes)
}

/// The bytes of the file `path` (following links, as any reader does), at most `cap` of them.
pub fn read(path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|error| FileError::Read {
        path: name.clone(),
        error,
    })?;
    // The size a file system reports is a hint (0 for devices and pipes), capped; one byte more
    // lets reading reach the end without growing the vector.
    let hint = file.metadata().map_or(0, |m| m.len()).min(cap as u64) as usize;
    read_bounded_into(Vec::with_capacity(hint + 1), file, &name, cap)
}

/// The text of `path`, or of standard input for `-`, held in `budget`, with `parsed` more bytes
/// for what the caller builds from the text (the bound on its parsed form), also held.
pub fn read_text_within(
    path: &Path,
    budget: &mut Budget,
    parsed: impl FnOnce(&str) -> u128,
) -> Result<String, FileError> {
    let text = read_text(path, budget.left())?;
    budget
        .hold("its text", text.len() as u128)
        .and_then(|()| budget.hold("its parsed form", parsed(&text)))
        .map_err(|over| FileError::OverBudget {
            path: display_name(path),
            over,
        })?;
    Ok(text)
}

/// The text of `path`, or of standard input for `-`, at most `cap` bytes of it.
pub fn read_text(path: &Path, cap: usize) -> Result<String, FileError> {
    let name = display_name(path);
    let bytes = match path.as_os_str() == "-" {
        true => read_bounded(io::stdin().lock(), &name, cap)?,
        false => read(path, cap)?,
    };
    String::from_utf8(bytes).map_err(|error| FileError::NotText { path: name, error })
}

/// How errors name `path`: `<stdin>` for `-`.
fn display_name(path: &Path) -> String {
    match path.as_os_str() == "-" {
        true => "<stdin>".to_string(),
        false => path.display().to_string(),
    }
}

/// Refuses `path` when it is a symbolic link (to anything, or dangling).
pub fn refuse_symlink(path: &Path) -> Result<(), FileError> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => Err(FileError::Symlink {
            path: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Creates the folder `dir` (and its missing parents) unless it exists; a folder that is a
/// symbolic link is refused.
pub fn create_dir(dir: &Path) -> Result<(), FileError> {
    refuse_symlink(dir)?;
    std::fs::create_dir_all(dir).map_err(|error| FileError::Write {
        path: dir.to_path_buf(),
        error,
    })
}

/// Writes `bytes` to a new file at `path`, replacing a regular file there. A symbolic link at
/// `path` is refused, and one put there meanwhile is not followed: the file is created with
/// `O_CREAT | O_EXCL`, which fails on any existing name, links included.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let error = |error| FileError::Write {
        path: path.to_path_buf(),
        error,
    };
    refuse_symlink(path)?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists if refuse_symlink(path).is_err() => FileError::Symlink {
                path: path.to_path_buf(),
            },
            _ => error(e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn reads_stop_one_byte_past_the_cap_whatever_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("spec.json");
        symlink("/dev/zero", &zero).unwrap();
        let error = read(&zero, 1 << 16).unwrap_err();
        assert!(
            matches!(error, FileError::OverCap { cap: 65536, .. }),
            "{error}"
        );
        assert!(error.to_string().ends_with(
            "spec.json: more than 65536 bytes, over the memory cap (raise it with --memory-cap)"
        ));
        let text = dir.path().join("t.json");
        std::fs::write(&text, "12345").unwrap();
        assert_eq!(read_text(&text, 5).unwrap(), "12345");
        assert!(matches!(
            read_text(&text, 4),
            Err(FileError::OverCap { .. })
        ));
        std::fs::write(&text, [0xff, 0xfe]).unwrap();
        assert!(
            read_text(&text, 5)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8 text")
        );
    }

    /// A writer that never stops (a FIFO fed by `yes`, a device) is read to the cap only.
    #[test]
    fn an_endless_fifo_is_read_to_the_cap_only() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("calls.jsonl");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            move || {
                let mut file = OpenOptions::new().write(true).open(&fifo).unwrap();
                let chunk = [b'x'; 4096];
                // Stops when the reader closes its end (EPIPE).
                while file.write_all(&chunk).is_ok() {}
            }
        });
        assert!(matches!(
            read(&fifo, 1 << 20),
            Err(FileError::OverCap { .. })
        ));
        writer.join().unwrap();
    }

    #[test]
    fn writes_go_through_no_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        let link = dir.path().join("call.json");
        symlink(&outside, &link).unwrap();
        let error = write_new(&link, b"new").unwrap_err().to_string();
        assert!(
            error.ends_with("is a symbolic link, and fa3conform writes through none"),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        // A dangling link would be created through by an ordinary write.
        let dangling = dir.path().join("expected.json");
        symlink(dir.path().join("made.txt"), &dangling).unwrap();
        assert!(write_new(&dangling, b"new").is_err());
        assert!(!dir.path().join("made.txt").exists());
        // A regular file is replaced.
        let plain = dir.path().join("plain.json");
        std::fs::write(&plain, "old").unwrap();
        write_new(&plain, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "new");

        let linked_dir = dir.path().join("case");
        symlink(dir.path(), &linked_dir).unwrap();
        assert!(matches!(
            create_dir(&linked_dir),
            Err(FileError::Symlink { .. })
        ));
        create_dir(&dir.path().join("a/b")).unwrap();
    }
}
