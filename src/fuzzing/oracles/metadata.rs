//! The metadata oracle: the properties the `metadata` and `kernel` conform suites, the `metadata`
//! and `differential` fuzz targets and the proptests check on one valid MUSA call (musa-fa3.md §6.9–§6.11), through the whole-stack entry point
//! [`crate::musa::flash_attn_with_kvcache_on`]:
//!
//! * **equivalence**: `scheduler_metadata = get_scheduler_metadata(<the call's own arguments>)`
//!   gives the output of no metadata, bit for bit when every sequence runs unsplit (the same
//!   partition), within the tolerance rule otherwise, and both match the reference; with sinks the
//!   metadata is dropped and the output is bit-identical;
//! * **sensitivity**: metadata computed for one changed argument is detected (a finding), and the
//!   kernel path shows exactly the consequence the finding names: refused (racing or out-of-bounds
//!   on the device), NaN rows (never computed), or a result within tolerance (harmless change);
//! * **injection**: the call made inside SGLang's MUSA backend (at the layer that refreshes the
//!   metadata) gets what the wrapper recomputes from its own view of the call; where that view
//!   agrees with the call the output matches the reference, where it does not the findings name the
//!   difference and the kernel path shows its consequence, and where the wrapper raises, the
//!   profile raises the same.

use crate::call::{
    Dtype, KvCacheCall, LayerInfo, MetadataArgsSpec, PyValue, SglangBackend, TensorValues,
};
use crate::cases::Options;
use crate::device;
use crate::kernel::KernelError;
use crate::musa::{
    InjectionCache, MetadataUsed, MusaError, MusaOptions, MusaOutput, flash_attn_with_kvcache_on,
    injected_metadata,
};
use crate::reference::{RefOutput, Stack};
use crate::scheduler::{check_buffer, get_scheduler_metadata, own_args};
use crate::tensor::{HostTensor, MaterialiseError, Tensors, materialise};
use crate::validate::profiles::MUSA;
use crate::validate::{Hazard, Profile, Severity};
use std::cell::{OnceCell, RefCell};

/// What a check established (for coverage statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Established {
    /// The call is outside what the property covers (rejected, MLA, or the changed arguments have
    /// no metadata).
    NotApplicable,
    /// Same partition: outputs bit-identical.
    BitIdentical,
    /// Other split partition: both within tolerance of the reference.
    WithinTolerance,
    /// Sinks: metadata dropped, output bit-identical to no metadata.
    DroppedBySinks,
    /// The metadata computed from the call's own arguments already breaks a device requirement
    /// (found, and the kernel path shows it).
    OwnMetadataHazard,
    /// Sensitivity: detected, harmless (kernel result within tolerance).
    DetectedHarmless,
    /// Sensitivity: detected, rows never computed (NaN on the kernel path).
    DetectedRowsMissing,
    /// Sensitivity: detected, the device would race or read out of bounds (the kernel path refuses).
    DetectedRefused,
    /// Injection: SGLang's wrapper raises while recomputing (e.g. no `cu_seqlens_q`).
    InjectionRaises,
}

/// One argument of `get_scheduler_metadata` changed away from the call's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    MaxSeqlenQ,
    CacheSeqlens,
    Heads,
    Window,
    Causal,
    PageSize,
    BatchOrder,
}

impl Change {
    pub const ALL: [Change; 7] = [
        Change::MaxSeqlenQ,
        Change::CacheSeqlens,
        Change::Heads,
        Change::Window,
        Change::Causal,
        Change::PageSize,
        Change::BatchOrder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Change::MaxSeqlenQ => "max_seqlen_q",
            Change::CacheSeqlens => "cache_seqlens",
            Change::Heads => "heads",
            Change::Window => "window",
            Change::Causal => "causal",
            Change::PageSize => "page_size",
            Change::BatchOrder => "batch_order",
        }
    }

    /// The changed arguments; `None` when the change does not apply (one sequence for batch order).
    pub fn apply(self, own: &MetadataArgsSpec) -> Option<MetadataArgsSpec> {
        let mut args = own.clone();
        match self {
            Change::MaxSeqlenQ => {
                args.max_seqlen_q = if own.max_seqlen_q > 1 {
                    1
                } else {
                    own.max_seqlen_q + 300
                };
            }
            Change::CacheSeqlens => {
                args.cache_seqlens = own.cache_seqlens.iter().map(|&s| s + 700).collect();
            }
            Change::Heads => {
                args.num_heads_q = if own.num_heads_q > own.num_heads_kv {
                    own.num_heads_kv
                } else {
                    own.num_heads_q * 8
                };
            }
            Change::Window => {
                args.window_size = match own.window_size {
                    Some([l, r]) if l >= 0 || r >= 0 => None,
                    _ => Some([0, 0]),
                };
            }
            Change::Causal => args.causal = !own.causal,
            Change::PageSize => args.page_size = Some(own.page_size.unwrap_or(1) * 2 + 1),
            Change::BatchOrder => {
                if own.batch_size < 2 {
                    return None;
                }
                args.cache_seqlens.reverse();
                for v in [&mut args.cache_leftpad].into_iter().flatten() {
                    v.reverse();
                }
                for cu in [&mut args.cu_seqlens_q, &mut args.cu_seqlens_k_new]
                    .into_iter()
                    .flatten()
                {
                    let mut lengths: Vec<i64> = cu.windows(2).map(|w| w[1] - w[0]).collect();
                    lengths.reverse();
                    let mut at = 0;
                    *cu = std::iter::once(0)
                        .chain(lengths.into_iter().map(|l| {
                            at += l;
                            at
                        }))
                        .collect();
                }
            }
        }
        Some(args)
    }
}

