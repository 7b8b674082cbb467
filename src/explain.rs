//! `fa3conform explain`: which error site(s) raise a message, with the layer, condition, citation,
//! usual causes and fixes. Accepts a rendered message (with or without its `ValueError: ` prefix),
//! a site id (`musa.W-1`) or a hazard code (`H-MUSA-SINKS-RENAMED`). Exact matches win; otherwise
//! the sites whose message shares the most words with the query are shown (of the query's exception
//! class, when it names one). [`list`] gives every error site, as text or a JSON document for tools
//! (the shadow oracle reads each site's message template and match kind from it).

use crate::report::documents::explain as doc;
use crate::report::{Format, Report, Status};
use crate::validate::registry::{self, HazardDef, MessageMatch, Site};
use crate::validate::{Exception, profiles};
use std::collections::BTreeSet;
use std::io::{self, Write};

/// What a query matched.
#[derive(Debug)]
pub enum Found {
    /// Sites whose message (or id) matches exactly.
    Exact(Vec<&'static Site>),
    /// Sites ranked by word overlap, best first, with their score in (0, 1].
    Fuzzy(Vec<(&'static Site, f64)>),
    Hazard(&'static HazardDef),
    /// A `scan` diagnostic code (`FA3Mnnn`).
    ScanRule(crate::scan::rules::Rule),
    Nothing,
}

/// Fuzzy matches below this word overlap are not shown.
const MIN_OVERLAP: f64 = 0.3;
const MAX_FUZZY: usize = 3;

/// Splits `ValueError: msg` into the exception and the message (a bare class name is an empty message).
fn split_exception(query: &str) -> (Option<Exception>, &str) {
    for e in Exception::ALL {
        if query == e.name() {
            return (Some(e), "");
        }
        if let Some(rest) = query
            .strip_prefix(e.name())
            .and_then(|r| r.strip_prefix(": "))
        {
            return (Some(e), rest);
        }
    }
    (None, query)
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Jaccard overlap of the word sets.
fn overlap(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// Finds the sites or hazard `query` names.
pub fn explain(query: &str) -> Found {
    let query = query.trim();
    if let Some(site) = registry::sites().find(|s| s.id.eq_ignore_ascii_case(query)) {
        return Found::Exact(vec![site]);
    }
    if let Some(h) = registry::hazards().find(|h| h.code.eq_ignore_ascii_case(query)) {
        return Found::Hazard(h);
    }
    if let Some(rule) = crate::scan::rules::Rule::from_code(&query.to_ascii_uppercase()) {
        return Found::ScanRule(rule);
    }
    let (exception, message) = split_exception(query);
    let exact: Vec<&'static Site> = registry::sites()
        .filter(|s| exception.is_none_or(|e| e == s.exception))
        .filter(|s| s.matches(message))
        // A bare `assert` (empty template) or a `KeyError` (`{}`, the key's repr) matches any
        // message: only when the query names the exception.
        .filter(|s| {
            !s.template.replace("{}", "").is_empty() || exception.is_some() || message.is_empty()
        })
        .collect();
    if !exact.is_empty() {
        return Found::Exact(exact);
    }
    let query_words = words(message);
    let mut ranked: Vec<(&'static Site, f64)> = registry::sites()
        .filter(|s| exception.is_none_or(|e| e == s.exception))
        .map(|s| {
            (
                s,
                overlap(&query_words, &words(&s.template.replace("{}", " "))),
            )
        })
        .filter(|(_, score)| *score >= MIN_OVERLAP)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked.truncate(MAX_FUZZY);
    if ranked.is_empty() {
        Found::Nothing
    } else {
        Found::Fuzzy(ranked)
    }
}

fn profiles_raising(site: &str) -> Vec<&'static str> {
    profiles::all()
        .into_iter()
        .filter(|p| p.sites().contains(&site))
        .map(|p| p.name())
        .collect()
}

fn render_site(site: &Site) -> String {
    let message = if site.template.is_empty() {
        "(no message: bare assert)".to_string()
    } else {
        site.template.to_string()
    };
    format!(
        "{id}  [{profiles}]\n  layer:     {layer}\n  raises:    {exc}: {message}\n  condition: {cond}\n  source:    {cite}\n  causes and fixes: {explain}\n",
        id = site.id,
        profiles = profiles_raising(site.id).join(", "),
        layer = site.layer,
        exc = site.exception,
        cond = site.condition,
        cite = site.citation,
        explain = site.explain,
    )
}

/// The text `explain` prints for what it found.
pub fn render(found: &Found) -> String {
    match found {
        Found::Exact(sites) => sites
            .iter()
            .map(|s| render_site(s))
            .collect::<Vec<_>>()
            .join("\n"),
        Found::Fuzzy(ranked) => {
            let mut out = String::from("no exact match; closest error sites:\n\n");
            let blocks: Vec<String> = ranked
                .iter()
                .map(|(s, score)| format!("(word overlap {score:.2}) {}", render_site(s)))
                .collect();
            out.push_str(&blocks.join("\n"));
            out
        }
        Found::Hazard(h) => format!(
            "{code}  (hazard, {severity:?})\n  message:   {template}\n  source:    {cite}\n  details:   {explain}\n",
            code = h.code,
            severity = h.severity,
            template = h.template,
            cite = h.citation,
            explain = h.explain,
        ),
        Found::ScanRule(rule) => crate::scan::rules::explain(*rule),
        Found::Nothing => "no error site or hazard matches\n".to_string(),
    }
}

impl Found {
    /// Findings when nothing matched: the query explains no known error.
    pub fn status(&self) -> Status {
        Status::findings_if(matches!(self, Found::Nothing))
    }
}

/// One entry of `explain --list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedSite {
    pub id: &'static str,
    /// The profiles whose checks can raise it.
    pub profiles: Vec<&'static str>,
    pub layer: &'static str,
    pub exception: &'static str,
    pub template: &'static str,
    pub message_match: MessageMatch,
    pub citation: &'static str,
}

/// `explain --list`: every registered error site, in registry order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteList {
    pub sites: Vec<ListedSite>,
}

/// Every registered error site, in registry order.
pub fn list() -> SiteList {
    let sites = registry::sites()
        .map(|s| ListedSite {
            id: s.id,
            profiles: profiles_raising(s.id),
            layer: s.layer,
            exception: s.exception.name(),
            template: s.template,
            message_match: s.message_match,
            citation: s.citation,
        })
        .collect();
    SiteList { sites }
}

impl Report for SiteList {
    const FORMATS: &'static [Format] = &[Format::Human, Format::Json];
    type Document = doc::SiteList;

    /// A listing finds nothing: a success.
    fn status(&self) -> Status {
        Status::Success
    }

    /// One line per site: id, profiles, exception and template, and whether the template is only
    /// the start of the message.
    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        for s in &self.sites {
            let partial = match s.message_match {
                MessageMatch::Exact => "",
                MessageMatch::Prefix => "  (prefix of the message)",
                MessageMatch::Pattern => "  (pattern: {*} is any text)",
            };
            // one line per site: a multi-line message shows its line breaks as `\n`
            writeln!(
                out,
                "{}  [{}]  {}: {}{partial}",
                s.id,
                s.profiles.join(", "),
                s.exception,
                s.template.replace('\n', "\\n")
            )?;
        }
        Ok(())
    }

    fn document(&self) -> doc::SiteList {
        let sites = self
            .sites
            .iter()
            .map(|s| doc::Site {
                id: s.id.to_string(),
                profiles: s.profiles.iter().map(|p| p.to_string()).collect(),
                layer: s.layer.to_string(),
                exception: s.exception.to_string(),
                template: s.template.to_string(),
                message_match: s.message_match.into(),
                citation: s.citation.to_string(),
            })
            .collect();
        doc::SiteList { sites }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(found: &Found) -> Vec<&'static str> {
        match found {
            Found::Exact(sites) => sites.iter().map(|s| s.id).collect(),
            Found::Fuzzy(ranked) => ranked.iter().map(|(s, _)| s.id).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn exact_message_with_and_without_class() {
        let found = explain("ValueError: Only ver=3 is supported for MUSA FA3.");
        assert_eq!(ids(&found), ["musa.W-1"]);
        assert!(matches!(found, Found::Exact(_)));
        assert_eq!(
            ids(&explain("Only ver=3 is supported for MUSA FA3.")),
            ["musa.W-1"]
        );
        // A template with placeholders matches its rendered instances (other stacks' sites may
        // match too, so only the MUSA ones are pinned).
        let found = ids(&explain("Add config for headdim 64-128"));
        assert!(
            found.contains(&"musa.G-13") && found.contains(&"musa.C-2"),
            "{found:?}"
        );
        // The exception class narrows the candidates.
        let found = ids(&explain("TypeError: 'int' object is not subscriptable"));
        assert!(found.contains(&"musa.K-6.window-type"), "{found:?}");
        assert!(
            !ids(&explain("IndexError: 'int' object is not subscriptable"))
                .contains(&"musa.K-6.window-type")
        );
    }

    #[test]
    fn fuzzy_and_ids() {
        let found = explain("only ver 3 supported on musa");
        assert!(matches!(found, Found::Fuzzy(_)));
        assert_eq!(ids(&found)[0], "musa.W-1");
        assert_eq!(ids(&explain("MUSA.W-1")), ["musa.W-1"]);
        assert!(matches!(explain("H-MUSA-SINKS-RENAMED"), Found::Hazard(_)));
        assert!(matches!(
            explain("completely unrelated words here"),
            Found::Nothing
        ));
        assert!(render(&explain("musa.W-1")).contains("pass ver=3 or omit it"));
    }
}
