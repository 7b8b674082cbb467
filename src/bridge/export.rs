//! `fa3conform export`: writes one case bundle per call, for the device runner.

use super::bundle::{CaseBundle, ExpectedNumbers, VerdictRecord, write_bundle};
use super::tensors::{StoredTensor, TensorFile};
use crate::call::{Dtype, KvCacheCall, Param, PyValue, TensorValues};
use crate::reference::{self, Precision, Stack};
use crate::report::documents::export as doc;
use crate::report::{Format, Report, Status};
use crate::tensor::{Tensors, materialise};
use crate::validate::{Outcome, Profile, profiles};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What `export` writes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    /// The calls, one bundle each.
    pub calls: Vec<KvCacheCall>,
    /// The folder the bundles are written to (one subfolder per case).
    pub out: PathBuf,
    /// The profile whose conventions the expected numbers follow.
    pub profile: String,
    /// Bytes one call's tensors may take once materialised.
    pub memory_cap: usize,
}

/// Why `export` stopped: bad input, or a bundle that could not be built or written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("unknown profile `{name}` (known: {known})")]
    UnknownProfile { name: String, known: String },
    #[error("case {index} ({id}): {message}")]
    Case {
        index: usize,
        id: String,
        message: String,
    },
    #[error(transparent)]
    Bundle(#[from] super::BundleError),
}

/// The bundles written.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportReport {
    pub out: PathBuf,
    pub profile: &'static str,
    pub bundles: usize,
    /// How many of them the profile accepts (they carry expected numbers).
    pub accepted: usize,
}

impl Report for ExportReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json];
    type Document = doc::Export;

    /// Every bundle was written: a success.
    fn status(&self) -> Status {
        Status::Success
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "exported {} bundles to {} ({} accepted by {}, {} rejected)",
            self.bundles,
            self.out.display(),
            self.accepted,
            self.profile,
            self.bundles - self.accepted
        )
    }

    fn document(&self) -> doc::Export {
        doc::Export {
            out: self.out.display().to_string(),
            profile: self.profile.to_string(),
            bundles: self.bundles,
            accepted: self.accepted,
            rejected: self.bundles - self.accepted,
        }
    }
}

/// The reference's conventions for a profile (`fa3-stable` differs from `fa3` only in messages).
pub fn stack_of(profile: &str) -> Option<Stack> {
    match profile {
        "fa3-stable" => Some(Stack::Fa3),
        name => Stack::ALL.into_iter().find(|s| s.name() == name),
    }
}

/// The dtype `out` is returned in: `q`'s on MUSA (musa-fa3.md §7), bf16 for fp8 inputs on the
/// CUDA stacks (cuda-fa3.md D.16).
pub fn out_dtype(stack: Stack, q: Dtype) -> Dtype {
    match (stack, q) {
        (Stack::SglKernel | Stack::Fa3, Dtype::Float8E4m3fn) => Dtype::Bfloat16,
        _ => q,
    }
}

/// The call with the values of its integer tensors written inline, from the materialised tensors.
fn with_int_values(call: &KvCacheCall, tensors: &Tensors) -> KvCacheCall {
    let inline = |name: &str, value: &PyValue| match value {
        PyValue::Tensor(t) if !t.dtype.is_floating_point() && t.values.is_none() => {
            let mut t = t.clone();
            t.values = tensors.get(name).map(|h| TensorValues::Int(h.ints()));
            PyValue::Tensor(t)
        }
        other => other.clone(),
    };
    let mut out = call.clone();
    // `tensors()` names positional tensors first, in order, then keyword ones.
    let names: Vec<String> = call.tensors().map(|(name, _)| name).collect();
    let mut positional_names = names.iter();
    for value in out.positional.iter_mut() {
        if value.as_tensor().is_some() {
            let name = positional_names.next().expect("one name per tensor");
            *value = inline(name, value);
        }
    }
    for (name, value) in out.keywords.iter_mut() {
        *value = inline(name, value);
    }
    out
}

/// Builds the bundle of one call: inputs, every profile's verdict and, when `profile` accepts the
/// call, the reference's numbers under its conventions.
pub fn bundle_for(
    call: &KvCacheCall,
    profile: &dyn Profile,
    cap_bytes: usize,
) -> Result<CaseBundle, String> {
    let tensors = materialise(call, cap_bytes).map_err(|e| e.to_string())?;
    let inputs: TensorFile = tensors
        .iter()
        .map(|(name, t)| (name.clone(), StoredTensor::from_host(t)))
        .collect();
    let verdicts: Vec<VerdictRecord> = profiles::all()
        .iter()
        .map(|p| VerdictRecord::from(&p.validate(call)))
        .collect();
    let expected = match profile.validate(call).outcome {
        Outcome::Rejected(_) => None,
        Outcome::Accepted(_) => {
            let stack = stack_of(profile.name()).ok_or_else(|| {
                format!("no reference conventions for profile {}", profile.name())
            })?;
            let exact = reference::run(call, &tensors, stack, Precision::Exact);
            let lowprec = reference::run(call, &tensors, stack, Precision::LowPrecision);
            let (exact, lowprec) = exact
                .and_then(|e| lowprec.map(|l| (e, l)))
                .map_err(|e| format!("accepted by {}, but {e}", profile.name()))?;
            let dtype = |name: &str| tensors.get(name).map_or(exact.dtype, |t| t.dtype);
            let returns_lse = call
                .bind_canonical()
                .ok()
                .and_then(|b| b.get(Param::ReturnSoftmaxLse).truthy())
                .unwrap_or(false);
            Some(ExpectedNumbers::new(
                profile.name(),
                out_dtype(stack, exact.dtype),
                (dtype("k_cache"), dtype("v_cache")),
                returns_lse,
                &exact,
                &lowprec,
            ))
        }
    };
    Ok(CaseBundle {
        call: with_int_values(call, &tensors),
        inputs,
        verdicts,
        expected,
    })
}

