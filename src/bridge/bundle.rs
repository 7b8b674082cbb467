//! One case bundle: a folder with `call.json`, `inputs.safetensors`, `expected.json` and, when the
//! numerics profile accepts the call, `expected.safetensors` (format: [`crate::bridge`]).

use super::tensors::{
    StoredTensor, TensorFile, TensorFileError, read_tensor_file, write_tensor_file,
};
use crate::call::{Dtype, KvCacheCall, PyValue};
use crate::files::{self, FileError};
use crate::memory::Budget;
use crate::reference::{Precision, RefOutput, Unspecified};
use crate::spec::{SpecError, call_to_json, parse_specs, read_json_text};
use crate::tolerance;
use crate::validate::registry::MessageMatch;
use crate::validate::{Outcome, Verdict};
use ndarray::ArrayD;
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

/// Version of the bundle layout; readers refuse other versions. 2: `numerics.returned_values`,
/// `pool` (slim bundles), `skipped`, aliasing tensors stored as their storage. 3: each verdict's
/// `message_match`.
pub const SCHEMA_VERSION: u32 = 3;

/// Names in `expected.safetensors` (and, for the first four, in `result.safetensors`).
pub mod names {
    pub const OUT: &str = "out";
    pub const LSE: &str = "softmax_lse";
    pub const K_CACHE: &str = "k_cache";
    pub const V_CACHE: &str = "v_cache";
    /// The low-precision reference's output (F32 holding its rounded values): the yardstick of the
    /// tolerance rule.
    pub const OUT_LOWPREC: &str = "out_lowprec";
    pub const LSE_LOWPREC: &str = "softmax_lse_lowprec";
    /// Beside `out`, `softmax_lse`, `k_cache`, `v_cache`: which of their elements the stack
    /// leaves unspecified (BOOL, true = not compared), present only when some are.
    pub const UNSPECIFIED_SUFFIX: &str = "_unspecified";

    /// The mask stored for tensor `name`.
    pub fn unspecified(name: &str) -> String {
        format!("{name}{UNSPECIFIED_SUFFIX}")
    }
}

/// The tolerance rule's parameters for the call's input dtype and softcap, written to
/// `expected.json` for readers of the bundle; `verify` applies [`crate::tolerance`] itself.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToleranceParams {
    /// `max|impl − ref64| ≤ max_mult · max|lowprec − ref64| + atol`.
    pub max_mult: f64,
    /// `mean|impl − ref64| ≤ mean_mult · mean|lowprec − ref64|` (lse: `+ atol`).
    pub mean_mult: f64,
    pub atol: f64,
}

impl ToleranceParams {
    pub fn for_call(dtype: Dtype, softcap: bool) -> ToleranceParams {
        let mult = tolerance::Multipliers::for_call(dtype, softcap);
        ToleranceParams {
            max_mult: mult.max,
            mean_mult: mult.mean,
            atol: tolerance::ATOL,
        }
    }
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

/// One profile's verdict as recorded in `expected.json`; `exception`, `message`, `message_match`
/// and `site` are set exactly when the outcome is `rejected`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictRecord {
    pub profile: String,
    pub outcome: OutcomeKind,
    pub exception: Option<String>,
    pub message: Option<String>,
    /// How `message` stands for the device's `str(exc)` (the error site's declaration).
    pub message_match: Option<MessageMatch>,
    pub site: Option<String>,
    pub hazards: Vec<HazardRecord>,
}

