//! `fa3conform run`: evaluate one call with the reference and summarise the result.

use super::ExitStatus;
use super::args::RunArgs;
use crate::bridge::tensors::{StoredTensor, TensorFile, write_tensor_file};
use crate::call::Dtype;
use crate::reference::{self, Precision, RefOutput};
use crate::spec::parse_specs;
use crate::tensor::materialise;
use anyhow::{Context, bail};
use ndarray::ArrayD;
use serde_json::json;
use std::io::Write;

/// min, max, mean and the count of non-finite values of an array.
fn summary(a: &ArrayD<f64>) -> serde_json::Value {
    let finite: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let (min, max) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let mean = if finite.is_empty() {
        f64::NAN
    } else {
        finite.iter().sum::<f64>() / finite.len() as f64
    };
    let number = |x: f64| if x.is_finite() { json!(x) } else { json!(null) };
    json!({
        "shape": a.shape(),
        "min": number(min),
        "max": number(max),
        "mean": number(mean),
        "non_finite": a.len() - finite.len(),
    })
}

fn render_human(id: &str, result: &RefOutput, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{id}: f64 reference, input dtype {}",
        result.dtype.torch_name()
    )?;
    let arrays = [
        ("out", Some(&result.out)),
        ("softmax_lse", Some(&result.lse)),
        ("k_cache", result.k_cache.as_ref()),
        ("v_cache", result.v_cache.as_ref()),
    ];
    for (name, array) in arrays {
        let Some(array) = array else { continue };
        let s = summary(array);
        writeln!(
            out,
            "  {name:<12} shape {:?}  min {}  max {}  mean {}  non-finite {}",
            array.shape(),
            s["min"],
            s["max"],
            s["mean"],
            s["non_finite"]
        )?;
    }
    Ok(())
}

/// Writes `out` and `softmax_lse` (F32, the stack's layout) and, after an append, `k_cache` and
/// `v_cache` (cache dtype): the names and dtypes device-bridge bundles use.
fn write_results(
    path: &std::path::Path,
    call: &crate::call::KvCacheCall,
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

pub fn run(args: &RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let text = super::read_input(&args.spec)?;
    let mut calls =
        parse_specs(&text).with_context(|| format!("reading {}", args.spec.display()))?;
    if calls.len() != 1 {
        bail!(
            "{} holds {} calls; `run` evaluates exactly one",
            args.spec.display(),
            calls.len()
        );
    }
    let call = calls.remove(0);
    let tensors = materialise(&call, args.memory_cap)?;
    let stack = args.stack.into();
    let result = reference::run(&call, &tensors, stack, Precision::Exact)?;
    if let Some(path) = &args.out {
        write_results(path, &call, &result)?;
    }
    match args.format {
        super::args::TextOrJson::Human => render_human(&call.id, &result, out)?,
        super::args::TextOrJson::Json => {
            let doc = json!({
                "schema_version": 1,
                "id": call.id,
                "stack": stack.name(),
                "out": summary(&result.out),
                "softmax_lse": summary(&result.lse),
                "k_cache": result.k_cache.as_ref().map(summary),
                "v_cache": result.v_cache.as_ref().map(summary),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
    }
    Ok(ExitStatus::Success)
}
