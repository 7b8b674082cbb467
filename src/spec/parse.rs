use super::json;
use crate::call::{
    Device, Dtype, KvCacheCall, NumpyScalar, NumpyValue, PyValue, SglangContext, TensorArg,
    TensorValues,
};
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

/// Reads a file's worth of specs: one object, an array of objects, or one object per line. The
/// first bad call is the error; [`parse_each`] keeps the others.
pub fn parse_specs(text: &str) -> Result<Vec<KvCacheCall>, SpecError> {
    parse_each(text)?.into_iter().collect()
}

/// Reads a file's worth of specs, each call on its own: a bad call (or JSON line) is its own error
/// and the others still parse. The outer error is for a file that is no spec file at all: not
/// JSON, empty, or a JSON value that is neither a call nor an array of calls.
pub fn parse_each(text: &str) -> Result<Vec<Result<KvCacheCall, SpecError>>, SpecError> {
    let text = json::without_bom(text);
    if text.trim().is_empty() {
        return err("", "no call specs: the input is empty");
    }
    let document = match json::parse(text) {
        Ok(document) => document,
        Err(whole) => {
            return match json_lines(text) {
                Some(lines) => Ok(lines),
                None => {
                    let (message, line, column) = json::describe(&whole, text);
                    err(
                        "",
                        format!("invalid JSON at line {line} column {column}: {message}"),
                    )
                }
            };
        }
    };
    match document {
        Value::Array(items) if items.is_empty() => err("", "no call specs: the array is empty"),
        Value::Array(items) => Ok(items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_call(v).map_err(|e| prefixed(&format!("[{i}]"), e)))
            .collect()),
        v @ Value::Object(_) => Ok(vec![parse_call(&v)]),
        other => err(
            "",
            format!(
                "expected a call object or an array of them, got {}",
                kind(&other)
            ),
        ),
    }
}

/// The calls of a JSON-lines file, or `None` when `text` is not one (then it is a single JSON
/// document with a syntax error). A file is taken for JSON lines when it has two or more
/// non-empty lines and at least half of them are JSON objects on their own: a pretty-printed
/// document's lines almost never are, and a JSON-lines file with a bad line still is one.
fn json_lines(text: &str) -> Option<Vec<Result<KvCacheCall, SpecError>>> {
    let lines: Vec<(usize, &str, Result<Value, serde_json::Error>)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| (n + 1, line, json::parse(line)))
        .collect();
    let objects = lines
        .iter()
        .filter(|(_, _, v)| matches!(v, Ok(Value::Object(_))))
        .count();
    if lines.len() < 2 || 2 * objects < lines.len() {
        return None;
    }
    Some(
        lines
            .into_iter()
            .map(|(n, line, parsed)| {
                let prefix = format!("line {n}");
                match parsed {
                    Ok(v) => parse_call(&v).map_err(|e| prefixed(&prefix, e)),
                    Err(e) => {
                        let (message, _, column) = json::describe(&e, line);
                        err(
                            &prefix,
                            format!("invalid JSON at column {column}: {message}"),
                        )
                    }
                }
            })
            .collect(),
    )
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
/// `recorded` is the recorder's note of where the call came from.
const TOP_LEVEL_KEYS: [&str; 8] = [
    "id",
    "seed",
    "context",
    "args",
    "positional",
    "metadata_args",
    "expect",
    "recorded",
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
    let recorded = match obj.get("recorded") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value(v.clone()).or_else(|e| err("recorded", e.to_string()))?)
        }
    };
    Ok(KvCacheCall {
        id,
        seed,
        context,
        positional,
        keywords,
        metadata_args,
        recorded,
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
            "expected an object with exactly one of the keys tensor, object, list, float, dict, numpy",
        );
    };
    let inner = &obj[tag];
    let inner_path = join(path, tag);
    match tag.as_str() {
        "tensor" => tensor(&inner_path, inner).map(PyValue::Tensor),
        "object" => match inner {
            // An empty dict is a dict (`{"dict": []}`), whatever form names it.
            Value::String(name) if name == "dict" => Ok(PyValue::Dict(Vec::new())),
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
        "dict" => dict(&inner_path, inner),
        "numpy" => numpy_scalar(&inner_path, inner).map(PyValue::Numpy),
        other => err(
            path,
            format!(
                "unknown wrapper `{other}` (expected tensor, object, list, float, dict or numpy)"
            ),
        ),
    }
}

