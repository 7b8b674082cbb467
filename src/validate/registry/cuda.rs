//! Error sites and hazards of the CUDA profiles (`fa3`, `fa3-stable`, `sgl-kernel`).
//!
//! Ids: `py.*` CPython errors (argument binding, attribute / index / conversion errors),
//! `aten.*` and `torch.*` PyTorch errors raised on the way, `fa3.A-*` upstream's Python wrapper,
//! `fa3.B-*` the C++ `mha_fwd` (numbered as cuda-fa3.md §B; shared by all three profiles),
//! `sgl.B3-*` sgl-kernel's FA3 wrapper, `sgl.FA4-*` / `sgl.FA4I-*` its `ver == 4` path and the
//! FA4 interface it calls, `sgl.E3-29*` the sinks block of sgl-flash-attn.
//!
//! The stable front end raises the same `mha_fwd` sites with `"<func>, <FILE>:<LINE>, "` in front
//! ([`stable_location`]); `<FILE>` is rendered as [`crate::validate::profiles::mha_fwd::STABLE_FILE`].

use super::{HazardDef, Site};

/// Where the stable front end raises a site: `__func__` and `__LINE__` of `flash_api_stable.cpp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StableLocation {
    pub function: &'static str,
    pub line: u32,
    /// `STD_TORCH_CHECK(cond)` without a message: the text after the prefix is empty.
    pub default_message: bool,
}

/// The stable build's location of a `mha_fwd` site (`None` for sites that are not a
/// `TORCH_CHECK` of `mha_fwd`).
pub fn stable_location(site: &str) -> Option<StableLocation> {
    if site == FA3_B_35.id {
        return Some(StableLocation {
            function: "run_mha_fwd",
            line: 436,
            default_message: true,
        });
    }
    MHA_STABLE_LINES
        .iter()
        .find(|(mha_site, _)| mha_site.id == site)
        .map(|&(_, line)| StableLocation {
            function: "mha_fwd",
            line,
            default_message: false,
        })
}

/// Every CUDA error site.
pub fn sites() -> impl Iterator<Item = &'static Site> {
    [
        GENERIC_SITES,
        PYTHON_SITES,
        FA4_SITES,
        MHA_SITES,
        SINK_SITES,
        LAUNCH_SITES,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// Every CUDA hazard kind.
pub fn hazards() -> impl Iterator<Item = &'static HazardDef> {
    HAZARDS.iter().copied()
}

const BINDING: &str = "CPython 3.11 Python/ceval.c initialize_locals";

