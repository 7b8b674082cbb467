//! mate's `_fmha_fwd_combine` (musa-fa3.md §5.8) and what runs after the kernel.

use super::state::{MusaState, fail_if};
use crate::call::Param;
use crate::validate::engine::{Check, Fail, HazardLog, Layer};
use crate::validate::py;
use crate::validate::registry::musa::*;

pub static COMBINE: Layer<MusaState> = Layer {
    name: "combine",
    checks: &[
        Check {
            name: "max_seqlen_q (shadowed)",
            sites: &[B_2],
            run: |s| fail_if(s.given(Param::CuSeqlensQ) && !s.given(Param::MaxSeqlenQ)),
        },
        Check {
            name: "metadata length (shadowed)",
            sites: &[B_3],
            run: |_| Ok(()), // same condition as F-41, which has passed
        },
        Check {
            name: "tile_n multiple of 32",
            sites: &[B_4],
            run: |s| fail_if(s.config.is_some_and(|c| c.tile_n % 32 != 0)),
        },
        Check {
            name: "max splits",
            sites: &[B_5],
            run: b5_max_splits,
        },
        Check {
            name: "`if return_lse` (after the kernel ran)",
            sites: &[B_6_TENSOR_BOOL],
            run: |s| py::truth(s.arg(Param::ReturnSoftmaxLse)).map(|_| ()),
        },
    ],
};

fn b5_max_splits(s: &mut MusaState) -> Result<(), Fail> {
    if s.has_metadata && s.num_splits > 128 {
        if s.given(Param::K) {
            s.hazard(H_MUSA_KV_WRITTEN_BEFORE_ERROR, &[]);
        }
        return Err(Fail::new());
    }
    Ok(())
}
