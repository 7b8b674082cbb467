//! SGLang's scheduler-metadata auto-injection emulated over a forward pass (musa-fa3.md §4).
//!
//! A forward pass is a JSON object:
//!
//! ```json
//! {"id": "hybrid-swa", "backend": {"prefix": "forward_decode", "num_hidden_layers": 4, "max_seqlen_k": 64},
//!  "calls": [{"layer": {"layer_id": 0, "tp_q_head_num": 8, "tp_k_head_num": 2, "qk_head_dim": 64, "v_head_dim": 64},
//!             "prefix": "forward_decode", "max_seqlen_k": 64, "call": {"id": "l0", "args": {...}}}]}
//! ```
//!
//! `backend` is the `context.sglang_backend` object of call specs (its `layer` must be absent: each
//! call names the layer it runs as; its `cached_metadata` is what the metadata dict holds when the
//! pass starts); a call's optional `prefix`, `max_seqlen_k` and `can_run_tbo` replace the
//! backend's for that call and the ones after it, as `_set_current_state` does. The call specs'
//! own `context` is replaced. Calls run in order through [`crate::musa::injected_metadata`] with
//! one shared metadata dict; each gets the metadata the wrapper hands to mate, which is then
//! checked against the call's own arguments ([`crate::scheduler::check_buffer`]).
//!
//! Several backend instances (a target model and its draft models) are given as
//! `"backends": [{"name": "target", "backend": {...}}, {"name": "draft", "backend": {...}}]` in
//! construction order, instead of `backend`; a call's `"backend": "target"` names the instance
//! that makes it (default: the last constructed). Each instance records its own state, but the
//! wrapper injects from `_CURRENT_BACKEND`, the last instance constructed (musa-fa3.md §4.1, §4.7
//! item 5), and the metadata dict is shared by all of them.

use crate::call::{KvCacheCall, LayerInfo, SglangBackend};
use crate::files::FileError;
use crate::memory::Budget;
use crate::musa::{InjectionCache, MetadataUsed, MusaError, injected_metadata};
use crate::report::documents::forward as doc;
use crate::report::{Format, Report, Status};
use crate::scheduler::check_buffer;
use crate::spec::{self, SpecError, parse_call, parse_document};
use crate::tensor::{Tensors, materialise_index_tensors};
use crate::validate::profiles::MUSA;
use crate::validate::registry::scheduler::{
    H_SCHED_MLA_WORKSPACE_STALE, H_SCHED_OTHER_BACKEND, H_SCHED_UNCHECKED,
};
use crate::validate::{Hazard, Profile, Severity};
use serde::Deserialize;
use std::io::{self, Write};
use std::path::PathBuf;

/// One call of a forward pass: the backend instance that makes it and the state its
/// `_set_current_state` records (`None`: unchanged since that instance's previous call).
#[derive(Clone, Debug, PartialEq)]
pub struct PassCall {
    /// Index of the instance in [`ForwardPass::backends`].
    pub backend: usize,
    pub layer: LayerInfo,
    pub prefix: Option<String>,
    pub max_seqlen_k: Option<i64>,
    pub can_run_tbo: Option<bool>,
    pub call: KvCacheCall,
}

/// A `MusaFlashAttentionBackend` instance and its state before the pass.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendInstance {
    pub name: String,
    pub state: SglangBackend,
}