impl From<&Verdict> for VerdictRecord {
    fn from(v: &Verdict) -> VerdictRecord {
        let (outcome, exception, message, message_match, site) = match &v.outcome {
            Outcome::Accepted(_) => (OutcomeKind::Accepted, None, None, None, None),
            Outcome::Rejected(r) => (
                OutcomeKind::Rejected,
                Some(r.exception.name().to_string()),
                Some(r.message.clone()),
                Some(r.message_match()),
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
            message_match,
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
    /// The attention input dtype (`q`'s): it sets the tolerance multipliers.
    pub input_dtype: Dtype,
    /// The stack applies the call's softcap: it raises the tolerance's maximum multiplier.
    pub softcap: bool,
    /// The dtype the stack returns `out` in.
    pub out_dtype: Dtype,
    /// Appended keys were rotated: cache keys compare within a tolerance, not bit for bit.
    pub rotated_keys: bool,
    /// The call returns `(out, softmax_lse, ...)` (`return_softmax_lse` true), not just `out`.
    pub returns_lse: bool,
    /// How many values the call returns under the profile's convention: 1 for `out` alone (not a
    /// tuple), else the tuple's length (musa-fa3.md §7: 4 on the fmha path, 2 on MLA).
    pub returned_values: usize,
    /// The call appends `k`/`v`: the caches after the call are part of the result.
    pub appends_kv: bool,
    /// `out`, `softmax_lse`, `out_lowprec`, `softmax_lse_lowprec` (F32) and, when `appends_kv`,
    /// `k_cache`, `v_cache` (cache dtype); `<name>_unspecified` (BOOL) for those with elements
    /// the stack leaves unspecified.
    pub tensors: TensorFile,
}

fn stored_f32(a: &ArrayD<f64>) -> StoredTensor {
    let values: Vec<f64> = a.iter().copied().collect();
    StoredTensor::from_values(Dtype::Float32, a.shape(), &values)
}

impl ExpectedNumbers {
    /// The numbers of the f64 reference (`exact`) and its low-precision twin (`lowprec`), with
    /// the elements `exact` marks unspecified; `caches` are the dtypes of `k_cache` and `v_cache`.
    pub fn new(
        profile: &str,
        out_dtype: Dtype,
        caches: (Dtype, Dtype),
        (returns_lse, returned_values): (bool, usize),
        exact: &RefOutput,
        lowprec: &RefOutput,
    ) -> ExpectedNumbers {
        let mut tensors = TensorFile::from([
            (names::OUT.to_string(), stored_f32(&exact.out)),
            (names::LSE.to_string(), stored_f32(&exact.lse)),
            (names::OUT_LOWPREC.to_string(), stored_f32(&lowprec.out)),
            (names::LSE_LOWPREC.to_string(), stored_f32(&lowprec.lse)),
        ]);
        for (name, cache, dtype) in [
            (names::K_CACHE, &exact.k_cache, caches.0),
            (names::V_CACHE, &exact.v_cache, caches.1),
        ] {
            if let Some(cache) = cache {
                let values: Vec<f64> = cache.iter().copied().collect();
                tensors.insert(
                    name.to_string(),
                    StoredTensor::from_values(dtype, cache.shape(), &values),
                );
            }
        }
        if let Some(masks) = &exact.unspecified {
            let named = [
                (names::OUT, Some(&masks.out)),
                (names::LSE, Some(&masks.lse)),
                (names::K_CACHE, masks.k_cache.as_ref()),
                (names::V_CACHE, masks.v_cache.as_ref()),
            ];
            for (name, mask) in named {
                if let Some(mask) = mask.filter(|m| m.iter().any(|&u| u)) {
                    let flags: Vec<f64> = mask.iter().map(|&u| f64::from(u8::from(u))).collect();
                    tensors.insert(
                        names::unspecified(name),
                        StoredTensor::from_values(Dtype::Bool, mask.shape(), &flags),
                    );
                }
            }
        }
        ExpectedNumbers {
            profile: profile.to_string(),
            input_dtype: exact.dtype,
            softcap: exact.softcap,
            out_dtype,
            rotated_keys: exact.rotated_keys,
            returns_lse,
            returned_values,
            appends_kv: exact.k_cache.is_some(),
            tensors,
        }
    }

    fn values(&self, name: &str) -> ArrayD<f64> {
        self.tensors[name].to_host().data
    }

    /// The mask stored for `name`, if any (true = unspecified).
    fn mask(&self, name: &str) -> Option<ArrayD<bool>> {
        self.tensors
            .get(&names::unspecified(name))
            .map(|t| t.to_host().data.mapv(|v| v != 0.0))
    }

    /// Which elements are not compared: `None` when every one is.
    fn unspecified(&self) -> Option<Unspecified> {
        let (out, lse) = (self.mask(names::OUT), self.mask(names::LSE));
        let (k_cache, v_cache) = (self.mask(names::K_CACHE), self.mask(names::V_CACHE));
        if out.is_none() && lse.is_none() && k_cache.is_none() && v_cache.is_none() {
            return None;
        }
        let none_of = |name: &str| ArrayD::from_elem(self.tensors[name].shape.as_slice(), false);
        Some(Unspecified {
            out: out.unwrap_or_else(|| none_of(names::OUT)),
            lse: lse.unwrap_or_else(|| none_of(names::LSE)),
            k_cache,
            v_cache,
        })
    }

    /// The numbers of the reference at `precision`, as the tolerance rule takes them (caches and
    /// the unspecified elements only for the exact reference: the rule reads them from it alone).
    pub fn ref_output(&self, precision: Precision) -> RefOutput {
        let lowprec = precision == Precision::LowPrecision;
        let (out, lse) = if lowprec {
            (names::OUT_LOWPREC, names::LSE_LOWPREC)
        } else {
            (names::OUT, names::LSE)
        };
        let cache = |name: &str| (!lowprec && self.appends_kv).then(|| self.values(name));
        RefOutput {
            out: self.values(out),
            lse: self.values(lse),
            k_cache: cache(names::K_CACHE),
            v_cache: cache(names::V_CACHE),
            dtype: self.input_dtype,
            softcap: self.softcap,
            rotated_keys: self.rotated_keys,
            unspecified: (!lowprec).then(|| self.unspecified()).flatten(),
            max_logit: None,
        }
    }
}

/// Which rows of the recorded KV pool a slim bundle's `k_cache`/`v_cache` hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolRows {
    /// Rows (pages, or cache rows) of the whole pool.
    pub pool_rows: usize,
    /// Row `i` of the bundle's caches is row `rows[i]` of the pool.
    pub rows: Vec<usize>,
}

/// A case as exported: the call, its inputs, every profile's verdict and the expected numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseBundle {
    /// The call, with the values of its integer tensors inline.
    pub call: KvCacheCall,
    /// Every tensor argument under its canonical parameter name, in the dtype the call names
    /// (an aliasing layout as its storage).
    pub inputs: TensorFile,
    /// Every profile's verdict, the gate profile's with every hazard `certify` reports.
    pub verdicts: Vec<VerdictRecord>,
    /// `None` when the numerics profile rejects the call.
    pub expected: Option<ExpectedNumbers>,
    /// Set when the caches hold only the pool rows the call touches.
    pub pool: Option<PoolRows>,
    /// Why the case has no inputs (the runner skips it), when export could not make them.
    pub skipped: Option<String>,
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
    /// torch names.
    input_dtype: String,
    out_dtype: String,
    /// Written only when true (bundles of calls without softcap read as before).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    softcap: bool,
    rotated_keys: bool,
    returns_lse: bool,
    returned_values: usize,
    appends_kv: bool,
    /// Informative: `verify` derives the parameters from `input_dtype` and `softcap`.
    #[serde(default)]
    tolerance: Option<ToleranceParams>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedJson {
    schema_version: u32,
    id: String,
    verdicts: Vec<VerdictRecord>,
    numerics: Option<NumericsJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<PoolRows>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
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
    #[error(transparent)]
    File(#[from] FileError),
}

fn invalid(path: &Path, message: impl Into<String>) -> BundleError {
    BundleError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Writes `bundle` into the folder `dir` (created if needed). A folder or file that is a symbolic
/// link is refused, never written through: a bundle is written inside `--out` only.
pub fn write_bundle(dir: &Path, bundle: &CaseBundle) -> Result<(), BundleError> {
    files::create_dir(dir)?;
    for stale in [RESULT_JSON, RESULT_TENSORS, EXPECTED_TENSORS, INPUTS_FILE] {
        match std::fs::remove_file(dir.join(stale)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(BundleError::Io {
                    path: dir.join(stale),
                    source: e,
                });
            }
            _ => {}
        }
    }
    let call = serde_json::to_string_pretty(&call_to_json(&bundle.call)).expect("JSON serialises");
    files::write_new(&dir.join(CALL_FILE), call.as_bytes())?;
    if bundle.skipped.is_none() {
        write_tensor_file(&dir.join(INPUTS_FILE), &bundle.inputs)?;
    }
    let numerics = bundle.expected.as_ref().map(|e| NumericsJson {
        profile: e.profile.clone(),
        input_dtype: e.input_dtype.torch_name().to_string(),
        out_dtype: e.out_dtype.torch_name().to_string(),
        softcap: e.softcap,
        rotated_keys: e.rotated_keys,
        returns_lse: e.returns_lse,
        returned_values: e.returned_values,
        appends_kv: e.appends_kv,
        tolerance: Some(ToleranceParams::for_call(e.input_dtype, e.softcap)),
    });
    let expected = ExpectedJson {
        schema_version: SCHEMA_VERSION,
        id: bundle.call.id.clone(),
        verdicts: bundle.verdicts.clone(),
        numerics,
        pool: bundle.pool.clone(),
        skipped: bundle.skipped.clone(),
    };
    let text = serde_json::to_string_pretty(&expected).expect("JSON serialises");
    files::write_new(&dir.join(EXPECTED_JSON), text.as_bytes())?;
    if let Some(e) = &bundle.expected {
        write_tensor_file(&dir.join(EXPECTED_TENSORS), &e.tensors)?;
    }
    Ok(())
}

/// Reads the bundle in `dir` within `budget`, which holds its calls, expectations and tensors
/// afterwards.
pub fn read_bundle(dir: &Path, budget: &mut Budget) -> Result<CaseBundle, BundleError> {
    let call_path = dir.join(CALL_FILE);
    let mut calls =
        parse_specs(&read_json_text(&call_path, budget)?).map_err(|source| BundleError::Spec {
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
    let expected_path = dir.join(EXPECTED_JSON);
    let json: ExpectedJson = serde_json::from_str(&read_json_text(&expected_path, budget)?)
        .map_err(|e| invalid(&expected_path, e.to_string()))?;
    let inputs = match json.skipped {
        Some(_) => TensorFile::new(),
        None => read_tensor_file(&dir.join(INPUTS_FILE), budget)?,
    };
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
            let tensors = read_tensor_file(&dir.join(EXPECTED_TENSORS), budget)?;
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
            for name in [names::OUT, names::LSE, names::K_CACHE, names::V_CACHE] {
                let Some(mask) = tensors.get(&names::unspecified(name)) else {
                    continue;
                };
                let fits = tensors
                    .get(name)
                    .is_some_and(|t| t.shape == mask.shape && mask.dtype == Dtype::Bool);
                if !fits {
                    return Err(invalid(
                        &dir.join(EXPECTED_TENSORS),
                        format!(
                            "`{}` is not a BOOL tensor of `{name}`'s shape",
                            names::unspecified(name)
                        ),
                    ));
                }
            }
            let dtype = |name: &str| {
                Dtype::from_torch_name(name).ok_or_else(|| {
                    invalid(
                        &expected_path,
                        format!("numerics: unknown dtype \"{name}\""),
                    )
                })
            };
            let numbers = ExpectedNumbers {
                profile: n.profile,
                input_dtype: dtype(&n.input_dtype)?,
                softcap: n.softcap,
                out_dtype: dtype(&n.out_dtype)?,
                rotated_keys: n.rotated_keys,
                returns_lse: n.returns_lse,
                returned_values: n.returned_values,
                appends_kv: n.appends_kv,
                tensors,
            };
            expected_fits_the_call(&numbers, &call)
                .map_err(|message| invalid(&dir.join(EXPECTED_TENSORS), message))?;
            Some(numbers)
        }
    };
    Ok(CaseBundle {
        call,
        inputs,
        verdicts: json.verdicts,
        expected,
        pool: json.pool,
        skipped: json.skipped,
    })
}

/// Checks that the expected numbers are what the call makes: the reference's outputs stored as
/// F32, `out` shaped as `q` with `v_cache`'s head size, the low-precision twins shaped as the
/// exact ones, the caches in the call's dtypes and shapes, and `input_dtype` the dtype of `q`. An
/// expected file relabelled (its `out` declared I32) would otherwise be compared as if it held
/// other numbers.
fn expected_fits_the_call(numbers: &ExpectedNumbers, call: &KvCacheCall) -> Result<(), String> {
    let tensors = &numbers.tensors;
    let arg = |name: &str| call.passed(name).and_then(|v| v.as_tensor());
    for name in [
        names::OUT,
        names::LSE,
        names::OUT_LOWPREC,
        names::LSE_LOWPREC,
    ] {
        if tensors[name].dtype != Dtype::Float32 {
            return Err(format!(
                "`{name}` has dtype {}, the reference's numbers are float32",
                tensors[name].dtype.torch_name()
            ));
        }
    }
    for (exact, lowprec) in [
        (names::OUT, names::OUT_LOWPREC),
        (names::LSE, names::LSE_LOWPREC),
    ] {
        if tensors[exact].shape != tensors[lowprec].shape {
            return Err(format!(
                "`{lowprec}` has shape {:?}, `{exact}` {:?}",
                tensors[lowprec].shape, tensors[exact].shape
            ));
        }
    }
    if let (Some(q), Some(v_cache)) = (arg("q"), arg("v_cache")) {
        if numbers.input_dtype != q.dtype {
            return Err(format!(
                "expected.json's input_dtype is {}, call.json's q is {}",
                numbers.input_dtype.torch_name(),
                q.dtype.torch_name()
            ));
        }
        let mut shape = q.shape.clone();
        if let (Some(last), Some(&head_v)) = (shape.last_mut(), v_cache.shape.last()) {
            *last = head_v;
        }
        if tensors[names::OUT].shape != shape {
            return Err(format!(
                "`out` has shape {:?}, the call's output has {shape:?}",
                tensors[names::OUT].shape
            ));
        }
    }
    // A softcap loosens the tolerance, so a bundle may claim one only for a call that has one.
    let call_softcap = call.passed("softcap").and_then(PyValue::as_number);
    if numbers.softcap && call_softcap.is_none_or(|c| c == 0.0) {
        return Err("expected.json's softcap is true, call.json has no softcap".into());
    }
    if numbers.appends_kv {
        for name in [names::K_CACHE, names::V_CACHE] {
            let (stored, given) = (&tensors[name], arg(name));
            if let Some(given) = given
                && (stored.dtype != given.dtype || stored.shape != given.shape)
            {
                return Err(format!(
                    "`{name}` is {}{:?}, call.json's {name} is {}{:?}",
                    stored.dtype.torch_name(),
                    stored.shape,
                    given.dtype.torch_name(),
                    given.shape
                ));
            }
        }
    }
    Ok(())
}

/// The bundle folders under `root`: `root` itself when it holds a `call.json`, else its
/// subfolders, in name order, when one of them does (those without one are not bundles, and
/// the caller reports them rather than passing over them).
pub fn bundle_dirs(root: &Path) -> Result<Vec<PathBuf>, BundleError> {
    if root.join(CALL_FILE).is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    let entries = std::fs::read_dir(root).map_err(|source| BundleError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let hidden = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            p.is_dir() && !hidden
        })
        .collect();
    dirs.sort();
    if !dirs.iter().any(|d| d.join(CALL_FILE).is_file()) {
        return Err(invalid(root, "no bundle (a folder with call.json) here"));
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{PyValue, TensorArg};
    use crate::reference::{self, Precision, Stack};
    use crate::tensor::materialise;

    fn append_call() -> KvCacheCall {
        let mut call = KvCacheCall {
            id: "append".into(),
            seed: 3,
            ..KvCacheCall::default()
        };
        let t = |shape: &[usize]| PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, shape));
        call.set("q", t(&[1, 2, 2, 8]))
            .set("k_cache", t(&[1, 8, 1, 8]))
            .set("v_cache", t(&[1, 8, 1, 8]))
            .set("k", t(&[1, 2, 1, 8]))
            .set("v", t(&[1, 2, 1, 8]))
            .set(
                "cache_seqlens",
                PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, &[1], vec![3])),
            )
            .set("return_softmax_lse", PyValue::Bool(true));
        call
    }

    #[test]
    fn bundles_round_trip_through_their_files() {
        let call = append_call();
        let tensors = materialise(&call, 1 << 20).unwrap();
        let run = |precision| reference::run(&call, &tensors, Stack::Musa, precision).unwrap();
        let expected = ExpectedNumbers::new(
            "musa",
            Dtype::Bfloat16,
            (Dtype::Bfloat16, Dtype::Bfloat16),
            (true, 4),
            &run(Precision::Exact),
            &run(Precision::LowPrecision),
        );
        let bundle = CaseBundle {
            inputs: tensors
                .iter()
                .map(|(n, t)| (n.clone(), StoredTensor::from_host(t)))
                .collect(),
            call,
            verdicts: vec![VerdictRecord {
                profile: "fa3".into(),
                outcome: OutcomeKind::Rejected,
                exception: Some("TypeError".into()),
                message: Some(
                    "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'".into(),
                ),
                message_match: Some(MessageMatch::Exact),
                site: Some("fa3.A-3".into()),
                hazards: vec![],
            }],
            expected: Some(expected),
            pool: None,
            skipped: None,
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(RESULT_JSON), "{}").unwrap();
        write_bundle(dir.path(), &bundle).unwrap();
        assert!(!dir.path().join(RESULT_JSON).exists(), "stale results go");
        assert_eq!(
            read_bundle(dir.path(), &mut Budget::new(1 << 20)).unwrap(),
            bundle
        );

        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(EXPECTED_JSON)).unwrap())
                .unwrap();
        assert_eq!(json["numerics"]["appends_kv"], true);
        assert_eq!(json["numerics"]["tolerance"]["max_mult"], 2.0);
        assert_eq!(json["verdicts"][0]["outcome"], "rejected");
        assert_eq!(json["verdicts"][0]["message_match"], "exact");
        let expected = &bundle.expected.as_ref().unwrap().tensors;
        // The two appended tokens land at positions 3 and 4 of the cache, as the inputs hold them.
        let k_after = expected[names::K_CACHE].to_host().data;
        let k_new = bundle.inputs["k"].to_host().data;
        assert_eq!(
            k_after.slice(ndarray::s![0, 3..5, .., ..]),
            k_new.slice(ndarray::s![0, .., .., ..])
        );
        assert_eq!(expected[names::LSE].shape, [1, 2, 2]);
        assert_eq!(expected[names::OUT].dtype, Dtype::Float32);

        // A softcap raises the tolerance: a bundle cannot claim one its call does not have.
        let mut claims_softcap = bundle.clone();
        claims_softcap.expected.as_mut().unwrap().softcap = true;
        write_bundle(dir.path(), &claims_softcap).unwrap();
        let err = read_bundle(dir.path(), &mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("expected.json's softcap is true, call.json has no softcap"),
            "{err}"
        );
    }

    /// A bundle folder or file that is already a symbolic link was written through (issue 16
    /// item 3): export's writes must stay inside `--out`.
    #[test]
    fn bundles_are_written_through_no_symbolic_link() {
        let bundle = CaseBundle {
            call: append_call(),
            inputs: TensorFile::new(),
            verdicts: Vec::new(),
            expected: None,
            pool: None,
            skipped: Some("a reason".into()),
        };
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let linked = dir.path().join("case-folder");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        let err = write_bundle(&linked, &bundle).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

        let case = dir.path().join("case");
        std::fs::create_dir(&case).unwrap();
        let target = elsewhere.join("precious.txt");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, case.join(EXPECTED_JSON)).unwrap();
        let err = write_bundle(&case, &bundle).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "expected.json: it is a symbolic link, and fa3conform writes through none"
            ),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn unreadable_bundles_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CALL_FILE), "[{}, {}]").unwrap();
        let err = read_bundle(dir.path(), &mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("call.json: holds 2 calls, a bundle has exactly one"),
            "{err}"
        );
        assert!(bundle_dirs(&dir.path().join("missing")).is_err());
    }
}
