//! JSON call specs: the porter-facing description of one `flash_attn_with_kvcache` call.
//!
//! ```json
//! {"id": "decode", "seed": 7, "context": {"sglang_backend": null},
//!  "args": {"q": {"tensor": {"shape": [2,1,8,128], "dtype": "bfloat16"}}, "ver": 2},
//!  "positional": []}
//! ```
//! A key absent from `args` is not passed; `null` is `None`; `{"tensor": {...}}` a tensor;
//! `{"object": "<type>"}` any other object; `{"list": [...]}` a list (plain arrays are tuples);
//! `{"float": "inf"}` a non-finite float; `{"dict": [[key, value], ...]}` a dict;
//! `{"numpy": {"dtype": "int64", "value": 3}}` a NumPy scalar. A file holds one object, an array of
//! them, or JSON lines.
//! Every error names the JSON path of the offending value. An optional top-level `"expect"` object
//! (profile name -> expected error-site id) annotates catalogue entries and is ignored here.
//! An optional top-level `"metadata_args"` object holds the `get_scheduler_metadata` keyword
//! arguments (FA3 signature) the call's `scheduler_metadata` was computed with
//! ([`crate::call::MetadataArgsSpec`]); `certify` compares them with the call. An optional
//! `"recorded"` object is the recorder's note ([`crate::call::Recorded`]). [`read_calls`] reads
//! files, standard input and folders of recordings, each file at most a cap's worth of bytes.

mod json;
mod parse;
mod sources;
mod write;

use crate::files::{self, FileError};
use crate::memory::Budget;
pub use parse::{SpecError, parse_call, parse_each, parse_specs};
pub use sources::{CallSet, InvalidCall, SourceError, cpu_tensors_on, parse_device_as, read_calls};
pub use write::{call_to_json, value_to_json};

/// The text of a JSON file (`-`: standard input), held in `budget` with the bound on what parsing
/// it builds: spec files, forward passes, bundle files.
pub fn read_json_text(path: &std::path::Path, budget: &mut Budget) -> Result<String, FileError> {
    files::read_text_within(path, budget, json::parsed_bytes_bound)
}

/// One JSON document as spec files are read: a byte-order mark skipped, a repeated key an error,
/// a syntax error named by its line and column (for files that are not call specs, such as
/// forward passes).
pub fn parse_document(text: &str) -> Result<serde_json::Value, SpecError> {
    let text = json::without_bom(text);
    json::parse(text).map_err(|e| {
        let (message, line, column) = json::describe(&e, text);
        SpecError {
            path: String::new(),
            message: format!("invalid JSON at line {line} column {column}: {message}"),
        }
    })
}
