//! Profile `musa`: SGLang's MUSA wrapper V3 (sglang 082898472f) → mate's FA3 wrapper →
//! `mate.mha_interface.flash_attn_with_kvcache` → `_fmha_fwd` → kernel config → combine
//! (mate v0.2.2, 3f58cc3e), as musa-fa3.md §3–§6 describes them.
//!
//! [`MusaProfile::validate`] is the one place the order is written: the layers below run in source
//! order, the metadata chain only when injection recomputes, then either the MLA branch or the fmha
//! path. Checks of arguments the SGLang wrapper never passes to mate (`cu_seqlens_k`, `seqused_q`,
//! `out`, `lse`, the context-parallel arguments) can never fire through this stack and are not sites of
//! this profile.

use injection::WindowBound;

mod fmha_fwd;
mod injection;

use crate::call::{
    BoundArgs, Device, Dtype, KvCacheCall, LseLayout, Param, PyValue, SglangBackend, TensorArg,
    signature,
};
use crate::mate::KernelConfig;
use crate::mate::python::{PyNum, PythonMask};
use crate::validate::engine::{Fail, HazardLog, Layer, reject, run_layers, sites_of};
use crate::validate::registry::musa::*;
use crate::validate::{Exception, Hazard, Outcome, Profile, Rejection, Resolved, Verdict};
pub use injection::should_update;
use std::sync::OnceLock;

/// What the wrapper's metadata injection decided (musa-fa3.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Injection {
    /// Not attempted: metadata passed, no backend, or no layer recorded yet.
    Off,
    /// Non-MLA backend, metadata recomputed through chain M for `batch` sequences.
    Recompute { batch: i64 },
    /// Non-MLA backend, the tensor cached under the prefix is reused: its length when the context
    /// gives the cached buffer.
    Reuse { len: Option<i64> },
    /// MLA backend: `(workspace, is_inited)`.
    Mla { is_inited: bool },
}

/// The per-call state the checks read and fill in, in mate's terms.
pub struct MusaState {
    pub(super) args: BoundArgs,
    pub(super) backend: Option<SglangBackend>,
    pub(super) hazards: Vec<Hazard>,
    pub(super) injection: Injection,
    /// `softmax_scale` after mate's default.
    pub(super) softmax_scale: f64,
    /// `seqused_k` as `_fmha_fwd` sees it: `cache_seqlens`, an int expanded to a tensor.
    pub(super) seqused_k: PyValue,
    pub(super) mla: bool,
    /// `window_size[0]`, `window_size[1]` after mate's `None` default, as Python values:
    /// `_resolve_mask` raises on them after F-35.
    pub(super) window_bounds: (WindowBound, WindowBound),
    /// `attention_chunk` after the fixed-length reset, as the kernel call receives it.
    pub(super) chunk: PyNum,
    pub(super) attention_chunk: i64,
    pub(super) dims: FwdDims,
    /// `scheduler_metadata is not None` after the sink policy.
    pub(super) has_metadata: bool,
    pub(super) num_splits: i64,
    pub(super) mask: Option<PythonMask>,
    pub(super) config: Option<KernelConfig>,
}

/// The sizes `_fmha_fwd` derives (fmha_fwd.py L492–L518), as Python ints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FwdDims {
    pub num_head: i64,
    pub head_dim: i64,
    pub num_head_kv: i64,
    pub head_dim_v: i64,
    pub batch_size: i64,
    pub seqlen_q: i64,
    pub total_q: i64,
    pub paged: bool,
    pub page_size: i64,
    pub pages_per_seq: i64,
    pub seqlen_k: i64,
    pub batch_size_k: i64,
}

impl HazardLog for MusaState {
    fn hazards(&mut self) -> &mut Vec<Hazard> {
        &mut self.hazards
    }
}

impl MusaState {
    /// The effective value of a wrapper parameter (SGLang's names).
    pub(super) fn arg(&self, param: Param) -> &PyValue {
        self.args.get(param)
    }

    pub(super) fn tensor(&self, param: Param) -> Option<&TensorArg> {
        self.arg(param).as_tensor()
    }

    pub(super) fn given(&self, param: Param) -> bool {
        !self.arg(param).is_none()
    }
}

/// `t.is_musa`; a tensor without a device is on the profile's native device.
pub(super) fn is_musa(t: &TensorArg) -> bool {
    t.device_or(Device::Musa) == Device::Musa
}

/// An int32 1-D tensor of `len` elements on `device`: what `torch.full` makes of an int `cache_seqlens`.
pub(super) fn int32_vector(len: usize, device: Option<Device>) -> TensorArg {
    TensorArg {
        device,
        ..TensorArg::new(Dtype::Int32, &[len])
    }
}

