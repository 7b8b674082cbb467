//! `fa3conform verify DIR --profile P`: judges what a real stack did with each bundle.
//!
//! A rejection must be reproduced exactly (exception class and `str(exc)`); an accepted call must
//! return, with `out` (and `softmax_lse` when the call asks for it) within the tolerance rule of
//! [`crate::tolerance`] against the f64 reference, and caches after an append equal to the expected
//! ones (bit for bit, except where that rule allows rotated keys and fp8 values a tolerance).

use super::bundle::{
    BundleError, CaseBundle, ExpectedNumbers, OutcomeKind, RESULT_JSON, RESULT_TENSORS,
    VerdictRecord, bundle_dirs, names, read_bundle,
};
use super::tensors::{TensorFile, read_tensor_file};
use crate::cli::ExitStatus;
use crate::conform::Format;
use crate::reference::{Precision, RefOutput};
use crate::tensor::DEFAULT_MEMORY_CAP;
use crate::tolerance;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// A bundle folder, or a folder of bundle folders, after `drivers/fa3conform_run.py`.
    pub dir: PathBuf,
    /// The profile whose verdicts and numerics the results must match.
    #[arg(long, default_value = "musa")]
    pub profile: String,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Bytes one tensor file may take once decoded.
    #[arg(long, default_value_t = DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
}

/// What verify found for one case.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseStatus {
    /// The result matches; the text says what was checked.
    Matched(String),
    Mismatch(String),
    /// The runner could not reproduce the case (its reason).
    Skipped(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct CaseReport {
    pub name: String,
    pub status: CaseStatus,
}

/// What the runner left in a bundle.
enum RunResult {
    Raised { exception: String, message: String },
    Returned(TensorFile),
    ReturnedOther(Value),
    Skipped(String),
    Missing,
}

fn read_result(dir: &Path, cap: usize) -> Result<RunResult, BundleError> {
    let json_path = dir.join(RESULT_JSON);
    if json_path.is_file() {
        let text = std::fs::read_to_string(&json_path).map_err(|source| BundleError::Io {
            path: json_path.clone(),
            source,
        })?;
        let invalid = |message: String| BundleError::Invalid {
            path: json_path.clone(),
            message,
        };
        let value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if let Some(reason) = value.get("skipped").and_then(Value::as_str) {
            return Ok(RunResult::Skipped(reason.to_string()));
        }
        return match (value.get("exception"), value.get("message")) {
            (Some(Value::String(exception)), Some(Value::String(message))) => {
                Ok(RunResult::Raised {
                    exception: exception.clone(),
                    message: message.clone(),
                })
            }
            (Some(Value::Null), _) => Ok(RunResult::ReturnedOther(
                value.get("returned").cloned().unwrap_or(Value::Null),
            )),
            _ => Err(invalid(
                "expected {\"exception\": str, \"message\": str} or {\"skipped\": str}".into(),
            )),
        };
    }
    let tensors_path = dir.join(RESULT_TENSORS);
    if tensors_path.is_file() {
        return Ok(RunResult::Returned(read_tensor_file(&tensors_path, cap)?));
    }
    Ok(RunResult::Missing)
}

/// As Python prints the last line of a traceback: `ValueError: message`, or the class alone.
fn python_error(exception: &str, message: &str) -> String {
    if message.is_empty() {
        exception.to_string()
    } else {
        format!("{exception}: {message}")
    }
}

fn describe_rejection(v: &VerdictRecord) -> String {
    python_error(
        v.exception.as_deref().unwrap_or_default(),
        v.message.as_deref().unwrap_or_default(),
    )
}

/// Judges one bundle's result against `profile`.
pub fn judge(dir: &Path, profile: &str, cap: usize) -> Result<CaseStatus, BundleError> {
    let bundle = read_bundle(dir, cap)?;
    let verdict = bundle.verdict(profile).ok_or_else(|| {
        let known: Vec<&str> = bundle.verdicts.iter().map(|v| v.profile.as_str()).collect();
        BundleError::Invalid {
            path: dir.to_path_buf(),
            message: format!(
                "expected.json has no verdict of profile `{profile}` (it has: {})",
                known.join(", ")
            ),
        }
    })?;
    let result = read_result(dir, cap)?;
    Ok(match (verdict.outcome, result) {
        (_, RunResult::Skipped(reason)) => CaseStatus::Skipped(reason),
        (_, RunResult::Missing) => CaseStatus::Mismatch(
            "no result.json or result.safetensors: the runner did not reach this case".into(),
        ),
        (OutcomeKind::Rejected, RunResult::Raised { exception, message }) => {
            let got = python_error(&exception, &message);
            if verdict.exception.as_deref() == Some(&exception)
                && verdict.message.as_deref() == Some(&message)
            {
                CaseStatus::Matched(format!("raised {got}"))
            } else {
                let expected = describe_rejection(verdict);
                CaseStatus::Mismatch(format!("expected {expected}\n     got {got}"))
            }
        }
        (OutcomeKind::Rejected, _) => CaseStatus::Mismatch(format!(
            "expected {}, but the call returned",
            describe_rejection(verdict)
        )),
        (OutcomeKind::Accepted, RunResult::Raised { exception, message }) => CaseStatus::Mismatch(
            format!("expected the call to be accepted, got {exception}: {message}"),
        ),
        (OutcomeKind::Accepted, RunResult::ReturnedOther(returned)) => {
            CaseStatus::Mismatch(format!("expected tensors, the call returned {returned}"))
        }
        (OutcomeKind::Accepted, RunResult::Returned(tensors)) => {
            let expected = numerics_for(&bundle, dir, profile)?;
            compare_outputs(expected, &tensors)
        }
    })
}

fn numerics_for<'a>(
    bundle: &'a CaseBundle,
    dir: &Path,
    profile: &str,
) -> Result<&'a ExpectedNumbers, BundleError> {
    match &bundle.expected {
        Some(e) if e.profile == profile => Ok(e),
        other => Err(BundleError::Invalid {
            path: dir.to_path_buf(),
            message: match other {
                Some(e) => format!(
                    "the expected numbers follow profile `{}`; export again with --profile {profile}",
                    e.profile
                ),
                None => "the call is accepted but the bundle has no expected numbers".into(),
            },
        }),
    }
}

