//! What the device runner (`python -m fa3conform.run`) left in a bundle: `result.json`, always,
//! and `result.safetensors` when the call returned.
//!
//! `result.json` holds `schema_version`, `outcome` and, per outcome: `returned` (`returned`:
//! `tuple`, `types` of the returned values), `raised` (`exception`, `message`, `traceback`),
//! `skipped` (`reason`: the runner cannot reproduce the case), `crashed` (`exit_code`, `signal`,
//! `signal_name`, `stderr_tail`: the worker process died in the call) or `timed_out` (`timeout_s`,
//! `stderr_tail`); and `runner`: the target's module, file, distribution and version, the backend,
//! the device and its name.

use super::bundle::{BundleError, RESULT_JSON, RESULT_TENSORS};
use super::tensors::{TensorFile, read_tensor_file};
use crate::files::FileError;
use crate::memory::Budget;
use crate::spec::read_json_text;
use serde::Deserialize;
use std::path::Path;

/// The `result.json` layout this fa3conform reads.
pub const RESULT_SCHEMA_VERSION: u32 = 1;

/// What the call returned, as Python saw it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Returned {
    /// A tuple or list (`out, lse, *rest`), not a single value.
    pub tuple: bool,
    /// `type(x).__name__` of each returned value (one for a single value).
    pub types: Vec<String>,
}

impl Returned {
    /// The values returned: the tuple's length, 1 for a single value.
    pub fn arity(&self) -> usize {
        self.types.len()
    }
}

/// One case's outcome on the device.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    Returned {
        returned: Returned,
        tensors: TensorFile,
    },
    Raised {
        exception: String,
        message: String,
    },
    /// The runner could not reproduce the case.
    Skipped(String),
    /// The process died in the call, or the call did not finish in time: what happened, in words.
    Failed(String),
    /// The runner never reached the case.
    Missing,
}

#[derive(Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Record {
    Returned {
        returned: Returned,
    },
    Raised {
        exception: String,
        message: String,
    },
    Skipped {
        reason: String,
    },
    Crashed {
        exit_code: Option<i64>,
        signal_name: Option<String>,
        #[serde(default)]
        stderr_tail: String,
    },
    TimedOut {
        timeout_s: f64,
        #[serde(default)]
        stderr_tail: String,
    },
}

#[derive(Deserialize)]
struct ResultJson {
    schema_version: u32,
    #[serde(flatten)]
    record: Record,
}

/// The last `lines` lines of `text`, indented, after a heading; nothing when it is blank.
fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.trim_end().lines().collect();
    if kept.is_empty() {
        return String::new();
    }
    let start = kept.len().saturating_sub(lines);
    format!("; its stderr ended with:\n{}", kept[start..].join("\n"))
}

/// Reads what the runner left in the bundle `dir` within `budget` (see [`read_tensor_file`]).
pub fn read_result(dir: &Path, budget: &mut Budget) -> Result<RunOutcome, BundleError> {
    let path = dir.join(RESULT_JSON);
    let text = match read_json_text(&path, budget) {
        Ok(text) => text,
        Err(FileError::Read { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(RunOutcome::Missing);
        }
        Err(e) => return Err(e.into()),
    };
    let invalid = |message: String| BundleError::Invalid {
        path: path.clone(),
        message,
    };
    let json: ResultJson = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if json.schema_version != RESULT_SCHEMA_VERSION {
        return Err(invalid(format!(
            "schema_version {} (this fa3conform reads {RESULT_SCHEMA_VERSION}): run the bundles \
             again with this fa3conform's runner",
            json.schema_version
        )));
    }
    Ok(match json.record {
        Record::Returned { returned } => RunOutcome::Returned {
            returned,
            tensors: read_tensor_file(&dir.join(RESULT_TENSORS), budget)?,
        },
        Record::Raised { exception, message } => RunOutcome::Raised { exception, message },
        Record::Skipped { reason } => RunOutcome::Skipped(reason),
        Record::Crashed {
            exit_code,
            signal_name,
            stderr_tail,
        } => {
            let how = match (signal_name, exit_code) {
                (Some(signal), _) => format!("killed by {signal}"),
                (None, Some(code)) => format!("exit status {code}"),
                (None, None) => "no exit status".to_string(),
            };
            RunOutcome::Failed(format!(
                "the process running the call died ({how}){}",
                tail(&stderr_tail, 12)
            ))
        }
        Record::TimedOut {
            timeout_s,
            stderr_tail,
        } => RunOutcome::Failed(format!(
            "the call did not finish within {timeout_s} s and was killed{}",
            tail(&stderr_tail, 12)
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome_of(json: &str) -> Result<RunOutcome, BundleError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(RESULT_JSON), json).unwrap();
        read_result(dir.path(), &mut Budget::new(1 << 20))
    }

    #[test]
    fn failures_are_told_in_words() {
        let crashed = outcome_of(
            r#"{"schema_version": 1, "outcome": "crashed", "exit_code": -11, "signal": 11,
                "signal_name": "SIGSEGV", "stderr_tail": "warming up\nFatal Python error: Segmentation fault\n\n",
                "runner": {}}"#,
        )
        .unwrap();
        assert_eq!(
            crashed,
            RunOutcome::Failed(
                "the process running the call died (killed by SIGSEGV); its stderr ended with:\n\
                 warming up\nFatal Python error: Segmentation fault"
                    .into()
            )
        );
        let timed_out = outcome_of(
            r#"{"schema_version": 1, "outcome": "timed_out", "timeout_s": 5.0, "stderr_tail": ""}"#,
        )
        .unwrap();
        assert_eq!(
            timed_out,
            RunOutcome::Failed("the call did not finish within 5 s and was killed".into())
        );
    }

    #[test]
    fn missing_and_malformed_results() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_result(dir.path(), &mut Budget::new(1 << 20)).unwrap(),
            RunOutcome::Missing
        );
        let old = outcome_of(r#"{"exception": "ValueError", "message": "x"}"#).unwrap_err();
        assert!(old.to_string().contains("missing field"), "{old}");
        let newer = outcome_of(r#"{"schema_version": 2, "outcome": "skipped", "reason": "r"}"#)
            .unwrap_err();
        assert!(
            newer
                .to_string()
                .ends_with("schema_version 2 (this fa3conform reads 1): run the bundles again with this fa3conform's runner"),
            "{newer}"
        );
    }
}