sites! { "", GENERIC_SITES:
    PY_BINDING_UNEXPECTED_KEYWORD = site!(
        "py.binding-unexpected-keyword",
        "argument binding",
        TypeError,
        "flash_attn_with_kvcache() got an unexpected keyword argument '{}'",
        BINDING,
        "A keyword the stack's signature does not have.",
        "Upstream FA3 has no ver, sinks, score_mod or aux_tensors (SGLang wrapper parameters): drop them when calling flash_attn_interface directly; sinks need sgl-kernel or mate."
    ),
    PY_BINDING_MULTIPLE_VALUES = site!(
        "py.binding-multiple-values",
        "argument binding",
        TypeError,
        "flash_attn_with_kvcache() got multiple values for argument '{}'",
        BINDING,
        "A parameter given both positionally and by keyword.",
        "Positional arguments shifted into a slot that is also passed by keyword. Pass everything after v_cache by keyword."
    ),
    PY_BINDING_MISSING = site!(
        "py.binding-missing",
        "argument binding",
        TypeError,
        "flash_attn_with_kvcache() missing {}",
        BINDING,
        "q, k_cache or v_cache not passed.",
        "Pass q, k_cache and v_cache (positionally or by keyword)."
    ),
    PY_BINDING_TOO_MANY = site!(
        "py.binding-too-many",
        "argument binding",
        TypeError,
        "flash_attn_with_kvcache() takes {}",
        BINDING,
        "More positional arguments than the signature has (30 upstream, 34 in sgl-kernel 0.3.21).",
        "A positional call written for a longer signature. Pass optional arguments by keyword."
    ),
    PY_NO_ATTRIBUTE = site!(
        "py.no-attribute",
        "Python wrapper",
        AttributeError,
        "'{}' object has no attribute '{}'",
        "CPython 3.11 Objects/object.c PyObject_GetAttr",
        "A non-tensor where the wrapper reads .stride(-1) or .shape.",
        "None or a list passed for a tensor argument (k_cache, v_cache, q, qv, or any tensor sgl-kernel passes through maybe_contiguous; an int cache_seqlens on the FA4 path). Pass a tensor."
    ),
    PY_TUPLE_INDEX = site!(
        "py.tuple-index",
        "Python wrapper",
        IndexError,
        "tuple index out of range",
        "CPython 3.11 Objects/tupleobject.c tupleitem",
        "Indexing a tuple out of range: q.shape[-1] of a 0-d tensor, or window_size with fewer than two entries.",
        "Pass window_size as a pair (left, right), and q with at least one dimension."
    ),
    PY_LIST_INDEX = site!(
        "py.list-index",
        "Python wrapper",
        IndexError,
        "list index out of range",
        "CPython 3.11 Objects/listobject.c list_item",
        "window_size given as a list with fewer than two entries.",
        "Pass window_size as (left, right)."
    ),
    PY_STR_INDEX = site!(
        "py.str-index",
        "Python wrapper",
        IndexError,
        "string index out of range",
        "CPython 3.11 Objects/unicodeobject.c unicode_getitem",
        "window_size given as a string shorter than two characters.",
        "Pass window_size as a pair of ints."
    ),
    PY_NOT_SUBSCRIPTABLE = site!(
        "py.not-subscriptable",
        "Python wrapper",
        TypeError,
        "'{}' object is not subscriptable",
        "CPython 3.11 Objects/abstract.c PyObject_GetItem",
        "window_size is not a sequence (None, an int).",
        "Pass window_size=(-1, -1) for no window; None is not accepted."
    ),
    PY_KEY = site!(
        "py.key",
        "Python wrapper",
        KeyError,
        "{}",
        "CPython 3.11 Objects/dictobject.c dict_subscript; flash-attention@0251105a hopper/flash_attn_interface.py L1092-L1093",
        "window_size is a dict without the key 0 or 1 (window_size[0], window_size[1]).",
        "Pass window_size as a pair (left, right), not a dict."
    ),
    PY_SCALAR_INDEX = site!(
        "py.scalar-index",
        "Python wrapper",
        IndexError,
        "invalid index to scalar variable.",
        "NumPy 2 scalar subscription; flash-attention@0251105a hopper/flash_attn_interface.py L1092",
        "window_size is a NumPy scalar (window_size[0]).",
        "Pass window_size as a pair (left, right)."
    ),
    PY_ZERO_POWER = site!(
        "py.zero-power",
        "Python wrapper",
        ZeroDivisionError,
        "0.0 cannot be raised to a negative power",
        "CPython 3.11 Objects/floatobject.c float_pow",
        "softmax_scale is None and q.shape[-1] (+ qv.shape[-1]) is 0, so the default scale 0 ** -0.5 fails.",
        "An empty head dimension. Fix the shapes or pass softmax_scale."
    ),
    PY_UNPACK = site!(
        "py.unpack",
        "FA4 interface",
        ValueError,
        "not enough values to unpack (expected {}, got {})",
        "CPython 3.11 Python/ceval.c unpack_iterable",
        "The FA4 interface unpacks q.shape[-2:] and needs q of rank >= 2.",
        "Pass q as (batch, seqlen, heads, dim) or (total_q, heads, dim)."
    ),
    PY_MODULO_ZERO = site!(
        "py.modulo-zero",
        "FA4 interface",
        ZeroDivisionError,
        "integer modulo by zero",
        "CPython 3.11 Objects/longobject.c l_mod (text checked with CPython 3.11.7)",
        "The FA4 interface computes num_head % num_head_kv with zero KV heads.",
        "k_cache has zero heads; fix its shape."
    ),
    PY_INT_LITERAL = site!(
        "py.int-literal",
        "sgl-kernel wrapper",
        ValueError,
        "invalid literal for int() with base 10: {}",
        "CPython 3.11 Objects/longobject.c PyLong_FromString",
        "attention_chunk is a string that int() cannot parse.",
        "Pass attention_chunk as an int (0 = off)."
    ),
    PY_INT_NAN = site!(
        "py.int-nan",
        "sgl-kernel wrapper",
        ValueError,
        "cannot convert float NaN to integer",
        "CPython 3.11 Objects/floatobject.c float___trunc___impl",
        "attention_chunk is float('nan').",
        "Pass attention_chunk as an int (0 = off)."
    ),
    PY_INT_INF = site!(
        "py.int-inf",
        "sgl-kernel wrapper",
        OverflowError,
        "cannot convert float infinity to integer",
        "CPython 3.11 Objects/floatobject.c float___trunc___impl",
        "attention_chunk is an infinite float.",
        "Pass attention_chunk as an int (0 = off)."
    ),
    PY_INT_TYPE = site!(
        "py.int-type",
        "sgl-kernel wrapper",
        TypeError,
        "int() argument must be a string, a bytes-like object or a real number, not '{}'",
        "CPython 3.11 Objects/longobject.c PyNumber_Long",
        "attention_chunk is neither None, a number, a string nor a tensor.",
        "Pass attention_chunk as an int (0 = off)."
    ),
    ATEN_TENSOR_TO_SCALAR = site!(
        "aten.tensor-to-scalar",
        "sgl-kernel wrapper",
        RuntimeError,
        "a Tensor with {} elements cannot be converted to Scalar",
        "pytorch/pytorch aten/src/ATen/native/TensorConversions.cpp _local_scalar_dense / Tensor.item",
        "int(attention_chunk) on a tensor with more than one element.",
        "Pass attention_chunk as an int."
    ),
    ATEN_TENSOR_INDEX = site!(
        "aten.tensor-index",
        "Python wrapper",
        IndexError,
        "index {} is out of bounds for dimension {} with size {}",
        "pytorch/pytorch aten/src/ATen/native/TensorShape.cpp select",
        "window_size given as a tensor with fewer than two elements.",
        "Pass window_size as (left, right)."
    ),
    ATEN_INDEX_0D = site!(
        "aten.index-0d",
        "Python wrapper",
        IndexError,
        "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number",
        "pytorch/pytorch torch/csrc/autograd/python_variable_indexing.cpp",
        "window_size given as a 0-dim tensor: the wrapper's `window_size[0]` indexes it.",
        "Pass window_size as (left, right)."
    ),
    ATEN_DIM_NO_DIMS = site!(
        "aten.dim-no-dims",
        "ATen",
        IndexError,
        "Dimension specified as {} but tensor has no dimensions",
        "pytorch/pytorch c10/core/WrapDimMinimal.cpp maybe_wrap_dim_slow",
        "stride(-1) of a 0-d tensor (a Python scalar made a tensor).",
        "Pass tensors with the documented rank."
    ),
    ATEN_DIM_RANGE = site!(
        "aten.dim-range",
        "ATen",
        IndexError,
        "Dimension out of range (expected to be in range of [{}, {}], but got {})",
        "pytorch/pytorch c10/core/WrapDimMinimal.cpp maybe_wrap_dim_slow",
        "mha_fwd reads a size of a tensor with too few dimensions (q.size(-2) of a 1-D q, page_table.size(1) of a 1-D table, rotary_cos.size(1), k_new.size(1)) before its shape checks run.",
        "Pass tensors with the documented rank: q 4-D (3-D with cu_seqlens_q), caches 4-D, page_table 2-D. (fa3-stable: the error passes through torch's stable C shim; its type and text there are UNVERIFIED and modelled as in the legacy build.)"
    ),
    ATEN_SCALAR_TYPE = site!(
        "aten.scalar-type",
        "mha_fwd",
        RuntimeError,
        "expected scalar type {} but found {}",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L1120, L1130, L1140 (data_ptr<float>(), ATen DEFINE_CAST); legacy build only",
        "fp8 q and a q/k/v descale that is not float32: the legacy build's data_ptr<float>() checks the dtype; the stable build reads the bytes as float without a check.",
        "Pass descales as float32 (batch, heads_k) tensors."
    ),
    ATEN_FULL_OVERFLOW = site!(
        "aten.full-overflow",
        "Python wrapper",
        RuntimeError,
        "value cannot be converted to type int without overflow",
        "pytorch/pytorch c10/util/TypeCast.h checked_convert (Scalar::toInt in fill_)",
        "An int cache_seqlens outside the int32 range, expanded with torch.full(..., dtype=torch.int32).",
        "Sequence lengths must fit in int32."
    ),
    TORCH_OP_ARG_TYPE = site!(
        "torch.op-arg-type",
        "operator call",
        RuntimeError,
        pattern "{}() Expected a value of type '{}' for argument '{}' but instead found type '{}'.\nPosition: {}\nValue: {}\nDeclaration: {}\nCast error details: {*}",
        "pytorch/pytorch@cb412ddd torch/csrc/jit/python/pybind_utils.h argumentToIValue (\"\\nCast error details: \" + the caster's what()); aten/src/ATen/core/function_schema_inl.h FunctionSchema::formatTypeMismatchMsg (\"Position: \", \"Value: \" py::repr, \"Declaration: \" the schema)",
        "An argument of the wrong Python type reaches the operator (e.g. a float window_size entry, a list for a tensor argument on upstream FA3).",
        "The message is determined up to its last line: the first line, `Position: <index of the argument in the schema>`, `Value: <repr of the value>` ({*} where the repr depends on tensor data, an object's address or the NumPy version), `Declaration: <the operator's schema as torch prints it>` (from the schema the source declares). Then `Cast error details: <pybind11's cast error, whose text depends on how torch was built>` ({*}). Fix: pass ints for window_size entries, num_splits and sm_margin, tensors (or None) for tensor arguments."
    ),
    TORCH_NO_KERNEL = site!(
        "torch.no-kernel",
        "operator call",
        NotImplementedError,
        "Could not run '{}' with arguments from the '{}' backend. This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build). If you are a Facebook employee using PyTorch on mobile, please visit https://fburl.com/ptmfixes for possible resolutions.",
        "pytorch/pytorch aten/src/ATen/core/dispatch/OperatorEntry.cpp reportError",
        "No tensor argument is on CUDA, so the dispatcher finds no kernel (the operators are registered for CUDA only). The message is the modelled prefix: torch continues with \"'<op>' is only available for these backends: [...]\" and one line per registration, which depend on the torch version and the loaded extensions.",
        "All tensors were left on the CPU (or another device). Move them to the GPU."
    ),
}