/// `{"dict": [[key, value], ...]}`: the items in order, keys and values in spec form.
fn dict(path: &str, v: &Value) -> Result<PyValue, SpecError> {
    let Value::Array(items) = v else {
        return err(
            path,
            format!("expected an array of [key, value] pairs, got {}", kind(v)),
        );
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let item_path = format!("{path}[{i}]");
            match item {
                Value::Array(pair) if pair.len() == 2 => Ok((
                    parse_value(&format!("{item_path}[0]"), &pair[0])?,
                    parse_value(&format!("{item_path}[1]"), &pair[1])?,
                )),
                other => err(
                    &item_path,
                    format!("expected a [key, value] pair, got {}", kind(other)),
                ),
            }
        })
        .collect::<Result<_, _>>()
        .map(PyValue::Dict)
}

/// `{"dtype": "int64", "value": 3}`: a NumPy scalar of a bool, integer or float dtype.
fn numpy_scalar(path: &str, v: &Value) -> Result<NumpyScalar, SpecError> {
    let Value::Object(obj) = v else {
        return err(path, format!("expected an object, got {}", kind(v)));
    };
    if let Some(key) = obj
        .keys()
        .find(|k| !["dtype", "value"].contains(&k.as_str()))
    {
        return err(&join(path, key), "unknown key (expected dtype, value)");
    }
    let dtype_path = join(path, "dtype");
    let dtype = match obj.get("dtype") {
        Some(Value::String(name)) => Dtype::from_torch_name(name)
            .filter(|d| !matches!(d, Dtype::Bfloat16 | Dtype::Float8E4m3fn | Dtype::Float8E5m2))
            .map_or_else(
                || err(&dtype_path, format!("not a NumPy scalar dtype: \"{name}\"")),
                Ok,
            )?,
        Some(other) => {
            return err(
                &dtype_path,
                format!("expected a string, got {}", kind(other)),
            );
        }
        None => return err(path, "missing key `dtype`"),
    };
    let value_path = join(path, "value");
    let value = match (obj.get("value"), dtype) {
        (None, _) => return err(path, "missing key `value`"),
        (Some(Value::Bool(b)), Dtype::Bool) => NumpyValue::Bool(*b),
        (Some(_), Dtype::Bool) => return err(&value_path, "expected true or false"),
        (Some(v), d) if d.is_floating_point() => NumpyValue::Float(special_float(&value_path, v)?),
        // The value must fit the type (`np.uint8(256)` raises `OverflowError`).
        (Some(v), d) => NumpyValue::Int(
            v.as_i64()
                .filter(|i| d.int_range().is_some_and(|(lo, hi)| (lo..=hi).contains(i)))
                .map_or_else(
                    || {
                        err(
                            &value_path,
                            format!("expected an integer for {}", d.torch_name()),
                        )
                    },
                    Ok,
                )?,
        ),
    };
    Ok(NumpyScalar { dtype, value })
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
        .map(|(i, v)| int_value(&format!("{path}[{i}]"), v, dtype))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorValues::Int(values))
}

