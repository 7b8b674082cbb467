//! `fa3conform certify`: every selected profile's verdict on each call of a spec file, the hazards,
//! and a one-line compatibility summary, as human text, JSON or JUnit XML; with `--numerics`, the
//! numbers of each accepted call on the modelled MUSA stack against the reference ([`numerics`]).
//!
//! The exit status is 0 when every call is accepted by `musa` with no error-severity hazard (and,
//! with `--numerics`, no numeric difference), 1 otherwise; unreadable input is an [`Error`] (the
//! command maps it to exit status 2).

pub mod numerics;

use crate::call::{KvCacheCall, PyValue, TensorArg, TensorValues, python_float_repr};
use crate::conform::xml_escape;
use crate::musa::InjectionCache;
use crate::scheduler::stale_metadata_findings;
use crate::spec::{SpecError, parse_specs};
use crate::validate::{Outcome, Profile, Severity, Verdict, profiles};
use numerics::Numerics;
use serde_json::{Map, Value, json};
use std::io::{self, Read, Write};
use std::path::PathBuf;

/// The profile whose verdict decides the exit status.
pub const GATE_PROFILE: &str = "musa";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Human,
    Json,
    Junit,
}

/// Arguments of `fa3conform certify`.
#[derive(Clone, Debug, clap::Args)]
pub struct CertifyArgs {
    /// Call spec files (JSON object, array or JSON lines); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Profiles to show (repeatable or comma-separated); default: all.
    #[arg(long = "profile", value_delimiter = ',')]
    pub profiles: Vec<String>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also run each call the `musa` profile accepts on the modelled MUSA stack (the kernel path,
    /// with the metadata it would get) and compare it with the f64 reference under the tolerance
    /// rule; a difference fails certification.
    #[arg(long)]
    pub numerics: bool,
    /// With `--numerics`: refuse calls whose tensors would take more bytes than this.
    #[arg(long, default_value_t = crate::tensor::DEFAULT_MEMORY_CAP)]
    pub memory_cap: usize,
}

/// Bad input: an unreadable file, an invalid spec, an unknown profile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path}: {source}")]
    Spec { path: String, source: SpecError },
    #[error("unknown profile `{name}` (known: {known})")]
    UnknownProfile { name: String, known: String },
    #[error("writing the report: {0}")]
    Write(#[from] io::Error),
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

/// Validates `call` against `selected`, plus the gate profile. A call the gate profile accepts
/// also gets the stale-metadata findings: whether the scheduler metadata it passes (or that
/// SGLang would inject, or that `metadata_args` describe) matches the call.
pub fn certify_call(call: &KvCacheCall, selected: &[&'static dyn Profile]) -> CallReport {
    let mut gate = profiles::by_name(GATE_PROFILE)
        .expect("the gate profile is registered")
        .validate(call);
    if gate.resolved().is_some() {
        gate.hazards.extend(stale_metadata_findings(call));
    }
    let verdicts: Vec<Verdict> = selected
        .iter()
        .map(|p| {
            if p.name() == GATE_PROFILE {
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

/// Resolves `--profile` names (none = all profiles).
pub fn select_profiles(names: &[String]) -> Result<Vec<&'static dyn Profile>, Error> {
    if names.is_empty() {
        return Ok(profiles::all());
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

fn read_calls(files: &[PathBuf]) -> Result<Vec<KvCacheCall>, Error> {
    let mut calls = Vec::new();
    for file in files {
        let path = file.display().to_string();
        let text = if path == "-" {
            let mut text = String::new();
            io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| Error::Read {
                    path: "<stdin>".into(),
                    source,
                })?;
            text
        } else {
            std::fs::read_to_string(file).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?
        };
        calls.extend(parse_specs(&text).map_err(|source| Error::Spec { path, source })?);
    }
    Ok(calls)
}

/// Runs `certify`: writes the report to `out` and returns the exit status (0 or 1).
pub fn run_certify(args: &CertifyArgs, out: &mut dyn Write) -> Result<u8, Error> {
    let selected = select_profiles(&args.profiles)?;
    let calls = read_calls(&args.files)?;
    let mut reports: Vec<CallReport> = calls.iter().map(|c| certify_call(c, &selected)).collect();
    if args.numerics {
        // In file order, one injection cache: the calls are one process's, as a recording is.
        let progress = crate::conform::progress_bar(calls.len() as u64);
        progress.set_message("numerics");
        let mut cache = InjectionCache::default();
        for (call, report) in calls.iter().zip(&mut reports) {
            if report.gate.resolved().is_some() {
                report.numerics = Some(numerics::check(call, &mut cache, args.memory_cap));
            }
            progress.inc(1);
        }
        progress.finish_and_clear();
    }
    let text = match args.format {
        Format::Human => render_human(&calls, &reports),
        Format::Json => render_json(&reports),
        Format::Junit => render_junit(&reports),
    };
    out.write_all(text.as_bytes())?;
    Ok(if reports.iter().all(CallReport::passes) {
        0
    } else {
        1
    })
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

/// Human report: per call the summary, each profile's outcome and the hazards.
pub fn render_human(calls: &[KvCacheCall], reports: &[CallReport]) -> String {
    let mut out = String::new();
    for (call, report) in calls.iter().zip(reports) {
        out.push_str(&render_human_call(call, report));
    }
    let passed = reports.iter().filter(|r| r.passes()).count();
    out.push_str(&format!(
        "{passed} of {} calls certified for {GATE_PROFILE}\n",
        reports.len()
    ));
    out
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
            "  numerics ({GATE_PROFILE}): {}\n",
            numerics.describe()
        ));
    }
    out
}

/// JSON report: one object per call, `{id, profiles: {name: {outcome, exception, message, site}},
/// hazards: [{profile, code, severity, message}], numerics: null | {status, detail}, summary,
/// certified}`.
pub fn render_json(reports: &[CallReport]) -> String {
    let calls: Vec<Value> = reports.iter().map(report_json).collect();
    let mut text = serde_json::to_string_pretty(&Value::Array(calls)).expect("JSON serialises");
    text.push('\n');
    text
}

fn report_json(report: &CallReport) -> Value {
    let mut profiles = Map::new();
    for v in &report.verdicts {
        let entry = match &v.outcome {
            Outcome::Accepted(_) => {
                json!({"outcome": "accepted", "exception": null, "message": null, "site": null})
            }
            Outcome::Rejected(r) => json!({
                "outcome": "rejected",
                "exception": r.exception.name(),
                "message": r.message,
                "site": r.site,
            }),
        };
        profiles.insert(v.profile.to_string(), entry);
    }
    let hazards: Vec<Value> = report
        .verdicts
        .iter()
        .flat_map(|v| {
            v.hazards.iter().map(move |h| {
                json!({"profile": v.profile, "code": h.code, "severity": h.severity.name(), "message": h.message})
            })
        })
        .collect();
    let numerics = report
        .numerics
        .as_ref()
        .map(|n| json!({"status": n.status(), "detail": n.describe()}));
    json!({
        "id": report.id,
        "profiles": profiles,
        "hazards": hazards,
        "numerics": numerics,
        "summary": report.summary(),
        "certified": report.passes(),
    })
}

/// JUnit XML: one test case per call; a call not certified for `musa` is a failure.
pub fn render_junit(reports: &[CallReport]) -> String {
    let failures = reports.iter().filter(|r| !r.passes()).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"certify\" tests=\"{}\" failures=\"{failures}\">\n",
        reports.len()
    );
    for r in reports {
        let name = xml_escape(&r.id);
        if r.passes() {
            out.push_str(&format!(
                "  <testcase classname=\"certify\" name=\"{name}\"/>\n"
            ));
        } else {
            let errors: Vec<String> = r
                .gate
                .hazards
                .iter()
                .filter(|h| h.severity == Severity::Error)
                .map(|h| format!("{}: {}", h.code, h.message))
                .chain(
                    r.numerics
                        .iter()
                        .filter(|n| n.fails())
                        .map(|n| format!("numerics: {}", n.describe())),
                )
                .collect();
            out.push_str(&format!(
                "  <testcase classname=\"certify\" name=\"{name}\">\n    <failure message=\"{}\">{}</failure>\n  </testcase>\n",
                xml_escape(&r.summary()),
                xml_escape(&errors.join("\n"))
            ));
        }
    }
    out.push_str("</testsuite>\n");
    out
}
