//! One case bundle: a folder with `call.json`, `inputs.safetensors`, `expected.json` and, when the
//! numerics profile accepts the call, `expected.safetensors` (format: [`crate::bridge`]).

use super::tensors::{TensorFile, TensorFileError, read_tensor_file, write_tensor_file};
use crate::call::KvCacheCall;
use crate::spec::{SpecError, call_to_json, parse_specs};
use crate::validate::{Outcome, Verdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const CALL_FILE: &str = "call.json";
pub const INPUTS_FILE: &str = "inputs.safetensors";
pub const EXPECTED_JSON: &str = "expected.json";
pub const EXPECTED_TENSORS: &str = "expected.safetensors";
/// Written by the runner when the target returned.
pub const RESULT_TENSORS: &str = "result.safetensors";
/// Written by the runner when the target raised.
pub const RESULT_JSON: &str = "result.json";

/// Version of the bundle layout; readers refuse other versions.
pub const SCHEMA_VERSION: u32 = 1;

/// Names in `expected.safetensors` (and, for the first four, in `result.safetensors`).
pub mod names {
    pub const OUT: &str = "out";
    pub const LSE: &str = "softmax_lse";
    pub const K_CACHE: &str = "k_cache";
    pub const V_CACHE: &str = "v_cache";
    /// The low-precision reference's output, in the output dtype: the error yardstick of the rule.
    pub const OUT_LOWPREC: &str = "out_lowprec";
    pub const LSE_LOWPREC: &str = "softmax_lse_lowprec";
}

/// The parameters of the tolerance rule `|impl − ref64| ≤ k·|lowprec − ref64| + atol` (on the
/// maximum) and `mean|impl − ref64| ≤ mean_k·mean|lowprec − ref64|`, as exported.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceParams {
    pub k: f64,
    pub mean_k: f64,
    pub atol: f64,
}

/// A hazard as recorded in `expected.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HazardRecord {
    pub code: String,
    /// `info`, `warning` or `error`.
    pub severity: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeKind {
    Accepted,
    Rejected,
}

/// One profile's verdict as recorded in `expected.json`; `exception`, `message` and `site` are
/// set exactly when the outcome is `rejected`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictRecord {
    pub profile: String,
    pub outcome: OutcomeKind,
    pub exception: Option<String>,
    pub message: Option<String>,
    pub site: Option<String>,
    pub hazards: Vec<HazardRecord>,
}

impl From<&Verdict> for VerdictRecord {
    fn from(v: &Verdict) -> VerdictRecord {
        let (outcome, exception, message, site) = match &v.outcome {
            Outcome::Accepted(_) => (OutcomeKind::Accepted, None, None, None),
            Outcome::Rejected(r) => (
                OutcomeKind::Rejected,
                Some(r.exception.name().to_string()),
                Some(r.message.clone()),
                Some(r.site.to_string()),
            ),
        };
        let hazards = v
            .hazards
            .iter()
            .map(|h| HazardRecord {
                code: h.code.to_string(),
                severity: serde_json::to_value(h.severity)
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_string))
                    .unwrap_or_default(),
                message: h.message.clone(),
            })
            .collect();
        VerdictRecord {
            profile: v.profile.to_string(),
            outcome,
            exception,
            message,
            site,
            hazards,
        }
    }
}

/// What an accepted call must compute, for one profile's conventions.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectedNumbers {
    /// The profile whose conventions (lse layout, empty rows, ...) the numbers follow.
    pub profile: String,
    /// The call returns `(out, softmax_lse, ...)` (`return_softmax_lse` true), not just `out`.
    pub returns_lse: bool,
    /// The call appends `k`/`v`: the caches after the call are part of the result.
    pub appends_kv: bool,
    pub tolerance: ToleranceParams,
    /// `out`, `softmax_lse` (F32, the f64 reference), `out_lowprec` (output dtype),
    /// `softmax_lse_lowprec` (F32) and, when `appends_kv`, `k_cache`, `v_cache` (cache dtype).
    pub tensors: TensorFile,
}

/// A case as exported: the call, its inputs, every profile's verdict and the expected numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseBundle {
    /// The call, with the values of its integer tensors inline.
    pub call: KvCacheCall,
    /// Every tensor argument under its canonical parameter name, in the dtype the call names.
    pub inputs: TensorFile,
    pub verdicts: Vec<VerdictRecord>,
    /// `None` when the numerics profile rejects the call.
    pub expected: Option<ExpectedNumbers>,
}