/// Applies the tolerance rule to what the call returned. `softmax_lse` counts only when the call
/// returns it; the caches only when the call appends.
fn compare_outputs(expected: &ExpectedNumbers, result: &TensorFile) -> CaseStatus {
    let exact = expected.ref_output(Precision::Exact);
    let mut required = vec![names::OUT];
    if expected.returns_lse {
        required.push(names::LSE);
    }
    if expected.appends_kv {
        required.extend([names::K_CACHE, names::V_CACHE]);
    }
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| !result.contains_key(*name))
        .collect();
    if !missing.is_empty() {
        return CaseStatus::Mismatch(format!("{RESULT_TENSORS} lacks {}", missing.join(", ")));
    }
    let out = &result[names::OUT];
    if out.dtype != expected.out_dtype {
        return CaseStatus::Mismatch(format!(
            "out: dtype {}, expected {}",
            out.dtype.torch_name(),
            expected.out_dtype.torch_name()
        ));
    }
    if expected.appends_kv {
        for name in [names::K_CACHE, names::V_CACHE] {
            let (got, want) = (&result[name], &expected.tensors[name]);
            if got.dtype != want.dtype {
                return CaseStatus::Mismatch(format!(
                    "{name}: dtype {}, expected {}",
                    got.dtype.torch_name(),
                    want.dtype.torch_name()
                ));
            }
        }
    }
    let values = |name: &str| result[name].to_host().data;
    let returned = RefOutput {
        out: out.to_host().data,
        lse: if expected.returns_lse {
            values(names::LSE)
        } else {
            exact.lse.clone()
        },
        k_cache: expected.appends_kv.then(|| values(names::K_CACHE)),
        v_cache: expected.appends_kv.then(|| values(names::V_CACHE)),
        dtype: expected.input_dtype,
        rotated_keys: expected.rotated_keys,
    };
    match tolerance::compare(
        &returned,
        &exact,
        &expected.ref_output(Precision::LowPrecision),
    ) {
        Ok(report) => {
            let mut note = format!("out {}", report.out);
            if expected.returns_lse {
                note.push_str(&format!("; lse {}", report.lse));
            }
            if report.caches_compared {
                note.push_str("; caches equal");
            }
            CaseStatus::Matched(note)
        }
        Err(mismatch) => CaseStatus::Mismatch(mismatch.to_string()),
    }
}

