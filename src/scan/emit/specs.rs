//! `--emit-specs FILE`: a call-spec skeleton per call site (the format of [`crate::spec`]) for
//! `certify` to complete once shapes are known.
//!
//! Literal arguments are filled in; any other argument is `{"unknown": "<source expression>"}`,
//! which the spec parser rejects until it is replaced by a value (usually a `{"tensor": ...}`).
//! `*args` is kept as one unknown positional entry and `**kwargs` as an unknown `"**"` key, so the
//! skeleton never silently drops an argument.

use crate::scan::{ArgKind, CallRecord};
use crate::spec::value_to_json;
use serde_json::{Map, Value, json};
use std::io::{self, Write};

fn value(arg: &crate::scan::RecordedArg) -> Value {
    match &arg.literal {
        Some(v) => value_to_json(v),
        None => json!({ "unknown": arg.text }),
    }
}

/// The skeleton of one call.
pub fn skeleton(call: &CallRecord) -> Value {
    let mut args = Map::new();
    let mut positional = Vec::new();
    for arg in &call.args {
        match &arg.kind {
            ArgKind::Positional | ArgKind::Unpack => positional.push(value(arg)),
            ArgKind::Keyword(name) => {
                args.insert(name.clone(), value(arg));
            }
            ArgKind::UnpackMapping => {
                args.insert("**".into(), value(arg));
            }
        }
    }
    let stacks: Vec<&str> = call.stacks.iter().map(|s| s.name()).collect();
    json!({
        "id": format!(
            "{}:{}:{} ({})",
            call.path,
            call.location.line,
            call.location.column,
            stacks.join(", ")
        ),
        "args": args,
        "positional": positional,
    })
}

pub fn render(calls: &[CallRecord], out: &mut dyn Write) -> io::Result<()> {
    let skeletons: Vec<Value> = calls.iter().map(skeleton).collect();
    serde_json::to_writer_pretty(&mut *out, &skeletons)?;
    writeln!(out)
}
