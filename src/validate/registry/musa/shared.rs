//! What the MUSA stack's error sites share: citations of the upstream sources and the messages of
//! Python expressions, torch and tvm-ffi that more than one layer raises.

macro_rules! sgl {
    ($lines:literal) => {
        concat!(
            "sgl-project/sglang@082898472f python/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py:",
            $lines
        )
    };
}
macro_rules! mate {
    ($path:literal, $lines:literal) => {
        concat!("MooreThreads/mate@3f58cc3e ", $path, ":", $lines)
    };
}
macro_rules! mha {
    ($lines:literal) => {
        mate!("mate/mha_interface.py", $lines)
    };
}
macro_rules! fwd {
    ($lines:literal) => {
        mate!("mate/jit/attention/fmha/fmha_fwd.py", $lines)
    };
}
macro_rules! meta {
    ($lines:literal) => {
        mate!("mate/jit/attention/fmha/fmha_get_metadata.py", $lines)
    };
}

/// CPython 3.11 / torch messages of Python expressions.
pub(super) const ATTR: &str = "'{}' object has no attribute '{}'";
pub(super) const TUPLE_INDEX: &str = "tuple index out of range";
pub(super) const NO_DIMS: &str = "Dimension specified as {} but tensor has no dimensions";
pub(super) const SUBSCRIPT: &str = "'{}' object is not subscriptable";
pub(super) const SEQ_INDEX: &str = "{} index out of range";
pub(super) const MOD_ZERO: &str = "integer modulo by zero";
pub(super) const ADD_CONFIG: &str = "Add config for headdim {}-{}";
pub(super) const ON_MUSA: &str = "inputs must be on MUSA device";
/// torch's `bool()` of a tensor that does not hold exactly one element.
pub(super) const TENSOR_BOOL: &str = "Boolean value of Tensor with {} is ambiguous";
pub(super) const ZERO_DIM_INDEX: &str = "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number";
pub(super) const TENSOR_INDEX: &str = "index {} is out of bounds for dimension {} with size {}";
pub(super) const SCALAR_INDEX: &str = "invalid index to scalar variable.";
/// tvm-ffi's argument conversion (apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h
/// ArgValueWithContext): the function's name and signature and the type names are the installed
/// tvm-ffi's.
pub(super) const FFI_ARG: &str =
    "Mismatched type on argument #{} when calling: `{*}`. Expected `{*}` but got `{*}`";