/// One value of an integer (or bool) tensor, exactly: a value the dtype cannot hold is an error,
/// never clamped or wrapped: the spec gives the tensor's contents, which the dtype must hold.
fn int_value(path: &str, v: &Value, dtype: Dtype) -> Result<i64, SpecError> {
    let (low, high) = dtype.int_range().expect("integer dtype");
    let value = match v {
        Value::Bool(b) => i64::from(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i,
            (None, Some(u)) => {
                return err(
                    path,
                    format!(
                        "{u} is out of range for {} [{low}, {high}]",
                        dtype.torch_name()
                    ),
                );
            }
            (None, None) => {
                return err(
                    path,
                    format!(
                        "expected an integer for a {} tensor, got {n}",
                        dtype.torch_name()
                    ),
                );
            }
        },
        other => return err(path, format!("expected an integer, got {}", kind(other))),
    };
    if !(low..=high).contains(&value) {
        return err(
            path,
            format!(
                "{value} is out of range for {} [{low}, {high}]",
                dtype.torch_name()
            ),
        );
    }
    Ok(value)
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
        assert_eq!(
            parse_err(r#"{"args": {"m": {"numpy": {"dtype": "bfloat16", "value": 1}}}}"#),
            "args.m.numpy.dtype: not a NumPy scalar dtype: \"bfloat16\""
        );
        assert_eq!(
            parse_err(r#"{"args": {"m": {"numpy": {"dtype": "int32", "value": 1.5}}}}"#),
            "args.m.numpy.value: expected an integer for int32"
        );
        // Keys that are not plain names are quoted, so that even the empty key has a path
        // (found by the call_spec fuzz target).
        assert!(parse_err(r#"{"": 1}"#).starts_with("[\"\"]: unknown key"));
        assert!(
            parse_err(r#"{"args": {"a b": {"list": 1}}}"#)
                .starts_with("args[\"a b\"].list: expected an array")
        );
    }

    #[test]
    fn documents_are_read_as_written() {
        let call = r#"{"id": "a"}"#;
        // A byte-order mark is skipped.
        assert_eq!(parse_specs(&format!("\u{feff}{call}")).unwrap()[0].id, "a");
        // A syntax error deep in a pretty-printed document is reported where it is, not as the
        // first line of a JSON-lines file.
        let pretty =
            "{\n  \"id\": \"x\",\n  \"args\": {\n    \"ver\": 3,\n    \"causal\": tru\n  }\n}\n";
        assert_eq!(
            parse_err(pretty),
            "invalid JSON at line 5 column 18: expected ident"
        );
        // A key given twice is an error, not "the last one wins".
        assert_eq!(
            parse_err("{\"id\": \"a\",\n \"args\": {\"ver\": 3, \"ver\": 2}}"),
            "invalid JSON at line 2 column 25: duplicate key \"ver\""
        );
        assert_eq!(parse_err(" \n"), "no call specs: the input is empty");
        assert_eq!(parse_err("[]"), "no call specs: the array is empty");
    }

    #[test]
    fn a_bad_json_line_is_its_own_error() {
        let calls =
            parse_each("{\"id\": \"a\"}\n{\"id\": \"b\",}\n\n{\"id\": 7}\n{\"id\": \"d\"}\n")
                .unwrap();
        let shown: Vec<String> = calls
            .iter()
            .map(|c| match c {
                Ok(call) => call.id.clone(),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            shown,
            [
                "a",
                "line 2: invalid JSON at column 12: trailing comma",
                "line 4.id: expected a string, got a number",
                "d"
            ]
        );
        assert_eq!(
            parse_err("{\"id\": \"a\"}\n{\"id\": \"b\",}\n"),
            "line 2: invalid JSON at column 12: trailing comma"
        );
    }

    #[test]
    fn integer_values_fit_their_dtype_exactly() {
        let with = |dtype: &str, values: &str| {
            parse_specs(&format!(
                r#"{{"args": {{"t": {{"tensor": {{"shape": [1], "dtype": "{dtype}", "values": [{values}]}}}}}}}}"#
            ))
            .map(|calls| calls[0].passed("t").unwrap().as_tensor().unwrap().int_values())
            .map_err(|e| e.to_string())
        };
        let refused = |dtype: &str, values: &str, message: &str| {
            assert_eq!(
                with(dtype, values),
                Err(format!("args.t.tensor.values[0]: {message}"))
            );
        };
        refused(
            "int32",
            "4294967299",
            "4294967299 is out of range for int32 [-2147483648, 2147483647]",
        );
        refused("uint8", "-1", "-1 is out of range for uint8 [0, 255]");
        refused("int8", "200", "200 is out of range for int8 [-128, 127]");
        refused("bool", "2", "2 is out of range for bool [0, 1]");
        refused(
            "int64",
            "9223372036854775808",
            "9223372036854775808 is out of range for int64 [-9223372036854775808, 9223372036854775807]",
        );
        refused(
            "int32",
            "1.5",
            "expected an integer for a int32 tensor, got 1.5",
        );
        assert_eq!(
            with("int64", "9007199254740993"),
            Ok(Some(vec![9007199254740993]))
        );
        assert_eq!(with("int32", "-2147483648"), Ok(Some(vec![-2147483648])));
        assert_eq!(with("bool", "true"), Ok(Some(vec![1])));
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

    #[test]
    fn dicts_and_numpy_scalars() {
        let calls = parse_specs(
            r#"{"args": {"max_seqlen_q": {"numpy": {"dtype": "int64", "value": 9}},
                "window_size": {"dict": [[0, -1], [1, {"list": []}]]},
                "pack_gqa": {"object": "dict"}}}"#,
        )
        .unwrap();
        let call = &calls[0];
        let seqlen = call.passed("max_seqlen_q").unwrap();
        assert_eq!(seqlen.type_name(), "numpy.int64");
        assert_eq!(seqlen.class_name(), "int64");
        assert_eq!(
            call.passed("window_size").unwrap().to_string(),
            "{0: -1, 1: []}"
        );
        assert_eq!(call.passed("pack_gqa"), Some(&PyValue::Dict(Vec::new())));
        // What the parser reads, the writer writes back.
        let again = crate::spec::call_to_json(call);
        assert_eq!(parse_call(&again).unwrap(), *call);
        assert_eq!(
            parse_err(r#"{"args": {"x": {"numpy": {"dtype": "uint8", "value": 256}}}}"#),
            "args.x.numpy.value: expected an integer for uint8"
        );
        assert_eq!(
            parse_err(r#"{"args": {"x": {"dict": [[0]]}}}"#),
            "args.x.dict[0]: expected a [key, value] pair, got an array"
        );
    }
}
