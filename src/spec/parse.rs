use crate::call::{Device, Dtype, KvCacheCall, PyValue, SglangContext, TensorArg, TensorValues};
use serde_json::{Map, Value};
use std::fmt;

/// A spec that cannot be read, with the JSON path of the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// `args.q.tensor.shape[2]`, prefixed by `[i]` or `line N` for multi-call files.
    pub path: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

fn err<T>(path: &str, message: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError {
        path: path.to_string(),
        message: message.into(),
    })
}

/// `path.key`, or `path["key"]` (JSON-quoted) for a key that is not a plain name, so that every
/// key, the empty one included, yields a non-empty path.
fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{}]", serde_json::Value::String(key.to_string())),
    }
}

fn prefixed(prefix: &str, e: SpecError) -> SpecError {
    let path = if e.path.is_empty() {
        prefix.to_string()
    } else if e.path.starts_with('[') {
        format!("{prefix}{}", e.path)
    } else {
        format!("{prefix}.{}", e.path)
    };
    SpecError {
        path,
        message: e.message,
    }
}

/// Reads a file's worth of specs: one object, an array of objects, or one object per line.
pub fn parse_specs(text: &str) -> Result<Vec<KvCacheCall>, SpecError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_call(v).map_err(|e| prefixed(&format!("[{i}]"), e)))
            .collect(),
        Ok(v @ Value::Object(_)) => Ok(vec![parse_call(&v)?]),
        Ok(other) => err(
            "",
            format!(
                "expected a call object or an array of them, got {}",
                kind(&other)
            ),
        ),
        Err(whole) => {
            let lines: Vec<(usize, &str)> = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .collect();
            if lines.len() < 2 {
                return err("", format!("invalid JSON: {whole}"));
            }
            lines
                .into_iter()
                .map(|(n, line)| {
                    let prefix = format!("line {}", n + 1);
                    let v: Value = serde_json::from_str(line).map_err(|e| SpecError {
                        path: prefix.clone(),
                        message: format!("invalid JSON: {e}"),
                    })?;
                    parse_call(&v).map_err(|e| prefixed(&prefix, e))
                })
                .collect()
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `expect` annotates catalogue entries (profile name -> expected site id); the call model ignores it.
const TOP_LEVEL_KEYS: [&str; 7] = [
    "id",
    "seed",
    "context",
    "args",
    "positional",
    "metadata_args",
    "expect",
];

/// Reads one call object.
pub fn parse_call(v: &Value) -> Result<KvCacheCall, SpecError> {
    let Value::Object(obj) = v else {
        return err("", format!("expected a call object, got {}", kind(v)));
    };
    if let Some(key) = obj.keys().find(|k| !TOP_LEVEL_KEYS.contains(&k.as_str())) {
        return err(
            &join("", key),
            format!(
                "unknown key (expected one of {})",
                TOP_LEVEL_KEYS.join(", ")
            ),
        );
    }
    let id = match obj.get("id") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return err("id", format!("expected a string, got {}", kind(other))),
    };
    let seed = match obj.get("seed") {
        None => 0,
        Some(v) => v
            .as_u64()
            .map_or_else(|| err("seed", "expected a non-negative integer"), Ok)?,
    };
    let context = match obj.get("context") {
        None | Some(Value::Null) => SglangContext::default(),
        Some(v) => serde_json::from_value(v.clone()).or_else(|e| err("context", e.to_string()))?,
    };
    let keywords = match obj.get("args") {
        None => Vec::new(),
        Some(Value::Object(args)) => args
            .iter()
            .map(|(k, v)| Ok((k.clone(), parse_value(&join("args", k), v)?)))
            .collect::<Result<_, SpecError>>()?,
        Some(other) => return err("args", format!("expected an object, got {}", kind(other))),
    };
    let positional = match obj.get("positional") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_value(&format!("positional[{i}]"), v))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return err(
                "positional",
                format!("expected an array, got {}", kind(other)),
            );
        }
    };
    let metadata_args = match obj.get("metadata_args") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value(v.clone()).or_else(|e| err("metadata_args", e.to_string()))?,
        ),
    };
    Ok(KvCacheCall {
        id,
        seed,
        context,
        positional,
        keywords,
        metadata_args,
    })
}

fn parse_value(path: &str, v: &Value) -> Result<PyValue, SpecError> {
    Ok(match v {
        Value::Null => PyValue::None,
        Value::Bool(b) => PyValue::Bool(*b),
        Value::Number(n) => number(path, n)?,
        Value::String(s) => PyValue::Str(s.clone()),
        Value::Array(items) => PyValue::Tuple(sequence(path, items)?),
        Value::Object(obj) => wrapped(path, obj)?,
    })
}

