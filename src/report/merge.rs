//! `fa3conform merge-reports`: the JSON documents of one campaign's shards, merged into the
//! document a single run would have written. `conform` shards must be the complete set of one
//! `--partition` split of one seed; `verify` shards one profile's, disjoint by case; `certify`
//! documents the same profiles', a call certified in several kept once when the verdicts agree.
//! Anything else is refused: a merged report never silently covers less, or mixes campaigns.

use super::documents::{certify, conform, verify};
use super::json::Document;
use super::{Format, Report, Status};
use crate::partition::Partition;
use std::collections::{BTreeMap, btree_map::Entry};
use std::io::{self, Write};

/// A document to merge and the name it is known by in errors (its file).
pub struct Source {
    pub name: String,
    pub document: serde_json::Value,
}

/// Why the documents cannot be merged into one.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("{name}: schema_version {found}, this fa3conform reads {expected}")]
    SchemaVersion {
        name: String,
        found: serde_json::Value,
        expected: u32,
    },
    #[error("{name} is not a conform, certify or verify JSON document")]
    UnknownKind { name: String },
    #[error("{name}: {source}")]
    Malformed {
        name: String,
        source: serde_json::Error,
    },
    #[error("{first} is a {first_kind} report and {other} a {other_kind} report")]
    MixedKinds {
        first: String,
        first_kind: &'static str,
        other: String,
        other_kind: &'static str,
    },
    #[error("{0}")]
    Conflict(String),
}

/// The merged document, of the kind its sources were.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Merged {
    Conform(conform::Campaign),
    Certify(certify::Certification),
    Verify(verify::Verification),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Conform,
    Certify,
    Verify,
}

impl Kind {
    /// What a document is, by the keys only its kind has.
    fn of(document: &serde_json::Value) -> Option<Kind> {
        let has = |key| document.get(key).is_some();
        if has("suites") && has("seed") {
            Some(Kind::Conform)
        } else if has("calls") {
            Some(Kind::Certify)
        } else if has("profile") && has("cases") {
            Some(Kind::Verify)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Conform => "conform",
            Kind::Certify => "certify",
            Kind::Verify => "verify",
        }
    }

    fn schema_version(self) -> u32 {
        match self {
            Kind::Conform => conform::Campaign::SCHEMA_VERSION,
            Kind::Certify => certify::Certification::SCHEMA_VERSION,
            Kind::Verify => verify::Verification::SCHEMA_VERSION,
        }
    }
}

/// Merges `sources`, which must all be documents of one kind and one campaign.
pub fn merge(sources: Vec<Source>) -> Result<Merged, MergeError> {
    let first = sources.first().ok_or(MergeError::Empty)?;
    let kind = Kind::of(&first.document).ok_or_else(|| MergeError::UnknownKind {
        name: first.name.clone(),
    })?;
    let first_name = first.name.clone();
    for source in &sources {
        let other_kind = Kind::of(&source.document).ok_or_else(|| MergeError::UnknownKind {
            name: source.name.clone(),
        })?;
        if other_kind != kind {
            return Err(MergeError::MixedKinds {
                first: first_name,
                first_kind: kind.name(),
                other: source.name.clone(),
                other_kind: other_kind.name(),
            });
        }
        let found = source.document.get("schema_version");
        if found.and_then(serde_json::Value::as_u64) != Some(kind.schema_version().into()) {
            return Err(MergeError::SchemaVersion {
                name: source.name.clone(),
                found: found.cloned().unwrap_or(serde_json::Value::Null),
                expected: kind.schema_version(),
            });
        }
    }
    match kind {
        Kind::Conform => merge_campaigns(typed(sources)?).map(Merged::Conform),
        Kind::Certify => merge_certifications(typed(sources)?).map(Merged::Certify),
        Kind::Verify => merge_verifications(typed(sources)?).map(Merged::Verify),
    }
}

/// The sources as documents of type `D`, each with its name.
fn typed<D: serde::de::DeserializeOwned>(
    sources: Vec<Source>,
) -> Result<Vec<(String, D)>, MergeError> {
    sources
        .into_iter()
        .map(|s| match serde_json::from_value(s.document) {
            Ok(document) => Ok((s.name, document)),
            Err(source) => Err(MergeError::Malformed {
                name: s.name,
                source,
            }),
        })
        .collect()
}