/// A forward pass: the backend instances (in construction order, so the last is
/// `_CURRENT_BACKEND`) and the calls in order.
#[derive(Clone, Debug, PartialEq)]
pub struct ForwardPass {
    pub id: String,
    pub backends: Vec<BackendInstance>,
    pub calls: Vec<PassCall>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PassCallJson {
    #[serde(default)]
    backend: Option<String>,
    layer: LayerInfo,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    max_seqlen_k: Option<i64>,
    #[serde(default)]
    can_run_tbo: Option<bool>,
    call: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendJson {
    name: String,
    backend: SglangBackend,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardPassJson {
    id: String,
    #[serde(default)]
    backend: Option<SglangBackend>,
    #[serde(default)]
    backends: Option<Vec<BackendJson>>,
    calls: Vec<PassCallJson>,
}

/// The name a pass's single `backend` goes by in reports.
const SINGLE_BACKEND: &str = "backend";

fn spec_error(path: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        path: path.into(),
        message: message.into(),
    }
}

/// The instances of a pass, from `backend` or `backends` (exactly one of them), each with its
/// JSON path.
fn backend_instances(
    json: &mut ForwardPassJson,
) -> Result<(Vec<BackendInstance>, Vec<String>), SpecError> {
    let (instances, paths): (Vec<BackendInstance>, Vec<String>) =
        match (json.backend.take(), json.backends.take()) {
            (Some(state), None) => (
                vec![BackendInstance {
                    name: SINGLE_BACKEND.into(),
                    state,
                }],
                vec!["backend".into()],
            ),
            (None, Some(list)) if !list.is_empty() => list
                .into_iter()
                .enumerate()
                .map(|(i, b)| {
                    let instance = BackendInstance {
                        name: b.name,
                        state: b.backend,
                    };
                    (instance, format!("backends[{i}].backend"))
                })
                .unzip(),
            (None, Some(_)) => {
                return Err(spec_error("backends", "expected at least one backend"));
            }
            _ => {
                return Err(spec_error(
                    "",
                    "expected exactly one of `backend` and `backends`",
                ));
            }
        };
    for (i, (instance, path)) in instances.iter().zip(&paths).enumerate() {
        if instance.state.layer.is_some() {
            return Err(spec_error(
                format!("{path}.layer"),
                "each call names its layer; the backend has none",
            ));
        }
        if instance.state.max_seqlen_k.is_some_and(|k| k < 0) {
            return Err(spec_error(
                format!("{path}.max_seqlen_k"),
                NEGATIVE_MAX_SEQLEN_K,
            ));
        }
        if instances[..i].iter().any(|b| b.name == instance.name) {
            return Err(spec_error(
                format!("backends[{i}].name"),
                format!("backend `{}` is named twice", instance.name),
            ));
        }
    }
    Ok((instances, paths))
}

/// Why a pass cannot hold a negative `max_seqlen_k`: the backend stores the batch's longest KV
/// length (`metadata.max_seq_len_k`, in `_set_current_state`).
const NEGATIVE_MAX_SEQLEN_K: &str =
    "must not be negative: SGLang sets it to the batch's longest KV length";

/// Parses a forward pass; errors name the JSON path. A pass SGLang cannot be in is refused: a
/// negative `max_seqlen_k` or a layer past its backend's `num_hidden_layers` (the layers a model
/// builds are numbered from 0; the NextN draft layer is 0).
pub fn parse_forward(text: &str) -> Result<ForwardPass, SpecError> {
    let document = parse_document(text)?;
    let mut json: ForwardPassJson = serde_path_to_error::deserialize(&document).map_err(|e| {
        let path = e.path().to_string();
        spec_error(
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })?;
    let (backends, backend_paths) = backend_instances(&mut json)?;
    let calls = json
        .calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if c.max_seqlen_k.is_some_and(|k| k < 0) {
                return Err(spec_error(
                    format!("calls[{i}].max_seqlen_k"),
                    NEGATIVE_MAX_SEQLEN_K,
                ));
            }
            let call = parse_call(&c.call).map_err(|e| {
                spec_error(
                    format!("calls[{i}].call.{}", e.path).trim_end_matches('.'),
                    e.message,
                )
            })?;
            let backend = match &c.backend {
                None => backends.len() - 1,
                Some(name) => backends
                    .iter()
                    .position(|b| &b.name == name)
                    .ok_or_else(|| {
                        spec_error(
                            format!("calls[{i}].backend"),
                            format!("no backend is named `{name}`"),
                        )
                    })?,
            };
            let layers = backends[backend].state.num_hidden_layers;
            if c.layer.layer_id >= layers {
                return Err(spec_error(
                    format!("calls[{i}].layer.layer_id"),
                    format!(
                        "layer {} is past the model's layers 0..{layers} ({}.num_hidden_layers)",
                        c.layer.layer_id, backend_paths[backend]
                    ),
                ));
            }
            Ok(PassCall {
                backend,
                layer: c.layer,
                prefix: c.prefix,
                max_seqlen_k: c.max_seqlen_k,
                can_run_tbo: c.can_run_tbo,
                call,
            })
        })
        .collect::<Result<_, SpecError>>()?;
    Ok(ForwardPass {
        id: json.id,
        backends,
        calls,
    })
}

/// A hazard as reports show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
}

impl From<Hazard> for Finding {
    fn from(h: Hazard) -> Finding {
        Finding {
            code: h.code,
            severity: h.severity,
            message: h.message,
        }
    }
}

/// What one call of the pass received and what is wrong with it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallReport {
    pub call: String,
    /// The backend instance that makes the call.
    pub backend: String,
    pub layer_id: u32,
    pub prefix: String,
    /// `accepted`, or the exception the stack raises.
    pub outcome: String,
    /// Where the forward's metadata came from.
    pub metadata: String,
    /// Whether any finding is a warning or an error, or the call raises.
    pub flagged: bool,
    pub findings: Vec<Finding>,
}

/// The findings of a whole pass.
#[derive(Clone, Debug, PartialEq)]
pub struct ForwardReport {
    pub id: String,
    pub calls: Vec<CallReport>,
    pub flagged: usize,
}

