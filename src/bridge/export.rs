//! `fa3conform export`: writes one case bundle per call, for the device runner. A case whose
//! bundle cannot be made is written as a skipped bundle that says why; the run goes on.

use super::bundle::{
    BundleError, CALL_FILE, CaseBundle, EXPECTED_TENSORS, ExpectedNumbers, INPUTS_FILE, PoolRows,
    VerdictRecord, write_bundle,
};
use super::slim::{SlimCall, slim};
use super::tensors::{StoredTensor, TensorFile};
use crate::call::{Dtype, KvCacheCall, Param, TensorArg, TensorValues};
use crate::certify::certify_call;
use crate::certify::numerics::with_described_metadata;
use crate::device;
use crate::mate::DEFAULT_MP;
use crate::memory::Budget;
use crate::musa::{self, MusaOptions};
use crate::partition::Partition;
use crate::reference::{self, ContextParallel, Precision, RefError, RefOutput, Stack};
use crate::report::documents::export as doc;
use crate::report::{Format, Report, Status};
use crate::tensor::{RowOrigins, Tensors, host_bytes, materialise_index_tensors, materialise_rows};
use crate::validate::{Outcome, Profile, profiles};
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What `export` writes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    /// The calls, one bundle each.
    pub calls: Vec<KvCacheCall>,
    /// Export only this shard of the calls (by position, or by bundle name under `hash:`);
    /// bundles keep the names a whole export gives them.
    pub partition: Option<Partition>,
    /// The folder the bundles are written to (one subfolder per case, named by its id): empty or
    /// absent, unless `force`.
    pub out: PathBuf,
    /// Remove the bundles `out` already holds (and their results) first.
    pub force: bool,
    /// Slim bundles, or whole pools.
    pub pools: Pools,
    /// The profile whose conventions the expected numbers follow.
    pub profile: String,
    /// Bytes one call's tensors may take once materialised.
    pub memory_cap: usize,
}

/// Why `export` wrote nothing, or stopped: bad input, or a bundle that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("unknown profile `{name}` (known: {known})")]
    UnknownProfile { name: String, known: String },
    /// `out` is not a folder export may write into.
    #[error("{0}")]
    Out(String),
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// The bundles written.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportReport {
    pub out: PathBuf,
    pub profile: &'static str,
    pub bundles: usize,
    /// How many of them the profile accepts (they carry expected numbers).
    pub accepted: usize,
    /// Bundles holding only the pool rows their call touches.
    pub slim: usize,
    /// Cases written as skipped bundles: (folder name, reason).
    pub skipped: Vec<(String, String)>,
    /// Bytes of the tensor files written.
    pub bytes: u64,
}

impl Report for ExportReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json];
    type Document = doc::Export;

    /// A skipped case is a finding: its bundle carries no inputs.
    fn status(&self) -> Status {
        Status::findings_if(!self.skipped.is_empty())
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for (case, reason) in &self.skipped {
            writeln!(out, "SKIPPED {case}: {reason}")?;
        }
        let skipped = self.skipped.len();
        writeln!(
            out,
            "exported {} bundles to {} ({} accepted by {}, {} rejected, {skipped} skipped; {} slim; {:.1} MB)",
            self.bundles,
            self.out.display(),
            self.accepted,
            self.profile,
            self.bundles - self.accepted - skipped,
            self.slim,
            self.bytes as f64 / 1e6,
        )
    }

    fn document(&self) -> doc::Export {
        doc::Export {
            out: self.out.display().to_string(),
            profile: self.profile.to_string(),
            bundles: self.bundles,
            accepted: self.accepted,
            rejected: self.bundles - self.accepted - self.skipped.len(),
            slim: self.slim,
            bytes: self.bytes,
            skipped: self
                .skipped
                .iter()
                .map(|(case, reason)| doc::Skipped {
                    case: case.clone(),
                    reason: reason.clone(),
                })
                .collect(),
        }
    }
}

