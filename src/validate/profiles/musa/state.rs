//! The per-call state every layer of the `musa` profile reads and fills in, and the helpers they
//! share.

use super::mask::WindowBound;
use crate::call::signature::MATE_FA3_WRAPPER;
use crate::call::{BoundArgs, Device, Dtype, Param, PyValue, SglangBackend, TensorArg};
use crate::mate::KernelConfig;
use crate::mate::python::{PyNum, PythonMask};
use crate::validate::Hazard;
use crate::validate::engine::{Fail, HazardLog};

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
    /// The context-parallel arguments `_fmha_fwd` receives.
    pub(super) cp: ContextParallel,
}

/// `cp_world_size`, `cp_rank`, `cp_tot_seqused_k` as mate's FA3 wrapper forwards them: the
/// caller's through the `mate` profile, the wrapper's defaults (1, 0, None) through SGLang's, which
/// never passes them (musa-fa3.md §2.1).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ContextParallel {
    pub world_size: PyValue,
    pub rank: PyValue,
    pub tot_seqused_k: PyValue,
}

impl ContextParallel {
    fn of(args: &BoundArgs) -> Self {
        let value = |param: Param| {
            if args.has_param(param) {
                return args.get(param).clone();
            }
            let position = MATE_FA3_WRAPPER
                .position(param)
                .expect("mate's wrapper has the context-parallel parameters");
            MATE_FA3_WRAPPER.params[position]
                .1
                .value()
                .expect("they have defaults")
        };
        ContextParallel {
            world_size: value(Param::CpWorldSize),
            rank: value(Param::CpRank),
            tot_seqused_k: value(Param::CpTotSequsedK),
        }
    }

    /// The arguments that differ from the defaults (which disable context parallelism).
    pub(super) fn given(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if !self.world_size.eq_int(1) {
            names.push(Param::CpWorldSize.name());
        }
        if !self.rank.eq_int(0) {
            names.push(Param::CpRank.name());
        }
        if !self.tot_seqused_k.is_none() {
            names.push(Param::CpTotSequsedK.name());
        }
        names
    }
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
    /// The state before the first layer: the bound arguments and the backend that may inject.
    pub(super) fn new(args: BoundArgs, backend: Option<SglangBackend>) -> Self {
        MusaState {
            seqused_k: args.get(Param::CacheSeqlens).clone(),
            cp: ContextParallel::of(&args),
            args,
            backend,
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
        }
    }

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

/// `softmax_scale` as the kernels receive it: the caller's value, or mate's default for `None`.
pub(super) fn effective_softmax_scale(s: &MusaState) -> PyValue {
    if s.given(Param::SoftmaxScale) {
        s.arg(Param::SoftmaxScale).clone()
    } else {
        PyValue::Float(s.softmax_scale)
    }
}