/// Element-wise identity, NaN equal to NaN.
fn bit_identical(a: &MusaOutput, b: &MusaOutput) -> bool {
    let same = |x: &HostTensor, y: &HostTensor| {
        x.data.shape() == y.data.shape()
            && ndarray::Zip::from(&x.data)
                .and(&y.data)
                .all(|p, q| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
    };
    let same_cache = |x: &Option<HostTensor>, y: &Option<HostTensor>| match (x, y) {
        (Some(x), Some(y)) => same(x, y),
        (x, y) => x.is_none() && y.is_none(),
    };
    same(a.returned.out(), b.returned.out())
        && a.returned
            .lse()
            .zip(b.returned.lse())
            .is_none_or(|(x, y)| same(x, y))
        && same_cache(&a.k_cache, &b.k_cache)
        && same_cache(&a.v_cache, &b.v_cache)
}

fn error_codes(findings: &[Hazard]) -> Vec<&'static str> {
    findings
        .iter()
        .filter(|h| h.severity == Severity::Error)
        .map(|h| h.code)
        .collect()
}

/// Memory cap for the properties' calls ([`case_options`] stay far below it).
pub const PROPERTY_MEMORY_CAP: usize = 1 << 28;

/// One call of the properties' domain (a valid, non-MLA MUSA call without metadata of its own),
/// materialised once; its reference results are computed on first use and shared by every
/// property checked on it.
pub struct Subject {
    call: KvCacheCall,
    /// The call's tensors, without metadata; [`Subject::run`] adds the metadata a call passes
    /// for the run's duration (copying every tensor per run cost the `metadata` fuzz target a
    /// tenth of its time).
    tensors: RefCell<Tensors>,
    /// The `get_scheduler_metadata` arguments that describe the call itself.
    own: MetadataArgsSpec,
    mp: usize,
    /// The exact and the low-precision reference.
    references: OnceCell<Result<(RefOutput, RefOutput), String>>,
}