/// The reference's conventions for a profile (`fa3-stable` differs from `fa3` only in messages,
/// `mate` from `musa` in its entry point).
pub fn stack_of(profile: &str) -> Option<Stack> {
    match profile {
        "fa3-stable" => Some(Stack::Fa3),
        "mate" => Some(Stack::Musa),
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

/// Whether `call` returns `softmax_lse`, and how many values it returns on `stack`: `out` alone
/// (1), else a 4-tuple `(out, lse, out_accum, lse_accum)` (musa-fa3.md §7, cuda-fa3.md A.4), or
/// `(out, lse)` on mate's MLA branch and on sgl-kernel's FA4 path (sgl-kernel-cuda.md).
pub fn returned_values(call: &KvCacheCall, stack: Stack) -> (bool, usize) {
    let bound = call.bind_canonical().ok();
    let returns_lse = bound
        .as_ref()
        .and_then(|b| b.get(Param::ReturnSoftmaxLse).truthy())
        .unwrap_or(false);
    let mla = call
        .context
        .sglang_backend
        .as_ref()
        .is_some_and(|b| b.use_mla);
    let fa4 = bound.and_then(|b| b.get(Param::Ver).as_int()) == Some(4);
    let values = match (returns_lse, stack) {
        (false, _) => 1,
        (true, Stack::Musa) if mla => 2,
        (true, Stack::SglKernel) if fa4 => 2,
        (true, _) => 4,
    };
    (returns_lse, values)
}

/// `call` with the values of its integer tensors written in, from `tensors` (materialised tensors
/// by stored name); float data stays out.
pub fn with_int_values(call: &KvCacheCall, tensors: &Tensors) -> KvCacheCall {
    let mut out = call.clone();
    for (name, t) in out.tensors_mut() {
        if !t.dtype.is_floating_point() && t.values.is_none() {
            t.values = tensors.get(&name).map(|h| TensorValues::Int(h.ints()));
        }
    }
    out
}

/// Whether bundles hold the pool rows a call touches ([`slim`]) or whole pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pools {
    Slim,
    Whole,
}

/// The call a bundle carries: `call` with the `scheduler_metadata` its `metadata_args` describe,
/// its integer values inline and, with [`Pools::Slim`], only the pool rows it touches when that
/// changes no profile's verdict.
fn bundle_call(
    call: &KvCacheCall,
    profile: &'static dyn Profile,
    pools: Pools,
    cap_bytes: usize,
) -> Result<(KvCacheCall, Option<SlimCall>), String> {
    let call = with_described_metadata(call, DEFAULT_MP)?;
    let indices = materialise_index_tensors(&call, cap_bytes).map_err(|e| e.to_string())?;
    let call = with_int_values(&call, &indices);
    let slimmed = match pools {
        Pools::Whole => None,
        Pools::Slim => slim(&call).filter(|s| {
            verdict_records(&s.call, profile, cap_bytes)
                == verdict_records(&call, profile, cap_bytes)
        }),
    };
    Ok((call, slimmed))
}

/// The default profiles' verdicts on `call` and, when it is not among them, the verdict of the
/// `profile` the bundle is exported for; the gate profile's with the stale-metadata findings
/// `certify` adds, reading the call's integer tensors within `cap_bytes`.
pub fn verdict_records(
    call: &KvCacheCall,
    profile: &'static dyn Profile,
    cap_bytes: usize,
) -> Vec<VerdictRecord> {
    let device = MusaOptions {
        mp: DEFAULT_MP,
        memory: Budget::new(cap_bytes),
    };
    let mut shown = profiles::defaults();
    if shown.iter().all(|p| p.name() != profile.name()) {
        shown.push(profile);
    }
    certify_call(call, &shown, &device)
        .verdicts
        .iter()
        .map(VerdictRecord::from)
        .collect()
}

/// Builds the bundle of one call: inputs, every profile's verdict and, when `profile` accepts the
/// call, the reference's numbers under its conventions. A call whose inputs or numbers cannot be
/// made gets a skipped bundle that says why.
pub fn bundle_for(
    call: &KvCacheCall,
    profile: &'static dyn Profile,
    cap_bytes: usize,
    pools: Pools,
) -> CaseBundle {
    let verdicts = verdict_records(call, profile, cap_bytes);
    let skipped = |call: &KvCacheCall, verdicts: Vec<VerdictRecord>, reason: String| CaseBundle {
        call: call.clone(),
        inputs: TensorFile::new(),
        verdicts,
        expected: None,
        pool: None,
        skipped: Some(reason),
    };
    let (whole, slimmed) = match bundle_call(call, profile, pools, cap_bytes) {
        Ok(found) => found,
        Err(reason) => return skipped(call, verdicts, reason),
    };
    let (call, rows, pool) = match slimmed {
        Some(s) => {
            let pool = PoolRows {
                pool_rows: s.pool_rows,
                rows: s.rows["k_cache"].clone(),
            };
            (s.call, s.rows, Some(pool))
        }
        None => (whole, RowOrigins::new(), None),
    };
    match inputs_and_numbers(&call, profile, cap_bytes, &rows) {
        Ok((inputs, expected)) => CaseBundle {
            call,
            inputs,
            verdicts,
            expected,
            pool,
            skipped: None,
        },
        Err(reason) => skipped(&call, verdicts, reason),
    }
}

/// The stored inputs of `call` and, when `profile` accepts it, the reference's numbers.
fn inputs_and_numbers(
    call: &KvCacheCall,
    profile: &dyn Profile,
    cap_bytes: usize,
    rows: &RowOrigins,
) -> Result<(TensorFile, Option<ExpectedNumbers>), String> {
    let mut budget = Budget::new(cap_bytes);
    let tensors = materialise_rows(call, budget.left(), rows).map_err(|e| e.to_string())?;
    let stored: Vec<(String, &TensorArg)> = call.tensors().collect();
    // the stored inputs, and the file serialised from them
    let stored_bytes: u128 = stored
        .iter()
        .map(|(name, arg)| (tensors[name].data.len() * arg.dtype.size_bytes()) as u128)
        .sum();
    budget
        .hold("the call's tensors", host_bytes(&tensors) as u128)
        .and_then(|()| budget.hold("the stored inputs", 2 * stored_bytes))
        .map_err(|over| over.to_string())?;
    let inputs: TensorFile = stored
        .iter()
        .map(|(name, arg)| (name.clone(), StoredTensor::for_arg(&tensors[name], arg)))
        .collect();
    let expected = match profile.validate(call).outcome {
        Outcome::Rejected(_) => None,
        Outcome::Accepted(_) => {
            let stack = stack_of(profile.name()).ok_or_else(|| {
                format!("no reference conventions for profile {}", profile.name())
            })?;
            let (meaning, exact, lowprec) =
                expected_references(call, &tensors, profile, stack, &mut budget).map_err(|e| {
                    format!("accepted by {}, but the reference: {e}", profile.name())
                })?;
            let dtype = |name: &str| tensors.get(name).map_or(exact.dtype, |t| t.dtype);
            Some(ExpectedNumbers::new(
                profile.name(),
                out_dtype(stack, exact.dtype),
                (dtype("k_cache"), dtype("v_cache")),
                returned_values(&meaning, stack),
                &exact,
                &lowprec,
            ))
        }
    };
    Ok((inputs, expected))
}

/// What a device running `call` as `profile` (on `stack`) must return, and the call in the
/// canonical signature whose meaning that is: on MUSA the device's departures from clean
/// attention overlaid and the elements it leaves undefined marked (docs/musa-device.md);
/// elsewhere the reference. A call to mate's FA3 wrapper means one rank's call
/// ([`musa::mate_rank`]); with context parallelism its numbers are the reference's for that rank
/// (the device model's departures are modelled for single-rank calls only).
fn expected_references(
    call: &KvCacheCall,
    tensors: &Tensors,
    profile: &dyn Profile,
    stack: Stack,
    budget: &mut Budget,
) -> Result<(KvCacheCall, RefOutput, RefOutput), String> {
    let both = |run: &dyn Fn(Precision) -> Result<RefOutput, RefError>| {
        Ok::<_, RefError>((run(Precision::Exact)?, run(Precision::LowPrecision)?))
    };
    if profile.name() == "mate" {
        let (rank_call, cp) = musa::mate_rank(call)?;
        let multi_rank = cp.world_size > 1;
        let tensors = musa::rank_tensors(tensors.clone());
        let cp_rank = multi_rank.then_some(&cp);
        hold_references(budget, &rank_call, &tensors, Stack::Musa, cp_rank)?;
        let (exact, lowprec) = if !multi_rank {
            device::musa_references(&rank_call, &tensors)
        } else {
            both(&|precision| reference::run_on_rank(&rank_call, &tensors, &cp, precision))
        }
        .map_err(|e| e.to_string())?;
        return Ok((rank_call, exact, lowprec));
    }
    hold_references(budget, call, tensors, stack, None)?;
    let (exact, lowprec) = if stack == Stack::Musa {
        device::musa_references(call, tensors)
    } else {
        both(&|precision| reference::run(call, tensors, stack, precision))
    }
    .map_err(|e| e.to_string())?;
    Ok((call.clone(), exact, lowprec))
}

/// Holds in `budget` what computing a bundle's expected numbers takes: two copies of the tensors
/// (as a rank's call names them, and the inputs as the device reads them), the reference in f64 and in
/// low precision, and the device's departures and encoded outputs made from their results (at most
/// as much again).
fn hold_references(
    budget: &mut Budget,
    call: &KvCacheCall,
    tensors: &Tensors,
    stack: Stack,
    cp: Option<&ContextParallel>,
) -> Result<(), String> {
    let references =
        reference::scratch_bytes(call, tensors, stack, cp).map_err(|e| e.to_string())?;
    budget
        .hold(
            "the expected numbers (the reference in f64 and in low precision)",
            2 * host_bytes(tensors) as u128 + 3 * references,
        )
        .map_err(|over| over.to_string())
}

/// A folder name for a case id: the id with anything unusual replaced, or `case-<index>`.
fn case_slug(index: usize, id: &str) -> String {
    let slug: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(120)
        .collect();
    if slug.trim_matches('.').is_empty() {
        format!("case-{index}")
    } else {
        slug
    }
}

/// One folder name per case, by id; a name taken by an earlier case gets the case's index.
fn case_dirs(calls: &[KvCacheCall]) -> Vec<String> {
    let mut taken = BTreeSet::new();
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let slug = case_slug(index, &call.id);
            let name = if taken.contains(&slug) {
                format!("{slug}-{index}")
            } else {
                slug
            };
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// Makes `out` ready for new bundles: absent or empty, or (with `force`) emptied of the bundles
/// it holds. Anything else in a non-empty folder is refused: results of other cases must never
/// mix with these.
fn prepare_out(out: &Path, force: bool) -> Result<(), String> {
    let shown = out.display();
    let entries: Vec<PathBuf> = match std::fs::read_dir(out) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{shown}: {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    if entries.is_empty() {
        return std::fs::create_dir_all(out).map_err(|e| format!("{shown}: {e}"));
    }
    let (bundles, other): (Vec<PathBuf>, Vec<PathBuf>) = entries
        .into_iter()
        .partition(|p| p.join(CALL_FILE).is_file());
    if !force {
        return Err(format!(
            "{shown} is not empty ({} bundles, {} other entries): export into an empty folder, \
             or pass --force to replace its bundles",
            bundles.len(),
            other.len()
        ));
    }
    if let Some(first) = other.first() {
        return Err(format!(
            "{shown} holds {} (and {} more) besides bundles: --force replaces bundles only, \
             choose an empty folder",
            first.display(),
            other.len() - 1
        ));
    }
    for bundle in bundles {
        std::fs::remove_dir_all(&bundle).map_err(|e| format!("{}: {e}", bundle.display()))?;
    }
    Ok(())
}

/// Writes one bundle per call of `options`, with a progress bar on stderr. A case whose bundle
/// cannot be made is a skipped bundle in the report; `Err` only for bad input or a failed write.
pub fn export(options: &ExportOptions) -> Result<ExportReport, ExportError> {
    let profile = profiles::by_name(&options.profile).ok_or_else(|| {
        let known: Vec<&str> = profiles::all().iter().map(|p| p.name()).collect();
        ExportError::UnknownProfile {
            name: options.profile.clone(),
            known: known.join(", "),
        }
    })?;
    prepare_out(&options.out, options.force).map_err(ExportError::Out)?;
    let selected: Vec<(&KvCacheCall, String)> = options
        .calls
        .iter()
        .zip(case_dirs(&options.calls))
        .enumerate()
        .filter(|(position, (_, name))| {
            options.partition.is_none_or(|p| p.selects(*position, name))
        })
        .map(|(_, selected)| selected)
        .collect();
    let progress = crate::report::progress_bar(selected.len() as u64);
    let mut report = ExportReport {
        out: options.out.clone(),
        profile: profile.name(),
        bundles: 0,
        accepted: 0,
        slim: 0,
        skipped: Vec::new(),
        bytes: 0,
    };
    for (call, name) in selected {
        let bundle = bundle_for(call, profile, options.memory_cap, options.pools);
        let dir = options.out.join(&name);
        write_bundle(&dir, &bundle)?;
        report.bundles += 1;
        report.accepted += usize::from(bundle.expected.is_some());
        report.slim += usize::from(bundle.pool.is_some());
        if let Some(reason) = bundle.skipped {
            report.skipped.push((name, reason));
        }
        report.bytes += [INPUTS_FILE, EXPECTED_TENSORS]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
            .map(|m| m.len())
            .sum::<u64>();
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::PyValue;
    use crate::tensor::materialise;

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

    fn options(calls: &[&str], out: &Path) -> ExportOptions {
        ExportOptions {
            calls: calls
                .iter()
                .map(|c| crate::spec::parse_specs(c).unwrap().remove(0))
                .collect(),
            partition: None,
            out: out.to_path_buf(),
            force: false,
            pools: Pools::Slim,
            profile: "musa".into(),
            memory_cap: 1 << 24,
        }
    }

    const DECODE: &str = r#"{"id": "decode/1", "args": {
        "q": {"tensor": {"shape": [1, 1, 2, 64], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [1, 16, 1, 64], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [1, 16, 1, 64], "dtype": "bfloat16"}}}}"#;
    const OVER_CAP: &str = r#"{"id": "big", "args": {
        "q": {"tensor": {"shape": [1, 1, 2, 64], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [1, 65536, 1, 64], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [1, 65536, 1, 64], "dtype": "bfloat16"}}}}"#;

    #[test]
    fn a_case_that_cannot_be_written_is_a_skipped_bundle_and_the_run_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bundles");
        let report = export(&options(&[OVER_CAP, DECODE, DECODE], &out)).unwrap();
        assert_eq!(report.status(), Status::Findings);
        let mut human = Vec::new();
        report.write_human(&mut human).unwrap();
        let human = String::from_utf8(human).unwrap();
        assert!(
            human.starts_with("SKIPPED big: the call's tensors need "),
            "{human}"
        );
        assert!(
            human.contains("(2 accepted by musa, 0 rejected, 1 skipped; 0 slim; "),
            "{human}"
        );
        // Folders are named by case id; a repeated id gets its index.
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["big", "decode-1", "decode-1-2"]);
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("big/expected.json")).unwrap())
                .unwrap();
        assert!(
            expected["skipped"]
                .as_str()
                .unwrap()
                .contains("over the 16777216 bytes left of the memory cap"),
            "{expected:#}"
        );
        assert_eq!(expected["verdicts"][0]["outcome"], "accepted");
        assert!(!out.join("big").join(INPUTS_FILE).exists());
        assert!(out.join("decode-1").join(INPUTS_FILE).exists());
    }

    /// The bundle folders `export` wrote under `out`, sorted.
    fn bundle_names(out: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn shards_of_an_export_are_disjoint_cover_it_and_keep_its_names() {
        let dir = tempfile::tempdir().unwrap();
        // A repeated id: its second bundle is named by its index in the whole export.
        let calls = [DECODE, DECODE, OVER_CAP, DECODE];
        let whole = dir.path().join("whole");
        export(&options(&calls, &whole)).unwrap();
        for scheme in ["count", "hash"] {
            let mut sharded = Vec::new();
            for shard in 1..=3 {
                let out = dir.path().join(format!("{scheme}-{shard}"));
                let mut options = options(&calls, &out);
                options.partition = Some(format!("{scheme}:{shard}/3").parse().unwrap());
                let report = export(&options).unwrap();
                let names = if out.exists() {
                    bundle_names(&out)
                } else {
                    Vec::new()
                };
                assert_eq!(report.bundles, names.len());
                sharded.extend(names);
            }
            sharded.sort();
            assert_eq!(sharded, bundle_names(&whole), "{scheme}");
        }
        assert_eq!(
            bundle_names(&whole),
            ["big", "decode-1", "decode-1-1", "decode-1-3"]
        );
    }

    #[test]
    fn a_used_folder_is_refused_unless_forced_and_never_mixed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bundles");
        let old = out.join("old-case");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join(CALL_FILE), "{}").unwrap();
        let mut options = options(&[DECODE], &out);
        let err = export(&options).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} is not empty (1 bundles, 0 other entries): export into an empty folder, or \
                 pass --force to replace its bundles",
                out.display()
            )
        );
        options.force = true;
        assert_eq!(export(&options).unwrap().bundles, 1);
        assert!(!old.exists(), "--force removes the old bundles");
        assert!(out.join("decode-1").join(CALL_FILE).exists());
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let err = export(&options).unwrap_err().to_string();
        assert!(err.contains("notes.txt"), "{err}");
        assert!(
            out.join("decode-1").exists(),
            "a refused export removes nothing"
        );
    }

    #[test]
    fn metadata_args_reach_the_bundle_with_every_certify_hazard() {
        let text = include_str!("../../examples/stale-metadata-pack-gqa.json");
        let call = crate::spec::parse_specs(text).unwrap().remove(0);
        let musa = profiles::by_name("musa").unwrap();
        let bundle = bundle_for(&call, musa, 1 << 30, Pools::Slim);
        let metadata = bundle.call.passed("scheduler_metadata").unwrap();
        let values = metadata.as_tensor().unwrap().int_values().unwrap();
        assert_eq!(
            bundle.inputs["scheduler_metadata"].to_host().ints(),
            values,
            "the buffer the metadata_args describe is an input"
        );
        assert_eq!(bundle.call.metadata_args, call.metadata_args);
        let certified: Vec<String> =
            certify_call(&call, &profiles::defaults(), &MusaOptions::default())
                .gate
                .hazards
                .iter()
                .map(|h| h.code.to_string())
                .collect();
        assert!(
            certified.iter().any(|c| c.starts_with("H-SCHED-")),
            "{certified:?}"
        );
        let exported: Vec<&str> = bundle
            .verdict("musa")
            .unwrap()
            .hazards
            .iter()
            .map(|h| h.code.as_str())
            .collect();
        assert_eq!(exported, certified);
    }

    #[test]
    fn expanded_tensors_are_stored_as_their_storage() {
        // SGLang's fp8 path: `k_scale.expand(batch, heads_k)`.
        let spec = r#"{"id": "fp8", "args": {
            "q": {"tensor": {"shape": [2, 1, 4, 64], "dtype": "float8_e4m3fn"}},
            "k_cache": {"tensor": {"shape": [2, 16, 2, 64], "dtype": "float8_e4m3fn"}},
            "v_cache": {"tensor": {"shape": [2, 16, 2, 64], "dtype": "float8_e4m3fn"}},
            "k_descale": {"tensor": {"shape": [2, 2], "stride": [0, 0], "dtype": "float32"}}}}"#;
        let call = crate::spec::parse_specs(spec).unwrap().remove(0);
        let musa = profiles::by_name("musa").unwrap();
        let bundle = bundle_for(&call, musa, 1 << 30, Pools::Slim);
        assert_eq!(bundle.skipped, None);
        assert_eq!(bundle.inputs["k_descale"].shape, [1], "one memory location");
        assert_eq!(bundle.inputs["q"].shape, [2, 1, 4, 64]);
    }
}
