//! Error sites of mate's JIT build and kernel launch (`J-`).

use super::shared::{FFI_ARG, TENSOR_BOOL};

const JIT: &str = "mate JIT build";

sites! { "musa.", JIT_SITES:
    J_1_JSON = site!(
        "musa.J-1.json",
        JIT,
        TypeError,
        "Object of type {} is not JSON serializable",
        fwd!("L33-L35"),
        "a value JSON cannot write reached the kernel's compile-time dict (`json.dumps(config, sort_keys=True)` in \
         _fmha_fwd_encode, called at fmha_fwd.py L837; the first such key in sorted order is named): \
         `has_attention_chunk` (`attention_chunk > 0` on a tensor or NumPy scalar: a tensor or `numpy.bool`, named \
         `bool`), `has_softcap` (`softcap != 0.0`, likewise), `is_causal`/`is_local` (a one-element tensor window \
         handed on by `and`/`or` in _resolve_mask), `is_packgqa` (pack_gqa itself when not None: a function, a \
         tensor, a NumPy scalar) or `is_rotary_interleaved` (a falsy rotary_interleaved itself)",
        "Fix: window_size, attention_chunk and softcap are Python numbers, pack_gqa and rotary_interleaved bools."
    ),
    J_1_HASH = site!(
        "musa.J-1.hash",
        JIT,
        TypeError,
        "unhashable type: '{}'",
        fwd!("L53-L56"),
        "the compile-time dict holds an unhashable value: `is_rotary_interleaved` is `rotary_interleaved and \
         rotary_cos is not None`, which is rotary_interleaved itself when it is falsy (an empty dict or list); \
         `_load_fmha_fwd_module` is functools.cached on the dict's items",
        "Fix: rotary_interleaved is a bool."
    ),
    J_1_TENSOR_BOOL = site!(
        "musa.J-1.tensor-bool",
        JIT,
        RuntimeError,
        TENSOR_BOOL,
        fwd!("L831"),
        "rotary_interleaved is a tensor of other than one element: `is_rotary_interleaved and rotary_cos is not None` \
         in the compile-time dict",
        "Fix: rotary_interleaved is a bool."
    ),
    J_1 = site!(
        "musa.J-1",
        JIT,
        RuntimeError,
        prefix "Ninja build failed.",
        mate!("mate/jit/cpp_ext.py", "L320-L324"),
        "k/v appended without any of cu_seqlens_q, cache_seqlens, cache_leftpad: static_assert \"AppendKV is only \
         supported with Varlen\" (include/mate/attention/fmha/seqlen.hpp L36); run_ninja raises \"Ninja build failed.\" \
         followed, when the build is not verbose (run_ninja captures the output), by \" Ninja output:\\n\" and the compiler's log",
        "Fix: pass cache_seqlens (the current lengths) when appending k/v; upstream FA3 rejects this call up front."
    ),
    J_3_ARG_TYPE = site!(
        "musa.J-3.arg-type",
        JIT,
        TypeError,
        pattern FFI_ARG,
        fwd!("L843-L885"),
        "the forward kernel's typed parameters (csrc/templates/attention/fmha/fwd_kern.j2 L20-L63) reject a value: \
         #11 max_seqlen_q (with cu_seqlens_q), #24/#25 the resolved window, #26 attention_chunk, #28 sm_margin, \
         #29 num_splits need an int (Python or NumPy; a float or tensor survives _resolve_mask unchanged unless \
         replaced); #22 softmax_scale, #27 softcap need a number (not a NumPy bool); #18 rotary_seqlens (without \
         rotary_cos nothing reads it before) and #19-#21 q/k/v_descale need a tensor or None (tvm-ffi argument \
         conversion, apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext: the signature \
         and the expected/actual type names are the installed version's, {*} in the message; conversions checked \
         in parameter order)",
        "Fix: pass Python ints for window_size, attention_chunk, max_seqlen_q, sm_margin and num_splits, and \
         tensors (or None) for rotary_seqlens and the descales."
    ),
}