sites! { "", PYTHON_SITES:
    FA3_A_1 = site!(
        "fa3.A-1",
        "FA3 Python wrapper",
        AssertionError,
        "k_cache must have contiguous last dimension",
        "Dao-AILab/flash-attention@0251105a hopper/flash_attn_interface.py:L1059",
        "k_cache.stride(-1) != 1.",
        "A transposed or sliced cache view (e.g. a (b, h, s, d) buffer transposed). Allocate the cache as (b, s, h, d) or pass .contiguous() (but append-KV then writes into the copy)."
    ),
    FA3_A_2 = site!(
        "fa3.A-2",
        "FA3 Python wrapper",
        AssertionError,
        "v_cache must have contiguous last dimension",
        "Dao-AILab/flash-attention@0251105a hopper/flash_attn_interface.py:L1060",
        "v_cache.stride(-1) != 1.",
        "As for k_cache: allocate the value cache with a contiguous last dimension."
    ),
    SGL_B3_1 = site!(
        "sgl.B3-1",
        "sgl-kernel FA3 wrapper",
        AssertionError,
        "k_cache must have contiguous last dimension",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L203",
        "ver != 4 and k_cache.stride(-1) != 1.",
        "Allocate the cache with a contiguous last dimension."
    ),
    SGL_B3_2 = site!(
        "sgl.B3-2",
        "sgl-kernel FA3 wrapper",
        AssertionError,
        "v_cache must have contiguous last dimension",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L204",
        "ver != 4 and v_cache.stride(-1) != 1.",
        "Allocate the value cache with a contiguous last dimension."
    ),
}

macro_rules! fa4 {
    ($id:literal, $line:literal, $template:literal, $condition:literal, $explain:literal) => {
        site!(
            $id,
            "sgl-kernel FA4 path",
            AssertionError,
            $template,
            concat!(
                "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L",
                $line
            ),
            $condition,
            $explain
        )
    };
}

macro_rules! fa4i {
    ($id:literal, $line:literal, $template:literal, $condition:literal, $explain:literal) => {
        site!(
            $id,
            "FA4 interface",
            AssertionError,
            $template,
            concat!(
                "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/_fa4_interface.py:L",
                $line
            ),
            $condition,
            $explain
        )
    };
}

sites! { "", FA4_SITES:
    SGL_FA4_2 = fa4!(
        "sgl.FA4-2",
        168,
        "FA4 does not support updating KV cache in-place.",
        "ver == 4 with k or v given.",
        "ver=4 selects FA4, which cannot append to the cache. Write the cache first, or use ver=3 (FA3)."
    ),
    SGL_FA4_3 = fa4!(
        "sgl.FA4-3",
        171,
        "FA4 does not support rotary embedding.",
        "ver == 4 with rotary_cos, rotary_sin or rotary_seqlens given.",
        "Rotate q/k before the call, or use ver=3."
    ),
    SGL_FA4_4 = fa4!(
        "sgl.FA4-4",
        174,
        "FA4 does not support non-consecutive batch indices or left padding.",
        "ver == 4 with cache_batch_idx or cache_leftpad given.",
        "Use ver=3 for cache_batch_idx / cache_leftpad."
    ),
    SGL_FA4_5 = fa4!(
        "sgl.FA4-5",
        177,
        "FA4 does not support descale.",
        "ver == 4 with q_descale, k_descale or v_descale given.",
        "FA4 has no fp8 path here; use ver=3 or drop the descales."
    ),
    SGL_FA4I_1 = fa4i!(
        "sgl.FA4I-1",
        142,
        "page_table must be int32",
        "ver == 4, paged, page_table not int32.",
        "Convert the page table with .to(torch.int32)."
    ),
    SGL_FA4I_2 = fa4i!(
        "sgl.FA4I-2",
        143,
        "page_table must be contiguous in the last dimension",
        "ver == 4, page_table.stride(-1) != 1 (the FA4 path does not fix it).",
        "Pass page_table.contiguous()."
    ),
    SGL_FA4I_3 = fa4i!(
        "sgl.FA4I-3",
        147,
        "",
        "ver == 4, page_table.shape != (batch_size, page_table.shape[1]) (bare assert).",
        "The page table needs one row per batch entry and rank 2."
    ),
    SGL_FA4I_4 = fa4i!(
        "sgl.FA4I-4",
        157,
        "",
        "ver == 4, not paged, k_cache.shape != (batch_size, seqlen_k, heads_k, head_dim) with batch_size from q (bare assert).",
        "FA4 needs one cache row per batch entry and the query's head dim."
    ),
    SGL_FA4I_5 = fa4i!(
        "sgl.FA4I-5",
        158,
        "",
        "ver == 4, not paged, v_cache.shape != (batch_size, seqlen_k, heads_k, head_dim_v) (bare assert).",
        "Allocate v_cache like k_cache."
    ),
    SGL_FA4I_6 = fa4i!(
        "sgl.FA4I-6",
        160,
        "",
        "ver == 4, paged, k_cache.shape != (num_pages, page_size, heads_k, head_dim) (bare assert).",
        "The paged cache must have q's head dim."
    ),
    SGL_FA4I_7 = fa4i!(
        "sgl.FA4I-7",
        161,
        "",
        "ver == 4, paged, v_cache.shape != (num_pages, page_size, heads_k, head_dim_v) (bare assert).",
        "Allocate v_cache like k_cache."
    ),
    SGL_FA4I_8 = fa4i!(
        "sgl.FA4I-8",
        170,
        "cu_seqlens_q must have shape (batch_size + 1,)",
        "ver == 4, cu_seqlens_q is not 1-D (its length defines batch_size).",
        "Pass 1-D offsets."
    ),
    SGL_FA4I_9 = fa4i!(
        "sgl.FA4I-9",
        176,
        "seqused_k must have shape (batch_size,)",
        "ver == 4, cache_seqlens is not (batch_size,).",
        "Pass one length per batch entry."
    ),
    SGL_FA4I_10 = fa4i!(
        "sgl.FA4I-10",
        179,
        "inputs must be float16 or bfloat16",
        "ver == 4 with q neither float16 nor bfloat16 (no fp8 on FA4).",
        "Use bf16/fp16, or ver=3 for fp8."
    ),
    SGL_FA4I_11 = fa4i!(
        "sgl.FA4I-11",
        183,
        "inputs must have the same dtype",
        "ver == 4 and q, k_cache, v_cache dtypes differ.",
        "Cast the caches to q's dtype."
    ),
    SGL_FA4I_12 = fa4i!(
        "sgl.FA4I-12",
        186,
        "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be int32",
        "ver == 4, cu_seqlens_q or cache_seqlens not int32.",
        "Convert with .to(torch.int32)."
    ),
    SGL_FA4I_13 = fa4i!(
        "sgl.FA4I-13",
        189,
        "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be contiguous",
        "ver == 4, cu_seqlens_q or cache_seqlens has stride(0) != 1.",
        "Pass .contiguous()."
    ),
    SGL_FA4I_14 = fa4i!(
        "sgl.FA4I-14",
        193,
        "",
        "ver == 4, sinks (learnable_sink) not of shape (num_heads,) (bare assert).",
        "One sink per query head."
    ),
    SGL_FA4I_15 = fa4i!(
        "sgl.FA4I-15",
        194,
        "learnable_sink must be bfloat16",
        "ver == 4, sinks not bfloat16.",
        "Pass sinks as bfloat16."
    ),
    SGL_FA4I_16 = fa4i!(
        "sgl.FA4I-16",
        196,
        "inputs must be on CUDA device",
        "ver == 4 and one of q, k_cache, v_cache, cu_seqlens_q, cache_seqlens, page_table, sinks is not on CUDA.",
        "Move every tensor to the GPU."
    ),
    SGL_FA4I_17 = fa4i!(
        "sgl.FA4I-17",
        210,
        "num_head must be divisible by num_head_kv",
        "ver == 4, q heads % k_cache heads != 0.",
        "Check the GQA ratio."
    ),
    SGL_FA4I_18 = fa4i!(
        "sgl.FA4I-18",
        211,
        "head_dim must be less than or equal to 256",
        "ver == 4, q.shape[-1] > 256.",
        "FA4 supports head dims up to 256."
    ),
    SGL_FA4I_19 = fa4i!(
        "sgl.FA4I-19",
        213,
        "head_dim must be divisible by {}",
        "ver == 4, q.shape[-1] not a multiple of 16 / element size (8 for fp16/bf16).",
        "Pad the head dim."
    ),
    SGL_FA4I_20 = fa4i!(
        "sgl.FA4I-20",
        214,
        "head_dim_v must be divisible by {}",
        "ver == 4, v_cache.shape[-1] not a multiple of 8.",
        "Pad the value head dim."
    ),
    SGL_FA4I_21 = fa4i!(
        "sgl.FA4I-21",
        359,
        "softcap and score_mod cannot be used together",
        "ver == 4 with a non-zero softcap and a score_mod.",
        "Fold the softcap into score_mod."
    ),
    SGL_FA4I_22 = fa4i!(
        "sgl.FA4I-22",
        475,
        "paged KV not supported on SM 9.0",
        "ver == 4 with a page_table on Hopper (asserted when compiling the kernel, so on every call).",
        "FA4 on sm90 has no paged KV: use ver=3."
    ),
    SGL_FA4I_23 = fa4i!(
        "sgl.FA4I-23",
        476,
        "SplitKV not supported on SM 9.0",
        "ver == 4 with num_splits > 1 on Hopper.",
        "Pass num_splits=1 (or 0) with ver=4 on sm90, or use ver=3."
    ),
}

