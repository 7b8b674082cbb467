//! `--format sarif`: SARIF 2.1.0 for code-scanning UIs. Every rule of the registry is listed in the
//! driver, so a result's `ruleIndex` is its position in [`Rule::ALL`].

use crate::scan::{Diagnostic, Rule, Severity};
use serde_json::{Value, json};

pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A relative URI reference for a path: `/`-separated, reserved characters percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.replace('\\', "/").bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn rule_descriptor(rule: Rule) -> Value {
    let info = rule.info();
    json!({
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": info.explanation},
        "help": {"text": info.explanation},
        "defaultConfiguration": {"level": level(info.severity), "enabled": info.default},
    })
}

fn result(d: &Diagnostic) -> Value {
    let index = Rule::ALL
        .iter()
        .position(|r| *r == d.rule)
        .expect("every rule is in Rule::ALL");
    let text = match &d.help {
        Some(help) => format!("{}\nhelp: {help}", d.message),
        None => d.message.clone(),
    };
    json!({
        "ruleId": d.rule.code(),
        "ruleIndex": index,
        "level": level(d.severity()),
        "message": {"text": text},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri(&d.path)},
                "region": {
                    "startLine": d.start.line,
                    "startColumn": d.start.column,
                    "endLine": d.end.line,
                    "endColumn": d.end.column,
                },
            },
        }],
        "properties": {"stacks": d.stacks.iter().map(|s| s.name()).collect::<Vec<_>>()},
    })
}

/// The SARIF log of the reported diagnostics.
pub fn log(diagnostics: &[Diagnostic]) -> Value {
    json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "fa3conform",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": Rule::ALL.iter().map(|r| rule_descriptor(*r)).collect::<Vec<_>>(),
            }},
            "columnKind": "unicodeCodePoints",
            "results": diagnostics.iter().map(result).collect::<Vec<_>>(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_encode_reserved_characters() {
        assert_eq!(uri("a/b c/d#e.py"), "a/b%20c/d%23e.py");
        assert_eq!(uri("dir\\x.py"), "dir/x.py");
    }
}
