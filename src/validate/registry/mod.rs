//! The one list of error sites and hazards. Only this module formats upstream error text.
//!
//! Ids are stable and never reused. Every site cites `repo@commit path:line` and carries the
//! explanation `fa3conform explain` prints. Templates use `{}` for values filled in order.

use super::{Exception, Severity};

/// A [`Site`]: id, layer, exception class (an [`Exception`] variant), message template, citation,
/// condition, explanation. `prefix "template"` marks a message whose end the sources do not
/// determine ([`MessageMatch::Prefix`]), `pattern "template"` one with parts they do not determine
/// in the middle, each written [`ANY_TEXT`] ([`MessageMatch::Pattern`]).
macro_rules! site {
    ($id:literal, $layer:expr, $exception:ident, prefix $template:expr, $citation:expr, $condition:expr, $explain:expr $(,)?) => {
        site!(@ $id, $layer, $exception, $template, Prefix, $citation, $condition, $explain)
    };
    ($id:literal, $layer:expr, $exception:ident, pattern $template:expr, $citation:expr, $condition:expr, $explain:expr $(,)?) => {
        site!(@ $id, $layer, $exception, $template, Pattern, $citation, $condition, $explain)
    };
    ($id:literal, $layer:expr, $exception:ident, $template:expr, $citation:expr, $condition:expr, $explain:expr $(,)?) => {
        site!(@ $id, $layer, $exception, $template, Exact, $citation, $condition, $explain)
    };
    (@ $id:literal, $layer:expr, $exception:ident, $template:expr, $match:ident, $citation:expr, $condition:expr, $explain:expr) => {
        $crate::validate::registry::Site {
            id: $id,
            layer: $layer,
            exception: $crate::validate::Exception::$exception,
            template: $template,
            message_match: $crate::validate::registry::MessageMatch::$match,
            citation: $citation,
            condition: $condition,
            explain: $explain,
        }
    };
}

/// A [`HazardDef`]: code, severity (a [`Severity`] variant), message template, citation, explanation.
macro_rules! hazard {
    ($code:literal, $severity:ident, $template:literal, $citation:expr, $explain:literal $(,)?) => {
        $crate::validate::registry::HazardDef {
            code: $code,
            severity: $crate::validate::Severity::$severity,
            template: $template,
            citation: $citation,
            explain: $explain,
        }
    };
}

