//! `fa3conform certify`: every selected profile's verdict on each call of a spec file, the hazards,
//! and a one-line compatibility summary, as human text, JSON or JUnit XML; with `--numerics`, the
//! numbers of each accepted call on the modelled MUSA stack against the reference ([`numerics`]).
//!
//! The report's status is a success when every call is accepted by the gate profile (`musa`, or
//! `mate` for calls written for mate's FA3-compatible wrapper: `--profile mate` without `musa`)
//! with no error-severity hazard (and, with `--numerics`, no numeric difference), findings otherwise. A call that cannot
//! be read (a bad JSON line, an invalid array element) is reported as such and the others are
//! still certified: the status is then an input error. A source that cannot be read at all is an
//! [`Error`].

pub mod numerics;

use crate::call::{Device, KvCacheCall, PyValue, TensorArg, TensorValues, python_float_repr};
use crate::device;
use crate::memory::Budget;
use crate::musa::{InjectionCache, MusaOptions};
use crate::report::documents::certify as doc;
use crate::report::junit::{self, TestRun};
use crate::report::{Format, Report, Status};
use crate::scheduler::stale_metadata_findings_on;
use crate::spec::{InvalidCall, SourceError, cpu_tensors_on, read_calls};
use crate::validate::registry::MessageMatch;
use crate::validate::{Outcome, Profile, Severity, Verdict, profiles};
use numerics::Numerics;
use std::borrow::Cow;
use std::io::{self, Write};
use std::path::PathBuf;

/// The profile whose verdict decides the status, unless the selection says the calls are written
/// for mate's own entry point ([`gate_of`]).
pub const GATE_PROFILE: &str = "musa";

/// The profile whose verdict decides a call's status: `mate` when the selected profiles include
/// it and not `musa` (calls written for mate's FA3-compatible wrapper), else [`GATE_PROFILE`].
pub fn gate_of(selected: &[&'static dyn Profile]) -> &'static dyn Profile {
    let named = |name: &str| selected.iter().find(|p| p.name() == name).copied();
    match (named(GATE_PROFILE), named("mate")) {
        (None, Some(mate)) => mate,
        _ => profiles::by_name(GATE_PROFILE).expect("the gate profile is registered"),
    }
}

/// What `certify` checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertifyOptions {
    /// Call spec files (JSON object, array or JSON lines), folders of recordings (their call
    /// files merged, a call recorded by several processes once); `-` is standard input.
    pub files: Vec<PathBuf>,
    /// Profiles to show; empty for all.
    pub profiles: Vec<String>,
    /// Also run each call the gate profile accepts on the modelled MUSA stack and compare it with
    /// the f64 reference ([`numerics`]).
    pub numerics: bool,
    /// Bytes a spec file may hold, and the bytes one call's integer tensors may take when the
    /// scheduler-metadata checks read them; with `numerics`, also the bytes one call's tensors may
    /// take once materialised.
    pub memory_cap: usize,
    /// Multiprocessor count of the modelled MUSA device (metadata, split heuristic, grid).
    pub mp: usize,
    /// Calls recorded on CPU stand for calls on this device: every CPU tensor is taken to be on it.
    pub device_as: Option<Device>,
}

/// Bad input: an unreadable file, an invalid spec, an unknown profile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An unreadable file or folder, or an invalid spec (named by its file).
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("unknown profile `{name}` (known: {known})")]
    UnknownProfile { name: String, known: String },
}

/// One call's verdicts, in the order of the selected profiles.
#[derive(Debug)]
pub struct CallReport {
    pub id: String,
    pub verdicts: Vec<Verdict>,
    /// The gate profile's verdict (also computed when `musa` is not selected for display).
    pub gate: Verdict,
    /// `--numerics`, for calls the gate profile accepts.
    pub numerics: Option<Numerics>,
}

