//! Error sites of mate's MLA decode branch (`MLA-`).

use super::shared::{
    FFI_ARG, SCALAR_INDEX, SEQ_INDEX, SUBSCRIPT, TENSOR_INDEX, TUPLE_INDEX, ZERO_DIM_INDEX,
};

const MLA: &str = "mate MLA decode branch";

sites! { "musa.", MLA_SITES:
    MLA_1_INDEX = site!(
        "musa.MLA-1.index",
        MLA,
        IndexError,
        TUPLE_INDEX,
        mha!("L924"),
        "MLA-shaped call (qv last dim 512, q last dim 64) with a 1-D qv (`qv.shape[-2]`)",
        "Fix: qv is (batch, seqlen, heads, 512) or (total_q, heads, 512)."
    ),
    MLA_2_METADATA_TYPE = site!(
        "musa.MLA-2.metadata-type",
        MLA,
        TypeError,
        SUBSCRIPT,
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is not None and not subscriptable (`scheduler_metadata[0]`, \
         evaluated before the dispatch converts its arguments)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), or None under SGLang injection."
    ),
    MLA_2_METADATA_INDEX = site!(
        "musa.MLA-2.metadata-index",
        MLA,
        IndexError,
        SEQ_INDEX,
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is a tuple, list or str of fewer than 2 items",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_KEY = site!(
        "musa.MLA-2.metadata-key",
        MLA,
        KeyError,
        "{}",
        mha!("L942-L943"),
        "MLA-shaped call whose scheduler_metadata is a dict without the key 0 or 1",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), not a dict."
    ),
    MLA_2_METADATA_TENSOR_0D = site!(
        "musa.MLA-2.metadata-tensor-0d",
        MLA,
        IndexError,
        ZERO_DIM_INDEX,
        mha!("L942"),
        "MLA-shaped call whose scheduler_metadata is a 0-dim tensor (`scheduler_metadata[0]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_TENSOR_INDEX = site!(
        "musa.MLA-2.metadata-tensor-index",
        MLA,
        IndexError,
        TENSOR_INDEX,
        mha!("L943"),
        "MLA-shaped call whose scheduler_metadata is a tensor with one row (`scheduler_metadata[1]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_METADATA_SCALAR = site!(
        "musa.MLA-2.metadata-scalar",
        MLA,
        IndexError,
        SCALAR_INDEX,
        mha!("L942"),
        "MLA-shaped call whose scheduler_metadata is a NumPy scalar (`scheduler_metadata[0]`)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool)."
    ),
    MLA_2_SEQLENS_K = site!(
        "musa.MLA-2.seqlens_k",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #4 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with cache_seqlens None: the C++ parameter seqlens_k is a non-optional tensor \
         (tvm-ffi argument conversion: apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext; \
         the function name and signature and tvm-ffi's type names are the installed version's, {*} in the message)",
        "Fix: the MLA decode kernel needs cache_seqlens as an int32 tensor."
    ),
    MLA_2_BLOCK_TABLE = site!(
        "musa.MLA-2.block_table",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #5 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with page_table None: the C++ parameter block_table is a non-optional tensor \
         (tvm-ffi argument conversion: apache/tvm-ffi@0a9d4b68 include/tvm/ffi/function_details.h ArgValueWithContext; \
         the function name and signature and tvm-ffi's type names are the installed version's, {*} in the message)",
        "Fix: the MLA decode kernel needs a paged cache (page size 64) with page_table."
    ),
    MLA_3 = site!(
        "musa.MLA-3",
        MLA,
        RuntimeError,
        "Back optional access",
        mate!("csrc/mla_pybind.mu", "L866-L871"),
        "MLA-shaped varlen call (cu_seqlens_q given) without max_seqlen_q: `max_seqlen_q.value()` on an empty Optional",
        "Fix: pass max_seqlen_q with cu_seqlens_q."
    ),
    MLA_2_IS_INITED = site!(
        "musa.MLA-2.is_inited",
        MLA,
        TypeError,
        pattern "Mismatched type on argument #13 when calling: `{*}`. Expected `{*}` but got `{*}`",
        mha!("L929-L944"),
        "MLA-shaped call with a scheduler_metadata that is not a (workspace, bool) pair: `scheduler_metadata[1]` \
         is passed for the C++ `bool is_inited` (tvm-ffi argument conversion as for MLA-2; UNVERIFIED, not executed)",
        "Fix: for MLA pass scheduler_metadata=(workspace uint8 tensor, is_inited bool), or None under SGLang injection."
    ),
    MLA_2_ARG_TYPE = site!(
        "musa.MLA-2.arg-type",
        MLA,
        TypeError,
        pattern FFI_ARG,
        mha!("L929-L944"),
        "MLA-shaped call where tvm-ffi cannot convert an argument of dispatch_mla_impl_for_fa_interface \
         (csrc/mla_pybind.mu L852-L865), in parameter order: #6 softmax_scale (double: a number, not a NumPy bool \
         or a tensor), #7 causal (bool: an int or bool), #8 cu_seqlens_q (Optional tensor), #9 max_seqlen_q \
         (Optional int), #12 the workspace `scheduler_metadata[0]` (Optional tensor); the signature and type names in \
         the message are the installed tvm-ffi's",
        "Fix: softmax_scale a float, causal a bool, cu_seqlens_q a tensor, max_seqlen_q an int."
    ),
    MLA_4 = site!(
        "musa.MLA-4",
        MLA,
        RuntimeError,
        "Check failed: (workspace.has_value()) is false: workspace must be provided",
        mate!("csrc/mla_pybind.mu", "L874"),
        "MLA-shaped call without scheduler_metadata and no MLA injection (workspace = None)",
        "mate's MLA decode needs the (workspace, is_inited) pair SGLang's MLA backend injects. Fix: pass \
         scheduler_metadata=(torch.empty(128 << 20, dtype=torch.uint8, device='musa'), False)."
    ),
    MLA_5_DEVICE = site!(
        "musa.MLA-5.device",
        MLA,
        RuntimeError,
        "Check failed: (seqlens_k.value().device().device_type == kDLExtDev) is false: seqlens_k.value() must be a MUSA tensor",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed (is_inited False) and cache_seqlens is not on a MUSA device",
        "Fix: cache_seqlens on the MUSA device."
    ),
    MLA_5_CONTIGUOUS = site!(
        "musa.MLA-5.contiguous",
        MLA,
        RuntimeError,
        "Check failed: (seqlens_k.value().IsContiguous()) is false: seqlens_k.value() must be contiguous",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed and cache_seqlens is not contiguous",
        "Fix: `.contiguous()`."
    ),
    MLA_5_DTYPE = site!(
        "musa.MLA-5.dtype",
        MLA,
        RuntimeError,
        "Check failed: seqlens_k.value().dtype() == dl_int32 ({} vs. int32) : Inconsistency of Tensor type: seqlens_k.value()",
        mate!("csrc/mla_pybind.mu", "L731-L734"),
        "MLA metadata recomputed and cache_seqlens is not int32 (an int cache_seqlens was expanded to int32)",
        "Fix: `.to(torch.int32)`."
    ),
    MLA_6_DEVICE = site!(
        "musa.MLA-6.device",
        MLA,
        RuntimeError,
        "Check failed: ({}.device().device_type == kDLExtDev) is false: {} must be a MUSA tensor",
        mate!("csrc/mla_pybind.mu", "L325-L332"),
        "an MLA kernel input (qv, q, v_cache, k_cache, cache_seqlens, page_table as q_latent/q_nope, q_rope/q_pe, ckv, \
         kpe, seqlens_k, block_table) is not on a MUSA device (mla_with_kvcache; flash_mla_asm.mu L489-L496 for 128 heads)",
        "Fix: every MLA input on the MUSA device."
    ),
    MLA_6_DTYPE = site!(
        "musa.MLA-6.dtype",
        MLA,
        RuntimeError,
        "Check failed: (is_bf16_or_fp16_dtype(q_type)) is false: mla only supports fp16 and bf16",
        mate!("csrc/mla_pybind.mu", "L346"),
        "mla_with_kvcache (heads != 128): qv is not float16/bfloat16",
        "Fix: fp16/bf16 MLA inputs."
    ),
    MLA_6_SAME_DTYPE = site!(
        "musa.MLA-6.same-dtype",
        MLA,
        RuntimeError,
        "Check failed: (dtype_equal(q_rope.dtype(), q_type) && dtype_equal(ckv.dtype(), q_type) && dtype_equal(kpe.dtype(), q_type)) is false: input tensor dtypes must match",
        mate!("csrc/mla_pybind.mu", "L347-L349"),
        "mla_with_kvcache: q, v_cache or k_cache dtype differs from qv's",
        "Fix: one dtype for all MLA inputs."
    ),
    MLA_6_CONTIGUOUS = site!(
        "musa.MLA-6.contiguous",
        MLA,
        RuntimeError,
        "Check failed: ({}.IsContiguous()) is false: {} must be contiguous",
        mate!("csrc/mla_pybind.mu", "L351-L364"),
        "MLA kernel: cache_seqlens (seqlens_k, with reused metadata) or a varlen cu_seqlens_q is not contiguous \
         (mla_with_kvcache; flash_mla_asm.mu L510, L527)",
        "Fix: `.contiguous()`."
    ),
    MLA_6_INT32 = site!(
        "musa.MLA-6.int32",
        MLA,
        RuntimeError,
        "Check failed: {}.dtype() == dl_int32 ({} vs. int32) : Inconsistency of Tensor type: {}",
        mate!("csrc/mla_pybind.mu", "L354-L355"),
        "MLA kernel: cache_seqlens (seqlens_k, with reused metadata) or page_table (block_table) is not int32",
        "Fix: `.to(torch.int32)`."
    ),
    MLA_6_BLOCK_TABLE_STRIDE = site!(
        "musa.MLA-6.block-table-stride",
        MLA,
        RuntimeError,
        "Check failed: block_table.stride(-1) == 1 ({} vs. 1) : block_table must have contiguous last dimension",
        mate!("csrc/mla_pybind.mu", "L358"),
        "MLA kernel: page_table.stride(-1) != 1",
        "Fix: `.contiguous()`."
    ),
    MLA_6_RANK = site!(
        "musa.MLA-6.rank",
        MLA,
        RuntimeError,
        "Check failed: tensor.ndim() == static_cast<int32_t>(expected.size()) ({} vs. {}) : {} has unexpected rank",
        mate!("csrc/tvm_ffi_utils.hpp", "L77-L84"),
        "an MLA kernel input has the wrong rank (expect_shape; mla_with_kvcache L375-L392, flash_mla_asm L575-L597)",
        "Fix: q/qv 4-D (batch, seqlen, heads, d) or 3-D with cu_seqlens_q; caches (pages, 64, 1, d); cache_seqlens (batch,)."
    ),
    MLA_6_SHAPE = site!(
        "musa.MLA-6.shape",
        MLA,
        RuntimeError,
        "Check failed: tensor.size(dim) == value ({} vs. {}) : {} has unexpected shape at dim {}",
        mate!("csrc/tvm_ffi_utils.hpp", "L77-L84"),
        "an MLA kernel input has a wrong size (expect_shape), e.g. an int cache_seqlens expanded to the page count",
        "Fix: cache_seqlens (batch,), page_table (batch, pages), caches (pages, 64, 1, 512/64), q heads equal to qv heads."
    ),
    MLA_6_PAGE_SIZE = site!(
        "musa.MLA-6.page-size",
        MLA,
        RuntimeError,
        "Check failed: page_size == 64 ({} vs. 64) : page size only supports 64",
        mate!("csrc/mla_pybind.mu", "L404"),
        "mla_with_kvcache: the paged cache's page size (v_cache.shape[1]) is not 64",
        "mate's MLA kernel supports page size 64 only. Fix: allocate the MLA KV pool with page_size=64."
    ),
    MLA_7_DIM = site!(
        "musa.MLA-7.dim",
        MLA,
        RuntimeError,
        "Check failed: {}.ndim() == {} ({} vs. {}) : {} must be a {}D tensor",
        mate!("csrc/flash_mla_asm.mu", "L517-L532"),
        "flash_mla_asm (128 heads): cache_seqlens not 1-D, page_table not 2-D, or q/qv not 4-D (3-D with cu_seqlens_q)",
        "Fix: qv (batch, seqlen, 128, 512) and q (batch, seqlen, 128, 64), or 3-D with cu_seqlens_q."
    ),
    MLA_7_SAME_DTYPE = site!(
        "musa.MLA-7.same-dtype",
        MLA,
        RuntimeError,
        "Check failed: (dtype_equal(q_nope.dtype(), q_pe.dtype()) && dtype_equal(q_nope.dtype(), ckv.dtype()) && dtype_equal(q_nope.dtype(), kpe.dtype())) is false: q_nope, q_pe, ckv and kpe must have the same dtype",
        mate!("csrc/flash_mla_asm.mu", "L539-L541"),
        "flash_mla_asm (128 heads): q, v_cache or k_cache dtype differs from qv's",
        "Fix: one dtype for all MLA inputs."
    ),
    MLA_7_DTYPE = site!(
        "musa.MLA-7.dtype",
        MLA,
        RuntimeError,
        "Check failed: (is_bf16_or_fp16_dtype(q_nope.dtype())) is false: flash_mla_asm only supports fp16 and bf16",
        mate!("csrc/flash_mla_asm.mu", "L542"),
        "flash_mla_asm (128 heads): MLA inputs are not float16/bfloat16",
        "Fix: fp16/bf16 MLA inputs."
    ),
    MLA_7_HEADDIM_V = site!(
        "musa.MLA-7.headdim-v",
        MLA,
        RuntimeError,
        "Check failed: args.headdim_v == 512 ({} vs. 512) : flash_mla_asm() headdim_v must be 512",
        mate!("csrc/flash_mla_asm.mu", "L563"),
        "flash_mla_asm (128 heads): v_cache's last dim is not 512 (routing looked at qv only)",
        "Fix: the latent cache (v_cache) has last dim 512."
    ),
    MLA_7_HEADS = site!(
        "musa.MLA-7.heads",
        MLA,
        RuntimeError,
        "Check failed: q_nope.size(-2) == q_pe.size(-2) ({} vs. {}) : q_nope and q_pe head counts must match",
        mate!("csrc/flash_mla_asm.mu", "L567"),
        "flash_mla_asm (128 heads): q has another head count than qv",
        "Fix: q (rope part) and qv (latent part) have the same heads."
    ),
}