/// The MLA workspace's last writer: the call and the inputs its schedule depends on.
struct WorkspaceWriter {
    call: String,
    cache_seqlens: Option<Vec<i64>>,
    cu_seqlens_q: Option<Vec<i64>>,
}

impl WorkspaceWriter {
    fn of(call: &KvCacheCall, tensors: &Tensors) -> WorkspaceWriter {
        let ints = |name: &str| tensors.get(name).map(|t| t.ints());
        WorkspaceWriter {
            call: call.id.clone(),
            cache_seqlens: ints("cache_seqlens"),
            cu_seqlens_q: ints("cu_seqlens_q"),
        }
    }

    fn differences(&self, other: &WorkspaceWriter) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.cache_seqlens != other.cache_seqlens {
            out.push("cache_seqlens");
        }
        if self.cu_seqlens_q != other.cu_seqlens_q {
            out.push("cu_seqlens_q");
        }
        out
    }
}

/// Runs the pass's calls in order through the wrapper's injection and checks what each receives;
/// each call's index tensors may take `memory_cap` bytes.
pub fn emulate(pass: &ForwardPass, mp: usize, memory_cap: usize) -> ForwardReport {
    let mut states: Vec<SglangBackend> = pass.backends.iter().map(|b| b.state.clone()).collect();
    let current = states.len() - 1;
    let mut cache = InjectionCache::default();
    let mut workspace: Option<WorkspaceWriter> = None;
    let mut reports = Vec::new();
    for step in &pass.calls {
        let caller = &mut states[step.backend];
        if let Some(prefix) = &step.prefix {
            caller.prefix.clone_from(prefix);
        }
        if step.max_seqlen_k.is_some() {
            caller.max_seqlen_k = step.max_seqlen_k;
        }
        if let Some(tbo) = step.can_run_tbo {
            caller.can_run_tbo = tbo;
        }
        caller.layer = Some(step.layer.clone());
        let (prefix, layer_id) = (caller.prefix.clone(), step.layer.layer_id);
        // The wrapper reads `_CURRENT_BACKEND` whichever instance calls it.
        let mut backend = states[current].clone();
        cache.describe_in(&mut backend);
        let mut call = step.call.clone();
        call.context.sglang_backend = Some(backend.clone());
        let mut report = CallReport {
            call: call.id.clone(),
            backend: pass.backends[step.backend].name.clone(),
            layer_id,
            prefix,
            outcome: "accepted".into(),
            metadata: String::new(),
            flagged: false,
            findings: Vec::new(),
        };
        let mut findings = Vec::new();
        if step.backend != current {
            findings.push(Hazard::new(
                H_SCHED_OTHER_BACKEND,
                &[
                    report.backend.clone(),
                    pass.backends[current].name.clone(),
                    describe_state(&backend),
                ],
            ));
        }
        let verdict = MUSA.validate(&call);
        if let Some(rejection) = verdict.rejection() {
            report.outcome = format!("raises {rejection}");
            report.metadata = "none (the call raises)".into();
        } else {
            let (metadata, received) = match materialise_index_tensors(&call, memory_cap) {
                Ok(tensors) => {
                    let received = injected_metadata(&call, &tensors, &mut cache, mp);
                    check_received(&call, &tensors, received, &mut workspace, &mut report, mp)
                }
                Err(e) => (
                    "unknown".to_string(),
                    vec![Hazard::new(H_SCHED_UNCHECKED, &[e.to_string()])],
                ),
            };
            report.metadata = metadata;
            findings.extend(received);
        }
        report.flagged = report.outcome != "accepted"
            || findings.iter().any(|h| h.severity >= Severity::Warning);
        report.findings = findings.into_iter().map(Finding::from).collect();
        reports.push(report);
    }
    ForwardReport {
        id: pass.id.clone(),
        flagged: reports.iter().filter(|r| r.flagged).count(),
        calls: reports,
    }
}

/// "its layer 3 (prefix forward_decode, max_seqlen_k 64)": the state the wrapper injects from.
fn describe_state(backend: &SglangBackend) -> String {
    match &backend.layer {
        None => "it has run no layer, so nothing is injected".into(),
        Some(layer) => format!(
            "the metadata follows its layer {} (prefix {}, max_seqlen_k {}, can_run_tbo {})",
            layer.layer_id,
            backend.prefix,
            backend
                .max_seqlen_k
                .map_or("None".to_string(), |k| k.to_string()),
            if backend.can_run_tbo { "True" } else { "False" }
        ),
    }
}

