//! `fa3conform run`: one call through the f64 reference, its outputs summarised (and, on request,
//! written as a safetensors file with the names and dtypes of device-bridge bundles).

use crate::bridge::tensors::{StoredTensor, TensorFile, write_tensor_file};
use crate::call::{Dtype, KvCacheCall};
use crate::memory::Budget;
use crate::reference::{self, Precision, RefOutput, Stack};
use crate::report::documents::run as doc;
use crate::report::{Format, Report, Status};
use crate::spec::{self, parse_specs};
use crate::tensor::{host_bytes, materialise};
use anyhow::{Context, bail};
use ndarray::ArrayD;
use std::io::{self, Write};
use std::path::PathBuf;

/// What `run` evaluates.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// A call-spec file with exactly one call; `-` for stdin.
    pub spec: PathBuf,
    /// Whose conventions apply where the stacks differ.
    pub stack: Stack,
    /// Bytes the spec file may hold, and the call's tensors once materialised.
    pub memory_cap: usize,
    /// Where to write the outputs as safetensors, if anywhere.
    pub out: Option<PathBuf>,
}

/// The reference's outputs for one call.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub id: String,
    pub stack: Stack,
    pub result: RefOutput,
}

/// Evaluates the one call of `options.spec`; unreadable or invalid input is an error.
pub fn run(options: &RunOptions) -> anyhow::Result<RunReport> {
    let mut budget = Budget::new(options.memory_cap);
    let text = spec::read_json_text(&options.spec, &mut budget)?;
    let mut calls =
        parse_specs(&text).with_context(|| format!("reading {}", options.spec.display()))?;
    if calls.len() != 1 {
        bail!(
            "{} holds {} calls; `run` evaluates exactly one",
            options.spec.display(),
            calls.len()
        );
    }
    let call = calls.remove(0);
    let tensors = materialise(&call, budget.left())?;
    budget.hold("the call's tensors", host_bytes(&tensors) as u128)?;
    let scratch = reference::scratch_bytes(&call, &tensors, options.stack, None)?;
    budget.hold("the f64 reference", scratch)?;
    let result = reference::run(&call, &tensors, options.stack, Precision::Exact)?;
    if let Some(path) = &options.out {
        let outputs = outputs_to_write(&call, &result);
        // the encoded tensors, and the file's bytes serialised from them
        let encoded: u128 = outputs
            .iter()
            .map(|(_, dtype, a)| (a.len() * dtype.size_bytes()) as u128)
            .sum();
        budget.hold(format!("writing {}", path.display()), 2 * encoded)?;
        write_results(path, &outputs)?;
    }
    Ok(RunReport {
        id: call.id,
        stack: options.stack,
        result,
    })
}

/// The shape, the finite values' min, max and mean, and the count of non-finite values.
fn summary(a: &ArrayD<f64>) -> doc::ArraySummary {
    let (mut min, mut max, mut sum, mut finite) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0);
    for &x in a.iter().filter(|x| x.is_finite()) {
        (min, max, sum, finite) = (min.min(x), max.max(x), sum + x, finite + 1);
    }
    let number = |x: f64| x.is_finite().then_some(x);
    doc::ArraySummary {
        shape: a.shape().to_vec(),
        min: number(min),
        max: number(max),
        mean: number(sum / finite as f64),
        non_finite: a.len() - finite,
    }
}

impl RunReport {
    fn arrays(&self) -> [(&'static str, Option<&ArrayD<f64>>); 4] {
        [
            ("out", Some(&self.result.out)),
            ("softmax_lse", Some(&self.result.lse)),
            ("k_cache", self.result.k_cache.as_ref()),
            ("v_cache", self.result.v_cache.as_ref()),
        ]
    }
}

impl Report for RunReport {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json];
    type Document = doc::Evaluation;

    /// Evaluating is all `run` does: any report is a success.
    fn status(&self) -> Status {
        Status::Success
    }

    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{}: f64 reference, input dtype {}",
            self.id,
            self.result.dtype.torch_name()
        )?;
        // Numbers as in the JSON document (`null` when no value is finite).
        let number = |x: Option<f64>| serde_json::to_string(&x).expect("numbers serialise");
        for (name, array) in self.arrays() {
            let Some(array) = array else { continue };
            let s = summary(array);
            writeln!(
                out,
                "  {name:<12} shape {:?}  min {}  max {}  mean {}  non-finite {}",
                s.shape,
                number(s.min),
                number(s.max),
                number(s.mean),
                s.non_finite
            )?;
        }
        Ok(())
    }

    fn document(&self) -> doc::Evaluation {
        doc::Evaluation {
            id: self.id.clone(),
            stack: self.stack.name().to_string(),
            out: summary(&self.result.out),
            softmax_lse: summary(&self.result.lse),
            k_cache: self.result.k_cache.as_ref().map(summary),
            v_cache: self.result.v_cache.as_ref().map(summary),
        }
    }
}

/// The outputs `--out` writes, with the names and dtypes device-bridge bundles use: `out` and
/// `softmax_lse` in float32 (the stack's layout) and, after an append, `k_cache` and `v_cache` in
/// the cache dtype.
fn outputs_to_write<'a>(
    call: &KvCacheCall,
    result: &'a RefOutput,
) -> Vec<(&'static str, Dtype, &'a ArrayD<f64>)> {
    let mut outputs = vec![
        ("out", Dtype::Float32, &result.out),
        ("softmax_lse", Dtype::Float32, &result.lse),
    ];
    for (name, cache) in [("k_cache", &result.k_cache), ("v_cache", &result.v_cache)] {
        if let Some(cache) = cache {
            let dtype = call
                .passed(name)
                .and_then(|v| v.as_tensor())
                .map_or(Dtype::Float32, |t| t.dtype);
            outputs.push((name, dtype, cache));
        }
    }
    outputs
}

/// Writes `outputs` ([`outputs_to_write`]) to `path` as safetensors.
fn write_results(
    path: &std::path::Path,
    outputs: &[(&'static str, Dtype, &ArrayD<f64>)],
) -> anyhow::Result<()> {
    let file: TensorFile = outputs
        .iter()
        .map(|&(name, dtype, array)| {
            let values = array.as_standard_layout();
            let values = values.as_slice().expect("standard layout");
            let tensor = StoredTensor::from_values(dtype, array.shape(), values);
            (name.to_string(), tensor)
        })
        .collect();
    write_tensor_file(path, &file).with_context(|| format!("writing {}", path.display()))
}
