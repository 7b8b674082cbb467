//! mate's `mha_interface.flash_attn_with_kvcache` (musa-fa3.md §5.3): its asserts and defaults, the
//! routing to the MLA branch, and the argument expressions of its `_fmha_fwd(...)` call.

use super::mask::window_pair;
use super::state::{MusaState, fail_if, int32_vector};
use crate::call::python as pyvalue;
use crate::call::{Param, PyValue};
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py::{self, SubscriptSites};
use crate::validate::registry::Site;
use crate::validate::registry::musa::*;

pub static MHA_INTERFACE: Layer<MusaState> = Layer {
    name: "mha_interface",
    checks: &[
        Check {
            name: "k_cache contiguous last dim",
            sites: &[K_1_ATTR, K_1_INDEX, K_1],
            run: |s| last_dim_contiguous(s, Param::KCache, [K_1_ATTR, K_1_INDEX, K_1]),
        },
        Check {
            name: "v_cache contiguous last dim",
            sites: &[K_2_ATTR, K_2_INDEX, K_2],
            run: |s| last_dim_contiguous(s, Param::VCache, [K_2_ATTR, K_2_INDEX, K_2]),
        },
        Check {
            name: "None defaults",
            sites: &[],
            run: none_defaults,
        },
        Check {
            name: "softmax_scale default",
            sites: &[K_3_ATTR, K_3_INDEX, K_3_ZERO_POWER],
            run: k3_softmax_scale,
        },
        Check {
            name: "int cache_seqlens",
            sites: &[K_4_OVERFLOW],
            run: k4_int_cache_seqlens,
        },
        Check {
            name: "MLA routing",
            sites: &[K_5_ATTR, K_5_INDEX],
            run: k5_route,
        },
    ],
};

/// The argument expressions of the `_fmha_fwd(...)` call (mha_interface.py L946–L988).
pub static FMHA_CALL: Layer<MusaState> = Layer {
    name: "_fmha_fwd call",
    checks: &[Check {
        name: "window_size[0], window_size[1]",
        sites: &[
            K_6_WINDOW_TYPE,
            K_6_WINDOW_INDEX,
            K_6_WINDOW_KEY,
            K_6_WINDOW_TENSOR_0D,
            K_6_WINDOW_TENSOR_INDEX,
            K_6_WINDOW_SCALAR,
        ],
        run: k6_window,
    }],
};

/// `assert x.stride(-1) == 1, "<name> must have contiguous last dimension"` (K-1, K-2).
fn last_dim_contiguous(
    s: &mut MusaState,
    param: Param,
    [attr, index, assert]: [&'static Site; 3],
) -> Result<(), Fail> {
    let t = py::tensor(s.arg(param), "stride").at(attr)?;
    let stride = py::stride(t, -1, index, index)?;
    fail_if(stride != 1).at(assert)
}

fn none_defaults(s: &mut MusaState) -> Result<(), Fail> {
    if s.args.bound(Param::WindowSize).was_passed() && s.arg(Param::WindowSize).is_none() {
        s.hazard(H_MUSA_WINDOW_NONE, &[]);
    }
    if s.args.bound(Param::AttentionChunk).was_passed() && s.arg(Param::AttentionChunk).is_none() {
        s.hazard(H_MUSA_CHUNK_NONE, &[]);
    }
    Ok(())
}

/// `x.shape[-1]` of q or qv, with the sites of the expression that reads it.
fn last_dim(v: &PyValue, attr: &'static Site, index: &'static Site) -> Result<usize, Fail> {
    let shape = py::shape(v).at(attr)?;
    py::shape_at(shape, -1).at(index)
}

fn k3_softmax_scale(s: &mut MusaState) -> Result<(), Fail> {
    // `if softmax_scale is None:` — any other value is kept (the kernel's conversion judges it).
    if s.given(Param::SoftmaxScale) {
        s.softmax_scale = pyvalue::float(s.arg(Param::SoftmaxScale)).unwrap_or(f64::NAN);
        return Ok(());
    }
    let mut dim = last_dim(s.arg(Param::Q), K_3_ATTR, K_3_INDEX)?;
    if s.given(Param::Qv) {
        dim += last_dim(s.arg(Param::Qv), K_3_ATTR, K_3_INDEX)?;
    }
    // Python's `0 ** -0.5` raises instead of returning inf.
    fail_if(dim == 0).at(K_3_ZERO_POWER)?;
    s.softmax_scale = (dim as f64).powf(-0.5);
    Ok(())
}

/// `isinstance(cache_seqlens, int)` → `torch.full((k_cache.shape[0],), ...)` on k_cache's device.
fn k4_int_cache_seqlens(s: &mut MusaState) -> Result<(), Fail> {
    let Some(value) = s.arg(Param::CacheSeqlens).as_int() else {
        return Ok(());
    };
    // torch.full(..., dtype=torch.int32) converts the fill value with an overflow check.
    fail_if(i32::try_from(value).is_err())?;
    let k_cache = s.tensor(Param::KCache).expect("K-1 checked k_cache");
    let rows = k_cache.shape[0];
    let device = k_cache.device;
    let q_batch = s
        .tensor(Param::Q)
        .and_then(|q| q.size(0))
        .map_or("?".to_string(), |b| b.to_string());
    s.seqused_k = PyValue::Tensor(int32_vector(rows, device));
    s.hazard(
        H_MUSA_INT_CACHE_SEQLENS_EXPANDED,
        &[&value.to_string(), &rows.to_string(), &q_batch],
    );
    Ok(())
}

fn k5_route(s: &mut MusaState) -> Result<(), Fail> {
    if !s.given(Param::Qv) {
        return Ok(());
    }
    let qv_dim = last_dim(s.arg(Param::Qv), K_5_ATTR, K_5_INDEX)?;
    s.mla = qv_dim == 512 && last_dim(s.arg(Param::Q), K_5_ATTR, K_5_INDEX)? == 64;
    if s.mla {
        s.hazard(H_MUSA_MLA_ROUTED, &[]);
    }
    Ok(())
}

/// `window_size[0]`, `window_size[1]` in the call of `_fmha_fwd` (mha_interface.py L972-L973).
const K6_WINDOW: SubscriptSites = SubscriptSites {
    not_subscriptable: K_6_WINDOW_TYPE,
    sequence_index: K_6_WINDOW_INDEX,
    key: K_6_WINDOW_KEY,
    zero_dim: K_6_WINDOW_TENSOR_0D,
    tensor_index: K_6_WINDOW_TENSOR_INDEX,
    scalar_index: K_6_WINDOW_SCALAR,
};

fn k6_window(s: &mut MusaState) -> Result<(), Fail> {
    s.window_bounds = window_pair(s.arg(Param::WindowSize), &K6_WINDOW)?;
    Ok(())
}