fn number(path: &str, n: &serde_json::Number) -> Result<PyValue, SpecError> {
    if let Some(i) = n.as_i64() {
        Ok(PyValue::Int(i))
    } else if n.is_u64() {
        err(path, "integer does not fit in 64 bits")
    } else {
        Ok(PyValue::Float(
            n.as_f64().expect("JSON numbers are f64 when not integers"),
        ))
    }
}

fn sequence(path: &str, items: &[Value]) -> Result<Vec<PyValue>, SpecError> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| parse_value(&format!("{path}[{i}]"), v))
        .collect()
}

fn wrapped(path: &str, obj: &Map<String, Value>) -> Result<PyValue, SpecError> {
    let mut keys = obj.keys();
    let (Some(tag), None) = (keys.next(), keys.next()) else {
        return err(
            path,
            "expected an object with exactly one of the keys tensor, object, list, float",
        );
    };
    let inner = &obj[tag];
    let inner_path = join(path, tag);
    match tag.as_str() {
        "tensor" => tensor(&inner_path, inner).map(PyValue::Tensor),
        "object" => match inner {
            Value::String(name) if !name.is_empty() => {
                // A callable is a function object; any other name is taken as the type name.
                let type_name = if name == "callable" { "function" } else { name };
                Ok(PyValue::Object(type_name.to_string()))
            }
            other => err(
                &inner_path,
                format!("expected a Python type name, got {}", kind(other)),
            ),
        },
        "list" => match inner {
            Value::Array(items) => Ok(PyValue::List(sequence(&inner_path, items)?)),
            other => err(
                &inner_path,
                format!("expected an array, got {}", kind(other)),
            ),
        },
        "float" => special_float(&inner_path, inner).map(PyValue::Float),
        other => err(
            path,
            format!("unknown wrapper `{other}` (expected tensor, object, list or float)"),
        ),
    }
}

fn special_float(path: &str, v: &Value) -> Result<f64, SpecError> {
    match v {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
        Value::Object(obj) if obj.len() == 1 && obj.contains_key("float") => {
            special_float(&join(path, "float"), &obj["float"])
        }
        Value::String(s) => match s.as_str() {
            "inf" | "+inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            "nan" | "NaN" => Ok(f64::NAN),
            _ => err(
                path,
                format!("expected a number, \"inf\", \"-inf\" or \"nan\", got \"{s}\""),
            ),
        },
        other => err(path, format!("expected a number, got {}", kind(other))),
    }
}

const TENSOR_KEYS: [&str; 5] = ["shape", "dtype", "device", "stride", "values"];

fn dims(path: &str, v: &Value) -> Result<Vec<usize>, SpecError> {
    let Value::Array(items) = v else {
        return err(
            path,
            format!(
                "expected an array of non-negative integers, got {}",
                kind(v)
            ),
        );
    };
    items
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .map_or_else(
                    || err(&format!("{path}[{i}]"), "expected a non-negative integer"),
                    Ok,
                )
        })
        .collect()
}

fn tensor(path: &str, v: &Value) -> Result<TensorArg, SpecError> {
    let Value::Object(obj) = v else {
        return err(path, format!("expected an object, got {}", kind(v)));
    };
    if let Some(key) = obj.keys().find(|k| !TENSOR_KEYS.contains(&k.as_str())) {
        return err(
            &join(path, key),
            format!("unknown key (expected one of {})", TENSOR_KEYS.join(", ")),
        );
    }
    let shape = match obj.get("shape") {
        Some(v) => dims(&join(path, "shape"), v)?,
        None => return err(path, "missing key `shape`"),
    };
    let dtype = match obj.get("dtype") {
        Some(Value::String(name)) => Dtype::from_torch_name(name).map_or_else(
            || {
                let known: Vec<&str> = Dtype::ALL.iter().map(|d| d.torch_name()).collect();
                err(
                    &join(path, "dtype"),
                    format!("unknown dtype \"{name}\" (known: {})", known.join(", ")),
                )
            },
            Ok,
        )?,
        Some(other) => {
            return err(
                &join(path, "dtype"),
                format!("expected a string, got {}", kind(other)),
            );
        }
        None => return err(path, "missing key `dtype`"),
    };
    let device = match obj.get("device") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(Device::from_name(name).map_or_else(
            || {
                err(
                    &join(path, "device"),
                    format!("unknown device \"{name}\" (expected musa, cuda or cpu)"),
                )
            },
            Ok,
        )?),
        Some(other) => {
            return err(
                &join(path, "device"),
                format!("expected a string, got {}", kind(other)),
            );
        }
    };
    let stride = match obj.get("stride") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let stride = dims(&join(path, "stride"), v)?;
            if stride.len() != shape.len() {
                return err(
                    &join(path, "stride"),
                    format!(
                        "has {} entries but shape has {} dimensions",
                        stride.len(),
                        shape.len()
                    ),
                );
            }
            Some(stride)
        }
    };
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .map_or_else(
            || err(&join(path, "shape"), "number of elements overflows"),
            Ok,
        )?;
    let values = match obj.get("values") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let vpath = join(path, "values");
            if items.len() != numel {
                return err(
                    &vpath,
                    format!(
                        "has {} values but shape {shape:?} has {numel} elements",
                        items.len()
                    ),
                );
            }
            Some(tensor_values(&vpath, items, dtype)?)
        }
        Some(other) => {
            return err(
                &join(path, "values"),
                format!("expected an array, got {}", kind(other)),
            );
        }
    };
    Ok(TensorArg {
        dtype,
        shape,
        stride,
        device,
        values,
    })
}

