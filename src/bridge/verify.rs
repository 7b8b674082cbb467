//! `fa3conform verify DIR --profile P`: judges what a real stack did with each bundle.
//!
//! A rejection must be reproduced exactly (exception class and `str(exc)`); an accepted call must
//! return, with `out` (and `softmax_lse` when the call asks for it) within the tolerance rule of
//! [`crate::tolerance`] against the f64 reference, and caches after an append equal to the expected
//! ones (bit for bit, except where that rule allows rotated keys and fp8 values a tolerance).

use super::bundle::{
    BundleError, CALL_FILE, CaseBundle, ExpectedNumbers, OutcomeKind, RESULT_TENSORS,
    VerdictRecord, bundle_dirs, names, read_bundle,
};
use super::result::{Returned, RunOutcome, read_result};
use super::tensors::TensorFile;
use crate::memory::Budget;
use crate::reference::{Precision, RefOutput};
use crate::report::documents::verify as doc;
use crate::report::junit::{self, TestRun};
use crate::report::{Format, Report, Status, human};
use crate::tolerance;
use crate::validate::registry::MessageMatch;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What `verify` judges.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOptions {
    /// A bundle folder, or a folder of bundle folders, after `python -m fa3conform.run`.
    pub dir: PathBuf,
    /// The profile whose verdicts and numerics the results must match.
    pub profile: String,
    /// Bytes one tensor file may take once decoded.
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
    /// The bundle cannot be read (a malformed file, a folder without `call.json`): an input
    /// error for this case; the others are still judged.
    Invalid(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct CaseReport {
    pub name: String,
    pub status: CaseStatus,
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
    let mut budget = Budget::new(cap);
    let bundle = read_bundle(dir, &mut budget)?;
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
    if let Some(reason) = &bundle.skipped {
        return Ok(CaseStatus::Skipped(format!(
            "export could not write it: {reason}"
        )));
    }
    let result = read_result(dir, &mut budget)?;
    Ok(match (verdict.outcome, result) {
        (_, RunOutcome::Skipped(reason)) => CaseStatus::Skipped(reason),
        (_, RunOutcome::Missing) => {
            CaseStatus::Mismatch("no result.json: the runner did not reach this case".into())
        }
        (_, RunOutcome::Failed(what)) => CaseStatus::Mismatch(what),
        (OutcomeKind::Rejected, RunOutcome::Raised { exception, message }) => {
            let got = python_error(&exception, &message);
            let message_match = verdict.message_match.unwrap_or(MessageMatch::Exact);
            let message_agrees = verdict
                .message
                .as_deref()
                .is_some_and(|expected| message_match.accepts(expected, &message));
            if verdict.exception.as_deref() == Some(&exception) && message_agrees {
                CaseStatus::Matched(format!("raised {got}"))
            } else {
                let expected = describe_rejection(verdict);
                let kind = match message_match {
                    MessageMatch::Exact => "",
                    MessageMatch::Prefix => " (message: its start)",
                    MessageMatch::Pattern => " (message: a pattern, {*} is any text)",
                };
                CaseStatus::Mismatch(format!("expected {expected}{kind}\n     got {got}"))
            }
        }
        (OutcomeKind::Rejected, _) => CaseStatus::Mismatch(format!(
            "expected {}, but the call returned",
            describe_rejection(verdict)
        )),
        (OutcomeKind::Accepted, RunOutcome::Raised { exception, message }) => CaseStatus::Mismatch(
            format!("expected the call to be accepted, got {exception}: {message}"),
        ),
        (OutcomeKind::Accepted, RunOutcome::Returned { returned, tensors }) => {
            let expected = numerics_for(&bundle, dir, profile)?;
            if !tensors.contains_key(names::OUT) {
                CaseStatus::Mismatch(format!(
                    "expected tensors, the call returned ({})",
                    returned.types.join(", ")
                ))
            } else if let Some(wrong) = wrong_arity(expected, &returned) {
                CaseStatus::Mismatch(wrong)
            } else {
                compare_outputs(expected, &tensors)
            }
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

/// How the returned values differ from the profile's return convention, if they do.
fn wrong_arity(expected: &ExpectedNumbers, returned: &Returned) -> Option<String> {
    let describe = |tuple: bool, n: usize| {
        if tuple {
            format!("a {n}-tuple")
        } else {
            "out alone (not a tuple)".to_string()
        }
    };
    let want_tuple = expected.returned_values > 1;
    let want = describe(want_tuple, expected.returned_values);
    let got = describe(returned.tuple, returned.arity());
    (want != got).then(|| {
        format!(
            "expected {want} under {}'s convention, the call returned {got} ({})",
            expected.profile,
            returned.types.join(", ")
        )
    })
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
        softcap: expected.softcap,
        rotated_keys: expected.rotated_keys,
        unspecified: None,
        max_logit: None,
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

/// Judges every case under `options.dir`; a bundle that cannot be read is that case's input
/// error, and a folder without any bundle the error.
pub fn verify(options: &VerifyOptions) -> Result<VerifyReport, BundleError> {
    let cases = bundle_dirs(&options.dir)?
        .into_iter()
        .map(|case| {
            let name = case.file_name().map_or_else(
                || case.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let status = if case.join(CALL_FILE).is_file() {
                judge(&case, &options.profile, options.memory_cap)
                    .unwrap_or_else(|e| CaseStatus::Invalid(e.to_string()))
            } else {
                CaseStatus::Invalid(format!("{}: no {CALL_FILE}: not a bundle", case.display()))
            };
            CaseReport { name, status }
        })
        .collect();
    Ok(VerifyReport {
        profile: options.profile.clone(),
        cases,
    })
}

/// Every case's judgement against one profile.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyReport {
    pub profile: String,
    pub cases: Vec<CaseReport>,
}

impl VerifyReport {
    fn count(&self, f: fn(&CaseStatus) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.status)).count()
    }

    /// (matched, mismatched, skipped)
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.count(|s| matches!(s, CaseStatus::Matched(_))),
            self.count(|s| matches!(s, CaseStatus::Mismatch(_))),
            self.count(|s| matches!(s, CaseStatus::Skipped(_))),
        )
    }

    fn invalid(&self) -> usize {
        self.count(|s| matches!(s, CaseStatus::Invalid(_)))
    }
}

impl Report for VerifyReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json, Format::Junit];
    type Document = doc::Verification;

    /// An input error when a bundle could not be read; else findings when any case mismatches,
    /// or when none was verified (every case skipped): skipped cases alone do not fail a run
    /// that verified others.
    fn status(&self) -> Status {
        let (matched, mismatched, _) = self.counts();
        let unreadable = if self.invalid() > 0 {
            Status::InputError
        } else {
            Status::Success
        };
        Status::combined([
            unreadable,
            Status::findings_if(mismatched > 0 || matched == 0),
        ])
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for case in &self.cases {
            match &case.status {
                CaseStatus::Matched(_) => {}
                CaseStatus::Mismatch(m) => human::failure_block(out, "MISMATCH", &case.name, m)?,
                CaseStatus::Skipped(m) => writeln!(out, "SKIPPED {}: {m}", case.name)?,
                CaseStatus::Invalid(m) => writeln!(out, "INVALID {}: {m}", case.name)?,
            }
        }
        let (matched, mismatched, skipped) = self.counts();
        let invalid = match self.invalid() {
            0 => String::new(),
            n => format!(", {n} invalid"),
        };
        writeln!(
            out,
            "verify --profile {}: {} cases, {matched} matched, {mismatched} mismatched, {skipped} skipped{invalid}",
            self.profile,
            self.cases.len()
        )?;
        if matched == 0 && mismatched == 0 {
            writeln!(out, "no case was verified: every case was skipped")?;
        }
        Ok(())
    }

    fn document(&self) -> doc::Verification {
        let (matched, mismatched, skipped) = self.counts();
        let cases = self
            .cases
            .iter()
            .map(|c| {
                let (outcome, message) = match &c.status {
                    CaseStatus::Matched(m) => (doc::CaseOutcome::Matched, m),
                    CaseStatus::Mismatch(m) => (doc::CaseOutcome::Mismatch, m),
                    CaseStatus::Skipped(m) => (doc::CaseOutcome::Skipped, m),
                    CaseStatus::Invalid(m) => (doc::CaseOutcome::Invalid, m),
                };
                doc::Case {
                    name: c.name.clone(),
                    outcome,
                    message: message.clone(),
                }
            })
            .collect();
        doc::Verification {
            profile: self.profile.clone(),
            matched,
            mismatched,
            skipped,
            invalid: self.invalid(),
            cases,
        }
    }

    fn test_run(&self) -> Option<TestRun> {
        let cases = self
            .cases
            .iter()
            .map(|c| junit::TestCase {
                classname: format!("verify.{}", self.profile),
                name: c.name.clone(),
                outcome: match &c.status {
                    CaseStatus::Matched(_) => junit::Outcome::Passed,
                    CaseStatus::Mismatch(m) => junit::Outcome::Failed {
                        message: m.clone(),
                        detail: None,
                    },
                    CaseStatus::Skipped(m) => junit::Outcome::Skipped { message: m.clone() },
                    CaseStatus::Invalid(m) => junit::Outcome::Failed {
                        message: format!("input error: {m}"),
                        detail: None,
                    },
                },
            })
            .collect();
        Some(TestRun {
            name: "fa3conform verify".into(),
            suites: vec![junit::TestSuite {
                name: format!("verify {}", self.profile),
                time: None,
                cases,
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::written_in_every_format;

    fn cases() -> Vec<CaseReport> {
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
        let report = VerifyReport {
            profile: "musa".into(),
            cases: cases(),
        };
        assert_eq!(report.status(), Status::Findings);
        for (format, text) in written_in_every_format(&report) {
            match format {
                Format::Human => assert_eq!(
                    text,
                    "MISMATCH b<1>\n  expected \"x\" & y\n\nSKIPPED c: no state\n\
                     verify --profile musa: 3 cases, 1 matched, 1 mismatched, 1 skipped\n"
                ),
                Format::Json => {
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(json["cases"][2]["outcome"], "skipped");
                    assert_eq!(json["mismatched"], 1);
                }
                Format::Junit => {
                    assert!(text.contains("classname=\"verify.musa\""), "{text}");
                    assert!(
                        text.contains("<failure message=\"expected &quot;x&quot; &amp; y\"/>"),
                        "{text}"
                    );
                    assert!(text.contains("<skipped message=\"no state\"/>"), "{text}");
                }
                Format::Sarif => unreachable!("not offered"),
            }
        }
    }

    #[test]
    fn a_folder_without_bundles_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let options = VerifyOptions {
            dir: dir.path().to_path_buf(),
            profile: "musa".into(),
            memory_cap: 1 << 20,
        };
        assert!(verify(&options).is_err());
    }

    /// Issue 16 item 8: a relabelled expected file, a malformed bundle and a folder without
    /// `call.json` are each that case's input error, and the other cases are still judged.
    #[test]
    fn bad_bundles_are_answered_per_case() {
        use crate::bridge::bundle::{EXPECTED_TENSORS, names};
        use crate::bridge::tensors::{read_tensor_file, write_tensor_file};
        use crate::call::Dtype;
        let dir = tempfile::tempdir().unwrap();
        let call = |id: &str| {
            format!(
                r#"{{"id": "{id}", "args": {{
                "q": {{"tensor": {{"shape": [1, 1, 2, 64], "dtype": "bfloat16"}}}},
                "k_cache": {{"tensor": {{"shape": [1, 16, 1, 64], "dtype": "bfloat16"}}}},
                "v_cache": {{"tensor": {{"shape": [1, 16, 1, 64], "dtype": "bfloat16"}}}},
                "cache_seqlens": {{"tensor": {{"shape": [1], "dtype": "int32", "values": [5]}}}},
                "ver": 3}}}}"#
            )
        };
        let out = dir.path().join("bundles");
        crate::bridge::export(&crate::bridge::ExportOptions {
            calls: ["relabelled", "malformed", "sound"]
                .iter()
                .map(|id| crate::spec::parse_specs(&call(id)).unwrap().remove(0))
                .collect(),
            out: out.clone(),
            force: false,
            pools: crate::bridge::Pools::Slim,
            profile: "musa".into(),
            memory_cap: 1 << 20,
            partition: None,
        })
        .unwrap();
        let expected = out.join("relabelled").join(EXPECTED_TENSORS);
        let mut tensors = read_tensor_file(&expected, &mut Budget::new(1 << 20)).unwrap();
        tensors.get_mut(names::OUT).unwrap().dtype = Dtype::Int32;
        write_tensor_file(&expected, &tensors).unwrap();
        std::fs::write(out.join("malformed").join(CALL_FILE), "{").unwrap();
        std::fs::create_dir(out.join("notes")).unwrap();

        let report = verify(&VerifyOptions {
            dir: out,
            profile: "musa".into(),
            memory_cap: 1 << 20,
        })
        .unwrap();
        let shown: Vec<(&str, String)> = report
            .cases
            .iter()
            .map(|c| {
                let text = match &c.status {
                    CaseStatus::Invalid(m) => {
                        format!("invalid: {}", m.rsplit(": ").next().unwrap())
                    }
                    other => format!("{other:?}"),
                };
                (c.name.as_str(), text)
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "malformed",
                    "invalid: EOF while parsing an object".to_string()
                ),
                ("notes", "invalid: not a bundle".to_string()),
                (
                    "relabelled",
                    "invalid: `out` has dtype int32, the reference's numbers are float32"
                        .to_string()
                ),
                (
                    "sound",
                    "Mismatch(\"no result.json: the runner did not reach this case\")".to_string()
                ),
            ]
        );
        assert_eq!(report.status(), Status::InputError);
    }

    fn numbers(returned_values: usize) -> ExpectedNumbers {
        ExpectedNumbers {
            profile: "musa".into(),
            input_dtype: crate::call::Dtype::Bfloat16,
            softcap: false,
            out_dtype: crate::call::Dtype::Bfloat16,
            rotated_keys: false,
            returns_lse: returned_values > 1,
            returned_values,
            appends_kv: false,
            tensors: TensorFile::new(),
        }
    }

    fn returned(tuple: bool, types: &[&str]) -> Returned {
        Returned {
            tuple,
            types: types.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn the_profiles_return_convention_is_checked() {
        let four = ["Tensor", "Tensor", "Tensor", "Tensor"];
        assert_eq!(wrong_arity(&numbers(4), &returned(true, &four)), None);
        assert_eq!(
            wrong_arity(&numbers(4), &returned(true, &["Tensor", "Tensor"])).unwrap(),
            "expected a 4-tuple under musa's convention, the call returned a 2-tuple (Tensor, Tensor)"
        );
        assert_eq!(
            wrong_arity(&numbers(1), &returned(false, &["Tensor"])),
            None
        );
        assert_eq!(
            wrong_arity(&numbers(1), &returned(true, &["Tensor"])).unwrap(),
            "expected out alone (not a tuple) under musa's convention, the call returned a \
             1-tuple (Tensor)"
        );
    }

    #[test]
    fn a_run_where_every_case_was_skipped_fails() {
        let dir = tempfile::tempdir().unwrap();
        let call = r#"{"id": "big", "args": {
            "q": {"tensor": {"shape": [1, 1, 2, 64], "dtype": "bfloat16"}},
            "k_cache": {"tensor": {"shape": [1, 4096, 1, 64], "dtype": "bfloat16"}},
            "v_cache": {"tensor": {"shape": [1, 4096, 1, 64], "dtype": "bfloat16"}}}}"#;
        let out = dir.path().join("bundles");
        let exported = crate::bridge::export(&crate::bridge::ExportOptions {
            calls: crate::spec::parse_specs(call).unwrap(),
            partition: None,
            out: out.clone(),
            force: false,
            pools: crate::bridge::Pools::Slim,
            profile: "musa".into(),
            memory_cap: 1 << 16,
        })
        .unwrap();
        assert_eq!(exported.skipped.len(), 1);
        let report = verify(&VerifyOptions {
            dir: out,
            profile: "musa".into(),
            memory_cap: 1 << 20,
        })
        .unwrap();
        assert_eq!(report.status(), Status::Findings);
        let mut human = Vec::new();
        report.write_human(&mut human).unwrap();
        let human = String::from_utf8(human).unwrap();
        assert!(
            human.starts_with("SKIPPED big: export could not write it: the call's tensors need "),
            "{human}"
        );
        assert!(
            human.ends_with(
                "1 cases, 0 matched, 0 mismatched, 1 skipped\n\
                 no case was verified: every case was skipped\n"
            ),
            "{human}"
        );
    }
}