impl CallReport {
    /// Accepted by the gate profile with no error-severity hazard and no numeric difference.
    pub fn passes(&self) -> bool {
        self.gate.resolved().is_some()
            && self
                .gate
                .hazards
                .iter()
                .all(|h| h.severity < Severity::Error)
            && !self.numerics.as_ref().is_some_and(Numerics::fails)
    }

    /// `accepted on sgl-kernel, rejected on musa: ValueError: Only ver=3 is supported for MUSA FA3.`
    pub fn summary(&self) -> String {
        summary(&self.verdicts)
    }
}

/// Validates `call` against `selected`, plus the gate profile ([`gate_of`]). A call the gate
/// profile accepts also gets the stale-metadata findings (whether the scheduler metadata it
/// passes, or that SGLang would inject, or that `metadata_args` describe, matches the call) and
/// the device's departures from clean attention it runs into ([`device::findings`]); for `mate`,
/// those of its call in the canonical signature, and none with context parallelism (both models
/// are of a single rank). `device` is the modelled device (multiprocessor count) and the memory
/// cap the index tensors those findings read must fit in.
pub fn certify_call(
    call: &KvCacheCall,
    selected: &[&'static dyn Profile],
    device: &MusaOptions,
) -> CallReport {
    let gate_profile = gate_of(selected);
    let mut gate = gate_profile.validate(call);
    if let Some(resolved) = gate.resolved() {
        // borrowed for `musa`: this runs for every call certify reads
        let single_rank = match gate_profile.name() {
            GATE_PROFILE => Some(Cow::Borrowed(call)),
            _ => crate::musa::mate_rank(call)
                .ok()
                .filter(|(_, cp)| cp.world_size <= 1)
                .map(|(rank_call, _)| Cow::Owned(rank_call)),
        };
        if let Some(single) = single_rank {
            let departures = device::findings(&single, resolved);
            gate.hazards.extend(stale_metadata_findings_on(
                &single,
                device.mp,
                device.memory.left(),
            ));
            gate.hazards.extend(departures);
        }
    }
    let verdicts: Vec<Verdict> = selected
        .iter()
        .map(|p| {
            if p.name() == gate.profile {
                gate.clone()
            } else {
                p.validate(call)
            }
        })
        .collect();
    CallReport {
        id: call.id.clone(),
        verdicts,
        gate,
        numerics: None,
    }
}

/// The one-line summary: accepted profiles first, then each distinct rejection with its profiles.
pub fn summary(verdicts: &[Verdict]) -> String {
    let accepted: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.resolved().is_some())
        .map(|v| v.profile)
        .collect();
    let mut rejections: Vec<(String, Vec<&str>)> = Vec::new();
    for v in verdicts {
        if let Some(r) = v.rejection() {
            let text = r.to_string();
            match rejections.iter_mut().find(|(t, _)| *t == text) {
                Some((_, names)) => names.push(v.profile),
                None => rejections.push((text, vec![v.profile])),
            }
        }
    }
    let mut parts: Vec<String> = Vec::new();
    if !accepted.is_empty() {
        parts.push(format!("accepted on {}", accepted.join(", ")));
    }
    parts.extend(
        rejections
            .into_iter()
            .map(|(text, names)| format!("rejected on {}: {text}", names.join(", "))),
    );
    parts.join(", ")
}

