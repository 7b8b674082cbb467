//! The SGLang MUSA wrapper V3's own checks (musa-fa3.md §3): the `ver` gate, and the arguments it
//! and mate's FA3 wrapper accept and drop or rename (§2.1, §2.2).

use super::state::{MusaState, fail_if};
use crate::call::python::{self, Cmp};
use crate::call::{Param, PyValue};
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer};
use crate::validate::py;
use crate::validate::registry::musa::*;

pub static WRAPPER: Layer<MusaState> = Layer {
    name: "sglang wrapper",
    checks: &[
        Check {
            name: "ver gate",
            sites: &[W_1_TENSOR_BOOL, W_1],
            run: ver_gate,
        },
        Check {
            name: "dropped arguments",
            sites: &[],
            run: dropped_arguments,
        },
    ],
};

/// `if ver != 3:` (a tensor compares elementwise; the `if` needs its one element).
fn ver_gate(s: &mut MusaState) -> Result<(), Fail> {
    let differs = python::compare(s.arg(Param::Ver), Cmp::Ne, &PyValue::Int(3))
        .expect("`!=` compares any two values");
    fail_if(py::truth(&differs).at(W_1_TENSOR_BOOL)?).at(W_1)
}

/// What the wrapper and mate's FA3 wrapper accept and silently drop or rename (§2.1, §2.2).
fn dropped_arguments(s: &mut MusaState) -> Result<(), Fail> {
    if s.given(Param::ScoreMod) {
        s.hazard(H_MUSA_SCORE_MOD_DROPPED, &[]);
    }
    if s.given(Param::AuxTensors) {
        s.hazard(H_MUSA_AUX_TENSORS_DROPPED, &[]);
    }
    if s.given(Param::Sinks) {
        s.hazard(H_MUSA_SINKS_RENAMED, &[]);
    }
    Ok(())
}
