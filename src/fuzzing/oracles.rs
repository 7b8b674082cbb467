//! Oracles: a case → "is this a bug?". A bug is reported by panicking with a reproducible message
//! (the call as JSON, the profile, the site). Cases outside what an oracle can judge are skipped
//! through [`Skip`], one named reason each — never by matching strings.

use crate::call::{Dims, KvCacheCall};
use crate::kernel::{self, KernelOptions, MetadataSource};
use crate::reference::{self, Precision, RefOutput, Stack};
use crate::spec::call_to_json;
use crate::tensor::{Tensors, materialise};
use crate::validate::{Outcome, Verdict, profiles, registry};

use super::harness::FUZZ_MEMORY_CAP;

/// Why an oracle could not judge a case (expected non-bugs, listed once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The call's tensors do not fit the fuzzing memory cap.
    OverMemoryCap,
    /// FA3's empty-KV fast path (`lse = +inf`, no kernel launch, cuda-fa3.md D.16): the kernel path
    /// models the device kernels, which never run for such a call.
    EmptyKvFastPath,
}

fn repro(call: &KvCacheCall) -> String {
    serde_json::to_string(&call_to_json(call)).expect("calls serialise")
}

/// Whether `message` is what `profile` raises for a site with `template`. The stable FA3 build's
/// C++ checks prefix `func, FILE:LINE, ` and report `CHECK_SHAPE` failures per dimension
/// (cuda-fa3.md 0.4, 0.5); its Python layer and every other profile raise the template as is.
fn message_of_site(profile: &str, template: &str, message: &str) -> bool {
    if registry::template_matches(template, message) || profile != "fa3-stable" {
        return registry::template_matches(template, message);
    }
    let prefix = format!(
        "{{}}, {}:{{}}, ",
        crate::validate::profiles::mha_fwd::STABLE_FILE
    );
    // A check without a message of its own renders nothing after the prefix (cuda-fa3.md 0.4).
    [
        template,
        "",
        "{} must have {} dimensions, got {}",
        "{} dimension {} must have size {}, got {}",
    ]
    .iter()
    .any(|body| registry::template_matches(&format!("{prefix}{body}"), message))
}

/// Every profile's verdict on `call`, checked: validation never panics (a panic is the bug), is
/// deterministic, raises only registered sites of the profile with the registered exception and a
/// message of the site's form, and resolves the sizes the call has.
pub fn validate_all(call: &KvCacheCall) -> Vec<Verdict> {
    profiles::all()
        .into_iter()
        .map(|profile| {
            let verdict = profile.validate(call);
            let again = profile.validate(call);
            // A NaN (e.g. a NaN softmax_scale a stack accepts) differs from itself under `==`;
            // Debug, where it equals itself, settles those (rare) cases.
            assert!(
                verdict == again || format!("{verdict:?}") == format!("{again:?}"),
                "{} is not deterministic on {}: {verdict:?} then {again:?}",
                profile.name(),
                repro(call)
            );
            match &verdict.outcome {
                Outcome::Rejected(rejection) => {
                    assert!(
                        profile.sites().contains(&rejection.site),
                        "{} raised {} which is not in its site list, on {}",
                        profile.name(),
                        rejection.site,
                        repro(call)
                    );
                    let site = registry::site(rejection.site);
                    assert_eq!(
                        site.exception,
                        rejection.exception,
                        "{}: {}",
                        rejection.site,
                        repro(call)
                    );
                    assert!(
                        message_of_site(profile.name(), site.template, &rejection.message),
                        "{}: message {:?} is not of the form {:?}, on {}",
                        rejection.site,
                        rejection.message,
                        site.template,
                        repro(call)
                    );
                }
                // Stacks accept calls whose shapes are inconsistent (mate never checks q's rank
                // with cu_seqlens_q, nor the type of max_seqlen_q); the kernel path refuses those
                // itself. Where the sizes do derive, the profile must have resolved the same ones.
                Outcome::Accepted(resolved) if !resolved.mla_decode => {
                    let dims = call
                        .bind_canonical()
                        .ok()
                        .and_then(|bound| Dims::of(&bound).ok());
                    if let Some(dims) = dims {
                        let agree = (
                            resolved.batch_size,
                            resolved.num_heads,
                            resolved.num_heads_k,
                        ) == (dims.batch_size, dims.num_heads, dims.num_heads_k)
                            && (resolved.head_size, resolved.head_size_v)
                                == (dims.head_size, dims.head_size_v);
                        assert!(
                            agree,
                            "{} resolved {resolved:?} but the call has {dims:?}: {}",
                            profile.name(),
                            repro(call)
                        );
                    }
                }
                Outcome::Accepted(_) => {}
            }
            verdict
        })
        .collect()
}

/// The reference's exact and low-precision results for a materialised call.
fn references(call: &KvCacheCall, tensors: &Tensors, stack: Stack) -> (RefOutput, RefOutput) {
    let run = |precision| {
        reference::run(call, tensors, stack, precision).unwrap_or_else(|e| {
            panic!(
                "the reference refused a valid {} call ({e}): {}",
                stack.name(),
                repro(call)
            )
        })
    };
    (run(Precision::Exact), run(Precision::LowPrecision))
}

/// The kernel path against the reference on a valid call of `stack`, once per metadata source:
/// outputs within the tolerance rule, caches after the append as the rule says.
pub fn differential(
    call: &KvCacheCall,
    stack: Stack,
    sources: &[MetadataSource],
) -> Result<(), Skip> {
    let tensors = materialise(call, FUZZ_MEMORY_CAP).map_err(|_| Skip::OverMemoryCap)?;
    let (ref64, lowprec) = references(call, &tensors, stack);
    if ref64.lse.iter().any(|&x| x == f64::INFINITY) {
        return Err(Skip::EmptyKvFastPath);
    }
    for &metadata in sources {
        let options = KernelOptions {
            metadata,
            stack,
            memory_cap: FUZZ_MEMORY_CAP,
            ..KernelOptions::default()
        };
        let out = kernel::run(call, &tensors, &options).unwrap_or_else(|e| {
            panic!(
                "the kernel refused a valid call ({e}) with {metadata:?}: {}",
                repro(call)
            )
        });
        if let Err(mismatch) = out.judge(&ref64, &lowprec) {
            panic!(
                "kernel ({metadata:?}) vs reference: {mismatch}\ncall: {}",
                repro(call)
            );
        }
    }
    Ok(())
}
