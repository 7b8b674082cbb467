//! The one loop that runs a profile's checks in order.

use super::registry;
use super::{Hazard, Rejection};

/// A failed check: the error site and the values its message template needs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fail {
    pub site: &'static str,
    pub args: Vec<String>,
}

impl Fail {
    pub fn new(site: &'static str) -> Fail {
        Fail {
            site,
            args: Vec::new(),
        }
    }

    pub fn with(site: &'static str, args: impl IntoIterator<Item = String>) -> Fail {
        Fail {
            site,
            args: args.into_iter().collect(),
        }
    }
}

/// One named check of a layer. `sites` lists every site `run` can fail with (most checks have one;
/// a Python expression such as `q.shape[-2:]` can also raise `AttributeError` or `IndexError`).
pub struct Check<S> {
    pub name: &'static str,
    pub sites: &'static [&'static str],
    pub run: fn(&mut S) -> Result<(), Fail>,
}

/// An ordered list of checks: one function or source region of one stack.
pub struct Layer<S: 'static> {
    pub name: &'static str,
    pub checks: &'static [Check<S>],
}

/// Per-call state every profile state carries: the hazards recorded so far.
pub trait HazardLog {
    fn hazards(&mut self) -> &mut Vec<Hazard>;

    /// Records a hazard registered under `code`, its template filled with `args`.
    fn hazard(&mut self, code: &'static str, args: &[&str]) {
        let def = registry::hazard(code);
        let message = registry::fill(
            def.template,
            args.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .as_slice(),
        );
        self.hazards().push(Hazard {
            code,
            severity: def.severity,
            message,
        });
    }
}

/// Runs `layers` in order on `state`; the first failing check is the rejection.
pub fn run_layers<S>(state: &mut S, layers: &[&Layer<S>]) -> Result<(), Rejection> {
    for layer in layers {
        for check in layer.checks {
            if let Err(fail) = (check.run)(state) {
                debug_assert!(
                    check.sites.contains(&fail.site),
                    "check {}::{} raised {} which it does not declare",
                    layer.name,
                    check.name,
                    fail.site
                );
                return Err(reject(fail));
            }
        }
    }
    Ok(())
}

/// Turns a failure into what Python sees, using the registry's exception and message template.
pub fn reject(fail: Fail) -> Rejection {
    let site = registry::site(fail.site);
    Rejection {
        site: site.id,
        exception: site.exception,
        message: registry::fill(site.template, &fail.args),
    }
}

/// Every site the layers can raise, in check order, without duplicates.
pub fn sites_of<S>(layers: &[&Layer<S>]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for check in layers.iter().flat_map(|l| l.checks) {
        for site in check.sites {
            if !out.contains(site) {
                out.push(site);
            }
        }
    }
    out
}