/// Fails when `cond` holds (an `assert not cond` with a fixed message).
pub(super) fn fail_if(cond: bool) -> Result<(), Fail> {
    if cond { Err(Fail::new()) } else { Ok(()) }
}

/// The `musa` profile.
pub struct MusaProfile;

pub static MUSA: MusaProfile = MusaProfile;

/// Every layer of the stack, in source order (the order [`MusaProfile::validate`] runs them).
fn all_layers() -> [&'static Layer<MusaState>; 10] {
    [
        &injection::WRAPPER,
        &injection::INJECTION,
        &injection::METADATA_CHAIN,
        &fmha_fwd::MHA_INTERFACE,
        &fmha_fwd::MLA_BRANCH,
        &fmha_fwd::FMHA_CALL,
        &fmha_fwd::FMHA_FWD,
        &fmha_fwd::KERNEL_CONFIG,
        &fmha_fwd::JIT_BUILD,
        &fmha_fwd::COMBINE,
    ]
}

impl MusaProfile {
    fn run(state: &mut MusaState) -> Result<(), Rejection> {
        run_layers(state, &[&injection::WRAPPER, &injection::INJECTION])?;
        if matches!(state.injection, Injection::Recompute { .. }) {
            run_layers(state, &[&injection::METADATA_CHAIN])?;
        }
        run_layers(state, &[&fmha_fwd::MHA_INTERFACE])?;
        if state.mla {
            return run_layers(state, &[&fmha_fwd::MLA_BRANCH]);
        }
        run_layers(
            state,
            &[
                &fmha_fwd::FMHA_CALL,
                &fmha_fwd::FMHA_FWD,
                &fmha_fwd::KERNEL_CONFIG,
                &fmha_fwd::JIT_BUILD,
                &fmha_fwd::COMBINE,
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
        let mut state = MusaState {
            seqused_k: args.get(Param::CacheSeqlens).clone(),
            args,
            // Only a backend that has recorded a layer can inject; others are not copied.
            backend: call
                .context
                .sglang_backend
                .as_ref()
                .filter(|b| b.layer.is_some())
                .cloned(),
            hazards: Vec::new(),
            injection: Injection::Off,
            softmax_scale: f64::NAN,
            mla: false,
            window_bounds: (WindowBound::None, WindowBound::None),
            chunk: PyNum::int(0),
            attention_chunk: 0,
            dims: FwdDims::default(),
            has_metadata: false,
            num_splits: 0,
            mask: None,
            config: None,
        };
        let outcome = match Self::run(&mut state) {
            Ok(()) => Outcome::Accepted(Box::new(resolved(&state))),
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

fn to_usize(x: i64) -> usize {
    usize::try_from(x).unwrap_or(0)
}

/// The parameters an accepted call runs with.
fn resolved(s: &MusaState) -> Resolved {
    let d = &s.dims;
    let varlen_q = s.given(Param::CuSeqlensQ);
    if s.mla {
        return fmha_fwd::mla_resolved(s);
    }
    let mask = s
        .mask
        .expect("an accepted fmha call has resolved its mask")
        .resolved(s.attention_chunk);
    let config = s
        .config
        .expect("an accepted fmha call has a kernel configuration");
    Resolved {
        batch_size: to_usize(d.batch_size),
        seqlen_q: to_usize(d.seqlen_q),
        total_q: to_usize(d.total_q),
        seqlen_k: to_usize(d.seqlen_k),
        num_heads: to_usize(d.num_head),
        num_heads_k: to_usize(d.num_head_kv),
        head_size: to_usize(d.head_dim),
        head_size_v: to_usize(d.head_dim_v),
        head_size_rounded: config.head_dim_rounded,
        head_size_v_rounded: config.head_dim_v_rounded,
        paged: d.paged,
        page_size: to_usize(d.page_size),
        varlen_q,
        is_causal: mask.is_causal,
        is_local: mask.is_local,
        window_left: mask.window_left,
        window_right: mask.window_right,
        attention_chunk: s.attention_chunk,
        softcap: s.arg(Param::Softcap).as_number().unwrap_or(0.0),
        softmax_scale: s.softmax_scale,
        num_splits: if s.has_metadata { s.num_splits } else { 1 },
        pack_gqa: config.pack_gqa,
        tile_m: config.tile_m,
        tile_n: config.tile_n,
        lse_layout: if varlen_q {
            LseLayout::HeadTotal
        } else {
            LseLayout::BatchHeadSeq
        },
        mla_decode: false,
    }
}
