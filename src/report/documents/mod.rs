//! Every JSON document fa3conform writes, one module each: the wire types are the schema. They are
//! kept apart from the commands' own types so that a document changes only on purpose; a change
//! that breaks a reader raises the document's [`Document::SCHEMA_VERSION`](super::json::Document).
//! README.md ("JSON documents") lists their top-level shapes.

pub mod certify;
pub mod conform;
pub mod explain;
pub mod export;
pub mod forward;
pub mod run;
pub mod scan;
pub mod verify;

use serde::{Deserialize, Serialize};

/// How a verdict's or template's message stands for the exception's `str()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageMatch {
    /// The message is `str(exc)` byte for byte.
    Exact,
    /// `str(exc)` starts with the message.
    Prefix,
    /// `str(exc)` is the message with each `{*}` replaced by some text (what the build or the
    /// library version decides), the rest byte for byte.
    Pattern,
}
