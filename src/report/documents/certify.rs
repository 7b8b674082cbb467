//! `certify --format json`: each call's verdict per profile, hazards, numerics and whether it is
//! certified for the gate profile (`musa`).

use super::MessageMatch;
use crate::report::json::Document;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    pub calls: Vec<Call>,
    /// Calls that could not be read; the run's exit code is then 2 (input error). Absent from
    /// documents written before it was added.
    #[serde(default)]
    pub invalid: Vec<Invalid>,
}

impl Document for Certification {
    const SCHEMA_VERSION: u32 = 1;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub id: String,
    /// Profile name → verdict, in the order the profiles were selected.
    #[serde(serialize_with = "ordered_map", deserialize_with = "map_in_order")]
    pub profiles: Vec<(String, Verdict)>,
    pub hazards: Vec<Hazard>,
    /// `--numerics` only, and only for calls the gate profile accepts; otherwise `null`.
    pub numerics: Option<Numerics>,
    /// `accepted on sgl-kernel, rejected on musa: ValueError: ...`
    pub summary: String,
    pub certified: bool,
}

/// A call of a spec file that could not be read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Invalid {
    pub file: String,
    /// Where in the file: `line 3`, `[2]`, followed by the JSON path in the call
    /// (`line 3.args.q.tensor.shape[1]`); empty for a file of one call.
    pub path: String,
    pub message: String,
}

/// An accepted call has `null` exception, message, message_match and site.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub exception: Option<String>,
    /// `str(exc)`, as far as `message_match` says.
    pub message: Option<String>,
    /// How `message` stands for `str(exc)`: byte for byte, its start, or a pattern whose `{*}`
    /// parts are the installed library's (the error site's declaration, `explain --list`).
    pub message_match: Option<MessageMatch>,
    /// The error site's id (`musa.W-1`).
    pub site: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Accepted,
    Rejected,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hazard {
    pub profile: String,
    pub code: String,
    /// `info`, `warning` or `error`.
    pub severity: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Numerics {
    /// `within-tolerance`, `differs` or `not-run`.
    pub status: String,
    pub detail: String,
}

fn ordered_map<S: Serializer>(entries: &[(String, Verdict)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(entries.iter().map(|(k, v)| (k, v)))
}

/// The profiles object read back in the order it was written.
fn map_in_order<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, Verdict)>, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(String, Verdict)>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of profile verdicts")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry()? {
                entries.push(entry);
            }
            Ok(entries)
        }
    }
    d.deserialize_map(Entries)
}
