//! mate's `_get_fwd_kernel_config` (musa-fa3.md §5.6): its lru_cache key, the supported head-dim
//! pairs, and the call's own configuration.

use super::state::MusaState;
use crate::call::python as pyvalue;
use crate::call::{Param, PyValue};
use crate::mate;
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py;
use crate::validate::registry::musa::*;

pub static KERNEL_CONFIG: Layer<MusaState> = Layer {
    name: "kernel config",
    checks: &[
        Check {
            name: "lru_cache key, pack_gqa's truth value",
            sites: &[C_3, C_3_TENSOR_BOOL],
            run: c3_pack_gqa,
        },
        Check {
            name: "supported head dims",
            sites: &[C_2],
            run: c2_kernel_config,
        },
    ],
};

/// `_get_fwd_kernel_config` is lru_cached (hashes pack_gqa), then `_get_tile_m` reads
/// `m * head_ratio if enable_packgqa else m` (fmha_utils.py L129) when pack_gqa is not None.
fn c3_pack_gqa(s: &mut MusaState) -> Result<(), Fail> {
    let pack_gqa = s.arg(Param::PackGqa);
    pyvalue::hash(pack_gqa).map_err(|e| Fail::with(e.args).at(C_3))?;
    if !pack_gqa.is_none() {
        py::truth(pack_gqa).at(C_3_TENSOR_BOOL)?;
    }
    Ok(())
}

/// The call's `pack_gqa` as the kernel config reads it (truthiness; `None` = heuristic).
fn pack_gqa(s: &MusaState) -> Option<bool> {
    match s.arg(Param::PackGqa) {
        PyValue::None => None,
        v => Some(v.truthy().unwrap_or(true)),
    }
}

/// The call's own kernel configuration (`Err`: the unsupported rounded head-dim pair).
pub(super) fn call_config(s: &MusaState) -> Result<mate::KernelConfig, mate::UnsupportedHeadDims> {
    let d = s.dims;
    mate::kernel_config(
        usize::try_from(d.head_dim).unwrap_or(0),
        usize::try_from(d.head_dim_v).unwrap_or(0),
        d.seqlen_q,
        d.num_head.checked_div(d.num_head_kv).unwrap_or(0),
        pack_gqa(s),
    )
}

fn c2_kernel_config(s: &mut MusaState) -> Result<(), Fail> {
    let d = s.dims;
    let (hd, hdv) = (d.head_dim as usize, d.head_dim_v as usize);
    let config = call_config(s)
        .map_err(|e| Fail::with([e.head_dim.to_string(), e.head_dim_v.to_string()]))?;
    let over = [hd, hdv].into_iter().find(|&x| x > 512);
    if let Some(dim) = over {
        s.hazard(H_MUSA_HEADDIM_OVER_512, &[&dim.to_string()]);
    } else if (config.head_dim_rounded, config.head_dim_v_rounded) != (hd, hdv) {
        s.hazard(
            H_MUSA_HEADDIM_ROUNDED,
            &[
                &hd.to_string(),
                &hdv.to_string(),
                &config.head_dim_rounded.to_string(),
                &config.head_dim_v_rounded.to_string(),
            ],
        );
    }
    s.config = Some(config);
    Ok(())
}