/// Where the metadata the wrapper handed to mate came from, and what is wrong with it. A rejection
/// the injection itself raises becomes the report's outcome.
fn check_received(
    call: &KvCacheCall,
    tensors: &Tensors,
    received: Result<MetadataUsed, MusaError>,
    workspace: &mut Option<WorkspaceWriter>,
    report: &mut CallReport,
    mp: usize,
) -> (String, Vec<Hazard>) {
    match received {
        Ok(MetadataUsed::None) => ("none".to_string(), Vec::new()),
        Ok(MetadataUsed::Passed(values)) => (
            "passed by the caller".to_string(),
            check_buffer(call, tensors, &values, call.metadata_args.as_ref(), mp),
        ),
        Ok(MetadataUsed::Injected {
            prefix,
            recomputed,
            metadata,
        }) => {
            let how = match (recomputed, &metadata.computed_for) {
                (true, _) => format!("recomputed and stored under {prefix}"),
                (false, Some(id)) => format!("reused from {prefix}, computed for call {id}"),
                (false, None) => format!("reused from {prefix}, cached before this pass"),
            };
            let call = call.with_scheduler_metadata(&metadata.values);
            let findings =
                check_buffer(&call, tensors, &metadata.values, metadata.args.as_ref(), mp);
            (how, findings)
        }
        Ok(MetadataUsed::MlaWorkspace { is_inited }) => {
            let this = WorkspaceWriter::of(call, tensors);
            let mut findings = Vec::new();
            if !is_inited {
                *workspace = Some(this);
            } else if let Some(writer) = workspace {
                let differ = writer.differences(&this);
                if !differ.is_empty() {
                    findings.push(Hazard::new(
                        H_SCHED_MLA_WORKSPACE_STALE,
                        &[writer.call.clone(), differ.join(", ")],
                    ));
                }
            }
            (
                format!(
                    "MLA workspace, is_inited={}",
                    if is_inited { "True" } else { "False" }
                ),
                findings,
            )
        }
        Err(MusaError::Raises(rejection)) => {
            report.outcome = format!("raises {rejection}");
            ("none (the call raises)".to_string(), Vec::new())
        }
        Err(e) => (
            "unknown".to_string(),
            vec![Hazard::new(H_SCHED_UNCHECKED, &[e.to_string()])],
        ),
    }
}

impl Report for ForwardReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json];
    type Document = doc::ForwardPass;

    /// Findings when a call is flagged.
    fn status(&self) -> Status {
        Status::findings_if(self.flagged > 0)
    }

    /// One block per call, flagged calls marked.
    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "forward pass {}", self.id)?;
        for r in &self.calls {
            let mark = if r.flagged { "FLAG" } else { "ok  " };
            let backend = if r.backend == SINGLE_BACKEND {
                String::new()
            } else {
                format!("backend {}, ", r.backend)
            };
            writeln!(
                out,
                "{mark} {} ({backend}layer {}, {}): {}; metadata: {}",
                r.call, r.layer_id, r.prefix, r.outcome, r.metadata
            )?;
            for f in &r.findings {
                let severity = f.severity.name();
                writeln!(out, "     {severity} {}: {}", f.code, f.message)?;
            }
        }
        writeln!(
            out,
            "{} of {} calls flagged",
            self.flagged,
            self.calls.len()
        )
    }

    fn document(&self) -> doc::ForwardPass {
        let calls = self
            .calls
            .iter()
            .map(|r| doc::Call {
                call: r.call.clone(),
                backend: r.backend.clone(),
                layer_id: r.layer_id,
                prefix: r.prefix.clone(),
                outcome: r.outcome.clone(),
                metadata: r.metadata.clone(),
                flagged: r.flagged,
                findings: r
                    .findings
                    .iter()
                    .map(|f| doc::Finding {
                        code: f.code.to_string(),
                        severity: f.severity.name().to_string(),
                        message: f.message.clone(),
                    })
                    .collect(),
            })
            .collect();
        doc::ForwardPass {
            id: self.id.clone(),
            calls,
            flagged: self.flagged,
        }
    }
}

/// What `forward` emulates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardOptions {
    /// The forward pass (JSON, see the module documentation); `-` for stdin.
    pub file: PathBuf,
    /// Multiprocessor count of the modelled MUSA device.
    pub mp: usize,
    /// Bytes the file, its parsed form and one call's index tensors may take.
    pub memory_cap: usize,
}

/// Why a forward pass could not be emulated.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error(transparent)]
    Read(#[from] FileError),
    #[error("{path}: {source}")]
    Parse { path: String, source: SpecError },
}

/// Reads the pass of `options.file` and emulates it.
pub fn forward(options: &ForwardOptions) -> Result<ForwardReport, ForwardError> {
    let mut budget = Budget::new(options.memory_cap);
    let text = spec::read_json_text(&options.file, &mut budget)?;
    let pass = parse_forward(&text).map_err(|source| ForwardError::Parse {
        path: options.file.display().to_string(),
        source,
    })?;
    // each call's index tensors get what the pass leaves
    Ok(emulate(&pass, options.mp, budget.left()))
}
