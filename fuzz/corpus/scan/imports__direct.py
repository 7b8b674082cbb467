# Every import form of the known entry points.
import flash_attn
import flash_attn.flash_attn_interface as fa2_interface
import flash_attn_3.flash_attn_interface as fa3_package
import hopper.flash_attn_interface as hopper_interface
import mate
import mate.mha_interface as mi
import sgl_kernel.flash_attn
import sgl_kernel.flash_attn as sgl_mod
import vllm.vllm_flash_attn as vllm_fa
from flash_attn_3.interface import flash_attn_with_kvcache as wrapper_fa
from flash_attn_interface import flash_attn_with_kvcache as fa3_fa
from sgl_kernel import flash_attn as sgl_submodule
from sgl_kernel.flash_attn import flash_attn_with_kvcache
from sgl_kernel.flash_attn import flash_attn_with_kvcache as fa
from sglang.jit_kernel.flash_attention import flash_attn_with_kvcache as dispatcher
from sglang.kernels.ops.attention import flash_attention as kernel_ops
from vllm_flash_attn import flash_attn_with_kvcache as vllm_standalone


def calls(q, k, v, md):
    flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
    fa(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
    sgl_mod.flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
    sgl_kernel.flash_attn.flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
    sgl_submodule.flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sgl-kernel
    dispatcher(q, k, v, scheduler_metadata=md)  # call: sglang-dispatcher
    kernel_ops.flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sglang-dispatcher
    fa3_fa(q, k, v)  # call: fa3
    fa3_package.flash_attn_with_kvcache(q, k, v)  # call: fa3
    hopper_interface.flash_attn_with_kvcache(q, k, v)  # call: fa3
    wrapper_fa(q, k, v)  # call: mate-fa3-wrapper
    mate.flash_attn_with_kvcache(q, k, v)  # call: mate
    mi.flash_attn_with_kvcache(q, k, v)  # call: mate
    flash_attn.flash_attn_with_kvcache(q, k, v)  # call: fa2
    fa2_interface.flash_attn_with_kvcache(q, k, v)  # call: fa2
    vllm_fa.flash_attn_with_kvcache(q, k, v)  # call: vllm-flash-attn
    vllm_standalone(q, k, v)  # call: vllm-flash-attn


def lazy(q, k, v, md):
    from sglang.srt.hardware_backend.musa.attention import flashattention_backend as musa

    return musa.flash_attn_with_kvcache(q, k, v, scheduler_metadata=md)  # call: sglang-musa


alias = fa3_fa


def through_assignment(q, k, v):
    return alias(q, k, v)  # call: fa3