fn conflict(message: String) -> MergeError {
    MergeError::Conflict(message)
}

/// One campaign from the complete set of its shards: every suite's cases in index order, each
/// exactly once, the suites' times summed.
fn merge_campaigns(
    shards: Vec<(String, conform::Campaign)>,
) -> Result<conform::Campaign, MergeError> {
    let (first_name, first) = &shards[0];
    let suite_names =
        |c: &conform::Campaign| c.suites.iter().map(|s| s.suite.clone()).collect::<Vec<_>>();
    for (name, shard) in &shards[1..] {
        if shard.seed != first.seed {
            return Err(conflict(format!(
                "{first_name} has seed {} and {name} seed {}: shards of one campaign share its seed",
                first.seed, shard.seed
            )));
        }
        if suite_names(shard) != suite_names(first) {
            return Err(conflict(format!(
                "{first_name} runs the suites {:?} and {name} {:?}: shards of one campaign run the same suites",
                suite_names(first),
                suite_names(shard)
            )));
        }
    }
    check_shards(&shards)?;
    let mut merged = conform::Campaign {
        seed: first.seed,
        partition: None,
        suites: first
            .suites
            .iter()
            .map(|s| conform::Suite {
                cases: Vec::new(),
                seconds: 0.0,
                ..s.clone()
            })
            .collect(),
    };
    for (_, shard) in shards {
        for (suite, part) in merged.suites.iter_mut().zip(shard.suites) {
            suite.seconds += part.seconds;
            suite.cases.extend(part.cases);
        }
    }
    for suite in &mut merged.suites {
        suite.cases.sort_by_key(|c| c.index);
        for (expected, case) in suite.cases.iter().enumerate() {
            if case.index != expected {
                let problem = if case.index < expected {
                    "is in two shards"
                } else {
                    "is in no shard"
                };
                let index = case.index.min(expected);
                return Err(conflict(format!(
                    "suite {}: case {index} {problem} (were the shards run with different --cases?)",
                    suite.suite
                )));
            }
        }
    }
    Ok(merged)
}

/// The shards are all of one split, each once, none missing; a single whole campaign passes as is.
fn check_shards(shards: &[(String, conform::Campaign)]) -> Result<(), MergeError> {
    if let [(_, only)] = shards
        && only.partition.is_none()
    {
        return Ok(());
    }
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    let mut split: Option<Partition> = None;
    for (name, shard) in shards {
        let Some(text) = &shard.partition else {
            return Err(conflict(format!(
                "{name} is a whole campaign, not a shard: there is nothing to merge it with"
            )));
        };
        let partition: Partition = text.parse().map_err(|e| conflict(format!("{name}: {e}")))?;
        let first = *split.get_or_insert(partition);
        if !first.same_split(&partition) {
            return Err(conflict(format!(
                "{name} is shard {partition} and {} shard {first}: shards of one campaign are split the same way",
                seen[&first.shard]
            )));
        }
        if let Some(other) = seen.insert(partition.shard, name) {
            return Err(conflict(format!(
                "{other} and {name} are both shard {partition}"
            )));
        }
    }
    let split = split.expect("at least one shard");
    let missing: Vec<String> = (1..=split.total)
        .filter(|i| !seen.contains_key(i))
        .map(|shard| Partition { shard, ..split }.to_string())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(conflict(format!(
            "shard {} missing: the merged report would not cover the campaign",
            missing.join(", ")
        )))
    }
}

