//! Profile `mate`: mate's FA3-compatible wrapper `flash_attn_3.interface.flash_attn_with_kvcache`
//! (also importable as `flash_attn_interface`; mate wrappers/flash-attention/flash_attn_3/
//! interface.py L175–L249, musa-fa3.md §2.2) as engines other than SGLang call it, over the same
//! layers as `musa` from `mha_interface` down. What differs from `musa`: the signature (`sinks`,
//! `s_aux`, `cp_world_size`, `cp_rank`, `cp_tot_seqused_k`; no `ver`, `score_mod`, `aux_tensors`),
//! no SGLang metadata injection, the sink resolved from `sinks` or `s_aux`, and the caller's
//! context-parallel arguments reaching `_fmha_fwd`'s asserts (F-36 … F-39) and the kernel.

use super::state::MusaState;
use super::{bind, run_mha_interface, unbound, verdict};
use crate::call::signature::{self, Bound};
use crate::call::{Device, KvCacheCall, Param};
use crate::validate::engine::{Check, Fail, HazardLog, Layer, run_layers, sites_of};
use crate::validate::registry::musa::{H_MATE_S_AUX_IGNORED, H_MUSA_SINKS_RENAMED, I_0};
use crate::validate::{Profile, Verdict};
use std::sync::OnceLock;

/// The `mate` profile.
pub struct MateProfile;

pub static MATE: MateProfile = MateProfile;

/// The wrapper's one step: `_resolve_sink` (interface.py L11–L14, L213); every other argument is
/// forwarded by keyword unchanged.
static WRAPPER: Layer<MusaState> = Layer {
    name: "mate FA3 wrapper",
    checks: &[Check {
        name: "sinks if sinks is not None else s_aux",
        sites: &[],
        run: resolve_sink,
    }],
};

/// Puts `s_aux` in the `sinks` slot when `sinks` is None: the layers below read `sinks` as
/// mate's `learnable_sink`.
fn resolve_sink(s: &mut MusaState) -> Result<(), Fail> {
    let s_aux = s.arg(Param::SAux).clone();
    if s.given(Param::Sinks) {
        s.hazard(H_MUSA_SINKS_RENAMED, &[]);
        if !s_aux.is_none() {
            s.hazard(H_MATE_S_AUX_IGNORED, &[]);
        }
    } else if !s_aux.is_none() {
        let slot = s
            .args
            .signature
            .position(Param::Sinks)
            .expect("mate's wrapper has sinks");
        s.args.params[slot] = Bound::Given(s_aux);
    }
    Ok(())
}

impl Profile for MateProfile {
    fn name(&self) -> &'static str {
        "mate"
    }

    fn models(&self) -> &'static str {
        "MooreThreads/mate v0.2.2 (3f58cc3e) FA3-compatible wrapper flash_attn_3.interface"
    }

    fn native_device(&self) -> Device {
        Device::Musa
    }

    fn validate(&self, call: &KvCacheCall) -> Verdict {
        let args = match bind(&signature::MATE_FA3_WRAPPER, call, I_0) {
            Ok(args) => args,
            Err(rejection) => return unbound(self.name(), rejection),
        };
        let mut state = MusaState::new(args, None);
        let result =
            run_layers(&mut state, &[&WRAPPER]).and_then(|()| run_mha_interface(&mut state, true));
        verdict(self.name(), state, result)
    }

    fn sites(&self) -> &'static [&'static str] {
        static SITES: OnceLock<Vec<&'static str>> = OnceLock::new();
        SITES.get_or_init(|| {
            let mut sites = vec![I_0.id];
            sites.extend(sites_of(&super::mha_interface_layers(true)));
            sites
        })
    }
}
