//! Python literals as [`PyValue`]s: numbers, strings without escapes or prefixes, booleans, `None`.
//! Tuples and lists are assembled by the analysis from their elements' values.

use crate::call::PyValue;
use tree_sitter::Node;

/// The value of a literal token, or `None` when `node` is not one the scan evaluates.
pub fn scalar(node: Node, source: &str) -> Option<PyValue> {
    let text = &source[node.byte_range()];
    match node.kind() {
        "integer" => parse_int(text).map(PyValue::Int),
        "float" => {
            let digits = text.replace('_', "");
            if digits.ends_with(['j', 'J']) {
                return None;
            }
            digits.parse().ok().map(PyValue::Float)
        }
        "true" => Some(PyValue::Bool(true)),
        "false" => Some(PyValue::Bool(false)),
        "none" => Some(PyValue::None),
        "string" => string(node, source).map(PyValue::Str),
        _ => None,
    }
}

/// A Python int literal (`10`, `1_000`, `0x1f`, `0o17`, `0b101`) that fits in i64.
fn parse_int(literal: &str) -> Option<i64> {
    let digits = literal.replace('_', "").to_ascii_lowercase();
    let (radix, body) = match digits.get(..2) {
        Some("0x") => (16, &digits[2..]),
        Some("0o") => (8, &digits[2..]),
        Some("0b") => (2, &digits[2..]),
        _ => (10, digits.as_str()),
    };
    i64::from_str_radix(body, radix).ok()
}

/// A plain string literal without escapes, prefixes or interpolation.
fn string(node: Node, source: &str) -> Option<String> {
    let mut content = String::new();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "string_start" => {
                let quote = &source[child.byte_range()];
                if !quote.starts_with(['"', '\'']) {
                    return None; // b'', f'', r'', ...
                }
            }
            "string_content" => {
                if child.named_child_count() > 0 {
                    return None; // escape sequences
                }
                content.push_str(&source[child.byte_range()]);
            }
            "string_end" => {}
            _ => return None,
        }
    }
    Some(content)
}

/// Python's `==` on literals: numbers compare by value across bool/int/float (`False == 0`).
pub fn python_eq(a: &PyValue, b: &PyValue) -> bool {
    match (a, b) {
        (PyValue::Tuple(x), PyValue::Tuple(y)) | (PyValue::List(x), PyValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| python_eq(a, b))
        }
        _ => match (a.as_number(), b.as_number()) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}
