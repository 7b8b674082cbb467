//! Exit codes. Codes are added, never reused or renumbered: scripts depend on them.

use crate::report::Status;

/// Help text listing the exit codes (shown by `--help`).
pub const EXIT_CODES_HELP: &str = "Exit codes:
  0  conformant: every case passed / every call accepted by musa without error hazards
  1  findings: a case failed, a call is rejected or has an error-severity hazard
  2  usage or input error: bad arguments, unreadable or malformed input
  3  internal error: a bug in fa3conform";

/// The exit code of a run that ended with `status` (for `std::process::ExitCode::from`).
pub fn exit_code(status: Status) -> u8 {
    match status {
        Status::Success => 0,
        Status::Findings => 1,
        Status::InputError => 2,
        Status::Internal => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_rise_with_precedence_and_match_the_help() {
        let statuses = [
            Status::Success,
            Status::Findings,
            Status::InputError,
            Status::Internal,
        ];
        for (code, status) in statuses.into_iter().enumerate() {
            assert_eq!(usize::from(exit_code(status)), code);
            assert!(EXIT_CODES_HELP.contains(&format!("\n  {code}  ")));
        }
    }
}
