"""llama.cpp's CUDA backend multiplies a MoE layer's routed experts with its mat-vec kernel
(MMVQ) only for one token per pass and with its tiled matrix kernel (MMQ) from two tokens on
(ggml/src/ggml-cuda/ggml-cuda.cu, ggml_cuda_mul_mat_id: 'if (ne2 == 1) { ...
ggml_cuda_mul_mat_vec_q ...; return; } if (ggml_cuda_should_use_mmq(src0->type, cc, ne12))
{ ggml_cuda_mul_mat_q(ctx, src0, src1, ids, dst); return; }', builds of late 2025;
https://github.com/ggml-org/llama.cpp/pull/18958: 'for batch_sizes > 1, we immediately move
to mmq'). The profile's moe_batched_slowdown / _per_token price that second kernel as a
multiple of the mat-vec kernel's time for the same experts. Current builds take the mat-vec
kernel further (engines.toml serving.llamacpp): these tests run the 2025 build's switch at one
token (Deployment.moe_matvec_max_tokens = 1), as the DGX Spark rows do. Expectations derived by hand."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.model.engines import Backend, get_engine
from decodescope.model.predict import estimates

# Qwen3-30B-A3B: 48 MoE layers, 128 experts of which 8 per token, each expert a gate, up and
# down projection of 2048 x 768 = 3 x 1,572,864 = 4,718,592 parameters; Q8_0 stores 8.5 bits
# per weight (32 int8 + one fp16 scale per 32): 4,718,592 x 8.5 / 8 = 5,013,504 bytes
EXPERT_BYTES = 3 * 2048 * 768 * 8.5 / 8
LAYERS = 48
# a test profile: the GB10's 273 GB/s at 0.8 for Q8_0 kernels = 218.4 GB/s; the tiled kernel
# 1.0 slower than the mat-vec one, and 0.25 more per token each touched expert multiplies
BW = 273e9 * 0.8
SLOWDOWN, PER_TOKEN = 1.0, 0.25


def _estimates(batch: int, same_tokens: bool, engine: str = "llamacpp"):
    """(expected with the slowdowns, expected without them, ceiling) estimates: the GB10 runs CUDA."""
    arch = load_arch("qwen3-30b-a3b")
    d = make_deployment(arch, "gb10", weights="q8_0", engine=engine, batch=batch, context=512,
                        same_tokens=same_tokens)
    d = replace(d, moe_matvec_max_tokens=1)
    base = replace(d.engine, memory_efficiency={"lpddr": 0.8}, format_efficiency={"q8_0": 1.0})
    priced = replace(base, moe_batched_slowdown=SLOWDOWN, moe_batched_slowdown_per_token=PER_TOKEN)
    free = replace(base, moe_batched_slowdown=0.0, moe_batched_slowdown_per_token=0.0)
    ceiling, with_slowdown = estimates(arch, replace(d, engine=priced))
    without = estimates(arch, replace(d, engine=free))[1]
    return with_slowdown, without, ceiling


def _rounds(batch: int, same_tokens: bool, engine: str = "llamacpp") -> tuple[float, float, float]:
    """(expected ms with the slowdowns, expected ms without them, ceiling ms)."""
    return tuple(e.round_ms for e in _estimates(batch, same_tokens, engine))


def test_one_token_per_pass_stays_on_the_mat_vec_kernel():
    priced, free, _ = _rounds(1, False)
    assert priced == pytest.approx(free)


def test_identical_requests_pay_for_the_experts_of_one_request():
    """Batch 2 of identical requests: the router sends both to the same 8 experts, so the
    mat-vec kernel would read 8 x 5,013,504 = 40,108,032 bytes per layer in 40,108,032 /
    218.4e9 s = 183.645 us; each expert multiplies both tokens (2 x 8 / 8 = 2), so the tiled
    kernel adds 183.645 x (1.0 + 0.25 x 2) = 275.468 us per layer, x 48 = 13.222 ms per step."""
    priced, free, _ = _rounds(2, True)
    read_us = 8 * EXPERT_BYTES / BW * 1e6
    assert read_us == pytest.approx(183.645, abs=1e-3)
    assert priced - free == pytest.approx(LAYERS * read_us * (SLOWDOWN + PER_TOKEN * 2) / 1e3, rel=1e-9)
    assert priced - free == pytest.approx(13.222, abs=1e-3)


def test_the_slower_reads_count_as_weight_stream_time():
    """The tiled kernel reads the same bytes for longer: the weights row takes the time
    (its bytes unchanged), so its effective GB/s drops; the kernel floors stay as they are."""
    slow, fast, _ = _estimates(2, True)
    assert slow.ms("weights") - fast.ms("weights") == pytest.approx(slow.round_ms - fast.round_ms, rel=1e-9)
    assert slow.ms("kernels") == pytest.approx(fast.ms("kernels"))
    assert next(c.bytes for c in slow.breakdown if c.component == "weights") == pytest.approx(
        next(c.bytes for c in fast.breakdown if c.component == "weights"))


def test_distinct_requests_pay_per_call_not_per_expert_touched():
    """Batch 2 of distinct requests touches 128 x (1 - (120/128)^2) = 128 x 0.12109375 =
    15.5 experts per layer (read in weight_ops); the tiled kernel's extra is priced on one
    token's 8 experts, 183.645 us, with 2 x 8 / 15.5 = 1.0323 tokens per touched expert:
    183.645 x (1.0 + 0.25 x 1.0323) = 231.038 us per layer, x 48 = 11.090 ms."""
    priced, free, _ = _rounds(2, False)
    read_us = 8 * EXPERT_BYTES / BW * 1e6
    assert priced - free == pytest.approx(LAYERS * read_us * (SLOWDOWN + PER_TOKEN * 16 / 15.5) / 1e3, rel=1e-9)
    assert priced - free == pytest.approx(11.090, abs=1e-3)


def test_the_ceiling_and_other_engines_do_not_pay():
    """The ceiling has no fixed costs; an engine without a batched MoE kernel switch
    (no backends, e.g. vLLM's fused MoE) is unchanged by the slowdowns."""
    llama = get_engine("llamacpp")
    limits = {b.value: llama.on(b).moe_matvec_max_tokens for b in Backend}
    assert limits == {"cuda": 8, "hip": 4, "vulkan": 8, "metal": 31}
    assert get_engine("vllm").moe_matvec_max_tokens == 0
    _, _, ceiling_llama = _rounds(2, False)
    priced, free, ceiling_vllm = _rounds(2, False, engine="vllm")
    assert priced == pytest.approx(free)
    assert ceiling_llama == pytest.approx(ceiling_vllm)


def test_the_output_says_when_the_batched_kernel_runs():
    """A note names the backend, the switch and the profile's factors where it applies (MoE,
    more tokens per pass than current CUDA builds' mat-vec limit of 8), and only there."""
    arch = load_arch("qwen3-30b-a3b")
    cuda = get_engine("llamacpp").moe_batched_slowdown

    def notes(a, batch):
        d = make_deployment(a, "gb10", weights="q8_0", engine="llamacpp", batch=batch)
        return [n for n in predict(a, d).notes if "batched kernel" in n]

    note = notes(arch, 9)
    assert len(note) == 1 and f"adds {cuda:g}x" in note[0] and "(9 here)" in note[0] and "(cuda)" in note[0]
    assert "above 8 token(s)" in note[0]
    assert not notes(arch, 8)
    assert not notes(load_arch("qwen3-8b"), 9)
