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