impl Subject {
    /// `call` on a device with `mp` multiprocessors, its tensors materialised under
    /// `memory_cap`; `None` when the call is outside the domain (or over the cap).
    pub fn of(call: &KvCacheCall, mp: usize, memory_cap: usize) -> Result<Option<Subject>, String> {
        let verdict = MUSA.validate(call);
        match verdict.resolved() {
            Some(r) if !r.mla_decode => {}
            _ => return Ok(None),
        }
        if call
            .passed("scheduler_metadata")
            .is_some_and(|v| !v.is_none())
        {
            return Ok(None);
        }
        let tensors = match materialise(call, memory_cap) {
            Ok(tensors) => tensors,
            Err(MaterialiseError::OverCap { .. }) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        Ok(Some(Subject {
            own: own_args(call, &tensors)?,
            call: call.clone(),
            tensors: RefCell::new(tensors),
            mp,
            references: OnceCell::new(),
        }))
    }

    /// The call passing `values`, and the stale-metadata findings of `values` computed with
    /// `args`.
    fn passing(&self, values: &[i32], args: &MetadataArgsSpec) -> (KvCacheCall, Vec<Hazard>) {
        let with = self.call.with_scheduler_metadata(values);
        let findings = check_buffer(&with, &self.tensors.borrow(), values, Some(args), self.mp);
        (with, findings)
    }

    /// Runs `call` (this subject's call, possibly with metadata added) on the whole stack.
    fn run(&self, call: &KvCacheCall) -> Result<MusaOutput, MusaError> {
        let options = MusaOptions {
            mp: self.mp,
            ..MusaOptions::default()
        };
        let mut tensors = self.tensors.borrow_mut();
        if let Some(TensorValues::Int(values)) = call
            .passed("scheduler_metadata")
            .and_then(PyValue::as_tensor)
            .and_then(|t| t.values.as_ref())
        {
            let values = values.iter().map(|&x| x as f64);
            tensors.insert(
                "scheduler_metadata".into(),
                HostTensor::vector(Dtype::Int32, values),
            );
        }
        let result =
            flash_attn_with_kvcache_on(call, &tensors, &mut InjectionCache::default(), &options);
        tensors.remove("scheduler_metadata");
        result
    }

    /// Judges `output` against the reference under the tolerance rule.
    fn matches_reference(&self, output: &MusaOutput) -> Result<(), String> {
        let (exact, low) = self
            .references
            .get_or_init(|| {
                device::musa_references(&self.call, &self.tensors.borrow())
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::clone)?;
        output.clone().judge(exact, low).map(|_| ())
    }

    /// How the kernel path must show the findings' consequence in `result` (the run with stale
    /// metadata), and whether it does.
    fn kernel_shows(
        &self,
        result: Result<MusaOutput, MusaError>,
        codes: &[&'static str],
    ) -> Result<Established, String> {
        let refused = codes
            .iter()
            .any(|c| matches!(*c, "H-SCHED-BATCH-TABLE" | "H-SCHED-SPLITS-EXCEED"));
        let missing = codes
            .iter()
            .any(|c| matches!(*c, "H-SCHED-M-BLOCKS" | "H-SCHED-SPLITS-NONPOSITIVE"));
        if refused {
            return match result {
                Err(MusaError::Kernel(KernelError::Rejected(_))) => {
                    Ok(Established::DetectedRefused)
                }
                other => Err(format!(
                    "findings {codes:?} say the device races or reads out of bounds, the kernel path gave {:?}",
                    other.map(|o| o.num_splits)
                )),
            };
        }
        let output = result.map_err(|e| format!("kernel path failed: {e}"))?;
        if missing {
            // Rows no tile wrote come back NaN, directly or through the combine of never-written
            // partial slots.
            let nan = output.returned.out().data.iter().any(|x| x.is_nan());
            return if nan {
                Ok(Established::DetectedRowsMissing)
            } else {
                Err(format!(
                    "findings {codes:?} say rows are never computed, the kernel path computed them all"
                ))
            };
        }
        self.matches_reference(&output)
            .map(|()| Established::DetectedHarmless)
            .map_err(|e| format!("findings {codes:?} say harmless, but the result differs: {e}"))
    }

    /// The equivalence property.
    pub fn equivalence(&self) -> Result<Established, String> {
        let Ok(metadata) = get_scheduler_metadata(&self.own, self.mp) else {
            return Ok(Established::NotApplicable);
        };
        let (with, findings) = self.passing(&metadata.to_tensor(), &self.own);
        let plain = self
            .run(&self.call)
            .map_err(|e| format!("without metadata: {e}"))?;
        self.matches_reference(&plain)
            .map_err(|e| format!("without metadata: {e}"))?;
        if findings
            .iter()
            .any(|h| h.code == "H-SCHED-DROPPED-BY-SINKS")
        {
            let output = self.run(&with).map_err(|e| format!("with metadata: {e}"))?;
            return if bit_identical(&plain, &output) {
                Ok(Established::DroppedBySinks)
            } else {
                Err("sinks must drop the metadata, but the output changed".into())
            };
        }
        let errors = error_codes(&findings);
        if !errors.is_empty() {
            self.kernel_shows(self.run(&with), &errors)?;
            return Ok(Established::OwnMetadataHazard);
        }
        let output = self.run(&with).map_err(|e| format!("with metadata: {e}"))?;
        if metadata.num_splits_dynamic.iter().all(|&n| n <= 1) {
            if bit_identical(&plain, &output) {
                Ok(Established::BitIdentical)
            } else {
                Err(
                    "every sequence runs unsplit, yet the output differs from the run without metadata"
                        .into(),
                )
            }
        } else {
            self.matches_reference(&output)
                .map(|()| Established::WithinTolerance)
                .map_err(|e| format!("with split metadata: {e}"))
        }
    }

    /// The sensitivity property for one changed argument.
    pub fn sensitivity(&self, change: Change) -> Result<Established, String> {
        // Batch order is no change when every sequence looks the same.
        let Some(changed) = change
            .apply(&self.own)
            .filter(|changed| *changed != self.own)
        else {
            return Ok(Established::NotApplicable);
        };
        let Ok(metadata) = get_scheduler_metadata(&changed, self.mp) else {
            return Ok(Established::NotApplicable);
        };
        let (with, findings) = self.passing(&metadata.to_tensor(), &changed);
        if findings
            .iter()
            .any(|h| h.code == "H-SCHED-DROPPED-BY-SINKS")
        {
            return Ok(Established::DroppedBySinks);
        }
        if findings.is_empty() {
            return Err(format!(
                "metadata computed with another {} is not detected",
                change.name()
            ));
        }
        self.kernel_shows(self.run(&with), &error_codes(&findings))
    }

    /// The injection property: the call made by the first layer of a `forward_extend` pass in
    /// SGLang's MUSA backend, the layer's heads and dims the call's own and the batch's
    /// `max_seqlen_k` the call's.
    pub fn injection(&self) -> Result<Established, String> {
        let own = &self.own;
        let as_i64 = |x: usize| i64::try_from(x).unwrap_or(i64::MAX);
        let mut call = self.call.clone();
        call.context.sglang_backend = Some(SglangBackend {
            prefix: "forward_extend".into(),
            layer: Some(LayerInfo {
                layer_id: 0,
                tp_q_head_num: as_i64(own.num_heads_q),
                tp_k_head_num: as_i64(own.num_heads_kv),
                qk_head_dim: as_i64(own.headdim),
                v_head_dim: as_i64(own.headdim_v.unwrap_or(own.headdim)),
            }),
            max_seqlen_k: Some(as_i64(own.max_seqlen_k)),
            ..SglangBackend::default()
        });
        if MUSA.validate(&call).resolved().is_none() {
            return Ok(Established::InjectionRaises);
        }
        // The profile accepted the call, so the wrapper's recomputation must succeed.
        let injected = injected_metadata(
            &call,
            &self.tensors.borrow(),
            &mut InjectionCache::default(),
            self.mp,
        )
        .map_err(|e| format!("the profile accepts, the injection fails: {e}"))?;
        let MetadataUsed::Injected { metadata, .. } = injected else {
            return Err(format!(
                "the first layer of a pass must recompute, got {injected:?}"
            ));
        };
        let Some(args) = &metadata.args else {
            return Err(format!(
                "a recomputed buffer without its arguments: {metadata:?}"
            ));
        };
        let (_, findings) = self.passing(&metadata.values, args);
        let result = self.run(&call);
        if let Ok(output) = &result {
            let same = matches!(&output.metadata,
                MetadataUsed::Injected { metadata: used, .. } if used.values == metadata.values);
            if !same {
                return Err(format!(
                    "the entry point ran with {:?}, the wrapper injects {:?}",
                    output.metadata, metadata.values
                ));
            }
        }
        let errors = error_codes(&findings);
        if errors.is_empty() {
            let output = result.map_err(|e| format!("with injected metadata: {e}"))?;
            return self
                .matches_reference(&output)
                .map(|()| Established::WithinTolerance)
                .map_err(|e| format!("injected metadata without findings: {e}"));
        }
        self.kernel_shows(result, &errors)
    }
}

/// The equivalence property for `call` on a device with `mp` multiprocessors.
pub fn check_equivalence(call: &KvCacheCall, mp: usize) -> Result<Established, String> {
    Subject::of(call, mp, PROPERTY_MEMORY_CAP)?
        .map_or(Ok(Established::NotApplicable), |s| s.equivalence())
}

/// The sensitivity property for `call` and one changed argument.
pub fn check_sensitivity(
    call: &KvCacheCall,
    change: Change,
    mp: usize,
) -> Result<Established, String> {
    Subject::of(call, mp, PROPERTY_MEMORY_CAP)?
        .map_or(Ok(Established::NotApplicable), |s| s.sensitivity(change))
}

/// The calls the properties are checked on: MUSA calls long enough to split the key range
/// (more than 4 key blocks) and, with a few query heads per KV head, to need several m-blocks.
/// Head dims stay at 64 or below: the split count and the tile shape read them only for sizes
/// these calls never reach (a KV head over mate's L2 size, head dims of 256 and more), and the
/// L2 head grouping still takes its groups of 16 and 8 (4 and 2 need `d + dv` above 128), while
/// larger dims multiplied every cache element materialised, copied and compared (the
/// `differential` target and the `kernel` suite draw them all).
pub fn case_options() -> Options {
    Options {
        max_seqlen_q: 48,
        max_seqlen_k: 640,
        max_heads_k: 2,
        max_group: 8,
        max_head_dim: 64,
        ..Options::small(Stack::Musa)
    }
}