/// Whether `constant` is the name the registry gives the site or hazard `id`: `id` without
/// `prefix`, in upper case, with every `.` and `-` written `_` (`musa.W-2.k_cache.attr` is
/// `W_2_K_CACHE_ATTR` in the MUSA registry). Checked at compile time for every declaration.
pub(crate) const fn names(constant: &str, id: &str, prefix: &str) -> bool {
    let (constant, id, prefix) = (constant.as_bytes(), id.as_bytes(), prefix.as_bytes());
    if id.len() < prefix.len() || constant.len() != id.len() - prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if id[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    let mut j = 0;
    while j < constant.len() {
        let expected = match id[prefix.len() + j] {
            b'.' | b'-' => b'_',
            b => b.to_ascii_uppercase(),
        };
        if constant[j] != expected {
            return false;
        }
        j += 1;
    }
    true
}

/// Declares error sites: `NAME = site!(...)` makes `pub const NAME: &Site`, its name checked
/// against the id (without `$prefix`, see [`names`]), and `$list` lists them in order.
macro_rules! sites {
    ($prefix:literal, $list:ident: $($name:ident = $site:expr),* $(,)?) => {
        $(
            pub const $name: &$crate::validate::registry::Site = &$site;
            const _: () = assert!(
                $crate::validate::registry::names(stringify!($name), $name.id, $prefix),
                concat!("the constant ", stringify!($name), " does not name its site's id")
            );
        )*
        pub(super) static $list: &[&$crate::validate::registry::Site] = &[$($name),*];
    };
}

/// Declares hazards as [`sites!`] declares sites: `NAME = hazard!(...)` makes
/// `pub const NAME: &HazardDef`, named after the whole code.
macro_rules! hazards {
    ($list:ident: $($name:ident = $hazard:expr),* $(,)?) => {
        $(
            pub const $name: &$crate::validate::registry::HazardDef = &$hazard;
            const _: () = assert!(
                $crate::validate::registry::names(stringify!($name), $name.code, ""),
                concat!("the constant ", stringify!($name), " does not name its hazard's code")
            );
        )*
        pub(super) static $list: &[&$crate::validate::registry::HazardDef] = &[$($name),*];
    };
}

pub mod cuda;
pub mod device;
pub mod musa;
pub mod scheduler;

/// One place in one stack that raises an exception.
#[derive(Debug, PartialEq, Eq)]
pub struct Site {
    /// Stable id, e.g. `musa.W-1` (prefix = stack, suffix = the spec's check label).
    pub id: &'static str,
    /// The function or source region, e.g. `sglang musa wrapper`, `mate _fmha_fwd`.
    pub layer: &'static str,
    pub exception: Exception,
    /// `str(exc)` with `{}` placeholders; empty for a bare `assert`.
    pub template: &'static str,
    /// How much of `str(exc)` the filled template determines.
    pub message_match: MessageMatch,
    /// `repo@commit path:Lx-Ly`.
    pub citation: &'static str,
    /// The condition that fires, in words.
    pub condition: &'static str,
    /// Usual causes and fixes, for porters.
    pub explain: &'static str,
}

/// In a [`MessageMatch::Pattern`] message, a run of text (possibly empty, possibly several lines)
/// that depends on the build or the library version.
pub const ANY_TEXT: &str = "{*}";

/// How a rendered message stands for `str(exc)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageMatch {
    /// Byte for byte.
    Exact,
    /// `str(exc)` starts with the message; the text that follows depends on the build or on what
    /// the sources do not determine (a compiler log, a list of registrations).
    Prefix,
    /// `str(exc)` is the message with each [`ANY_TEXT`] replaced by some text (a schema or
    /// signature as the installed library prints it, a build-dependent detail); everything else
    /// byte for byte.
    Pattern,
}

impl MessageMatch {
    /// Whether `actual` (an exception's `str()`) is what `expected` (a rendered message) stands for.
    pub fn accepts(self, expected: &str, actual: &str) -> bool {
        match self {
            MessageMatch::Exact => actual == expected,
            MessageMatch::Prefix => actual.starts_with(expected),
            MessageMatch::Pattern => pattern_matches(expected, actual),
        }
    }
}

/// Whether `text` is `pattern` with each [`ANY_TEXT`] standing for any run of text. Leftmost
/// matching of each literal piece is enough: a later match of a piece never leaves more room
/// for the pieces after it.
fn pattern_matches(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split(ANY_TEXT);
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let mut pieces: Vec<&str> = pieces.collect();
    let Some(last) = pieces.pop() else {
        return rest.is_empty();
    };
    for piece in pieces {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A registered hazard kind.
#[derive(Debug)]
pub struct HazardDef {
    pub code: &'static str,
    pub severity: Severity,
    pub template: &'static str,
    pub citation: &'static str,
    pub explain: &'static str,
}

/// Every site of every profile.
pub fn sites() -> impl Iterator<Item = &'static Site> {
    musa::sites().chain(cuda::sites())
}

/// Every hazard kind.
pub fn hazards() -> impl Iterator<Item = &'static HazardDef> {
    musa::hazards()
        .chain(cuda::hazards())
        .chain(scheduler::HAZARDS.iter().copied())
        .chain(device::HAZARDS.iter().copied())
}

/// The site registered under `id`.
///
/// # Panics
/// For an unregistered id: every id a profile reports is registered (a test checks each list).
pub fn site(id: &str) -> &'static Site {
    sites()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("error site {id} is not registered"))
}

