//! mate's JIT build and kernel launch (musa-fa3.md §5.7): the compile-time key, the AppendKV
//! constraint, and tvm-ffi's conversion of the kernel's arguments.

use super::mask::py_number;
use super::state::{MusaState, effective_softmax_scale, fail_if};
use crate::call::python::{self as pyvalue, Cmp, FfiType};
use crate::call::{Dtype, NumpyScalar, NumpyValue, Param, PyValue};
use crate::mate::python::{Truth, TruthKind};
use crate::validate::engine::{At, Check, Fail, Layer};
use crate::validate::py;
use crate::validate::registry::musa::*;

pub static JIT_BUILD: Layer<MusaState> = Layer {
    name: "JIT build",
    checks: &[
        Check {
            name: "JIT key",
            sites: &[J_1_TENSOR_BOOL, J_1_JSON, J_1_HASH],
            run: j1_compile_key,
        },
        Check {
            name: "AppendKV needs varlen",
            sites: &[J_1],
            run: |s| {
                let varlen = s.given(Param::CuSeqlensQ)
                    || !s.seqused_k.is_none()
                    || s.given(Param::CacheLeftpad);
                fail_if(s.given(Param::K) && !varlen)
            },
        },
        Check {
            name: "tvm-ffi argument conversion",
            sites: &[J_3_ARG_TYPE],
            run: j3_arguments,
        },
    ],
};

/// A truth value `_resolve_mask` handed on: a bool, or a one-element bool tensor.
fn truth_value(t: Truth) -> PyValue {
    match t.kind {
        TruthKind::Bool => PyValue::Bool(t.value),
        TruthKind::Tensor => PyValue::tensor(Dtype::Bool, &[]),
        TruthKind::Numpy => PyValue::Numpy(NumpyScalar {
            dtype: Dtype::Bool,
            value: NumpyValue::Bool(t.value),
        }),
    }
}

/// `attention_chunk` as the compile-time dict reads it: the fixed-length reset's int 0, else the
/// caller's value (`None` is 0).
fn attention_chunk_value(s: &MusaState) -> PyValue {
    let given = s.arg(Param::AttentionChunk);
    let reset = s.chunk.value == 0.0 && pyvalue::float(given).is_some_and(|c| c != 0.0);
    if reset || given.is_none() {
        PyValue::Int(0)
    } else {
        given.clone()
    }
}

/// The forward kernel's compile-time dict (fmha_fwd.py L806-L839): building it evaluates
/// `rotary_interleaved and rotary_cos is not None` (L831), `_fmha_fwd_encode` JSON-dumps it with
/// sorted keys (L35) and `_load_fmha_fwd_module` hashes its items (L56). Only the entries below can
/// hold something other than a Python bool or int; they are listed in sorted key order.
fn j1_compile_key(s: &mut MusaState) -> Result<(), Fail> {
    let mask = s.mask.expect("resolved before the JIT build");
    let interleaved = s.arg(Param::RotaryInterleaved);
    let is_rotary_interleaved = if py::truth(interleaved).at(J_1_TENSOR_BOOL)? {
        PyValue::Bool(s.given(Param::RotaryCos))
    } else {
        interleaved.clone()
    };
    let compared = |v: &PyValue, op: Cmp, rhs: PyValue| {
        pyvalue::compare(v, op, &rhs).expect("policy_and_mask has compared these with numbers")
    };
    let is_packgqa = match s.arg(Param::PackGqa) {
        PyValue::None => PyValue::Bool(s.config.is_some_and(|c| c.pack_gqa)),
        given => given.clone(),
    };
    let entries = [
        compared(&s.cp.world_size, Cmp::Gt, PyValue::Int(1)), // enable_cp
        compared(&attention_chunk_value(s), Cmp::Gt, PyValue::Int(0)), // has_attention_chunk
        compared(s.arg(Param::Softcap), Cmp::Ne, PyValue::Float(0.0)), // has_softcap
        truth_value(mask.is_causal),
        truth_value(mask.is_local),
        is_packgqa,
        is_rotary_interleaved,
    ];
    for value in &entries {
        pyvalue::json_dumps(value).map_err(|e| Fail::with(e.args).at(J_1_JSON))?;
    }
    for value in &entries {
        pyvalue::hash(value).map_err(|e| Fail::with(e.args).at(J_1_HASH))?;
    }
    Ok(())
}

/// The kernel's typed parameters (fwd_kern.j2 L20–L63) that a caller's value can reach, converted
/// by tvm-ffi in parameter order (mcc is clang-based; C++ leaves the order of the conversions open).
fn j3_arguments(s: &mut MusaState) -> Result<(), Fail> {
    let mask = s.mask.expect("resolved before the kernel call");
    let max_seqlen_q = if s.given(Param::CuSeqlensQ) {
        s.arg(Param::MaxSeqlenQ).clone()
    } else {
        PyValue::Int(s.dims.seqlen_q)
    };
    let softmax_scale = effective_softmax_scale(s);
    let (left, right, chunk) = (
        py_number(mask.window_left),
        py_number(mask.window_right),
        py_number(s.chunk),
    );
    let num_splits = if s.given(Param::Sinks) {
        PyValue::Int(-1)
    } else {
        s.arg(Param::NumSplits).clone()
    };
    let arguments = [
        (11, &max_seqlen_q, FfiType::Int),
        (18, s.arg(Param::RotarySeqlens), FfiType::OptionalTensor),
        (19, s.arg(Param::QDescale), FfiType::OptionalTensor),
        (20, s.arg(Param::KDescale), FfiType::OptionalTensor),
        (21, s.arg(Param::VDescale), FfiType::OptionalTensor),
        (22, &softmax_scale, FfiType::Float),
        (24, &left, FfiType::Int),
        (25, &right, FfiType::Int),
        (26, &chunk, FfiType::Int),
        (27, s.arg(Param::Softcap), FfiType::Float),
        (28, s.arg(Param::SmMargin), FfiType::Int),
        (29, &num_splits, FfiType::Int),
        (36, &s.cp.world_size, FfiType::Int),
        (37, &s.cp.rank, FfiType::Int),
        (38, &s.cp.tot_seqused_k, FfiType::OptionalTensor),
    ];
    match pyvalue::first_unconverted(arguments) {
        Some(index) => Err(Fail::with([index.to_string()])),
        None => Ok(()),
    }
}
