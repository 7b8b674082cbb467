//! The device bridge: case bundles that carry a call, its inputs and what it must do to a real
//! stack (`export`), and the judge of what the stack did (`verify`). `python -m fa3conform.run`
//! runs bundles on a device between the two; `python -m fa3conform.record` records call sites.
//!
//! A bundle is one folder per case:
//! - `call.json`: the call spec ([`crate::spec`]), integer tensors with their values inline;
//! - `inputs.safetensors`: every tensor argument under its canonical parameter name (positional
//!   ones too), in the dtype the call names, row-major over the logical shape (strides and devices
//!   are in `call.json`);
//! - `expected.json`: `schema_version`, `id`, every profile's verdict (`outcome`, `exception`,
//!   `message`, `site`, `hazards`) and `numerics` (`profile`, `returns_lse`, `appends_kv`,
//!   `tolerance`), `null` when the numerics profile rejects the call;
//! - `expected.safetensors` (with `numerics`): [`bundle::names`]: the f64 reference's `out` and
//!   `softmax_lse` as F32 in the profile's layout, the low-precision reference's `out_lowprec`
//!   (output dtype) and `softmax_lse_lowprec` (F32), and `k_cache`/`v_cache` after the call (cache
//!   dtype) when the call appends `k`/`v`.
//!
//! The runner adds `result.json` (what happened: [`result`]) and, when the call returned,
//! `result.safetensors` (`out`, `softmax_lse` when returned, `k_cache`/`v_cache` after the call
//! when `k` was passed).

pub mod bundle;
pub mod export;
pub mod result;
pub mod slim;
pub mod tensors;
pub mod verify;

pub use bundle::{
    BundleError, CaseBundle, ExpectedNumbers, HazardRecord, OutcomeKind, PoolRows, ToleranceParams,
    VerdictRecord, bundle_dirs, read_bundle, write_bundle,
};
pub use export::{ExportError, ExportOptions, ExportReport, Pools, bundle_for, export};
pub use tensors::{StoredTensor, TensorFile, TensorFileError, read_tensor_file, write_tensor_file};
pub use verify::{VerifyOptions, VerifyReport, verify};