sites! { "", SINK_SITES:
    SGL_E3_29A = site!(
        "sgl.E3-29a",
        "mha_fwd sinks (sgl-flash-attn)",
        RuntimeError,
        "sinks must have dtype bfloat16",
        "sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp:L1131",
        "sinks given and not bfloat16.",
        "Attention-sink logits in float32 (as some checkpoints store them). Cast with .to(torch.bfloat16)."
    ),
    SGL_E3_29B = site!(
        "sgl.E3-29b",
        "mha_fwd sinks (sgl-flash-attn)",
        RuntimeError,
        "sinks must be on CUDA",
        "sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp:L1133",
        "sinks not on CUDA.",
        "Move the sinks to the GPU."
    ),
    SGL_E3_29C = site!(
        "sgl.E3-29c",
        "mha_fwd sinks (sgl-flash-attn)",
        RuntimeError,
        "sinks must have shape (num_heads)",
        "sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp:L1134",
        "sinks is not 1-D of q's head count.",
        "Sinks per KV head, or for all ranks before the tensor-parallel split. Pass one sink per local query head."
    ),
    SGL_E3_29D = site!(
        "sgl.E3-29d",
        "mha_fwd sinks (sgl-flash-attn)",
        RuntimeError,
        "sinks must be contiguous",
        "sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp:L1135",
        "sinks is a strided view (not passed through maybe_contiguous).",
        "Pass sinks.contiguous()."
    ),
}

sites! { "", LAUNCH_SITES:
    FA3_B_35 = site!(
        "fa3.B-35",
        "mha_fwd launch",
        RuntimeError,
        "Expected params.num_splits >= 1 to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L371 (run_mha_fwd); hopper/flash_api_stable.cpp:L436; sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp (run_mha_fwd)",
        "A positive num_splits that wraps to <= 0 when stored in the C++ int params.num_splits (e.g. 2**32), with work to launch. Default TORCH_CHECK message (two spaces after 'false.' and 'improved?'); the stable build prints only its prefix.",
        "num_splits is a split count: pass 0 for the heuristic or a small positive value."
    ),
}

macro_rules! mha_sites {
    ($($name:ident = $id:literal, $up:literal, $stable:literal, $sgl:literal, $template:literal, $condition:literal, $explain:literal;)*) => {
        sites! { "", MHA_SITES: $(
            $name = site!($id, "mha_fwd", RuntimeError, $template,
                concat!("Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L", $up,
                    "; hopper/flash_api_stable.cpp:L", $stable,
                    "; sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp:L", $sgl),
                $condition,
                concat!($explain, " [fa3-stable raises the same check as \"mha_fwd, <build>/hopper/flash_api_stable.cpp:", $stable,
                    ", <message>\", where <build> stands for the build machine's source directory (build-dependent); its CHECK_SHAPE messages name the rank or the first differing dimension instead.]"))
        ),* }
        static MHA_STABLE_LINES: &[(&Site, u32)] = &[$(($name, $stable)),*];
    };
}