impl Site {
    /// Whether `message` (an exception's `str()`) is one this site raises: an instance of the
    /// template, read as [`Self::message_match`] says (a prefix site's text may go on).
    pub fn matches(&self, message: &str) -> bool {
        match self.message_match {
            MessageMatch::Prefix => template_matches(&format!("{}{{}}", self.template), message),
            MessageMatch::Exact | MessageMatch::Pattern => template_matches(self.template, message),
        }
    }
}

/// Whether `message` is an instance of `template` (each `{}` and each [`ANY_TEXT`] matches any
/// text).
pub fn template_matches(template: &str, message: &str) -> bool {
    let template = template.replace(ANY_TEXT, "{}");
    let pieces: Vec<&str> = template.split("{}").collect();
    if pieces.len() == 1 {
        return template == message;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    let Some(mut rest) = message.strip_prefix(first) else {
        return false;
    };
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Fills `{}` placeholders in order. Missing values leave `{}` visible (a test catches that).
pub fn fill(template: &str, args: &[String]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut args = args.iter();
    let mut rest = template;
    while let Some(i) = rest.find("{}") {
        out.push_str(&rest[..i]);
        match args.next() {
            Some(a) => out.push_str(a),
            None => out.push_str("{}"),
        }
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_their_filled_instances() {
        assert!(template_matches(
            "Only ver=3 is supported for MUSA FA3.",
            "Only ver=3 is supported for MUSA FA3."
        ));
        assert!(!template_matches(
            "Only ver=3 is supported for MUSA FA3.",
            "Only ver=3 is supported"
        ));
        assert!(template_matches(
            "Add config for headdim {}-{}",
            "Add config for headdim 64-128"
        ));
        assert!(template_matches(
            "'{}' object has no attribute '{}'",
            "'int' object has no attribute 'stride'"
        ));
        assert!(!template_matches(
            "'{}' object has no attribute '{}'",
            "'int' object has no attr 'stride'"
        ));
        assert!(template_matches("", ""));
        assert!(!template_matches("", "x"));
        assert!(template_matches("{}", "anything"));
    }

    #[test]
    fn a_prefix_match_accepts_what_follows_the_message() {
        let message = "Mismatched type on argument #11";
        assert!(
            MessageMatch::Prefix
                .accepts(message, "Mismatched type on argument #11 when calling: f")
        );
        assert!(
            !MessageMatch::Exact
                .accepts(message, "Mismatched type on argument #11 when calling: f")
        );
        assert!(MessageMatch::Exact.accepts(message, message));
        assert!(!MessageMatch::Prefix.accepts(message, "Mismatched type on argument #1"));
    }

    #[test]
    fn a_pattern_match_lets_each_wildcard_stand_for_any_text() {
        let pattern =
            "op() Expected 'int'.\nPosition: 25\nDeclaration: {*}\nCast error details: {*}";
        let torch_2_9 = "op() Expected 'int'.\nPosition: 25\nDeclaration: op(Tensor q, int w=-1) -> Tensor\nCast error details: Unable to cast 1.5 to int";
        assert!(MessageMatch::Pattern.accepts(pattern, torch_2_9));
        // the wildcards may be empty, and may span lines
        assert!(MessageMatch::Pattern.accepts(
            pattern,
            "op() Expected 'int'.\nPosition: 25\nDeclaration: a\nb\nCast error details: "
        ));
        // the determined parts are compared byte for byte
        assert!(!MessageMatch::Pattern.accepts(
            pattern,
            "op() Expected 'int'.\nPosition: 24\nDeclaration: x\nCast error details: y"
        ));
        assert!(!MessageMatch::Pattern.accepts(pattern, "op() Expected 'int'."));
        // a pattern without wildcards is exact; text after the last literal piece is refused
        assert!(MessageMatch::Pattern.accepts("abc", "abc"));
        assert!(!MessageMatch::Pattern.accepts("abc", "abcd"));
        assert!(!MessageMatch::Pattern.accepts("a{*}c", "abcd"));
        assert!(MessageMatch::Pattern.accepts("a{*}c{*}", "abcd"));
        // the last piece may not reuse text a middle piece consumed
        assert!(!MessageMatch::Pattern.accepts("a{*}bc{*}c", "abc"));
    }
}
