//! The JSON writer: a document as one pretty-printed object whose first key is
//! `schema_version`, then a newline.

use serde::Serialize;
use std::io::{self, Write};

/// A JSON document a command writes ([`super::documents`] has them all).
pub trait Document: Serialize {
    /// Raised on every incompatible change of the document's shape; written as `schema_version`.
    const SCHEMA_VERSION: u32;

    /// The `schema_version` written: [`Self::SCHEMA_VERSION`], unless the document takes the
    /// version of what it holds (merge-reports' merged document).
    fn schema_version(&self) -> u32 {
        Self::SCHEMA_VERSION
    }
}

#[derive(Serialize)]
struct Versioned<'a, D> {
    schema_version: u32,
    #[serde(flatten)]
    document: &'a D,
}

/// Writes `document` with its `schema_version`.
pub fn write<D: Document>(document: &D, out: &mut dyn Write) -> io::Result<()> {
    write_value(
        &Versioned {
            schema_version: document.schema_version(),
            document,
        },
        out,
    )
}

/// Writes any serialisable value as pretty-printed JSON and a newline.
pub fn write_value(value: &impl Serialize, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample {
        b: u8,
        a: Option<&'static str>,
    }

    impl Document for Sample {
        const SCHEMA_VERSION: u32 = 7;
    }

    #[test]
    fn schema_version_comes_first_and_fields_keep_their_order() {
        let mut out = Vec::new();
        write(&Sample { b: 1, a: None }, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\n  \"schema_version\": 7,\n  \"b\": 1,\n  \"a\": null\n}\n"
        );
    }
}
