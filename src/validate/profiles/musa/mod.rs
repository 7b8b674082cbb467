//! Profile `musa`: SGLang's MUSA wrapper V3 (sglang 082898472f) → mate's FA3 wrapper →
//! `mate.mha_interface.flash_attn_with_kvcache` → `_fmha_fwd` → kernel config → combine
//! (mate v0.2.2, 3f58cc3e), as musa-fa3.md §3–§6 describes them.
//!
//! [`MusaProfile::validate`] is the one place the order is written: the layers below run in source
//! order, the metadata chain only when injection recomputes, then either the MLA branch or the fmha
//! path. Checks of arguments the SGLang wrapper never passes to mate (`cu_seqlens_k`, `seqused_q`,
//! `out`, `lse`, the context-parallel arguments) can never fire through this stack and are not sites of
//! this profile.
//!
//! One module per layer, each importing only [`state`] (the per-call state and the helpers every
//! layer uses) and [`mask`] (`_resolve_mask`'s operands, which the metadata chain and `_fmha_fwd`
//! both evaluate): [`sglang`] the wrapper's own checks, [`injection`] the metadata injection and
//! chain M, [`interface`] mate's `mha_interface.flash_attn_with_kvcache`, [`mla`] its MLA branch,
//! [`fmha_fwd`] (which also reads [`kernel_config`]'s configuration of the call), [`kernel_config`],
//! [`jit`] the JIT build and launch, [`combine`]. Below the SGLang wrapper, parameters keep the
//! wrapper's names; comments give mate's name where it differs (`k_cache` is mate's `k`, `k` is
//! `k_new`, `cache_seqlens` is `seqused_k`, ...).

mod combine;
mod fmha_fwd;
mod injection;
mod interface;
mod jit;
mod kernel_config;
mod mask;
mod mla;
mod sglang;
mod state;

pub use injection::should_update;

use crate::call::{Device, KvCacheCall, signature};
use crate::validate::engine::{HazardLog, Layer, reject, run_layers, sites_of};
use crate::validate::registry::musa::{H_MUSA_ASSERTION_ERROR, W_0};
use crate::validate::{Exception, Outcome, Profile, Rejection, Verdict};
use state::{Injection, MusaState};
use std::sync::OnceLock;

/// The `musa` profile.
pub struct MusaProfile;

pub static MUSA: MusaProfile = MusaProfile;

/// Every layer of the stack, in source order (the order [`MusaProfile::validate`] runs them).
fn all_layers() -> [&'static Layer<MusaState>; 10] {
    [
        &sglang::WRAPPER,
        &injection::INJECTION,
        &injection::METADATA_CHAIN,
        &interface::MHA_INTERFACE,
        &mla::MLA_BRANCH,
        &interface::FMHA_CALL,
        &fmha_fwd::FMHA_FWD,
        &kernel_config::KERNEL_CONFIG,
        &jit::JIT_BUILD,
        &combine::COMBINE,
    ]
}

impl MusaProfile {
    fn run(state: &mut MusaState) -> Result<(), Rejection> {
        run_layers(state, &[&sglang::WRAPPER, &injection::INJECTION])?;
        if matches!(state.injection, Injection::Recompute { .. }) {
            run_layers(state, &[&injection::METADATA_CHAIN])?;
        }
        run_layers(state, &[&interface::MHA_INTERFACE])?;
        if state.mla {
            return run_layers(state, &[&mla::MLA_BRANCH]);
        }
        run_layers(
            state,
            &[
                &interface::FMHA_CALL,
                &fmha_fwd::FMHA_FWD,
                &kernel_config::KERNEL_CONFIG,
                &jit::JIT_BUILD,
                &combine::COMBINE,
            ],
        )
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
        let args = match signature::bind(&signature::SGLANG_MUSA, call) {
            Ok(args) => args,
            Err(message) => {
                let detail = message
                    .strip_prefix("flash_attn_with_kvcache() ")
                    .unwrap_or(&message)
                    .to_string();
                return Verdict {
                    profile: self.name(),
                    outcome: Outcome::Rejected(reject(W_0, &[detail])),
                    hazards: Vec::new(),
                };
            }
        };
        // Only a backend that has recorded a layer can inject; others are not copied.
        let backend = call
            .context
            .sglang_backend
            .as_ref()
            .filter(|b| b.layer.is_some())
            .cloned();
        let mut state = MusaState::new(args, backend);
        let outcome = match Self::run(&mut state) {
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
            profile: self.name(),
            outcome,
            hazards: state.hazards,
        }
    }

    fn sites(&self) -> &'static [&'static str] {
        static SITES: OnceLock<Vec<&'static str>> = OnceLock::new();
        SITES.get_or_init(|| {
            let mut sites = vec![W_0.id];
            sites.extend(sites_of(&all_layers()));
            sites
        })
    }
}