/// Resolves `--profile` names (none = the default profiles, [`profiles::defaults`]).
pub fn select_profiles(names: &[String]) -> Result<Vec<&'static dyn Profile>, Error> {
    if names.is_empty() {
        return Ok(profiles::defaults());
    }
    names
        .iter()
        .map(|name| {
            profiles::by_name(name).ok_or_else(|| Error::UnknownProfile {
                name: name.clone(),
                known: profiles::all()
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        })
        .collect()
}

/// Certifies every call of `options.files`.
pub fn certify(options: &CertifyOptions) -> Result<CertifyReport, Error> {
    let selected = select_profiles(&options.profiles)?;
    let mut budget = Budget::new(options.memory_cap);
    let set = read_calls(&options.files, &mut budget)?;
    let (mut calls, invalid) = (set.calls, set.invalid);
    if let Some(device) = options.device_as {
        calls.iter_mut().for_each(|c| cpu_tensors_on(c, device));
    }
    // Each call's index tensors and numbers get what the calls themselves leave.
    let musa = MusaOptions {
        mp: options.mp,
        memory: budget,
    };
    let mut reports: Vec<CallReport> = calls
        .iter()
        .map(|c| certify_call(c, &selected, &musa))
        .collect();
    if options.numerics {
        // In file order, one injection cache: the calls are one process's, as a recording is. A
        // call that reuses metadata an earlier call cached is certified with those contents (a
        // reused buffer too short for it raises).
        let progress = crate::report::progress_bar(calls.len() as u64);
        progress.set_message("numerics");
        let mut cache = InjectionCache::default();
        for (call, report) in calls.iter().zip(&mut reports) {
            let in_process = cache.applied_to(call);
            if in_process != *call {
                *report = certify_call(&in_process, &selected, &musa);
            }
            if report.gate.resolved().is_some() {
                report.numerics = Some(match report.gate.profile {
                    GATE_PROFILE => numerics::check(call, &mut cache, &musa),
                    _ => numerics::check_mate(call, &musa),
                });
            }
            progress.inc(1);
        }
        progress.finish_and_clear();
    }
    Ok(CertifyReport {
        calls,
        reports,
        invalid,
    })
}

/// The calls certified and what was found for each.
#[derive(Debug)]
pub struct CertifyReport {
    pub calls: Vec<KvCacheCall>,
    /// One per call, in order.
    pub reports: Vec<CallReport>,
    /// The calls that could not be read, in order.
    pub invalid: Vec<InvalidCall>,
}

impl Report for CertifyReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json, Format::Junit];
    type Document = doc::Certification;

    /// An input error when a call could not be read, else findings when any call is not
    /// certified for the gate profile.
    fn status(&self) -> Status {
        let unreadable = if self.invalid.is_empty() {
            Status::Success
        } else {
            Status::InputError
        };
        let findings = Status::findings_if(!self.reports.iter().all(CallReport::passes));
        Status::combined([unreadable, findings])
    }

    /// Per call the summary, each profile's outcome and the hazards.
    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for (call, report) in self.calls.iter().zip(&self.reports) {
            out.write_all(render_human_call(call, report).as_bytes())?;
        }
        for invalid in &self.invalid {
            writeln!(out, "{invalid}: not certified (input error)")?;
        }
        let passed = self.reports.iter().filter(|r| r.passes()).count();
        let unreadable = match self.invalid.len() {
            0 => String::new(),
            n => format!(" ({n} could not be read)"),
        };
        let gate = self
            .reports
            .first()
            .map_or(GATE_PROFILE, |r| r.gate.profile);
        writeln!(
            out,
            "{passed} of {} calls certified for {gate}{unreadable}",
            self.reports.len() + self.invalid.len()
        )
    }

    fn document(&self) -> doc::Certification {
        doc::Certification {
            calls: self.reports.iter().map(call_document).collect(),
            invalid: self
                .invalid
                .iter()
                .map(|i| doc::Invalid {
                    file: i.file.clone(),
                    path: i.error.path.clone(),
                    message: i.error.message.clone(),
                })
                .collect(),
        }
    }

    /// One test case per call; a call not certified for the gate profile is a failure whose
    /// message is the summary and whose text lists the error hazards and numeric differences.
    fn test_run(&self) -> Option<TestRun> {
        let cases = self
            .reports
            .iter()
            .map(|r| junit::TestCase {
                classname: "certify".into(),
                name: r.id.clone(),
                outcome: if r.passes() {
                    junit::Outcome::Passed
                } else {
                    let detail = failure_detail(r);
                    junit::Outcome::Failed {
                        message: r.summary(),
                        detail: (!detail.is_empty()).then_some(detail),
                    }
                },
            })
            .chain(self.invalid.iter().map(|i| junit::TestCase {
                classname: "certify".into(),
                name: if i.error.path.is_empty() {
                    i.file.clone()
                } else {
                    format!("{} {}", i.file, i.error.path)
                },
                outcome: junit::Outcome::Failed {
                    message: format!("input error: {}", i.error.message),
                    detail: None,
                },
            }))
            .collect();
        Some(TestRun {
            name: "fa3conform certify".into(),
            suites: vec![junit::TestSuite {
                name: "certify".into(),
                time: None,
                cases,
            }],
        })
    }
}