/// Collects the cases under `dir` and judges each; `Err` for unreadable input.
pub fn verify_dir(dir: &Path, profile: &str, cap: usize) -> Result<Vec<CaseReport>, BundleError> {
    bundle_dirs(dir)?
        .into_iter()
        .map(|case| {
            let name = case.file_name().map_or_else(
                || case.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            Ok(CaseReport {
                name,
                status: judge(&case, profile, cap)?,
            })
        })
        .collect()
}

/// The `verify` command: exit 0 when every case matches (skips allowed), 1 on any mismatch, 2 on
/// bad input.
pub fn run_verify(args: &VerifyArgs, out: &mut dyn Write) -> ExitStatus {
    let reports = match verify_dir(&args.dir, &args.profile, args.memory_cap) {
        Ok(reports) => reports,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Error;
        }
    };
    let rendered = render(&reports, &args.profile, args.format);
    let written = match &args.output {
        Some(path) => {
            std::fs::write(path, rendered).map_err(|e| format!("{}: {e}", path.display()))
        }
        None => out
            .write_all(rendered.as_bytes())
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = written {
        eprintln!("error: writing the report: {e}");
        return ExitStatus::Error;
    }
    if reports
        .iter()
        .any(|r| matches!(r.status, CaseStatus::Mismatch(_)))
    {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    }
}

fn counts(reports: &[CaseReport]) -> (usize, usize, usize) {
    let count = |f: fn(&CaseStatus) -> bool| reports.iter().filter(|r| f(&r.status)).count();
    (
        count(|s| matches!(s, CaseStatus::Matched(_))),
        count(|s| matches!(s, CaseStatus::Mismatch(_))),
        count(|s| matches!(s, CaseStatus::Skipped(_))),
    )
}

/// Renders the reports as a human summary, JSON or JUnit XML.
pub fn render(reports: &[CaseReport], profile: &str, format: Format) -> String {
    let (matched, mismatched, skipped) = counts(reports);
    match format {
        Format::Human => {
            let mut out = String::new();
            for r in reports {
                match &r.status {
                    CaseStatus::Matched(_) => {}
                    CaseStatus::Mismatch(m) => {
                        writeln!(out, "MISMATCH {}\n  {}\n", r.name, m.replace('\n', "\n  "))
                            .unwrap()
                    }
                    CaseStatus::Skipped(m) => writeln!(out, "SKIPPED {}: {m}", r.name).unwrap(),
                }
            }
            writeln!(
                out,
                "verify --profile {profile}: {} cases, {matched} matched, {mismatched} mismatched, {skipped} skipped",
                reports.len()
            )
            .unwrap();
            out
        }
        Format::Json => {
            let cases: Vec<Value> = reports
                .iter()
                .map(|r| {
                    let (outcome, message) = match &r.status {
                        CaseStatus::Matched(m) => ("matched", m),
                        CaseStatus::Mismatch(m) => ("mismatch", m),
                        CaseStatus::Skipped(m) => ("skipped", m),
                    };
                    json!({"name": r.name, "outcome": outcome, "message": message})
                })
                .collect();
            let doc = json!({"schema_version": 1, "profile": profile, "matched": matched,
                             "mismatched": mismatched, "skipped": skipped, "cases": cases});
            serde_json::to_string_pretty(&doc).expect("JSON values serialise")
        }
        Format::Junit => {
            let esc = crate::conform::xml_escape;
            let mut out = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"fa3conform verify\">\n  \
                 <testsuite name=\"verify {}\" tests=\"{}\" failures=\"{mismatched}\" skipped=\"{skipped}\">\n",
                esc(profile),
                reports.len()
            );
            for r in reports {
                let open = format!(
                    "    <testcase classname=\"verify.{}\" name=\"{}\"",
                    esc(profile),
                    esc(&r.name)
                );
                match &r.status {
                    CaseStatus::Matched(_) => writeln!(out, "{open}/>").unwrap(),
                    CaseStatus::Mismatch(m) => writeln!(
                        out,
                        "{open}>\n      <failure message=\"{}\"/>\n    </testcase>",
                        esc(m)
                    )
                    .unwrap(),
                    CaseStatus::Skipped(m) => writeln!(
                        out,
                        "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                        esc(m)
                    )
                    .unwrap(),
                }
            }
            out.push_str("  </testsuite>\n</testsuites>\n");
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reports() -> Vec<CaseReport> {
        vec![
            CaseReport {
                name: "a".into(),
                status: CaseStatus::Matched("raised ValueError: x".into()),
            },
            CaseReport {
                name: "b<1>".into(),
                status: CaseStatus::Mismatch("expected \"x\" & y".into()),
            },
            CaseReport {
                name: "c".into(),
                status: CaseStatus::Skipped("no state".into()),
            },
        ]
    }

    #[test]
    fn reports_in_every_format() {
        assert_eq!(
            render(&reports(), "musa", Format::Human),
            "MISMATCH b<1>\n  expected \"x\" & y\n\nSKIPPED c: no state\n\
             verify --profile musa: 3 cases, 1 matched, 1 mismatched, 1 skipped\n"
        );
        let xml = render(&reports(), "musa", Format::Junit);
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(xml.contains(
            "name=\"b&lt;1&gt;\">\n      <failure message=\"expected &quot;x&quot; &amp; y\"/>"
        ));
        assert!(xml.contains("<skipped message=\"no state\"/>"));
        let json: Value = serde_json::from_str(&render(&reports(), "musa", Format::Json)).unwrap();
        assert_eq!(json["cases"][2]["outcome"], "skipped");
    }

    #[test]
    fn bad_input_exits_with_2() {
        let dir = tempfile::tempdir().unwrap();
        let args = VerifyArgs {
            dir: dir.path().to_path_buf(),
            profile: "musa".into(),
            format: Format::Human,
            output: None,
            memory_cap: 1 << 20,
        };
        assert_eq!(run_verify(&args, &mut Vec::new()), ExitStatus::Error);
    }
}