/// A folder name for case `index`: its number, then its id with anything unusual replaced.
fn case_dir(out: &Path, index: usize, id: &str) -> PathBuf {
    let slug: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(80)
        .collect();
    out.join(if slug.is_empty() {
        format!("{index:04}")
    } else {
        format!("{index:04}-{slug}")
    })
}

/// Writes one bundle per call of `options`, with a progress bar on stderr.
pub fn export(options: &ExportOptions) -> Result<ExportReport, ExportError> {
    let profile = profiles::by_name(&options.profile).ok_or_else(|| {
        let known: Vec<&str> = profiles::all().iter().map(|p| p.name()).collect();
        ExportError::UnknownProfile {
            name: options.profile.clone(),
            known: known.join(", "),
        }
    })?;
    let progress = crate::report::progress_bar(options.calls.len() as u64);
    let mut accepted = 0;
    for (index, call) in options.calls.iter().enumerate() {
        let dir = case_dir(&options.out, index, &call.id);
        let bundle =
            bundle_for(call, profile, options.memory_cap).map_err(|message| ExportError::Case {
                index,
                id: call.id.clone(),
                message,
            })?;
        accepted += usize::from(bundle.expected.is_some());
        write_bundle(&dir, &bundle)?;
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(ExportReport {
        out: options.out.clone(),
        profile: profile.name(),
        bundles: options.calls.len(),
        accepted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::TensorArg;

    #[test]
    fn integer_tensors_get_their_values_inline_positional_ones_too() {
        let seqlens = TensorArg::new(Dtype::Int32, &[2]);
        let call = KvCacheCall {
            seed: 9,
            positional: vec![
                PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, &[2, 1, 2, 8])),
                PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, &[2, 16, 1, 8])),
                PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, &[2, 16, 1, 8])),
                PyValue::None,
            ],
            keywords: vec![("cache_seqlens".into(), PyValue::Tensor(seqlens))],
            ..KvCacheCall::default()
        };
        let tensors = materialise(&call, 1 << 20).unwrap();
        let inline = with_int_values(&call, &tensors);
        let values = inline.passed("cache_seqlens").unwrap().as_tensor().unwrap();
        assert_eq!(values.int_values(), Some(tensors["cache_seqlens"].ints()));
        assert_eq!(
            inline.positional[0], call.positional[0],
            "float data stays out of call.json"
        );
        assert_eq!(inline.positional[3], PyValue::None);
    }

    #[test]
    fn profiles_map_to_reference_conventions() {
        assert_eq!(stack_of("fa3-stable"), Some(Stack::Fa3));
        assert_eq!(stack_of("sgl-kernel"), Some(Stack::SglKernel));
        assert_eq!(stack_of("rocm"), None);
        assert_eq!(
            out_dtype(Stack::Musa, Dtype::Float8E4m3fn),
            Dtype::Float8E4m3fn
        );
        assert_eq!(out_dtype(Stack::Fa3, Dtype::Float8E4m3fn), Dtype::Bfloat16);
        assert_eq!(out_dtype(Stack::SglKernel, Dtype::Float16), Dtype::Float16);
    }

    #[test]
    fn an_unknown_profile_is_an_input_error() {
        let options = ExportOptions {
            calls: Vec::new(),
            out: PathBuf::from("unused"),
            profile: "rocm".into(),
            memory_cap: 1 << 20,
        };
        let err = export(&options).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown profile `rocm` (known: musa, "),
            "{err}"
        );
    }

    #[test]
    fn the_summary_counts_accepted_and_rejected_bundles() {
        let report = ExportReport {
            out: PathBuf::from("bundles"),
            profile: "musa",
            bundles: 3,
            accepted: 2,
        };
        let written = crate::report::testing::written_in_every_format(&report);
        assert_eq!(
            written[0].1,
            "exported 3 bundles to bundles (2 accepted by musa, 1 rejected)\n"
        );
        let json: serde_json::Value = serde_json::from_str(&written[1].1).unwrap();
        assert_eq!(
            (json["bundles"].as_u64(), json["rejected"].as_u64()),
            (Some(3), Some(1))
        );
    }
}