/// The gate profile's error hazards and a numeric difference, one per line (empty for a call
/// that fails by being rejected).
fn failure_detail(report: &CallReport) -> String {
    let hazards = report
        .gate
        .hazards
        .iter()
        .filter(|h| h.severity == Severity::Error)
        .map(|h| format!("{}: {}", h.code, h.message));
    let numerics = report
        .numerics
        .iter()
        .filter(|n| n.fails())
        .map(|n| format!("numerics: {}", n.describe()));
    hazards.chain(numerics).collect::<Vec<_>>().join("\n")
}

/// A call on one line: keyword arguments as `name=value`, tensors as `dtype[shape]` with their
/// device, strides and (short) values when the spec gives them.
pub fn describe_call(call: &KvCacheCall) -> String {
    let positional = call.positional.iter().map(describe_value);
    let keywords = call
        .keywords
        .iter()
        .map(|(k, v)| format!("{k}={}", describe_value(v)));
    positional.chain(keywords).collect::<Vec<_>>().join(", ")
}

fn describe_value(v: &PyValue) -> String {
    match v {
        PyValue::Tensor(t) => describe_tensor(t),
        PyValue::Tuple(items) | PyValue::List(items)
            if items.iter().any(|i| i.as_tensor().is_some()) =>
        {
            let inner: Vec<String> = items.iter().map(describe_value).collect();
            match v {
                PyValue::List(_) => format!("[{}]", inner.join(", ")),
                _ if inner.len() == 1 => format!("({},)", inner[0]),
                _ => format!("({})", inner.join(", ")),
            }
        }
        other => other.to_string(),
    }
}

fn describe_tensor(t: &TensorArg) -> String {
    let shape: Vec<String> = t.shape.iter().map(usize::to_string).collect();
    let mut s = format!("{}[{}]", t.dtype.torch_name(), shape.join(","));
    if let Some(d) = t.device {
        s.push('@');
        s.push_str(d.name());
    }
    if let Some(stride) = &t.stride {
        let stride: Vec<String> = stride.iter().map(usize::to_string).collect();
        s.push_str(&format!(" stride({})", stride.join(",")));
    }
    match &t.values {
        Some(TensorValues::Int(v)) if v.len() <= 16 => {
            let v: Vec<String> = v.iter().map(i64::to_string).collect();
            s.push_str(&format!("={{{}}}", v.join(",")));
        }
        Some(TensorValues::Float(v)) if v.len() <= 16 => {
            let v: Vec<String> = v.iter().map(|&x| python_float_repr(x)).collect();
            s.push_str(&format!("={{{}}}", v.join(",")));
        }
        _ => {}
    }
    s
}

