"""Kernel classes for real kernel names, the traps included.

Names as they appear in traces and source, each with where it was read:
vLLM docs nsys output (FA3, sm90_xmma, act_and_mul, fused_add_rms_norm), SGLang report
tables (nvjet, ncclDevKernel, one-shot push allreduce), vllm csrc/custom_all_reduce.cuh,
flashinfer include/flashinfer/comm/trtllm_allreduce_fusion.cuh and norm/sampling kernels,
fla-org/flash-linear-attention, state-spaces/mamba, Dao-AILab/causal-conv1d, the Triton
MoE kernel of vLLM/SGLang, AMD TraceLens's classify_kernels.py (Cijk_, wvSplitK), HTA test
traces (ncclKernel_*, cutlass 2.x GEMMs), and the H200 traces in tests/data/h200.
"""

import pytest

from decodescope.trace.classify import KernelClass as K
from decodescope.trace.classify import classify

CASES = [
    # trap: FlashAttention-3 lives inside cutlass::device_kernel
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
     "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >", K.ATTENTION),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>>>", K.GEMM),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t>>",
     K.ATTENTION),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, (unsigned int)2>", K.ATTENTION),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0", K.ATTENTION),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16H128PagedKvCausalP64VarSeqQ128Kv128PersistentContext", K.ATTENTION),
    # trap: std::enable_if prefix instead of void
    ("std::enable_if<T2>(int)0&&vllm::_typeConvert<T1>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>",
     K.NORM_ACT_ROPE),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, unsigned int)",
     K.NORM_ACT_ROPE),
    # trap: a CuTe-DSL norm whose name contains "cutlass"
    ("kernel_cutlass_kernel_flashinfernormkernelsfused_add_rmsnormFusedAddRMSNormKernel_object_at__0x7f", K.NORM_ACT_ROPE),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, (bool)1>(T1 *, const T1 *, int)",
     K.NORM_ACT_ROPE),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, (bool)1>", K.NORM_ACT_ROPE),
    # trap: fused allreduce + residual + RMSNorm is communication
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::trtllm_allreduce_fusion"
     "::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, false>", K.ALLREDUCE),
    # custom allreduce: vLLM (and SGLang, which keeps namespace vllm), SGLang JIT, TensorRT-LLM, torch symm-mem
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*)",
     K.ALLREDUCE),
    ("void (anonymous namespace)::all_reduce_one_shot_push_kernel<__nv_bfloat16, 8u, true>((anonymous namespace)::"
     "AllReducePushData, device::distributed::PushController)", K.ALLREDUCE),
    ("oneShotAllReduceKernel", K.ALLREDUCE),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, 2>", K.ALLREDUCE),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", K.ALLREDUCE),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", K.ALLREDUCE),
    ("ncclDevKernel_AllGather_RING_LL", K.COLLECTIVE),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", K.COLLECTIVE),
    # linear attention: GDN / FLA / Mamba / causal conv1d
    ("fused_recurrent_gated_delta_rule_fwd_kernel", K.LINEAR_ATTENTION),
    ("fused_sigmoid_gating_delta_rule_update_kernel", K.LINEAR_ATTENTION),
    ("chunk_gated_delta_rule_fwd_kernel_h_blockdim64", K.LINEAR_ATTENTION),
    ("_causal_conv1d_update_kernel", K.LINEAR_ATTENTION),
    ("void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16> >",
     K.LINEAR_ATTENTION),
    ("void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<32, 4, 1, true, true, c10::BFloat16> >",
     K.LINEAR_ATTENTION),
    ("_selective_scan_update_kernel", K.LINEAR_ATTENTION),
    # MoE
    ("fused_moe_kernel", K.MOE_GEMM),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, "
     "int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized, "
     "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>>>", K.MOE_GEMM),
    ("void vllm::moe::topk_softmax_kernel<8, 64>", K.MOE_ROUTING),
    ("void moe_align_block_size_kernel<int>", K.MOE_ROUTING),
    # GEMM: cuBLAS, CUTLASS 2.x, AMD hipBLASLt / Tensile, skinny GEMV
    ("nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT", K.GEMM),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off", K.GEMM),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_256x64)",
     K.GEMM),
    ("Cijk_Alik_Bljk_BBS_BH_MT64x16x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0", K.GEMM),
    ("void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 4, 1>", K.GEMM),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>", K.GEMM),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>", K.GEMM),
    # sampling
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2>", K.SAMPLING),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<float>>>",
     K.SAMPLING),
    # copies, fills, generic
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::"
     "OpaqueType<2u>, unsigned int, 4, 128, 1, 16, 16>", K.MEMCPY),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>", K.ATTENTION),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char*, 3ul> >", K.ELEMENTWISE),
    ("triton_poi_fused_add_cos_sin_0", K.ELEMENTWISE),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>", K.UNKNOWN),
]


@pytest.mark.parametrize("name, want", CASES, ids=[c[0][:40] for c in CASES])
def test_kernel_classes(name, want):
    assert classify(name) is want


def test_memcpy_and_memset_by_category():
    assert classify("Memcpy DtoD (Device -> Device)", "gpu_memcpy") is K.MEMCPY
    assert classify("Memset (Device)", "gpu_memset") is K.MEMSET
