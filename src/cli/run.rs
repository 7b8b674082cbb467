//! `fa3conform run`: evaluate one call with the reference and summarise the result.

use super::ExitStatus;
use super::args::RunArgs;
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
