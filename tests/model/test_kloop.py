"""SGLang's ROCm build multiplies block-FP8 dense layers with aiter's Triton
gemm_a8w8_blockscale, whose one gfx942 config before aiter v0.1.11 (BLOCK_SIZE_M/N/K 128,
NUM_KSPLIT 1) gives each 128 x 128 output tile to one workgroup that walks all of K in
128-deep blocks: a decode GEMM takes ceil(K / 128) x the time of one block (model/kloop.py).
Expectations derived by hand below from DeepSeek-V3's config (hidden 7168, q_lora_rank 1536,
kv_lora_rank 512 + rope 64, 128 heads of 128 (v) and 192 (qk), dense intermediate 18432,
3 dense + 58 MoE layers) at TP 8."""

from dataclasses import replace

import pytest

from decodescope.arch import MoE, load_arch
from decodescope.model import make_deployment
from decodescope.model.engines import Backend, get_engine
from decodescope.model.kloop import gemm_calls, k_loop_excess_s
from decodescope.model.predict import estimates

ARCH = load_arch("deepseek-v3")
DENSE, SPARSE = ARCH.layers[0], ARCH.layers[3]
FP8 = make_deployment(ARCH, "mi300x", engine="sglang", tp=8).weights


def _calls(layer) -> dict[str, tuple[int, list[str]]]:
    ts = layer.tensors()
    moe = layer.mlp if isinstance(layer.mlp, MoE) else None
    return {lead: (blocks, [ts[i].name for i in idx]) for lead, (blocks, idx) in gemm_calls(ts, FP8, moe, 8, False).items()}


def test_deepseek_v3_moe_layer_makes_three_dense_fp8_calls():
    """q_a_proj and kv_a_proj_with_mqa are one GEMM (SGLang's fused_qkv_a_proj_with_mqa) over
    K = hidden 7168: 56 blocks; q_b_proj over K = q_lora_rank 1536: 12; o_proj is row-split,
    K = 128 heads x 128 / 8 = 2048: 16. kv_b_proj is absorbed at decode, the routed experts run
    in the MoE kernel, and so does the shared expert (256 routed + 1 shared of the routed width)."""
    assert _calls(SPARSE) == {"q_a_proj": (56, ["q_a_proj", "kv_a_proj_with_mqa"]),
                              "q_b_proj": (12, ["q_b_proj"]), "o_proj": (16, ["o_proj"])}


def test_deepseek_v3_dense_layer_adds_its_mlp():
    """gate and up are one GEMM (MergedColumnParallelLinear) over K = 7168: 56 blocks; down is
    row-split, K = 18432 / 8 = 2304: 18 blocks."""
    calls = _calls(DENSE)
    assert calls["gate_proj"] == (56, ["gate_proj", "up_proj"])
    assert calls["down_proj"] == (18, ["down_proj"])
    assert len(calls) == 5


def test_a_call_pays_its_k_loop_beyond_its_bytes_only():
    """At 2 us per block and no roofline time the MoE layer's calls take (56 + 12 + 16) x 2
    = 168 us; where q_a and kv_a already take 150 + 10 us, above their 112 us loop, that call
    adds nothing: (12 + 16) x 2 = 56 us."""
    ts = SPARSE.tensors()
    zero = [0.0] * len(ts)
    assert k_loop_excess_s(ts, zero, FP8, SPARSE.mlp, 8, 2e-6) == pytest.approx(168e-6)
    slow = [150e-6 if t.name == "q_a_proj" else 10e-6 if t.name == "kv_a_proj_with_mqa" else 0.0 for t in ts]
    assert k_loop_excess_s(ts, slow, FP8, SPARSE.mlp, 8, 2e-6) == pytest.approx(56e-6)
    assert k_loop_excess_s(ts, zero, FP8, SPARSE.mlp, 8, 0.0) == 0.0


def test_only_sglangs_rocm_build_walks_k():
    """engines.toml serving.sglang by_backend.hip sets the block time; the CUDA build's kernels
    split K (DeepGEMM / CUTLASS), and other engines set nothing."""
    sglang = get_engine("sglang")
    assert sglang.on(Backend.HIP).fp8_gemm_us_per_k_block == pytest.approx(1.96)
    assert sglang.on(Backend.CUDA).fp8_gemm_us_per_k_block == 0.0
    assert get_engine("vllm").on(Backend.HIP).fp8_gemm_us_per_k_block == 0.0


def test_the_block_time_is_the_measured_saving_per_block():
    """aiter PR 1930 (MI300X, SGLang, DeepSeek-R1, concurrency 4): a tuned config for the one
    shape N=2112, K=7168 cut the median TPOT from 28.76 to 22.05 ms; that GEMM runs once in
    each of the 61 layers and walks 7168 / 128 = 56 blocks: 6.71 ms / 61 / 56 = 1.964 us per
    block (a lower bound: the tuned kernel's own time is not in the saving)."""
    assert (28.76 - 22.05) / 61 / 56 * 1e3 == pytest.approx(1.96, abs=0.005)


def test_deepseek_v3_on_mi300x_pays_the_k_loops_once_per_call():
    """Test profile: bandwidth 5.3 TB/s x 0.8 x fp8 0.5 = 2.12 TB/s. Per layer the MLA calls
    read q_a + kv_a (1536 + 576) x 7168 = 15,138,816 B in 7.1410 us, q_b 3072 x 1536 =
    4,718,592 B in 2.2258 us and o_proj 7168 x 2048 = 14,680,064 B in 6.9246 us, against
    loops of 56, 12 and 16 x 1.96 = 109.76, 23.52 and 31.36 us: 102.619 + 21.294 + 24.435
    = 148.348 us, x 61 layers = 9049.2 us. Each dense layer's MLP reads gate + up 2 x 2304 x
    7168 = 33,030,144 B in 15.5803 us and down 7168 x 2304 = 16,515,072 B in 7.7901 us against
    109.76 and 18 x 1.96 = 35.28 us: 94.180 + 27.490 = 121.670 us, x 3 = 365.0 us. In all
    9414.2 us more in the kernels row than without the block time; the weights row stays."""
    d = make_deployment(ARCH, "mi300x", engine="sglang", tp=8, batch=1, context=512)
    base = replace(d.engine, bw_efficiency=0.8, format_efficiency={"fp8": 0.5}, by_backend={})
    walk = replace(base, by_backend={"hip": {"fp8_gemm_us_per_k_block": 1.96}})
    with_loops, without = (estimates(ARCH, replace(d, engine=e))[1] for e in (walk, base))
    assert with_loops.ms("kernels") - without.ms("kernels") == pytest.approx(9.4142, rel=1e-4)
    assert with_loops.ms("weights") == pytest.approx(without.ms("weights"), rel=1e-12)
