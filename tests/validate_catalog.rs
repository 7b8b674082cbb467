//! The validation catalogue (`tests/catalog/*.json`): every call's expected outcome per profile,
//! coverage of every error site of every profile, and one insta snapshot per call with the verdicts
//! of all profiles side by side (`snapshots/catalog/<id>.snap`).
//!
//! A catalogue entry is a call spec with an `"expect"` map: profile name -> `"accepted"` or the id
//! of the site that rejects it. Expectations are written by hand from the specs, not from the code.

mod support;

use fa3conform::call::KvCacheCall;
use fa3conform::certify::{certify_call, render_human_call};
use fa3conform::conform::catalogue::FILES;
use fa3conform::musa::MusaOptions;
use fa3conform::spec::parse_specs;
use fa3conform::validate::{Outcome, profiles, registry};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Sites no call through the profile's entry point can raise first, and why. Listed so that
/// `explain` knows them; the coverage test accepts exactly these as unreached.
const UNREACHABLE: &[(&str, &str)] = &[
    // Shadowed in _fmha_fwd: the F-8 device list and the F-12 int32/contiguity loop check the same
    // tensors first.
    (
        "musa.F-14.device",
        "shadowed by musa.F-8 (cache_batch_idx is in its device list)",
    ),
    (
        "musa.F-15.device",
        "shadowed by musa.F-8 (cache_leftpad is in its device list)",
    ),
    (
        "musa.F-15.dtype",
        "shadowed by musa.F-12.dtype (cache_leftpad is in its loop)",
    ),
    ("musa.F-15.contiguous", "shadowed by musa.F-12.contiguous"),
    // Combine: its asserts repeat earlier ones or test a constant.
    (
        "musa.B-2",
        "shadowed by musa.F-5 (max_seqlen_q None with cu_seqlens_q)",
    ),
    (
        "musa.B-3",
        "shadowed by musa.F-41 (same length condition, same batch)",
    ),
    ("musa.B-4", "tile_n is always 64"),
];

struct Entry {
    file: String,
    call: KvCacheCall,
    expect: BTreeMap<String, String>,
}

/// The catalogue as the binary carries it (the folder's files, checked by
/// [`the_binary_carries_every_catalogue_file`]).
fn catalogue() -> Vec<Entry> {
    let mut entries = Vec::new();
    for (file, text) in FILES {
        let file = file.to_string();
        let calls = parse_specs(text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let raw: Vec<Value> = match serde_json::from_str(text).unwrap() {
            Value::Array(items) => items,
            one => vec![one],
        };
        for (call, raw) in calls.into_iter().zip(raw) {
            let expect = raw
                .get("expect")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().expect("site id").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            entries.push(Entry {
                file: file.clone(),
                call,
                expect,
            });
        }
    }
    entries
}

fn outcome_label(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Accepted(_) => "accepted".into(),
        Outcome::Rejected(r) => r.site.to_string(),
    }
}

/// Every `tests/catalog/*.json` is compiled into the binary, as it is in the folder.
#[test]
fn the_binary_carries_every_catalogue_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/catalog");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/catalog exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    let carried: Vec<(String, String)> = FILES
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    let names = |list: &[(String, String)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&carried), names(&files));
    assert!(
        carried == files,
        "a carried catalogue file differs from the folder's"
    );
}

#[test]
fn entries_have_unique_ids_and_expectations() {
    let entries = catalogue();
    assert!(!entries.is_empty());
    let mut seen = BTreeSet::new();
    for e in &entries {
        assert!(!e.call.id.is_empty(), "{}: an entry has no id", e.file);
        assert!(seen.insert(e.call.id.clone()), "duplicate id {}", e.call.id);
        assert!(
            !e.expect.is_empty(),
            "{}: {} has no expect",
            e.file,
            e.call.id
        );
    }
}

#[test]
fn entries_reach_their_expected_outcome() {
    let mut wrong = Vec::new();
    for e in catalogue() {
        for (profile, expected) in &e.expect {
            let p = profiles::by_name(profile)
                .unwrap_or_else(|| panic!("{}: unknown profile {profile}", e.call.id));
            let verdict = p.validate(&e.call);
            let got = outcome_label(&verdict.outcome);
            if &got != expected {
                wrong.push(format!(
                    "{} [{profile}]: expected {expected}, got {got}",
                    e.call.id
                ));
            }
            if let Some(r) = verdict.rejection() {
                assert!(
                    !r.message.contains("{}"),
                    "{}: unfilled template in {r}",
                    e.call.id
                );
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_site_is_reached_or_documented_unreachable() {
    let mut reached = BTreeSet::new();
    for e in catalogue() {
        for p in profiles::all() {
            if let Outcome::Rejected(r) = p.validate(&e.call).outcome {
                reached.insert(r.site);
            }
        }
    }
    let unreachable: BTreeSet<&str> = UNREACHABLE.iter().map(|(id, _)| *id).collect();
    let mut missing = Vec::new();
    for p in profiles::all() {
        for &site in p.sites() {
            // Every listed site is registered (panics otherwise).
            registry::site(site);
            match (reached.contains(site), unreachable.contains(site)) {
                (false, false) => {
                    missing.push(format!("{site} ({}) is reached by no call", p.name()))
                }
                (true, true) => missing.push(format!(
                    "{site} is listed unreachable but a call reaches it"
                )),
                _ => {}
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_hazard_is_raised_by_some_call() {
    let mut raised = BTreeSet::new();
    for e in catalogue() {
        for p in profiles::all() {
            raised.extend(p.validate(&e.call).hazards.iter().map(|h| h.code));
        }
    }
    // H-SCHED-* come from the scheduler-metadata checks, H-DEV-* from the device's departures,
    // not from a profile (tests/scheduler_equivalence.rs and tests/device_quirks.rs raise each).
    let silent: Vec<&str> = registry::hazards()
        .map(|h| h.code)
        .filter(|c| !raised.contains(c) && !c.starts_with("H-SCHED-") && !c.starts_with("H-DEV-"))
        .collect();
    assert!(
        silent.is_empty(),
        "hazards no catalogue call raises: {silent:?}"
    );
}

#[test]
fn registry_ids_are_unique_and_used() {
    let mut ids = BTreeSet::new();
    for s in registry::sites() {
        assert!(ids.insert(s.id), "site {} registered twice", s.id);
        assert!(!s.citation.is_empty() && !s.condition.is_empty() && !s.explain.is_empty());
    }
    let listed: BTreeSet<&str> = profiles::all()
        .iter()
        .flat_map(|p| p.sites().iter().copied())
        .collect();
    let unused: Vec<&&str> = ids.iter().filter(|id| !listed.contains(**id)).collect();
    assert!(
        unused.is_empty(),
        "registered but in no profile: {unused:?}"
    );
    let mut codes = BTreeSet::new();
    for h in registry::hazards() {
        assert!(codes.insert(h.code), "hazard {} registered twice", h.code);
    }
}

/// The default profiles, and `mate` where the entry expects a verdict of it.
#[test]
fn snapshots_show_every_profile_side_by_side() {
    let settings = support::snapshot_settings("catalog");
    for e in catalogue() {
        let shown: Vec<_> = profiles::all()
            .into_iter()
            .filter(|p| {
                profiles::defaults().iter().any(|d| d.name() == p.name())
                    || e.expect.contains_key(p.name())
            })
            .collect();
        let report = certify_call(&e.call, &shown, &MusaOptions::default());
        let text = render_human_call(&e.call, &report);
        settings.bind(|| insta::assert_snapshot!(e.call.id.clone(), text));
    }
}