/// Every call once, in the order the documents list them; a call in several documents must have
/// been certified the same way in each.
fn merge_certifications(
    documents: Vec<(String, certify::Certification)>,
) -> Result<certify::Certification, MergeError> {
    let profiles = |call: &certify::Call| {
        call.profiles
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>()
    };
    let mut expected: Option<(String, Vec<String>)> = None;
    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut calls: Vec<certify::Call> = Vec::new();
    let mut invalid: Vec<certify::Invalid> = Vec::new();
    for (name, document) in documents {
        invalid.extend(document.invalid);
        for call in document.calls {
            let (first, first_profiles) =
                expected.get_or_insert_with(|| (name.clone(), profiles(&call)));
            if profiles(&call) != *first_profiles {
                return Err(conflict(format!(
                    "{first} certifies against {first_profiles:?} and {name} against {:?}: merged calls share their profiles",
                    profiles(&call)
                )));
            }
            match seen.entry(call.id.clone()) {
                Entry::Vacant(slot) => {
                    slot.insert((name.clone(), calls.len()));
                    calls.push(call);
                }
                Entry::Occupied(slot) => {
                    let (other, at) = slot.get();
                    if calls[*at] != call {
                        return Err(conflict(format!(
                            "call `{}` is in {other} and {name} with different results",
                            call.id
                        )));
                    }
                }
            }
        }
    }
    Ok(certify::Certification { calls, invalid })
}

/// One profile's cases from disjoint shards, by name (as `verify` lists a folder), counts redone.
fn merge_verifications(
    shards: Vec<(String, verify::Verification)>,
) -> Result<verify::Verification, MergeError> {
    let (first_name, first) = &shards[0];
    let profile = first.profile.clone();
    let mut cases: BTreeMap<String, (String, verify::Case)> = BTreeMap::new();
    for (name, shard) in &shards {
        if shard.profile != profile {
            return Err(conflict(format!(
                "{first_name} verifies profile {profile} and {name} profile {}",
                shard.profile
            )));
        }
        for case in &shard.cases {
            if let Some((other, _)) = cases.insert(case.name.clone(), (name.clone(), case.clone()))
            {
                return Err(conflict(format!(
                    "case `{}` is in {other} and {name}: shards are disjoint",
                    case.name
                )));
            }
        }
    }
    let cases: Vec<verify::Case> = cases.into_values().map(|(_, case)| case).collect();
    let count = |outcome| cases.iter().filter(|c| c.outcome == outcome).count();
    Ok(verify::Verification {
        profile,
        matched: count(verify::CaseOutcome::Matched),
        mismatched: count(verify::CaseOutcome::Mismatch),
        skipped: count(verify::CaseOutcome::Skipped),
        invalid: count(verify::CaseOutcome::Invalid),
        cases,
    })
}

/// Written as the document it is, with its kind's `schema_version`.
impl Document for Merged {
    /// Never written: each kind has its own version.
    const SCHEMA_VERSION: u32 = 0;

    fn schema_version(&self) -> u32 {
        match self {
            Merged::Conform(_) => Kind::Conform,
            Merged::Certify(_) => Kind::Certify,
            Merged::Verify(_) => Kind::Verify,
        }
        .schema_version()
    }
}

impl Report for Merged {
    const FORMATS: &'static [Format] = &[Format::Json, Format::Human];
    type Document = Merged;

    /// As the source command would have it: an input error for a call or bundle that could not
    /// be read, findings for a failed case, a call not certified, a mismatch or nothing verified.
    fn status(&self) -> Status {
        let unreadable = match self {
            Merged::Conform(_) => false,
            Merged::Certify(c) => !c.invalid.is_empty(),
            Merged::Verify(v) => v.invalid > 0,
        };
        if unreadable {
            return Status::InputError;
        }
        Status::findings_if(match self {
            Merged::Conform(c) => c
                .suites
                .iter()
                .flat_map(|s| &s.cases)
                .any(|c| c.outcome == conform::CaseOutcome::Failed),
            Merged::Certify(c) => c.calls.iter().any(|c| !c.certified),
            Merged::Verify(v) => v.mismatched > 0 || v.matched == 0,
        })
    }

