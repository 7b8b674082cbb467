//! `fa3conform run`: one call through the f64 reference, its outputs summarised (and, on request,
//! written as a safetensors file with the names and dtypes of device-bridge bundles).

use crate::bridge::tensors::{StoredTensor, TensorFile, write_tensor_file};
use crate::call::{Dtype, KvCacheCall};
use crate::files;
use crate::reference::{self, Precision, RefOutput, Stack};
use crate::report::documents::run as doc;
use crate::report::{Format, Report, Status};
use crate::spec::parse_specs;
use crate::tensor::materialise;
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
    let text = files::read_text(&options.spec, options.memory_cap)?;
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
    let tensors = materialise(&call, options.memory_cap)?;
    let result = reference::run(&call, &tensors, options.stack, Precision::Exact)?;
    if let Some(path) = &options.out {
        write_results(path, &call, &result)?;
    }
    Ok(RunReport {
        id: call.id,
        stack: options.stack,
        result,
    })
}

/// The shape, the finite values' min, max and mean, and the count of non-finite values.
fn summary(a: &ArrayD<f64>) -> doc::ArraySummary {
    let finite: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let (min, max) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
    let number = |x: f64| x.is_finite().then_some(x);
    doc::ArraySummary {
        shape: a.shape().to_vec(),
        min: number(min),
        max: number(max),
        mean: number(mean),
        non_finite: a.len() - finite.len(),
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

/// Writes `out` and `softmax_lse` (F32, the stack's layout) and, after an append, `k_cache` and
/// `v_cache` (cache dtype): the names and dtypes device-bridge bundles use.
fn write_results(
    path: &std::path::Path,
    call: &KvCacheCall,
    result: &RefOutput,
) -> anyhow::Result<()> {
    let mut file = TensorFile::new();
    let mut put = |name: &str, dtype: Dtype, array: &ArrayD<f64>| {
        let values: Vec<f64> = array.iter().copied().collect();
        file.insert(
            name.to_string(),
            StoredTensor::from_values(dtype, array.shape(), &values),
        );
    };
    put("out", Dtype::Float32, &result.out);
    put("softmax_lse", Dtype::Float32, &result.lse);
    for (name, cache) in [("k_cache", &result.k_cache), ("v_cache", &result.v_cache)] {
        if let Some(cache) = cache {
            let dtype = call
                .passed(name)
                .and_then(|v| v.as_tensor())
                .map_or(Dtype::Float32, |t| t.dtype);
            put(name, dtype, cache);
        }
    }
    write_tensor_file(path, &file).with_context(|| format!("writing {}", path.display()))
}
