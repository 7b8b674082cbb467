//! The verdict oracle: `profile`'s verdict on a call is deterministic, a rejection is one of the
//! profile's registered sites with its exception and a message of the site's form, every hazard is
//! registered, and an accepted call resolves the sizes it has. The `validation` suite, the
//! `validate` and `call_spec` fuzz targets and the catalogue tests ask it.

use super::repro;
use crate::call::{Dims, KvCacheCall};
use crate::validate::profiles::{self, mha_fwd::STABLE_FILE};
use crate::validate::registry::{self, cuda::stable_location, template_matches};
use crate::validate::{Outcome, Profile, Rejection, Verdict};
use std::cell::OnceCell;

/// Whether a check validates the call a second time to compare the verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Determinism {
    Checked,
    Unchecked,
}

/// `profile`'s verdict on `call`, checked: validating twice gives the same verdict; a rejection
/// is a site of the profile's list with the registered exception and a message of the site's
/// form; every hazard is registered; an accepted call whose sizes derive
/// resolves those sizes (stacks accept some inconsistent shapes, which the kernel path refuses).
pub fn verdict_checked(profile: &dyn Profile, call: &KvCacheCall) -> Result<Verdict, String> {
    verdict_checked_with(profile, call, &CallDims::default(), Determinism::Checked)
}

/// The sizes `call` itself derives (`None` when it binds to no signature or its shapes give
/// none), derived on first use and shared by every profile's check of the call.
type CallDims = OnceCell<Option<Dims>>;

/// [`verdict_checked`], validating twice only with [`Determinism::Checked`].
fn verdict_checked_with(
    profile: &dyn Profile,
    call: &KvCacheCall,
    call_dims: &CallDims,
    determinism: Determinism,
) -> Result<Verdict, String> {
    let name = profile.name();
    let first = profile.validate(call);
    if determinism == Determinism::Checked {
        let second = profile.validate(call);
        // A NaN (e.g. a NaN softmax_scale a stack accepts) differs from itself under `==`; Debug,
        // where it equals itself, settles those (rare) cases.
        if first != second && format!("{first:?}") != format!("{second:?}") {
            return Err(format!(
                "{name} is not deterministic: {first:?} then {second:?}"
            ));
        }
    }
    match &first.outcome {
        Outcome::Rejected(rejection) => {
            if !profile.sites().contains(&rejection.site) {
                return Err(format!(
                    "{name} raised {}, which is not in its site list",
                    rejection.site
                ));
            }
            let site = registry::sites()
                .find(|s| s.id == rejection.site)
                .ok_or_else(|| format!("{name}: unregistered site {}", rejection.site))?;
            if site.exception != rejection.exception {
                return Err(format!(
                    "{name}: {} raised {} but the site is a {}",
                    site.id, rejection.exception, site.exception
                ));
            }
            if !message_is_from_site(site.template, rejection) {
                return Err(format!(
                    "{name}: message {:?} is not from site {} ({:?})",
                    rejection.message, site.id, site.template
                ));
            }
        }
        Outcome::Accepted(resolved) if !resolved.mla_decode => {
            let dims = call_dims.get_or_init(|| {
                call.bind_canonical()
                    .ok()
                    .and_then(|bound| Dims::of(&bound).ok())
            });
            if let Some(dims) = dims {
                let resolved_sizes = (
                    resolved.batch_size,
                    resolved.num_heads,
                    resolved.num_heads_k,
                    resolved.head_size,
                    resolved.head_size_v,
                );
                let call_sizes = (
                    dims.batch_size,
                    dims.num_heads,
                    dims.num_heads_k,
                    dims.head_size,
                    dims.head_size_v,
                );
                if resolved_sizes != call_sizes {
                    return Err(format!(
                        "{name} resolved {resolved:?} but the call has {dims:?}"
                    ));
                }
            }
        }
        Outcome::Accepted(_) => {}
    }
    if let Some(hazard) = first
        .hazards
        .iter()
        .find(|hazard| registry::hazards().all(|h| h.code != hazard.code))
    {
        return Err(format!("{name}: unregistered hazard {}", hazard.code));
    }
    Ok(first)
}

/// Whether `rejection.message` is the site's template with its `{}` filled, possibly behind the
/// stable front end's `"<func>, <FILE>:<LINE>, "` (whose `CHECK_SHAPE` texts are per dimension).
pub fn message_is_from_site(template: &str, rejection: &Rejection) -> bool {
    if template_matches(template, &rejection.message) {
        return true;
    }
    let Some(location) = stable_location(rejection.site) else {
        return false;
    };
    let prefix = format!("{}, {STABLE_FILE}:{}, ", location.function, location.line);
    let Some(body) = rejection.message.strip_prefix(&prefix) else {
        return false;
    };
    if location.default_message {
        return body.is_empty();
    }
    template_matches(template, body)
        || (template.contains(" must have shape (")
            && (template_matches("{} must have {} dimensions, got {}", body)
                || template_matches("{} dimension {} must have size {}, got {}", body)))
}

/// Every profile's verdict on `call`, each checked by [`verdict_checked`] (validated twice only
/// with [`Determinism::Checked`]); a failure panics with the call (the fuzz targets' form of a
/// finding).
pub fn validate_all(call: &KvCacheCall, determinism: Determinism) -> Vec<Verdict> {
    let call_dims = CallDims::default();
    profiles::all()
        .into_iter()
        .map(|profile| {
            verdict_checked_with(profile, call, &call_dims, determinism)
                .unwrap_or_else(|problem| panic!("{problem}, on {}", repro(call)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Exception;

    fn rejection(site: &'static str, message: &str) -> Rejection {
        Rejection {
            site,
            exception: Exception::RuntimeError,
            message: message.to_string(),
        }
    }

    #[test]
    fn templates_match_filled_messages_only() {
        assert!(template_matches(
            "head_size should be a multiple of {}",
            "head_size should be a multiple of 8"
        ));
        assert!(!template_matches(
            "head_size should be a multiple of {}",
            "head_size_v should be a multiple of 8"
        ));
        assert!(template_matches(
            "'{}' object has no attribute '{}'",
            "'int' object has no attribute 'shape'"
        ));
        assert!(template_matches("", ""));
        assert!(!template_matches("", "x"));
    }

    #[test]
    fn stable_messages_are_recognised_by_prefix_and_shape_form() {
        let template = "q must have shape (batch_size, seqlen_q, num_heads, head_size)";
        let stable = format!("mha_fwd, {STABLE_FILE}:876, q must have 4 dimensions, got 3");
        assert!(message_is_from_site(
            template,
            &rejection("fa3.B-17a", &stable)
        ));
        let wrong_line = format!("mha_fwd, {STABLE_FILE}:877, q must have 4 dimensions, got 3");
        assert!(!message_is_from_site(
            template,
            &rejection("fa3.B-17a", &wrong_line)
        ));
        let launch = format!("run_mha_fwd, {STABLE_FILE}:436, ");
        assert!(message_is_from_site(
            "Expected ...",
            &rejection("fa3.B-35", &launch)
        ));
    }
}
