//! JSON text as call specs read it: a leading byte-order mark is skipped, a key repeated in one
//! object is an error (serde_json would silently keep the last value), and a syntax error names its
//! line and column in the text the user wrote.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Parses one JSON document, refusing duplicate keys.
pub(super) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|strict| strict.0)
}

/// Heap bytes one JSON value may take once parsed, its text's bytes apart: the [`Value`] itself in
/// an array or map that may have grown to twice its length, as an object member also its key
/// (`String`) and the map's hash and index slots, and an allocator's header and rounding for the
/// one allocation it may own.
const PARSED_BYTES_PER_VALUE: u128 = (2
    * (std::mem::size_of::<Value>()
        + std::mem::size_of::<String>()
        + 2 * std::mem::size_of::<u64>())
    + 32) as u128;

/// An upper bound on the bytes `text` takes once parsed and turned into calls: every value but
/// the first follows a `,`, `[` or `{` (a count that string contents only inflate), each value
/// counts [`PARSED_BYTES_PER_VALUE`], strings and numbers at most their text again, and the calls
/// built from the tree while it is alive at most as much as the tree.
pub(crate) fn parsed_bytes_bound(text: &str) -> u128 {
    let values = memchr::memchr3_iter(b',', b'[', b'{', text.as_bytes()).count() as u128 + 1;
    2 * (values * PARSED_BYTES_PER_VALUE + text.len() as u128)
}

/// `text` without a UTF-8 byte-order mark (editors on Windows write one).
pub(super) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// serde_json's message without its ` at line L column C` suffix, and the position on its own in
/// `text`. serde_json reports an error found on reading a newline as column 0 of the next line;
/// that is the end of the line the user has to fix, so it is reported there.
pub(super) fn describe(e: &serde_json::Error, text: &str) -> (String, usize, usize) {
    let display = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = display
        .strip_suffix(&suffix)
        .unwrap_or(&display)
        .to_string();
    let (line, column) = match (e.line(), e.column()) {
        (line, 0) if line > 1 => {
            let previous = text.lines().nth(line - 2).unwrap_or("");
            (line - 1, previous.chars().count() + 1)
        }
        position => position,
    };
    (message, line, column)
}

/// A `Value` whose objects had no key twice.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }

    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        // JSON text cannot spell a non-finite number, so `x` is always representable.
        Ok(serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {}",
                    Value::String(key)
                )));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_errors_with_their_position() {
        // Reported at the repeated key's closing quote.
        let text = "{\"a\": 1,\n \"b\": {\"c\": 1, \"c\": 2}}";
        let e = parse(text).unwrap_err();
        assert_eq!(
            describe(&e, text),
            ("duplicate key \"c\"".to_string(), 2, 18)
        );
        // A value cut short by the end of its line is reported at the end of that line.
        let text = "{\"a\":\n tru\n}";
        let e = parse(text).unwrap_err();
        assert_eq!(describe(&e, text), ("expected ident".to_string(), 2, 5));
        assert_eq!(
            parse(r#"{"a": [1, -2, 3.5, "x", null, true, {}]}"#).unwrap(),
            serde_json::json!({"a": [1, -2, 3.5, "x", null, true, {}]})
        );
    }
}
