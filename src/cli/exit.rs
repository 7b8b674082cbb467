//! Exit codes. Codes are added, never reused or renumbered: scripts depend on them.

use std::process::ExitCode;

/// Help text listing the exit codes (shown by `--help`).
pub const EXIT_CODES_HELP: &str = "Exit codes:
  0  conformant: every case passed / every call accepted by musa without error hazards
  1  findings: a case failed, a call is rejected or has an error-severity hazard
  2  usage or input error: bad arguments, unreadable or malformed input
  3  internal error: a bug in fa3conform";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Success = 0,
    Failure = 1,
    Error = 2,
    Internal = 3,
}

impl ExitStatus {
    /// The status a library entry point reported as a raw code (0–3).
    pub fn from_code(code: u8) -> ExitStatus {
        match code {
            0 => ExitStatus::Success,
            1 => ExitStatus::Failure,
            2 => ExitStatus::Error,
            _ => ExitStatus::Internal,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status as u8)
    }
}
