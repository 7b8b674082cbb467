//! The one loop that runs a profile's checks in order.

use super::registry::{self, HazardDef, Site};
use super::{Hazard, Rejection};

/// A failed check: the values its message template needs, in order, and the site, which only a
/// check that declares several names (a check with one site leaves it to the engine).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fail {
    site: Option<&'static Site>,
    args: Vec<String>,
}

impl Fail {
    /// A failure whose message takes no values.
    pub fn new() -> Fail {
        Fail::default()
    }

    /// A failure whose message is filled with `args`.
    pub fn with(args: impl IntoIterator<Item = String>) -> Fail {
        Fail {
            site: None,
            args: args.into_iter().collect(),
        }
    }

    /// What Python sees, for a failure that names its site (one raised outside a check, such as
    /// SGLang's `should_update` evaluated for the injection model).
    ///
    /// # Panics
    /// If the failure names no site: that is a bug in the code that raised it.
    pub fn into_rejection(self) -> Rejection {
        let site = self
            .site
            .expect("a failure raised outside a check names its site");
        reject(site, &self.args)
    }

    /// The failure as `site`, one of the sites the failing check declares, unless an inner
    /// expression already named its own (`x.stride(-1)` raising before the assert around it).
    pub fn at(self, site: &'static Site) -> Fail {
        Fail {
            site: self.site.or(Some(site)),
            ..self
        }
    }
}

/// Names the site of a failing expression, in a check that declares several.
pub trait At {
    fn at(self, site: &'static Site) -> Self;
}

impl<T> At for Result<T, Fail> {
    fn at(self, site: &'static Site) -> Self {
        self.map_err(|fail| fail.at(site))
    }
}

/// One named check of a layer. `sites` lists every site `run` can fail with (most checks have one;
/// a Python expression such as `q.shape[-2:]` can also raise `AttributeError` or `IndexError`).
/// A check with one site fails without naming it; a check with several names the one it raises.
pub struct Check<S> {
    pub name: &'static str,
    pub sites: &'static [&'static Site],
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

    /// Records hazard `def`, its template filled with `args`.
    fn hazard(&mut self, def: &'static HazardDef, args: &[&str]) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.hazards().push(Hazard::new(def, &args));
    }
}

/// Runs `layers` in order on `state`; the first failing check is the rejection.
pub fn run_layers<S>(state: &mut S, layers: &[&Layer<S>]) -> Result<(), Rejection> {
    for layer in layers {
        for check in layer.checks {
            if let Err(fail) = (check.run)(state) {
                let site = match (fail.site, check.sites) {
                    (Some(site), _) => site,
                    (None, [site]) => site,
                    (None, _) => panic!(
                        "check {}::{} failed without naming one of its sites",
                        layer.name, check.name
                    ),
                };
                debug_assert!(
                    check.sites.contains(&site),
                    "check {}::{} raised {} which it does not declare",
                    layer.name,
                    check.name,
                    site.id
                );
                return Err(reject(site, &fail.args));
            }
        }
    }
    Ok(())
}

/// What Python sees when `site` raises: its exception, its message template filled with `args`.
pub fn reject(site: &'static Site, args: &[String]) -> Rejection {
    Rejection {
        site: site.id,
        exception: site.exception,
        message: registry::fill(site.template, args),
    }
}

/// Every site the layers can raise, in check order, without duplicates.
pub fn sites_of<S>(layers: &[&Layer<S>]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for check in layers.iter().flat_map(|l| l.checks) {
        for site in check.sites {
            if !out.contains(&site.id) {
                out.push(site.id);
            }
        }
    }
    out
}
