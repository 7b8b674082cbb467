//! Upstream FlashAttention-3 `hopper/` (Dao-AILab/flash-attention@0251105a): the Python wrapper
//! `flash_attn_interface.flash_attn_with_kvcache`, the custom op `_flash_attn_forward`, then
//! `mha_fwd` built from `flash_api.cpp` (`fa3`) or `flash_api_stable.cpp` (`fa3-stable`,
//! any build against torch >= 2.9).

use super::cuda_op::{
    FA3_CUSTOM_OP, OP_CALL, SeqlensLength, WINDOW_INDEX_SITES, assert_last_stride,
    binding_rejection, default_scale, expand_int_seqlens, index_window, maybe_contiguous_all,
    profile_sites,
};
use super::cuda_state::{Arg, CudaState, Flavour};
use super::mha_fwd::{LAUNCH, MHA_FWD, render, resolved};
use crate::call::{Device, KvCacheCall, Param, signature};
use crate::validate::engine::{At, Check, HazardLog, Layer, run_layers};
use crate::validate::registry::cuda::*;
use crate::validate::{Outcome, Profile, Verdict};
use std::sync::OnceLock;

/// `flash_attn_with_kvcache` (`flash_attn_interface.py:L1059-1101`): the only Python checks are
/// the two stride asserts; then the default scale, the `int` `cache_seqlens` expansion (to
/// `q.shape[0]`) and `window_size[0]`/`[1]` as the custom op's arguments are evaluated.
static PYTHON: Layer<CudaState> = Layer {
    name: "flash_attn_interface.flash_attn_with_kvcache",
    checks: &[
        Check {
            name: "k_cache last stride",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS, FA3_A_1],
            run: |s| assert_last_stride(s, Param::KCache).at(FA3_A_1),
        },
        Check {
            name: "v_cache last stride",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS, FA3_A_2],
            run: |s| assert_last_stride(s, Param::VCache).at(FA3_A_2),
        },
        Check {
            name: "default softmax_scale",
            sites: &[PY_NO_ATTRIBUTE, PY_TUPLE_INDEX, PY_ZERO_POWER],
            run: default_scale,
        },
        Check {
            name: "int cache_seqlens",
            sites: &[PY_NO_ATTRIBUTE, PY_TUPLE_INDEX, ATEN_FULL_OVERFLOW],
            run: |s| expand_int_seqlens(s, SeqlensLength::QRows),
        },
        Check {
            name: "window_size[0], window_size[1]",
            sites: WINDOW_INDEX_SITES,
            run: |s| {
                s.attention_chunk = s.py(Param::AttentionChunk).clone();
                index_window(s)
            },
        },
    ],
};

/// The custom op's body before it calls `flash_attn_3::fwd` (`flash_attn_interface.py:L96-106`):
/// `maybe_contiguous` on the tensors it lists (the custom op already checked they are tensors).
static CUSTOM_OP_BODY: Layer<CudaState> = Layer {
    name: "flash_attn_3::_flash_attn_forward body",
    checks: &[Check {
        name: "maybe_contiguous",
        sites: &[ATEN_DIM_NO_DIMS],
        run: |s| {
            maybe_contiguous_all(
                s,
                &[
                    Arg::Q,
                    Arg::K,
                    Arg::KNew,
                    Arg::VNew,
                    Arg::CuSeqlensQ,
                    Arg::CuSeqlensKNew,
                    Arg::SequsedK,
                    Arg::PageTable,
                    Arg::KvBatchIdx,
                    Arg::LeftpadK,
                    Arg::RotaryCos,
                    Arg::RotarySin,
                    Arg::SeqlensRotary,
                ],
            )
        },
    }],
};

static LAYERS: [&Layer<CudaState>; 5] = [&PYTHON, &OP_CALL, &CUSTOM_OP_BODY, &MHA_FWD, &LAUNCH];

/// The `fa3` / `fa3-stable` profile.
pub struct Fa3 {
    flavour: Flavour,
}

/// Upstream FA3 with the legacy front end `flash_api.cpp`.
pub static FA3: Fa3 = Fa3 {
    flavour: Flavour::Legacy,
};

/// Upstream FA3 with `flash_api_stable.cpp`.
pub static FA3_STABLE: Fa3 = Fa3 {
    flavour: Flavour::Stable,
};

impl Profile for Fa3 {
    fn name(&self) -> &'static str {
        match self.flavour {
            Flavour::Legacy => "fa3",
            Flavour::Stable => "fa3-stable",
        }
    }

    fn models(&self) -> &'static str {
        match self.flavour {
            Flavour::Legacy => {
                "Dao-AILab/flash-attention@0251105a hopper/ (flash_attn_interface.py, flash_api.cpp), sm90, all features"
            }
            Flavour::Stable => {
                "Dao-AILab/flash-attention@0251105a hopper/ (flash_attn_interface.py, flash_api_stable.cpp), sm90, all features"
            }
        }
    }

    fn native_device(&self) -> Device {
        Device::Cuda
    }

    fn validate(&self, call: &KvCacheCall) -> Verdict {
        let bound = match signature::bind(FA3_CUSTOM_OP.signature, call) {
            Ok(bound) => bound,
            Err(message) => {
                return Verdict {
                    profile: self.name(),
                    outcome: Outcome::Rejected(binding_rejection(message)),
                    hazards: Vec::new(),
                };
            }
        };
        let mut state = CudaState::new(bound, self.flavour, &FA3_CUSTOM_OP);
        let outcome = match run_layers(&mut state, &LAYERS) {
            Ok(()) => {
                if state.py(Param::ReturnSoftmaxLse).truthy() == Some(true) {
                    state.hazard(
                        H_CUDA_RETURNS_4_TUPLE,
                        &["out_accum, softmax_lse_accum; empty float32 tensors unless split"],
                    );
                }
                Outcome::Accepted(Box::new(resolved(&state)))
            }
            Err(rejection) => Outcome::Rejected(render(&state, rejection)),
        };
        Verdict {
            profile: self.name(),
            outcome,
            hazards: state.hazards,
        }
    }

    fn sites(&self) -> &'static [&'static str] {
        static LEGACY: OnceLock<Vec<&'static str>> = OnceLock::new();
        static STABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
        match self.flavour {
            Flavour::Legacy => LEGACY.get_or_init(|| profile_sites(&[&LAYERS])),
            Flavour::Stable => STABLE.get_or_init(|| {
                let mut sites = profile_sites(&[&LAYERS]);
                // The stable build reads descales with an untyped data_ptr(): no implicit dtype
                // check.
                sites.retain(|s| *s != ATEN_SCALAR_TYPE.id);
                sites
            }),
        }
    }
}