mha_sites! {
    FA3_B_2 = "fa3.B-2", 715, 784, 696,
        "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type",
        "q.dtype is not float16, bfloat16 or float8_e4m3fn.",
        "q is float32 (an unconverted activation) or float8_e5m2. Cast q (and the caches) to bf16/fp16, or quantise to float8_e4m3fn with descales.";
    FA3_B_4 = "fa3.B-4", 721, 790, 702,
        "query and key must have the same dtype",
        "k_cache.dtype differs from q.dtype.",
        "A bf16 query with an fp8 or fp16 KV cache. Cast the cache, or quantise q to the cache dtype (fp8 calls need q, k_cache and v_cache all float8_e4m3fn).";
    FA3_B_5 = "fa3.B-5", 722, 791, 703,
        "query and value must have the same dtype",
        "v_cache.dtype differs from q.dtype.",
        "Same as the key check, for the value cache; checked after k_cache, so k_cache already matched.";
    FA3_B_6 = "fa3.B-6", 724, 793, 705,
        "q must be on CUDA",
        "q is not a CUDA tensor (another tensor of the call is, so the CUDA kernel was dispatched).",
        "q left on the CPU. Move it with q.cuda().";
    FA3_B_7 = "fa3.B-7", 724, 793, 705,
        "k must be on CUDA",
        "k_cache (C++ name k) is not on CUDA.",
        "The KV cache was allocated on the CPU. Allocate it on the GPU.";
    FA3_B_8 = "fa3.B-8", 724, 793, 705,
        "v must be on CUDA",
        "v_cache (C++ name v) is not on CUDA.",
        "The value cache was allocated on the CPU. Allocate it on the GPU.";
    FA3_B_10A = "fa3.B-10a", 734, 803, 715,
        "page_table must be on CUDA",
        "page_table is not on CUDA.",
        "Block table built on the host. Move it to the GPU.";
    FA3_B_10B = "fa3.B-10b", 735, 804, 716,
        "page_table must have dtype torch.int32",
        "page_table is not int32.",
        "torch.arange/torch.tensor default to int64. Convert with .to(torch.int32).";
    FA3_B_11A = "fa3.B-11a", 743, 812, 724,
        "cu_seqlens_q must be on CUDA",
        "cu_seqlens_q is not on CUDA.",
        "Offsets computed on the host. Move them to the GPU.";
    FA3_B_11B = "fa3.B-11b", 743, 812, 724,
        "cu_seqlens_q must be contiguous",
        "cu_seqlens_q is not contiguous (possible only for a multi-dimensional tensor: the wrapper makes a 1-D one contiguous).",
        "A 2-D slice passed as offsets. Pass a 1-D int32 tensor of batch_size + 1 offsets.";
    FA3_B_11C = "fa3.B-11c", 744, 813, 725,
        "cu_seqlens_q must have dtype torch.int32",
        "cu_seqlens_q is not int32.",
        "torch.cumsum returns int64. Convert with .to(torch.int32).";
    FA3_B_11D = "fa3.B-11d", 745, 814, 726,
        "max_seqlen_q must be provided if cu_seqlens_q is provided",
        "cu_seqlens_q given with max_seqlen_q None.",
        "Varlen query without its maximum length. Pass max_seqlen_q (an int).";
    FA3_B_13 = "fa3.B-13", 777, 845, 758,
        "batch_size must be equal to batch_size_k",
        "No cache_batch_idx, and q's batch (q.shape[0], or cu_seqlens_q.shape[0] - 1) differs from the cache's (k_cache.shape[0], or page_table.shape[0] when paged).",
        "A cache allocated for more sequences than the batch. Pass cache_batch_idx, or slice the cache / page_table to the batch.";
    FA3_B_14 = "fa3.B-14", 780, 848, 761,
        "FlashAttention forward only supports head dimension at most 256",
        "q.shape[-1] > 256.",
        "MLA latent dims (512, 576) passed as the head dim. Use qv with a <= 64 rope part, or a different kernel.";
    FA3_B_15 = "fa3.B-15", 781, 849, 762,
        "Number of heads in key/value must divide number of heads in query",
        "q heads % k_cache heads != 0.",
        "Heads and head_dim swapped in a reshape, or a tensor-parallel split that breaks the GQA ratio. Check num_heads / num_heads_k.";
    FA3_B_16A = "fa3.B-16a", 783, 851, 764,
        "If V headdim is different from Q/K dim, we only support Q/K headdim in (128, 192] and V headdim in (96, 128], or (Q/K <= 64 and V <= 512).",
        "v_cache.shape[-1] != q.shape[-1] outside the two supported ranges.",
        "A value dim from another model. Only (d in (128,192], dv in (96,128]) or (d <= 64, dv <= 512) are compiled.";
    FA3_B_16C = "fa3.B-16c", 789, 857, 770,
        "HeaddimV > 256 requires fp16 and bf16 data type",
        "Different V head dim > 256 with fp8 q.",
        "fp8 MLA-style calls. Use bf16/fp16 for dv > 256.";
    FA3_B_17A = "fa3.B-17a", 808, 876, 789,
        "q must have shape (batch_size, seqlen_q, num_heads, head_size)",
        "Without cu_seqlens_q, q is not 4-D (the expected sizes are read from q itself).",
        "A packed (total_q, heads, dim) query without cu_seqlens_q. Pass cu_seqlens_q and max_seqlen_q, or reshape q to 4-D.";
    FA3_B_17B = "fa3.B-17b", 810, 878, 791,
        "q must have shape (total_q, num_heads, head_size)",
        "With cu_seqlens_q, q is not 3-D.",
        "A padded 4-D query passed with cu_seqlens_q. Flatten q to (total_q, heads, dim).";
    FA3_B_17C = "fa3.B-17c", 811, 879, 792,
        "cu_seqlens_q must have shape (batch_size + 1)",
        "cu_seqlens_q is not 1-D.",
        "A (batch, 1) or (1, batch + 1) offsets tensor. Flatten it.";
    FA3_B_18A = "fa3.B-18a", 815, 883, 796,
        "k must have shape (batch_size_k, seqlen_k, num_heads_k, head_size)",
        "Not paged: k_cache is not 4-D or its last dim differs from q's head dim.",
        "A (batch, heads, seqlen, dim) cache layout, or a head-dim mismatch. FA3 expects (batch, seqlen, heads, dim).";
    FA3_B_18B = "fa3.B-18b", 816, 884, 797,
        "v must have shape (batch_size_k, seqlen_k, num_heads_k, head_size_v)",
        "Not paged: v_cache is not 4-D or its first three dims differ from k_cache's.",
        "Key and value caches of different batch, length or head count. Allocate them alike.";
    FA3_B_18C = "fa3.B-18c", 823, 891, 804,
        "k must have shape (num_pages, page_size, num_heads_k, head_size)",
        "Paged: k_cache is not 4-D or its last dim differs from q's head dim.",
        "A flat (num_tokens, heads, dim) pool passed with a page_table. Reshape it to (num_pages, page_size, heads, dim).";
    FA3_B_18D = "fa3.B-18d", 824, 892, 805,
        "v must have shape (num_pages, page_size, num_heads_k, head_size_v)",
        "Paged: v_cache is not 4-D or its first three dims differ from k_cache's.",
        "Key and value pools of different page counts or sizes. Allocate them alike.";
    FA3_B_18E = "fa3.B-18e", 825, 893, 806,
        "page_table must have shape (batch_size_k, max_num_pages_per_seq)",
        "Paged: page_table has more than two dimensions.",
        "A (batch, 1, pages) table. Squeeze it to 2-D.";
    FA3_B_20A = "fa3.B-20a", 836, 904, 817,
        "seqused_k must have dtype int32",
        "cache_seqlens (C++ seqused_k) is not int32; checked before its device.",
        "int64 sequence lengths (torch default). Convert with .to(torch.int32).";
    FA3_B_20B = "fa3.B-20b", 837, 905, 818,
        "seqused_k must be on CUDA",
        "cache_seqlens is not on CUDA.",
        "Lengths kept on the host. Move them to the GPU.";
    FA3_B_20C = "fa3.B-20c", 837, 905, 818,
        "seqused_k must be contiguous",
        "cache_seqlens is not contiguous (upstream makes a 1-D one contiguous; sgl-kernel passes a tensor through unchanged).",
        "A strided view such as lengths[::2]. Pass .contiguous().";
    FA3_B_20D = "fa3.B-20d", 838, 906, 819,
        "seqused_k must have shape (batch_size)",
        "cache_seqlens is not 1-D of batch_size elements.",
        "A length per cache row instead of per batch entry, or an int cache_seqlens expanded to the wrong length (upstream: q.shape[0], which is total_q for varlen q; sgl-kernel: k_cache.shape[0]). Pass a tensor of batch_size lengths.";
    FA3_B_21A = "fa3.B-21a", 843, 911, 824,
        "leftpad_k must have dtype int32",
        "cache_leftpad (C++ leftpad_k) is not int32; checked before its device.",
        "int64 left paddings. Convert with .to(torch.int32).";
    FA3_B_21B = "fa3.B-21b", 844, 912, 825,
        "leftpad_k must be on CUDA",
        "cache_leftpad is not on CUDA.",
        "Move it to the GPU.";
    FA3_B_21C = "fa3.B-21c", 844, 912, 825,
        "leftpad_k must be contiguous",
        "cache_leftpad is not contiguous (only possible when not 1-D: the wrapper fixes 1-D ones).",
        "Pass a 1-D int32 tensor.";
    FA3_B_21D = "fa3.B-21d", 845, 913, 826,
        "leftpad_k must have shape (batch_size)",
        "cache_leftpad is not 1-D of batch_size elements.",
        "One entry per batch entry is required.";
    FA3_B_23 = "fa3.B-23", 855, 923, 836,
        "head_size should be a multiple of {}",
        "q.shape[-1] is not a multiple of 8 (16 for fp8).",
        "Odd head dims (e.g. 80 is fine, 72 with fp8 is not). Pad the head dim.";
    FA3_B_24 = "fa3.B-24", 856, 924, 837,
        "head_size_v should be a multiple of {}",
        "v_cache.shape[-1] is not a multiple of 8 (16 for fp8).",
        "Pad the value head dim.";
    FA3_B_27A = "fa3.B-27a", 931, 998, 912,
        "If k_new is supplied, v_new must also be passed in",
        "k given without v.",
        "Append-KV with only new keys. Pass v too.";
    FA3_B_27B = "fa3.B-27b", 932, 999, 913,
        "If k_new is supplied, seqlens_k must also be passed in",
        "k given without cache_seqlens (the message says seqlens_k).",
        "Append-KV needs the write position. Pass cache_seqlens.";
    FA3_B_27C = "fa3.B-27c", 933, 1000, 914,
        "If k_new is supplied, it must have seqlen <= the seqlen of the KV cache",
        "k given and the query length (max_seqlen_q when varlen) exceeds the cache capacity; the number of new tokens itself is not checked.",
        "A prefill longer than the allocated cache. Allocate a larger cache.";
    FA3_B_27D1 = "fa3.B-27d1", 938, 1005, 919,
        "cu_seqlens_k_new must be on CUDA",
        "cu_seqlens_k_new is not on CUDA.",
        "Move it to the GPU.";
    FA3_B_27D2 = "fa3.B-27d2", 938, 1005, 919,
        "cu_seqlens_k_new must be contiguous",
        "cu_seqlens_k_new is not contiguous (not 1-D).",
        "Pass a 1-D int32 tensor.";
    FA3_B_27D3 = "fa3.B-27d3", 939, 1006, 920,
        "cu_seqlens_k_new must have dtype torch.int32",
        "cu_seqlens_k_new is not int32.",
        "Convert with .to(torch.int32).";
    FA3_B_27E = "fa3.B-27e", 943, 1010, 924,
        "k_new must have the same dtype as query",
        "k.dtype differs from q.dtype.",
        "New keys in another dtype than the query. Cast them.";
    FA3_B_27F = "fa3.B-27f", 944, 1011, 925,
        "v_new must have the same dtype as query",
        "v.dtype differs from q.dtype.",
        "Cast the new values.";
    FA3_B_27G1 = "fa3.B-27g1", 945, 1012, 926,
        "k_new must be on CUDA",
        "k is not on CUDA.",
        "Move the new keys to the GPU.";
    FA3_B_27G2 = "fa3.B-27g2", 945, 1012, 926,
        "v_new must be on CUDA",
        "v is not on CUDA.",
        "Move the new values to the GPU.";
    FA3_B_27I1 = "fa3.B-27i1", 952, 1019, 933,
        "k_new must have shape (batch_size, seqlen_k_new, num_heads_k, head_size)",
        "Not varlen-new: k is not (batch_size, k.shape[1], heads_k, head_size).",
        "New keys with the cache's batch instead of q's, or a head mismatch.";
    FA3_B_27I2 = "fa3.B-27i2", 953, 1020, 934,
        "v_new must have shape (batch_size, seqlen_k_new, num_heads_k, head_size_v)",
        "Not varlen-new: v does not match k's token count or the cache's heads / value dim.",
        "Allocate v like k with the value dim.";
    FA3_B_27I3 = "fa3.B-27i3", 955, 1022, 936,
        "k_new must have shape (total_k_new, num_heads_k, head_size)",
        "With cu_seqlens_k_new: k is not 3-D (total_k_new, heads_k, head_size).",
        "Flatten the new keys to (total_new, heads, dim).";
    FA3_B_27I4 = "fa3.B-27i4", 956, 1023, 937,
        "v_new must have shape (total_k_new, num_heads_k, head_size_v)",
        "With cu_seqlens_k_new: v does not match k.",
        "Flatten the new values like k.";
    FA3_B_27I5 = "fa3.B-27i5", 957, 1024, 938,
        "cu_seqlens_k_new must have shape (batch_size + 1)",
        "cu_seqlens_k_new is not 1-D of batch_size + 1 offsets.",
        "Offsets for another batch size.";
    FA3_B_28A = "fa3.B-28a", 1007, 1074, 988,
        "scheduler_metadata must be on CUDA",
        "scheduler_metadata given, the metadata block runs (varlen, or causal/local unsplit on sm90), and it is not on CUDA.",
        "Metadata copied to the host. Keep get_scheduler_metadata's result on the GPU.";
    FA3_B_28B = "fa3.B-28b", 1008, 1075, 989,
        "scheduler_metadata must have shape (metadata_size)",
        "scheduler_metadata is not 1-D of the size this call needs (cuda-fa3.md C.3).",
        "Metadata computed for another batch size or mask type. Recompute it with get_scheduler_metadata for this call's parameters.";
    FA3_B_28C = "fa3.B-28c", 1009, 1076, 990,
        "scheduler_metadata must be contiguous",
        "scheduler_metadata is a strided view (it is not passed through maybe_contiguous).",
        "Pass the tensor get_scheduler_metadata returned, not a slice.";
    FA3_B_28D = "fa3.B-28d", 1010, 1077, 991,
        "scheduler_metadata must have dtype int32",
        "scheduler_metadata is not int32 (checked last, after shape).",
        "Metadata converted to another dtype. Pass it unchanged.";
    FA3_B_29A = "fa3.B-29a", 1029, 1096, 1010,
        "q_v is only supported for head_size <= 64",
        "qv given and q.shape[-1] > 64.",
        "MLA absorbed path with a wide rope part. qv needs d <= 64 (and dv >= 256).";
    FA3_B_29B = "fa3.B-29b", 1030, 1097, 1011,
        "q_v is only supported for hdim_v >= 256.",
        "qv given and v_cache.shape[-1] < 256.",
        "qv is for MLA latents (dv 256..512).";
    FA3_B_29C = "fa3.B-29c", 1031, 1098, 1012,
        "q_v is only supported for fp16 and bf16 data type",
        "qv given with fp8 q.",
        "Use bf16/fp16 for the MLA absorbed path.";
    FA3_B_29E = "fa3.B-29e", 1035, 1102, 1016,
        "q_v must have the same dtype as query",
        "qv.dtype differs from q.dtype.",
        "Cast qv.";
    FA3_B_29F = "fa3.B-29f", 1036, 1103, 1017,
        "q_v must be on CUDA",
        "qv is not on CUDA.",
        "Move qv to the GPU.";
    FA3_B_29G = "fa3.B-29g", 1037, 1104, 1018,
        "q_v tensor must have contiguous last dimension",
        "qv.stride(-1) != 1 (no wrapper fixes qv).",
        "A transposed or sliced qv. Pass qv.contiguous().";
    FA3_B_29H1 = "fa3.B-29h1", 1039, 1106, 1020,
        "q_v must have shape (batch_size, seqlen_q, num_heads, head_size_v)",
        "Not varlen: qv is not (batch, seqlen_q, heads, head_size_v).",
        "qv must match q's layout with the value dim.";
    FA3_B_29H2 = "fa3.B-29h2", 1041, 1108, 1022,
        "q_v must have shape (total_q, num_heads, head_size_v)",
        "Varlen: qv is not (total_q, heads, head_size_v).",
        "Flatten qv like q.";
    FA3_B_30A = "fa3.B-30a", 1053, 1120, 1034,
        "If rotary cos/sin are provided, new key / value to be appended to KV cache must also be provided",
        "rotary_cos given without k.",
        "Rotary is applied to appended keys only. Pass k/v, or rotate outside the kernel.";
    FA3_B_30B1 = "fa3.B-30b1", 1055, 1122, 1036,
        "rotary_cos must be on CUDA",
        "rotary_cos is not on CUDA.",
        "Move the cos table to the GPU.";
    FA3_B_30B2 = "fa3.B-30b2", 1055, 1122, 1036,
        "rotary_cos must be contiguous",
        "rotary_cos is not contiguous (e.g. a column slice: the wrapper only fixes a non-unit last stride).",
        "Pass rotary_cos[:, :r].contiguous().";
    FA3_B_30C = "fa3.B-30c", 1057, 1124, 1038,
        "rotary_dim must be <= headdim",
        "2 * rotary_cos.shape[1] > q.shape[-1].",
        "A cos table of full width (rotary_dim) instead of rotary_dim / 2. Pass cos[:, : rotary_dim // 2].";
    FA3_B_30D = "fa3.B-30d", 1058, 1125, 1039,
        "Only rotary dimensions divisible by 16 are currently supported",
        "2 * rotary_cos.shape[1] is not a multiple of 16.",
        "Partial rotary with an odd fraction. Use a rotary dim that is a multiple of 16.";
    FA3_B_30E = "fa3.B-30e", 1061, 1128, 1042,
        "cos/sin seqlen must be at least the seqlen of KV cache",
        "Paged: rotary_cos.shape[0] < pages_per_seq * page_size.",
        "A cos table sized to the current length, not to the cache capacity.";
    FA3_B_30F = "fa3.B-30f", 1063, 1130, 1044,
        "rotary_cos must have shape (seqlen_ro, params.rotary_dim / 2)",
        "rotary_cos is not 2-D.",
        "A (1, seqlen, dim) table. Squeeze it.";
    FA3_B_30G = "fa3.B-30g", 1064, 1131, 1045,
        "rotary_cos must have the same dtype as query",
        "rotary_cos.dtype differs from q.dtype.",
        "float32 cos table with bf16 q. Cast it.";
    FA3_B_30H = "fa3.B-30h", 1066, 1133, 1047,
        "If rotary cos is provided, rotary sin must also be provided",
        "rotary_cos given without rotary_sin.",
        "Pass both tables.";
    FA3_B_30I1 = "fa3.B-30i1", 1068, 1135, 1049,
        "rotary_sin must be on CUDA",
        "rotary_sin is not on CUDA.",
        "Move the sin table to the GPU.";
    FA3_B_30I2 = "fa3.B-30i2", 1068, 1135, 1049,
        "rotary_sin must be contiguous",
        "rotary_sin is not contiguous.",
        "Pass rotary_sin.contiguous().";
    FA3_B_30J = "fa3.B-30j", 1069, 1136, 1050,
        "rotary_sin must have shape (seqlen_ro, params.rotary_dim / 2)",
        "rotary_sin's shape differs from rotary_cos's.",
        "Build both tables with the same shape.";
    FA3_B_30K = "fa3.B-30k", 1070, 1137, 1051,
        "rotary_cos must have the same dtype as query",
        "rotary_sin.dtype differs from q.dtype; upstream's message names rotary_cos (copy-paste).",
        "Despite the text, it is rotary_sin's dtype that is wrong. Cast rotary_sin.";
    FA3_B_30L1 = "fa3.B-30l1", 1076, 1143, 1057,
        "seqlens_rotary must be on CUDA",
        "rotary_seqlens (C++ seqlens_rotary) is not on CUDA.",
        "Move it to the GPU.";
    FA3_B_30L2 = "fa3.B-30l2", 1076, 1143, 1057,
        "seqlens_rotary must be contiguous",
        "rotary_seqlens is not contiguous (not 1-D).",
        "Pass a 1-D int32 tensor.";
    FA3_B_30L3 = "fa3.B-30l3", 1077, 1144, 1058,
        "seqlens_rotary must have dtype torch.int32",
        "rotary_seqlens is not int32.",
        "Convert with .to(torch.int32).";
    FA3_B_30L4 = "fa3.B-30l4", 1078, 1145, 1059,
        "seqlens_rotary must have shape (batch_size)",
        "rotary_seqlens is not 1-D of batch_size.",
        "One rotary start per batch entry.";
    FA3_B_31A = "fa3.B-31a", 1087, 1154, 1068,
        "kv_batch_idx must be on CUDA",
        "cache_batch_idx (C++ kv_batch_idx) is not on CUDA.",
        "Move it to the GPU.";
    FA3_B_31B = "fa3.B-31b", 1087, 1154, 1068,
        "kv_batch_idx must be contiguous",
        "cache_batch_idx is not contiguous (not 1-D).",
        "Pass a 1-D int32 tensor.";
    FA3_B_31C = "fa3.B-31c", 1088, 1155, 1069,
        "kv_batch_idx must have dtype int32",
        "cache_batch_idx is not int32. Its length and values are never checked.",
        "Convert with .to(torch.int32).";
    FA3_B_32 = "fa3.B-32", 1095, 1162, 1076,
        "num_splits > 256 not supported",
        "The resolved num_splits (the requested value, truncated to a C++ int) exceeds 256.",
        "num_splits is a split count, not a block size. Pass 0 (heuristic) or a value <= 256.";
    FA3_B_33A = "fa3.B-33a", 1118, 1185, 1099,
        "q_descale must be on CUDA",
        "fp8 q and q_descale not on CUDA (for non-fp8 q descales are ignored).",
        "Move the scale to the GPU.";
    FA3_B_33B = "fa3.B-33b", 1119, 1186, 1100,
        "q_descale must have shape (batch_size, num_heads_k)",
        "fp8 q and q_descale is not (batch_size, num_heads_k).",
        "A scalar or per-tensor scale. Expand it: scale.expand(batch, heads_k).";
    FA3_B_33C = "fa3.B-33c", 1128, 1195, 1109,
        "k_descale must be on CUDA",
        "fp8 q and k_descale not on CUDA.",
        "Move the scale to the GPU.";
    FA3_B_33D = "fa3.B-33d", 1129, 1196, 1110,
        "k_descale must have shape (batch_size, num_heads_k)",
        "fp8 q and k_descale is not (batch_size, num_heads_k).",
        "Expand a per-tensor scale to (batch, heads_k).";
    FA3_B_33E = "fa3.B-33e", 1138, 1205, 1119,
        "v_descale must be on CUDA",
        "fp8 q and v_descale not on CUDA.",
        "Move the scale to the GPU.";
    FA3_B_33F = "fa3.B-33f", 1139, 1206, 1120,
        "v_descale must have shape (batch_size, num_heads_k)",
        "fp8 q and v_descale is not (batch_size, num_heads_k).",
        "Expand a per-tensor scale to (batch, heads_k).";
}