fn tensor_values(path: &str, items: &[Value], dtype: Dtype) -> Result<TensorValues, SpecError> {
    if dtype.is_floating_point() {
        let values = items
            .iter()
            .enumerate()
            .map(|(i, v)| special_float(&format!("{path}[{i}]"), v))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(TensorValues::Float(values));
    }
    let values = items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Bool(b) => Ok(*b as i64),
            Value::Number(n) => n.as_i64().map_or_else(
                || {
                    err(
                        &format!("{path}[{i}]"),
                        format!("expected an integer for a {} tensor", dtype.torch_name()),
                    )
                },
                Ok,
            ),
            other => err(
                &format!("{path}[{i}]"),
                format!("expected an integer, got {}", kind(other)),
            ),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorValues::Int(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> String {
        parse_specs(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_json_path() {
        assert_eq!(
            parse_err(r#"{"args": {"q": {"tensor": {"shape": [2, 1, -8], "dtype": "bfloat16"}}}}"#),
            "args.q.tensor.shape[2]: expected a non-negative integer"
        );
        assert_eq!(
            parse_err(r#"[{}, {"args": {"q": {"tensor": {"shape": [2], "dtype": "bf17"}}}}]"#),
            "[1].args.q.tensor.dtype: unknown dtype \"bf17\" (known: float16, bfloat16, float8_e4m3fn, \
             float8_e5m2, float32, float64, int8, uint8, int16, int32, int64, bool)"
        );
        assert_eq!(
            parse_err(
                r#"{"args": {"cache_seqlens": {"tensor": {"shape": [2], "dtype": "int32", "values": [1]}}}}"#
            ),
            "args.cache_seqlens.tensor.values: has 1 values but shape [2] has 2 elements"
        );
        assert_eq!(
            parse_err("{}\n{\"seed\": -1}\n"),
            "line 2.seed: expected a non-negative integer"
        );
        assert_eq!(
            parse_err(
                r#"{"args": {"q": {"tensor": {"shape": [4294967296, 4294967296, 4294967296], "dtype": "int8"}}}}"#
            ),
            "args.q.tensor.shape: number of elements overflows"
        );
        assert!(parse_err("{").starts_with("invalid JSON"));
        // Keys that are not plain names are quoted, so that even the empty key has a path
        // (found by the call_spec fuzz target).
        assert!(parse_err(r#"{"": 1}"#).starts_with("[\"\"]: unknown key"));
        assert!(
            parse_err(r#"{"args": {"a b": {"list": 1}}}"#)
                .starts_with("args[\"a b\"].list: expected an array")
        );
    }

    #[test]
    fn values_kinds_and_order() {
        let calls = parse_specs(
            r#"{"id": "x", "seed": 3, "args": {"ver": 2, "window_size": [-1, -1], "softcap": 0.0,
                "sinks": null, "score_mod": {"object": "callable"}, "pack_gqa": {"list": [true]},
                "softmax_scale": {"float": "inf"}}, "positional": [1]}"#,
        )
        .unwrap();
        let call = &calls[0];
        assert_eq!(call.id, "x");
        assert_eq!(call.seed, 3);
        let names: Vec<&str> = call.keywords.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "ver",
                "window_size",
                "softcap",
                "sinks",
                "score_mod",
                "pack_gqa",
                "softmax_scale"
            ]
        );
        assert_eq!(call.passed("ver"), Some(&PyValue::Int(2)));
        assert_eq!(call.passed("softcap"), Some(&PyValue::Float(0.0)));
        assert_eq!(call.passed("sinks"), Some(&PyValue::None));
        assert_eq!(call.passed("score_mod").unwrap().type_name(), "function");
        assert!(matches!(call.passed("pack_gqa"), Some(PyValue::List(_))));
        assert_eq!(call.passed("q"), Some(&PyValue::Int(1)));
        assert_eq!(call.passed("causal"), None);
    }
}
