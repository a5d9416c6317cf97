"""The K loop of a dense FP8 GEMM that gives each output tile to one workgroup.

SGLang's ROCm build multiplies block-FP8 dense layers with aiter's Triton
gemm_a8w8_blockscale (engines.toml serving.sglang fields_source). With aiter's one gfx942
config of before v0.1.11 (BLOCK_SIZE_M/N/K 128, NUM_KSPLIT 1) the kernel launches one
workgroup per 128 x 128 output tile, and each walks all of K in 128-deep blocks, one after
another. A decode GEMM has a few dozen tiles on a GPU of hundreds of compute units, so its
time is the walk: ceil(K / 128) blocks x the time of one block, whatever its bytes. The time
of one block is engine-profile data (EngineProfile.fp8_gemm_us_per_k_block, with its source)."""

from __future__ import annotations

from math import ceil

from decodescope.arch import MoE, Tensor
from decodescope.model.formats import WeightFormat

K_BLOCK = 128  # BLOCK_SIZE_K of the config, = the checkpoint's 128 x 128 weight-scale block
# tensors SGLang multiplies in one GEMM with the first of their group (one input, outputs side by
# side): DeepSeek's fused_qkv_a_proj_with_mqa, QKVParallelLinear, MergedColumnParallelLinear
FUSED_WITH = {"kv_a_proj_with_mqa": "q_a_proj", "k_proj": "q_proj", "v_proj": "q_proj", "up_proj": "gate_proj"}
# absorbed into the MLA decode kernel's batched matmuls (w_kc, w_vc), not a dense linear call
NOT_A_CALL = ("kv_b_proj",)


def fused_shared_expert(moe: MoE | None) -> bool:
    """SGLang runs DeepSeek-V3/R1's one shared expert inside the MoE kernel (257 experts,
    top 9) on gfx942 and later (deepseek_v2.py determine_num_fused_shared_experts: 256
    routed experts and one shared one, whose width is a routed expert's)."""
    return bool(moe and moe.num_experts == 256 and moe.shared_expert_intermediate_size == moe.moe_intermediate_size)


def gemm_calls(tensors, fmt: WeightFormat, moe: MoE | None, tp: int, mtp: bool) -> dict[str, tuple[int, list[int]]]:
    """The dense FP8 GEMM calls of a layer: lead tensor -> (K blocks per rank, indices of
    the tensors it multiplies). Experts, 16-bit tensors and absorbed ones make no call."""
    calls: dict[str, tuple[int, list[int]]] = {}
    for i, t in enumerate(tensors):
        if not _dense_fp8(t, fmt, moe, mtp):
            continue
        lead = FUSED_WITH.get(t.name, t.name)
        k = t.shape[1] // (tp if t.shard == "row" else 1)  # the input a row split divides
        calls.setdefault(lead, (ceil(k / K_BLOCK), []))[1].append(i)
    return calls


def _dense_fp8(t: Tensor, fmt: WeightFormat, moe: MoE | None, mtp: bool) -> bool:
    if not t.linear or t.experts > 1 or t.name in NOT_A_CALL or len(t.shape) != 2:
        return False
    if t.name.startswith("shared_expert") and fused_shared_expert(moe):
        return False
    return fmt.tensor_format(t, mtp).kernel == "fp8"


def k_loop_excess_s(tensors, weight_time_s: list[float], fmt: WeightFormat, moe: MoE | None, tp: int,
                    k_block_s: float, mtp: bool = False) -> float:
    """Seconds the dense FP8 GEMM calls' K loops take beyond their tensors' roofline time
    (weight_time_s, one per tensor): per call max(0, K blocks x k_block_s - their sum)."""
    if not k_block_s:
        return 0.0
    return sum(max(0.0, blocks * k_block_s - sum(weight_time_s[i] for i in idx))
               for blocks, idx in gemm_calls(tensors, fmt, moe, tp, mtp).values())
