//! Profiles `musa` and `mate`, the MUSA stack's two entry points. `musa`: SGLang's MUSA wrapper V3
//! (sglang 082898472f) → mate's FA3 wrapper → `mate.mha_interface.flash_attn_with_kvcache` →
//! `_fmha_fwd` → kernel config → combine (mate v0.2.2, 3f58cc3e), as musa-fa3.md §3–§6 describes
//! them. `mate` ([`mate`]): the same stack entered at mate's FA3 wrapper, as engines other than
//! SGLang call it, with the caller's context-parallel arguments and sink resolution.
//!
//! [`MusaProfile::validate`] and [`run_mha_interface`] are the one place the order is written: the
//! layers below run in source order, the metadata chain only when injection recomputes, then
//! either the MLA branch or the fmha path. Checks of arguments neither wrapper passes to mate
//! (`cu_seqlens_k`, `seqused_q`, `out`, `lse`) can never fire through this stack and are no sites;
//! the context-parallel asserts are `mate`'s only.
//!
//! One module per layer, each importing only [`state`] (the per-call state and the helpers every
//! layer uses) and [`mask`] (`_resolve_mask`'s operands, which the metadata chain and `_fmha_fwd`
//! both evaluate): [`sglang`] the wrapper's own checks, [`injection`] the metadata injection and
//! chain M, [`interface`] mate's `mha_interface.flash_attn_with_kvcache`, [`mla`] its MLA branch,
//! [`fmha_fwd`] (which also reads [`kernel_config`]'s configuration of the call), [`kernel_config`],
//! [`jit`] the JIT build and launch, [`combine`]; [`mate`] is the `mate` profile's first layer.
//! Below the wrappers, parameters keep the wrappers' names; comments give mate's name where it
//! differs (`k_cache` is mate's `k`, `k` is `k_new`, `cache_seqlens` is `seqused_k`, `sinks` is
//! `learnable_sink`, which through `mate` holds `s_aux` when `sinks` is None, ...).

mod combine;
mod fmha_fwd;
mod injection;
mod interface;
mod jit;
mod kernel_config;
mod mask;
mod mate;
mod mla;
mod sglang;
mod state;

pub use injection::should_update;
pub use mate::{MATE, MateProfile};

use crate::call::signature::{self, BoundArgs, Signature};
use crate::call::{Device, KvCacheCall};
use crate::validate::engine::{HazardLog, Layer, reject, run_layers, sites_of};
use crate::validate::registry::Site;
use crate::validate::registry::musa::{H_MUSA_ASSERTION_ERROR, W_0};
use crate::validate::{Exception, Outcome, Profile, Rejection, Verdict};
use state::{Injection, MusaState};
use std::sync::OnceLock;

/// The `musa` profile.
pub struct MusaProfile;

pub static MUSA: MusaProfile = MusaProfile;

/// The fmha path's layers, from the `_fmha_fwd(...)` call on, in source order;
/// `context_parallel`: with `_fmha_fwd`'s context-parallel asserts, which only a caller of mate's
/// own wrapper can reach (SGLang's never passes the arguments, whose defaults pass).
fn fmha_layers(context_parallel: bool) -> Vec<&'static Layer<MusaState>> {
    let mut layers = vec![&interface::FMHA_CALL, &fmha_fwd::FMHA_FWD];
    if context_parallel {
        layers.push(&fmha_fwd::CONTEXT_PARALLEL);
    }
    layers.extend([
        &fmha_fwd::METADATA_LENGTH,
        &kernel_config::KERNEL_CONFIG,
        &jit::JIT_BUILD,
        &combine::COMBINE,
    ]);
    layers
}

/// Every layer from mate's `mha_interface` down, in source order (for the sites they declare).
fn mha_interface_layers(context_parallel: bool) -> Vec<&'static Layer<MusaState>> {
    let mut layers = vec![&interface::MHA_INTERFACE, &mla::MLA_BRANCH];
    layers.extend(fmha_layers(context_parallel));
    layers
}