hazards! { HAZARDS:
    H_SGL_VER_RUNS_FA3 = hazard!(
        "H-SGL-VER-RUNS-FA3",
        Warning,
        "ver={} is not 4: sgl-kernel 0.3.21 silently runs FA3",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L163 (only ver == 4 is tested)",
        "sgl-kernel accepts any ver and runs FA3 unless ver == 4 (Python equality: 4.0 selects FA4, \"4\" does not). Code ported from CUDA with ver=2 ran FA3 there; the MUSA wrapper rejects it."
    ),
    H_SGL_ARG_DROPPED = hazard!(
        "H-SGL-ARG-DROPPED",
        Error,
        "{} is accepted and ignored on sgl-kernel's FA3 path",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L231-267 (not passed to the op)",
        "score_mod and aux_tensors only reach FA4 (ver == 4); with any other ver they are silently dropped."
    ),
    H_SGL_FA4_QV_DROPPED = hazard!(
        "H-SGL-FA4-QV-DROPPED",
        Error,
        "qv is silently dropped on the FA4 path: attention is computed without it",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L184-201",
        "The ver == 4 branch does not forward qv; MLA absorbed calls compute a different result."
    ),
    H_SGL_FA4_ARG_DROPPED = hazard!(
        "H-SGL-FA4-ARG-DROPPED",
        Warning,
        "{} is not forwarded on the FA4 path",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L184-201",
        "The ver == 4 branch forwards only q, caches, cu_seqlens_q, cache_seqlens, scale, causal, window, softcap, num_splits, pack_gqa, return_softmax_lse, sinks, page_table, score_mod, aux_tensors."
    ),
    H_SGL_FA4_SPLITS_UNMODELLED = hazard!(
        "H-SGL-FA4-SPLITS-UNMODELLED",
        Info,
        "FA4 chooses num_splits by its own heuristic (not modelled); a choice > 1 fails on sm90 with AssertionError: SplitKV not supported on SM 9.0",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/_fa4_interface.py:L315-338, L476",
        "With num_splits < 1 the FA4 interface picks a split count from its tile sizes and the SM count; fa3conform does not model FA4's tiles, so it cannot tell whether the call passes. Pass num_splits=1 to be sure."
    ),
    H_SGL_FA4_RETURNS_2_TUPLE = hazard!(
        "H-SGL-FA4-RETURNS-2-TUPLE",
        Info,
        "return_softmax_lse=True returns (out, lse) on the FA4 path, a 4-tuple on FA3",
        "sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/_fa4_interface.py:L940",
        "Code that unpacks out, lse, *rest works with both; code indexing [2] or [3] does not."
    ),
    H_CUDA_INT_SEQLENS_EXPANDED = hazard!(
        "H-CUDA-INT-SEQLENS-EXPANDED",
        Warning,
        "int cache_seqlens={} expanded to {} entries taken from {}",
        "Dao-AILab/flash-attention@0251105a hopper/flash_attn_interface.py:L1063-1067; sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L209-213",
        "Upstream FA3 sizes the tensor from q.shape[0] (total_q for varlen q), sgl-kernel 0.3.21 from k_cache.shape[0] (the page count when paged). Pass a tensor of batch_size lengths."
    ),
    H_CUDA_RETURNS_4_TUPLE = hazard!(
        "H-CUDA-RETURNS-4-TUPLE",
        Info,
        "return_softmax_lse=True returns a 4-tuple (out, lse, {})",
        "Dao-AILab/flash-attention@0251105a hopper/flash_attn_interface.py:L144-148, L1103; sgl-project/sglang@b5493f65b sgl-kernel/python/sgl_kernel/flash_attn.py:L269",
        "Not the documented (out, lse): the split-KV accumulators follow. Unpack with out, lse, *rest."
    ),
    H_CUDA_SCHEDULER_METADATA_IGNORED = hazard!(
        "H-CUDA-SCHEDULER-METADATA-IGNORED",
        Warning,
        "scheduler_metadata is silently ignored: the call is neither varlen nor causal/local unsplit",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L990-1006",
        "mha_fwd only reads scheduler_metadata when the scheduler needs a semaphore or the call is varlen (cuda-fa3.md C.3)."
    ),
    H_CUDA_DESCALE_IGNORED = hazard!(
        "H-CUDA-DESCALE-IGNORED",
        Warning,
        "{} is ignored because q is not float8_e4m3fn",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L1115-1146",
        "Descales only apply to fp8 inputs; with bf16/fp16 they are neither checked nor used."
    ),
    H_CUDA_ROTARY_IGNORED = hazard!(
        "H-CUDA-ROTARY-IGNORED",
        Error,
        "{} is ignored because rotary_cos is not given",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L1052-1083",
        "The rotary block only runs when rotary_cos is given."
    ),
    H_CUDA_ROTARY_SEQLENS_UNUSED = hazard!(
        "H-CUDA-ROTARY-SEQLENS-UNUSED",
        Info,
        "rotary_seqlens is unused because rotary_cos is not given",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L1052-1083",
        "rotary_seqlens only positions the rotation of the appended keys; without rotary_cos there is no rotation and nothing else reads it, so the call computes what it would without it (FA3's own tests pass it either way)."
    ),
    H_CUDA_V_WITHOUT_K = hazard!(
        "H-CUDA-V-WITHOUT-K",
        Error,
        "v is ignored because k is not given: nothing is appended",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L929-975",
        "v_new is only read inside the k_new block."
    ),
    H_CUDA_CU_SEQLENS_K_NEW_WITHOUT_K = hazard!(
        "H-CUDA-CU-SEQLENS-K-NEW-WITHOUT-K",
        Warning,
        "cu_seqlens_k_new is ignored because k is not given",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L929-975",
        "cu_seqlens_k_new is only read inside the k_new block."
    ),
    H_CUDA_SOFTCAP_NEGATIVE = hazard!(
        "H-CUDA-SOFTCAP-NEGATIVE",
        Warning,
        "a negative softcap is treated as no softcap",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L378 (SOFTCAP_SWITCH(params.softcap > 0.0))",
        "Only softcap > 0 enables capping."
    ),
    H_CUDA_EMPTY_KV = hazard!(
        "H-CUDA-EMPTY-KV",
        Info,
        "no keys at all: out is zero-filled and softmax_lse is +inf",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L1190-1194",
        "Note +inf, unlike the -inf of rows the kernel masks completely."
    ),
    H_CUDA_HEADS_K_ZERO = hazard!(
        "H-CUDA-HEADS-K-ZERO",
        Error,
        "k_cache has zero heads: num_heads % num_heads_k divides by zero in C++ and the process dies (SIGFPE); no exception is raised",
        "Dao-AILab/flash-attention@0251105a hopper/flash_api.cpp:L781",
        "The verdict stays 'accepted' because no Python exception exists for this case; treat it as fatal."
    ),
}
