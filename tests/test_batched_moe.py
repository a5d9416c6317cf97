"""llama.cpp's CUDA backend multiplies a MoE layer's routed experts with its mat-vec kernel
(MMVQ) only for one token per pass and with its tiled matrix kernel (MMQ) from two tokens on
(ggml/src/ggml-cuda/ggml-cuda.cu, ggml_cuda_mul_mat_id: 'if (ne2 == 1) { ...
ggml_cuda_mul_mat_vec_q ...; return; } if (ggml_cuda_should_use_mmq(src0->type, cc, ne12))
{ ggml_cuda_mul_mat_q(ctx, src0, src1, ids, dst); return; }', builds of late 2025). The
profile's moe_batched_ms_per_gb / moe_batched_us_per_token price that second kernel; the
experts it reads stay the routed ones. Expectations derived by hand below."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.engines import get_engine
from decodescope.model.predict import estimates

# Qwen3-30B-A3B: 48 MoE layers, 128 experts of which 8 per token, each expert a gate, up and
# down projection of 2048 x 768 = 3 x 1,572,864 = 4,718,592 parameters; Q8_0 stores 8.5 bits
# per weight (32 int8 + one fp16 scale per 32): 4,718,592 x 8.5 / 8 = 5,013,504 bytes
EXPERT_BYTES = 3 * 2048 * 768 * 8.5 / 8
LAYERS = 48
MS_PER_GB, US_PER_TOKEN = 5.0, 40.0  # a test profile's prices, not the fitted ones


def _rounds(batch: int, same_tokens: bool, engine: str = "llamacpp") -> tuple[float, float, float]:
    """(expected ms with the prices, expected ms without them, ceiling ms)."""
    arch = load_arch("qwen3-30b-a3b")
    d = make_deployment(arch, "gb10", weights="q8_0", engine=engine, batch=batch, context=512,
                        same_tokens=same_tokens)
    priced = replace(d.engine, moe_batched_ms_per_gb=MS_PER_GB, moe_batched_us_per_token=US_PER_TOKEN)
    free = replace(d.engine, moe_batched_ms_per_gb=0.0, moe_batched_us_per_token=0.0)
    ceiling, with_prices = estimates(arch, replace(d, engine=priced))
    without = estimates(arch, replace(d, engine=free))[1]
    return with_prices.round_ms, without.round_ms, ceiling.round_ms


def test_one_token_per_pass_stays_on_the_mat_vec_kernel():
    priced, free, _ = _rounds(1, False)
    assert priced == pytest.approx(free)


def test_identical_requests_pay_for_the_experts_of_one_request():
    """Batch 2 of identical requests: the router picks the same 8 experts for both, so per
    layer 8 x 5,013,504 = 40,108,032 bytes at 5 ms per GB (5e-12 s per byte) = 200.540 us,
    plus 2 tokens x 40 us = 80 us: 280.540 us x 48 layers = 13.466 ms more per step."""
    priced, free, _ = _rounds(2, True)
    per_layer_us = 8 * EXPERT_BYTES * MS_PER_GB * 1e-12 * 1e6 + 2 * US_PER_TOKEN
    assert per_layer_us == pytest.approx(280.540, abs=1e-3)
    assert priced - free == pytest.approx(LAYERS * per_layer_us / 1e3, rel=1e-9)
    assert priced - free == pytest.approx(13.466, abs=1e-3)


def test_distinct_requests_pay_for_every_expert_they_touch():
    """Batch 2 of distinct requests touches 128 x (1 - (120/128)^2) = 128 x 0.12109375 =
    15.5 experts per layer: 15.5 x 5,013,504 = 77,709,312 bytes = 388.547 us at 5 ms per GB,
    + 80 us for the 2 tokens = 468.547 us x 48 layers = 22.490 ms."""
    priced, free, _ = _rounds(2, False)
    assert priced - free == pytest.approx(LAYERS * (15.5 * EXPERT_BYTES * 5e-12 * 1e6 + 80) / 1e3, rel=1e-9)
    assert priced - free == pytest.approx(22.490, abs=1e-3)


def test_the_ceiling_and_other_engines_do_not_pay():
    """The ceiling has no fixed costs; an engine without a batched MoE kernel switch
    (moe_matvec_max_tokens 0, e.g. vLLM's fused MoE) is unchanged by the prices."""
    assert get_engine("llamacpp").moe_matvec_max_tokens == 1
    assert get_engine("vllm").moe_matvec_max_tokens == 0
    _, _, ceiling_llama = _rounds(2, False)
    priced, free, ceiling_vllm = _rounds(2, False, engine="vllm")
    assert priced == pytest.approx(free)
    assert ceiling_llama == pytest.approx(ceiling_vllm)