impl CaseBundle {
    pub fn verdict(&self, profile: &str) -> Option<&VerdictRecord> {
        self.verdicts.iter().find(|v| v.profile == profile)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NumericsJson {
    profile: String,
    returns_lse: bool,
    appends_kv: bool,
    tolerance: ToleranceParams,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedJson {
    schema_version: u32,
    id: String,
    verdicts: Vec<VerdictRecord>,
    numerics: Option<NumericsJson>,
}

#[derive(Debug, Error)]
pub enum BundleError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Spec { path: PathBuf, source: SpecError },
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
}

fn invalid(path: &Path, message: impl Into<String>) -> BundleError {
    BundleError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read_text(path: &Path) -> Result<String, BundleError> {
    std::fs::read_to_string(path).map_err(|source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_text(path: &Path, text: &str) -> Result<(), BundleError> {
    std::fs::write(path, text).map_err(|source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `bundle` into the folder `dir` (created if needed).
pub fn write_bundle(dir: &Path, bundle: &CaseBundle) -> Result<(), BundleError> {
    std::fs::create_dir_all(dir).map_err(|source| BundleError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let call = serde_json::to_string_pretty(&call_to_json(&bundle.call)).expect("JSON serialises");
    write_text(&dir.join(CALL_FILE), &call)?;
    write_tensor_file(&dir.join(INPUTS_FILE), &bundle.inputs)?;
    let numerics = bundle.expected.as_ref().map(|e| NumericsJson {
        profile: e.profile.clone(),
        returns_lse: e.returns_lse,
        appends_kv: e.appends_kv,
        tolerance: e.tolerance,
    });
    let expected = ExpectedJson {
        schema_version: SCHEMA_VERSION,
        id: bundle.call.id.clone(),
        verdicts: bundle.verdicts.clone(),
        numerics,
    };
    let text = serde_json::to_string_pretty(&expected).expect("JSON serialises");
    write_text(&dir.join(EXPECTED_JSON), &text)?;
    if let Some(e) = &bundle.expected {
        write_tensor_file(&dir.join(EXPECTED_TENSORS), &e.tensors)?;
    }
    Ok(())
}

/// Reads the bundle in `dir`, decoding no more than `cap_bytes` per tensor file.
pub fn read_bundle(dir: &Path, cap_bytes: usize) -> Result<CaseBundle, BundleError> {
    let call_path = dir.join(CALL_FILE);
    let mut calls = parse_specs(&read_text(&call_path)?).map_err(|source| BundleError::Spec {
        path: call_path.clone(),
        source,
    })?;
    if calls.len() != 1 {
        return Err(invalid(
            &call_path,
            format!("holds {} calls, a bundle has exactly one", calls.len()),
        ));
    }
    let call = calls.remove(0);
    let inputs = read_tensor_file(&dir.join(INPUTS_FILE), cap_bytes)?;
    let expected_path = dir.join(EXPECTED_JSON);
    let json: ExpectedJson = serde_json::from_str(&read_text(&expected_path)?)
        .map_err(|e| invalid(&expected_path, e.to_string()))?;
    if json.schema_version != SCHEMA_VERSION {
        return Err(invalid(
            &expected_path,
            format!(
                "schema_version {} (this fa3conform reads {SCHEMA_VERSION})",
                json.schema_version
            ),
        ));
    }
    let expected = match json.numerics {
        None => None,
        Some(n) => {
            let tensors = read_tensor_file(&dir.join(EXPECTED_TENSORS), cap_bytes)?;
            let mut required = vec![
                names::OUT,
                names::LSE,
                names::OUT_LOWPREC,
                names::LSE_LOWPREC,
            ];
            if n.appends_kv {
                required.extend([names::K_CACHE, names::V_CACHE]);
            }
            if let Some(missing) = required.iter().find(|name| !tensors.contains_key(**name)) {
                return Err(invalid(
                    &dir.join(EXPECTED_TENSORS),
                    format!("has no tensor `{missing}`"),
                ));
            }
            Some(ExpectedNumbers {
                profile: n.profile,
                returns_lse: n.returns_lse,
                appends_kv: n.appends_kv,
                tolerance: n.tolerance,
                tensors,
            })
        }
    };
    Ok(CaseBundle {
        call,
        inputs,
        verdicts: json.verdicts,
        expected,
    })
}