/// The resolved parameters of an accepted call, on one line.
pub fn describe_outcome(verdict: &Verdict) -> String {
    match &verdict.outcome {
        Outcome::Rejected(r) => format!("rejected  {r}  [{}]", r.site),
        Outcome::Accepted(r) => {
            let mask = if r.is_causal {
                "causal".to_string()
            } else if r.is_local {
                format!("local({},{})", r.window_left, r.window_right)
            } else {
                "full".to_string()
            };
            let mut s = format!(
                "accepted  b={} sq={} sk={} h={}/{} d={}/{}->{}/{} {mask}",
                r.batch_size,
                r.seqlen_q,
                r.seqlen_k,
                r.num_heads,
                r.num_heads_k,
                r.head_size,
                r.head_size_v,
                r.head_size_rounded,
                r.head_size_v_rounded,
            );
            if r.attention_chunk > 0 {
                s.push_str(&format!(" chunk={}", r.attention_chunk));
            }
            if r.softcap != 0.0 {
                s.push_str(&format!(" softcap={}", python_float_repr(r.softcap)));
            }
            s.push_str(&format!(
                " splits={} pack_gqa={} tile={}x{} scale={:.6} lse={:?}{}",
                r.num_splits,
                r.pack_gqa,
                r.tile_m,
                r.tile_n,
                r.softmax_scale,
                r.lse_layout,
                if r.mla_decode { " mla" } else { "" },
            ));
            s
        }
    }
}

/// One call's block of the human report (also the body of the catalogue snapshots).
pub fn render_human_call(call: &KvCacheCall, report: &CallReport) -> String {
    let mut out = format!("{}: {}\n", report.id, report.summary());
    out.push_str(&format!("  call: {}\n", describe_call(call)));
    if let Some(b) = &call.context.sglang_backend {
        out.push_str(&format!(
            "  context: {}\n",
            serde_json::to_string(b).expect("context serialises")
        ));
    }
    let width = report
        .verdicts
        .iter()
        .map(|v| v.profile.len())
        .max()
        .unwrap_or(0);
    for v in &report.verdicts {
        out.push_str(&format!(
            "  {:width$}  {}\n",
            v.profile,
            describe_outcome(v)
        ));
    }
    for v in &report.verdicts {
        for h in &v.hazards {
            out.push_str(&format!(
                "  hazard {:7} {} ({}): {}\n",
                h.severity.name(),
                h.code,
                v.profile,
                h.message
            ));
        }
    }
    if let Some(numerics) = &report.numerics {
        out.push_str(&format!(
            "  numerics ({}): {}\n",
            report.gate.profile,
            numerics.describe()
        ));
    }
    out
}

/// The registry's match kinds as the JSON documents write them (`certify`'s verdicts and
/// `explain --list`).
impl From<MessageMatch> for crate::report::documents::MessageMatch {
    fn from(m: MessageMatch) -> Self {
        match m {
            MessageMatch::Exact => Self::Exact,
            MessageMatch::Prefix => Self::Prefix,
            MessageMatch::Pattern => Self::Pattern,
        }
    }
}

fn call_document(report: &CallReport) -> doc::Call {
    let profiles = report
        .verdicts
        .iter()
        .map(|v| {
            let verdict = match &v.outcome {
                Outcome::Accepted(_) => doc::Verdict {
                    outcome: doc::Outcome::Accepted,
                    exception: None,
                    message: None,
                    message_match: None,
                    site: None,
                },
                Outcome::Rejected(r) => doc::Verdict {
                    outcome: doc::Outcome::Rejected,
                    exception: Some(r.exception.name().to_string()),
                    message: Some(r.message.clone()),
                    message_match: Some(r.message_match().into()),
                    site: Some(r.site.to_string()),
                },
            };
            (v.profile.to_string(), verdict)
        })
        .collect();
    let hazards = report
        .verdicts
        .iter()
        .flat_map(|v| {
            v.hazards.iter().map(move |h| doc::Hazard {
                profile: v.profile.to_string(),
                code: h.code.to_string(),
                severity: h.severity.name().to_string(),
                message: h.message.clone(),
            })
        })
        .collect();
    doc::Call {
        id: report.id.clone(),
        profiles,
        hazards,
        numerics: report.numerics.as_ref().map(|n| doc::Numerics {
            status: n.status().to_string(),
            detail: n.describe(),
        }),
        summary: report.summary(),
        certified: report.passes(),
    }
}