    /// One line: what was merged and what it holds.
    fn write_human(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Merged::Conform(c) => {
                let cases = c.suites.iter().flat_map(|s| &s.cases);
                let failed = cases
                    .clone()
                    .filter(|c| c.outcome == conform::CaseOutcome::Failed);
                writeln!(
                    out,
                    "conform seed {}: {} cases, {} failed",
                    c.seed,
                    cases.count(),
                    failed.count()
                )
            }
            Merged::Certify(c) => {
                let certified = c.calls.iter().filter(|c| c.certified).count();
                writeln!(
                    out,
                    "certify: {certified} of {} calls certified",
                    c.calls.len()
                )
            }
            Merged::Verify(v) => writeln!(
                out,
                "verify --profile {}: {} cases, {} matched, {} mismatched, {} skipped",
                v.profile,
                v.cases.len(),
                v.matched,
                v.mismatched,
                v.skipped
            ),
        }
    }

    fn document(&self) -> Merged {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn source(name: &str, document: Value) -> Source {
        Source {
            name: name.into(),
            document,
        }
    }

    /// A conform shard of `seed` holding the cases `indices` of one suite.
    fn shard(name: &str, seed: u64, partition: Option<&str>, indices: &[usize]) -> Source {
        let cases: Vec<Value> = indices
            .iter()
            .map(|i| json!({"index": i, "name": format!("c{i}"), "outcome": "passed"}))
            .collect();
        let version = conform::Campaign::SCHEMA_VERSION;
        let mut document = json!({"schema_version": version, "seed": seed, "suites": [
            {"suite": "kernel", "description": "d", "seconds": 1.5, "cases": cases}]});
        if let Some(p) = partition {
            document["partition"] = json!(p);
        }
        source(name, document)
    }

    fn refusal(sources: Vec<Source>) -> String {
        merge(sources).unwrap_err().to_string()
    }

    #[test]
    fn conform_shards_merge_in_case_order_with_times_summed() {
        let merged = merge(vec![
            shard("b", 5, Some("count:2/2"), &[1, 3]),
            shard("a", 5, Some("count:1/2"), &[0, 2]),
        ])
        .unwrap();
        let Merged::Conform(campaign) = &merged else {
            panic!("{merged:?}")
        };
        assert_eq!(campaign.partition, None);
        assert_eq!(campaign.suites[0].seconds, 3.0);
        let order: Vec<usize> = campaign.suites[0].cases.iter().map(|c| c.index).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert_eq!(merged.status(), Status::Success);
    }

    #[test]
    fn conform_shards_of_different_campaigns_or_incomplete_sets_are_refused() {
        assert_eq!(
            refusal(vec![
                shard("a", 5, Some("count:1/2"), &[0]),
                shard("b", 6, Some("count:2/2"), &[1])
            ]),
            "a has seed 5 and b seed 6: shards of one campaign share its seed"
        );
        assert_eq!(
            refusal(vec![
                shard("a", 5, Some("count:1/3"), &[0]),
                shard("b", 5, Some("count:3/3"), &[2])
            ]),
            "shard count:2/3 missing: the merged report would not cover the campaign"
        );
        assert_eq!(
            refusal(vec![
                shard("a", 5, Some("hash:1/2"), &[0]),
                shard("b", 5, Some("hash:1/2"), &[1])
            ]),
            "a and b are both shard hash:1/2"
        );
        assert_eq!(
            refusal(vec![
                shard("a", 5, Some("hash:1/2"), &[0]),
                shard("b", 5, Some("count:2/2"), &[1])
            ]),
            "b is shard count:2/2 and a shard hash:1/2: shards of one campaign are split the same way"
        );
        assert_eq!(
            refusal(vec![
                shard("a", 5, None, &[0, 1]),
                shard("b", 5, Some("count:2/2"), &[1])
            ]),
            "a is a whole campaign, not a shard: there is nothing to merge it with"
        );
        assert_eq!(
            refusal(vec![
                shard("a", 5, Some("count:1/2"), &[0, 2]),
                shard("b", 5, Some("count:2/2"), &[1, 3, 5])
            ]),
            "suite kernel: case 4 is in no shard (were the shards run with different --cases?)"
        );
        let mut other_suite = shard("b", 5, Some("count:2/2"), &[1]);
        other_suite.document["suites"][0]["suite"] = json!("metadata");
        assert_eq!(
            refusal(vec![shard("a", 5, Some("count:1/2"), &[0]), other_suite]),
            "a runs the suites [\"kernel\"] and b [\"metadata\"]: shards of one campaign run the same suites"
        );
    }

    #[test]
    fn one_whole_campaign_merges_to_itself() {
        let merged = merge(vec![shard("a", 5, None, &[0, 1])]).unwrap();
        let Merged::Conform(campaign) = merged else {
            panic!()
        };
        assert_eq!(campaign.suites[0].cases.len(), 2);
    }

    #[test]
    fn documents_of_other_kinds_or_versions_are_refused() {
        let verify = json!({"schema_version": 1, "profile": "musa", "matched": 0, "mismatched": 0,
            "skipped": 0, "cases": []});
        assert_eq!(
            refusal(vec![shard("a", 5, None, &[0]), source("v", verify)]),
            "a is a conform report and v a verify report"
        );
        let mut newer = shard("a", 5, None, &[0]);
        let version = conform::Campaign::SCHEMA_VERSION;
        newer.document["schema_version"] = json!(version + 1);
        assert_eq!(
            refusal(vec![newer]),
            format!(
                "a: schema_version {}, this fa3conform reads {version}",
                version + 1
            )
        );
        assert_eq!(
            refusal(vec![source("x", json!({"schema_version": 1, "out": "d"}))]),
            "x is not a conform, certify or verify JSON document"
        );
        assert_eq!(refusal(vec![]), "nothing to merge");
    }

    fn verification(name: &str, profile: &str, cases: &[(&str, &str)]) -> Source {
        let cases: Vec<Value> = cases
            .iter()
            .map(|(case, outcome)| json!({"name": case, "outcome": outcome, "message": "m"}))
            .collect();
        source(
            name,
            json!({"schema_version": 1, "profile": profile, "matched": 9, "mismatched": 9,
                "skipped": 9, "cases": cases}),
        )
    }

    #[test]
    fn verify_shards_merge_by_case_name_with_counts_redone() {
        let merged = merge(vec![
            verification("b", "musa", &[("k-1", "mismatch"), ("k-3", "skipped")]),
            verification("a", "musa", &[("k-0", "matched"), ("k-2", "matched")]),
        ])
        .unwrap();
        let Merged::Verify(v) = &merged else {
            panic!("{merged:?}")
        };
        let names: Vec<&str> = v.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k-0", "k-1", "k-2", "k-3"]);
        assert_eq!((v.matched, v.mismatched, v.skipped), (2, 1, 1));
        assert_eq!(merged.status(), Status::Findings);
        assert_eq!(
            refusal(vec![
                verification("a", "musa", &[("k-0", "matched")]),
                verification("b", "mate", &[("k-1", "matched")])
            ]),
            "a verifies profile musa and b profile mate"
        );
        assert_eq!(
            refusal(vec![
                verification("a", "musa", &[("k-0", "matched")]),
                verification("b", "musa", &[("k-0", "matched")])
            ]),
            "case `k-0` is in a and b: shards are disjoint"
        );
    }

    fn certification(name: &str, calls: &[(&str, &[&str], bool)]) -> Source {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, profiles, certified)| {
                let verdicts: serde_json::Map<String, Value> = profiles
                    .iter()
                    .map(|p| {
                        let verdict = json!({"outcome": "accepted", "exception": null,
                            "message": null, "site": null});
                        (p.to_string(), verdict)
                    })
                    .collect();
                json!({"id": id, "profiles": verdicts, "hazards": [], "numerics": null,
                    "summary": "s", "certified": certified})
            })
            .collect();
        source(name, json!({"schema_version": 1, "calls": calls}))
    }

    #[test]
    fn certify_documents_keep_each_call_once_and_their_profile_order() {
        let both: &[&str] = &["sgl-kernel", "musa"];
        let merged = merge(vec![
            certification("a", &[("x", both, true), ("y", both, false)]),
            certification("b", &[("y", both, false), ("z", both, true)]),
        ])
        .unwrap();
        let Merged::Certify(c) = &merged else {
            panic!("{merged:?}")
        };
        let ids: Vec<&str> = c.calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["x", "y", "z"]);
        assert_eq!(c.calls[0].profiles[0].0, "sgl-kernel");
        assert_eq!(merged.status(), Status::Findings);
        assert_eq!(
            refusal(vec![
                certification("a", &[("y", both, true)]),
                certification("b", &[("y", both, false)])
            ]),
            "call `y` is in a and b with different results"
        );
        assert_eq!(
            refusal(vec![
                certification("a", &[("x", both, true)]),
                certification("b", &[("y", &["musa"], true)])
            ]),
            "a certifies against [\"sgl-kernel\", \"musa\"] and b against [\"musa\"]: merged calls share their profiles"
        );
    }
}
