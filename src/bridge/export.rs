//! `fa3conform export`: writes one case bundle per call, for the device runner.

use super::bundle::{BundleError, CaseBundle, ExpectedNumbers, VerdictRecord, write_bundle};
use super::tensors::{StoredTensor, TensorFile};
use crate::call::{Dtype, KvCacheCall, Param, PyValue, TensorValues};
use crate::cli::ExitStatus;
use crate::conform;
use crate::reference::{self, Precision, Stack};
use crate::spec::parse_specs;
use crate::tensor::{DEFAULT_MEMORY_CAP, Tensors, materialise};
use crate::validate::{Outcome, Profile, profiles};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Campaign seed of suites when `--seed` is not given (the `conform` default).
const DEFAULT_SUITE_SEED: u64 = 20261130;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A registered suite whose cases are calls.
    #[arg(long, required_unless_present = "spec", conflicts_with = "spec")]
    pub suite: Option<String>,
    /// A call-spec file (one object, an array, or JSON lines).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Number of cases (suite: required; spec: the first N calls, all by default).
    #[arg(long)]
    pub cases: Option<usize>,
    /// Suite: the campaign seed (default 20261130). Spec: replaces each call's data seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder the bundles are written to (one subfolder per case).
    #[arg(long)]
    pub out: PathBuf,
    /// The profile whose conventions the expected numbers follow.
    #[arg(long, default_value = "musa")]
    pub profile: String,
    /// Bytes one call's tensors may take once materialised.
    #[arg(long, default_value_t = DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
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

fn calls_of(args: &ExportArgs) -> Result<Vec<KvCacheCall>, String> {
    if let Some(path) = &args.spec {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut calls = parse_specs(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        calls.truncate(args.cases.unwrap_or(calls.len()));
        if let Some(seed) = args.seed {
            calls.iter_mut().for_each(|c| c.seed = seed);
        }
        return Ok(calls);
    }
    let name = args.suite.as_deref().unwrap_or_default();
    let suite = conform::suites()
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("unknown suite `{name}`"))?;
    let cases = args.cases.ok_or("--suite needs --cases N")?;
    let seed = args.seed.unwrap_or(DEFAULT_SUITE_SEED);
    (0..cases)
        .map(|i| {
            suite.call(seed, i).ok_or_else(|| {
                format!(
                    "suite `{name}` checks something other than single calls: nothing to export"
                )
            })
        })
        .collect()
}

/// The `export` command: exit 0 when every bundle was written, 2 on bad input.
pub fn run_export(args: &ExportArgs, out: &mut dyn Write) -> ExitStatus {
    match export(args, out) {
        Ok(()) => ExitStatus::Success,
        Err(e) => {
            eprintln!("error: {e}");
            ExitStatus::Error
        }
    }
}

fn export(args: &ExportArgs, out: &mut dyn Write) -> Result<(), String> {
    let profile = profiles::by_name(&args.profile).ok_or_else(|| {
        let known: Vec<&str> = profiles::all().iter().map(|p| p.name()).collect();
        format!(
            "unknown profile `{}` (known: {})",
            args.profile,
            known.join(", ")
        )
    })?;
    let calls = calls_of(args)?;
    let progress = conform::progress_bar(calls.len() as u64);
    let mut accepted = 0;
    for (index, call) in calls.iter().enumerate() {
        let dir = case_dir(&args.out, index, &call.id);
        let bundle = bundle_for(call, profile, args.memory_cap)
            .map_err(|e| format!("case {index} ({}): {e}", call.id))?;
        accepted += usize::from(bundle.expected.is_some());
        write_bundle(&dir, &bundle).map_err(|e: BundleError| e.to_string())?;
        progress.inc(1);
    }
    progress.finish_and_clear();
    writeln!(
        out,
        "exported {} bundles to {} ({accepted} accepted by {}, {} rejected)",
        calls.len(),
        args.out.display(),
        profile.name(),
        calls.len() - accepted
    )
    .map_err(|e| e.to_string())
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
    fn bad_sources_are_input_errors() {
        let args = |suite: Option<&str>, spec: Option<&str>| ExportArgs {
            suite: suite.map(str::to_string),
            spec: spec.map(PathBuf::from),
            cases: Some(1),
            seed: None,
            out: PathBuf::from("unused"),
            profile: "musa".into(),
            memory_cap: 1 << 20,
        };
        assert_eq!(
            calls_of(&args(Some("nope"), None)).unwrap_err(),
            "unknown suite `nope`"
        );
        assert!(
            calls_of(&args(None, Some("no/such/file.json")))
                .unwrap_err()
                .starts_with("no/such/file.json: ")
        );
        let mut bad_profile = args(None, Some("no/such/file.json"));
        bad_profile.profile = "rocm".into();
        assert_eq!(run_export(&bad_profile, &mut Vec::new()), ExitStatus::Error);
    }
}