/// Runs mate's `mha_interface.flash_attn_with_kvcache` and what it calls: the MLA branch or the
/// fmha path.
fn run_mha_interface(state: &mut MusaState, context_parallel: bool) -> Result<(), Rejection> {
    run_layers(state, &[&interface::MHA_INTERFACE])?;
    if state.mla {
        return run_layers(state, &[&mla::MLA_BRANCH]);
    }
    run_layers(state, &fmha_layers(context_parallel))
}

impl MusaProfile {
    fn run(state: &mut MusaState) -> Result<(), Rejection> {
        run_layers(state, &[&sglang::WRAPPER, &injection::INJECTION])?;
        if matches!(state.injection, Injection::Recompute { .. }) {
            run_layers(state, &[&injection::METADATA_CHAIN])?;
        }
        run_mha_interface(state, false)
    }
}

/// Binds `call` to an entry point's `signature`, or the binding's `TypeError`, raised at `site`.
fn bind(
    signature: &'static Signature,
    call: &KvCacheCall,
    site: &'static Site,
) -> Result<BoundArgs, Rejection> {
    signature::bind(signature, call).map_err(|message| {
        let detail = message
            .strip_prefix("flash_attn_with_kvcache() ")
            .unwrap_or(&message)
            .to_string();
        reject(site, &[detail])
    })
}

/// The verdict of `profile` after its layers ran on `state` with `result`.
fn verdict(profile: &'static str, mut state: MusaState, result: Result<(), Rejection>) -> Verdict {
    let outcome = match result {
        Ok(()) if state.mla => Outcome::Accepted(Box::new(mla::resolved(&state))),
        Ok(()) => Outcome::Accepted(Box::new(fmha_fwd::resolved(&state))),
        Err(rejection) => {
            if rejection.exception == Exception::AssertionError {
                state.hazard(H_MUSA_ASSERTION_ERROR, &[]);
            }
            Outcome::Rejected(rejection)
        }
    };
    Verdict {
        profile,
        outcome,
        hazards: state.hazards,
    }
}

/// A binding failure's verdict: no layer ran.
fn unbound(profile: &'static str, rejection: Rejection) -> Verdict {
    Verdict {
        profile,
        outcome: Outcome::Rejected(rejection),
        hazards: Vec::new(),
    }
}

impl Profile for MusaProfile {
    fn name(&self) -> &'static str {
        "musa"
    }

    fn models(&self) -> &'static str {
        "sgl-project/sglang@082898472f MUSA wrapper V3 over MooreThreads/mate v0.2.2 (3f58cc3e)"
    }

    fn native_device(&self) -> Device {
        Device::Musa
    }

    fn validate(&self, call: &KvCacheCall) -> Verdict {
        // Binding to the wrapper's signature comes first; it is not a check on the state because
        // the state is built from the bound arguments.
        let args = match bind(&signature::SGLANG_MUSA, call, W_0) {
            Ok(args) => args,
            Err(rejection) => return unbound(self.name(), rejection),
        };
        // Only a backend that has recorded a layer can inject; others are not copied.
        let backend = call
            .context
            .sglang_backend
            .as_ref()
            .filter(|b| b.layer.is_some())
            .cloned();
        let mut state = MusaState::new(args, backend);
        let result = Self::run(&mut state);
        verdict(self.name(), state, result)
    }

    fn sites(&self) -> &'static [&'static str] {
        static SITES: OnceLock<Vec<&'static str>> = OnceLock::new();
        SITES.get_or_init(|| {
            let mut layers = vec![
                &sglang::WRAPPER,
                &injection::INJECTION,
                &injection::METADATA_CHAIN,
            ];
            layers.extend(mha_interface_layers(false));
            let mut sites = vec![W_0.id];
            sites.extend(sites_of(&layers));
            sites
        })
    }
}
