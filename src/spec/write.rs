use crate::call::{KvCacheCall, NumpyValue, PyValue, TensorValues};
use serde_json::{Map, Value, json};

fn float_json(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        let s = if x.is_nan() {
            "nan"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        json!({ "float": s })
    }
}

/// A value in spec form (the inverse of the parser).
pub fn value_to_json(v: &PyValue) -> Value {
    match v {
        PyValue::None => Value::Null,
        PyValue::Bool(b) => json!(b),
        PyValue::Int(i) => json!(i),
        PyValue::Float(x) => float_json(*x),
        PyValue::Str(s) => json!(s),
        PyValue::Tuple(items) => Value::Array(items.iter().map(value_to_json).collect()),
        PyValue::List(items) => {
            json!({ "list": items.iter().map(value_to_json).collect::<Vec<_>>() })
        }
        PyValue::Object(name) => json!({ "object": name }),
        PyValue::Dict(items) => json!({
            "dict": items
                .iter()
                .map(|(k, v)| json!([value_to_json(k), value_to_json(v)]))
                .collect::<Vec<_>>()
        }),
        PyValue::Numpy(n) => {
            let value = match n.value {
                NumpyValue::Bool(b) => json!(b),
                NumpyValue::Int(i) => json!(i),
                NumpyValue::Float(x) => float_json(x),
            };
            json!({ "numpy": { "dtype": n.dtype.torch_name(), "value": value } })
        }
        PyValue::Tensor(t) => {
            let mut obj = Map::new();
            obj.insert("shape".into(), json!(t.shape));
            obj.insert("dtype".into(), json!(t.dtype.torch_name()));
            if let Some(device) = t.device {
                obj.insert("device".into(), json!(device.name()));
            }
            if let Some(stride) = &t.stride {
                obj.insert("stride".into(), json!(stride));
            }
            match &t.values {
                Some(TensorValues::Int(v)) => {
                    obj.insert("values".into(), json!(v));
                }
                Some(TensorValues::Float(v)) => {
                    obj.insert(
                        "values".into(),
                        Value::Array(v.iter().map(|&x| float_json(x)).collect()),
                    );
                }
                None => {}
            }
            json!({ "tensor": obj })
        }
    }
}

/// A call in spec form.
pub fn call_to_json(call: &KvCacheCall) -> Value {
    let mut obj = Map::new();
    obj.insert("id".into(), json!(call.id));
    obj.insert("seed".into(), json!(call.seed));
    if call.context.sglang_backend.is_some() {
        obj.insert(
            "context".into(),
            serde_json::to_value(&call.context).expect("context serialises"),
        );
    }
    let args: Map<String, Value> = call
        .keywords
        .iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect();
    obj.insert("args".into(), Value::Object(args));
    if !call.positional.is_empty() {
        obj.insert(
            "positional".into(),
            Value::Array(call.positional.iter().map(value_to_json).collect()),
        );
    }
    if let Some(metadata_args) = &call.metadata_args {
        obj.insert(
            "metadata_args".into(),
            serde_json::to_value(metadata_args).expect("metadata_args serialise"),
        );
    }
    if let Some(recorded) = &call.recorded {
        obj.insert(
            "recorded".into(),
            serde_json::to_value(recorded).expect("recorded serialises"),
        );
    }
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_call;

    #[test]
    fn round_trip() {
        let text = r#"{"id": "r", "seed": 1, "args": {"q": {"tensor": {"shape": [1, 2], "dtype": "bfloat16",
            "device": "cpu", "stride": [2, 1], "values": [1.5, {"float": "-inf"}]}}, "ver": 3.0,
            "pack_gqa": {"list": [1]}, "score_mod": {"object": "function"}, "window_size": [-1, 0],
            "max_seqlen_q": {"numpy": {"dtype": "int64", "value": 3}},
            "softcap": {"numpy": {"dtype": "float32", "value": {"float": "inf"}}},
            "causal": {"numpy": {"dtype": "bool", "value": true}}},
            "positional": [null], "recorded": {"entry": "m:f", "values_skipped": "CUDA graph capture"}}"#;
        let call = crate::spec::parse_specs(text).unwrap().remove(0);
        let again = parse_call(&call_to_json(&call)).unwrap();
        assert_eq!(call, again);
    }

    #[test]
    fn metadata_args_round_trip_and_reject_unknown_fields() {
        let text = r#"{"id": "m", "args": {}, "metadata_args": {"batch_size": 2, "max_seqlen_q": 1,
            "max_seqlen_k": 64, "num_heads_q": 8, "num_heads_kv": 2, "headdim": 128,
            "cache_seqlens": [5, 9], "cu_seqlens_q": [0, 1, 2], "page_size": 16, "causal": true,
            "window_size": [-1, 0]}}"#;
        let call = crate::spec::parse_specs(text).unwrap().remove(0);
        let args = call.metadata_args.as_ref().unwrap();
        assert_eq!(
            (args.batch_size, args.page_size, args.window_size),
            (2, Some(16), Some([-1, 0]))
        );
        assert_eq!(parse_call(&call_to_json(&call)).unwrap(), call);
        let bad = r#"{"args": {}, "metadata_args": {"batch_size": 1, "seqlens": []}}"#;
        let message = crate::spec::parse_specs(bad).unwrap_err().to_string();
        assert!(
            message.starts_with("metadata_args: unknown field `seqlens`"),
            "{message}"
        );
    }
}
