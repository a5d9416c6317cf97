"""llama.cpp's Metal backend multiplies a MoE layer's experts below 32 tokens per pass with
mul_mv_id, which dispatches one mat-vec per (token, routed expert) pair ('const int64_t ne123
= ne20*ne21;' threadgroup slices of one column each in ggml_metal_op_mul_mat_id,
ggml-org/ggml src/ggml-metal/ggml-metal-ops.cpp): an expert routed to by several tokens is read
once per token, not once per pass (engines.toml serving.llamacpp by_backend.metal
moe_matvec_per_pair), and reaches a share of its format's bandwidth of its own (engine.llamacpp
by_backend.metal moe_matvec_efficiency). Expectations derived by hand below."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.engines import Backend, get_engine
from decodescope.model.predict import estimates

ARCH = load_arch("qwen3-30b-a3b")  # 48 MoE layers, 128 experts, 8 per token
# one expert (gate, up, down of 2048 x 768) in Q8_0 (8.5 bits per weight): 3 x 1,572,864 x 8.5 / 8
EXPERT_BYTES = 3 * 2048 * 768 * 8.5 / 8
LAYERS = 48


def _weights_gb(batch: int, same_tokens: bool, per_pair: bool) -> tuple[float, float]:
    """(expected, ceiling) weight bytes per round (GB) on an M2 Ultra (Metal), with the Metal
    mat-vec kernel's per-pair reads on or off."""
    d = make_deployment(ARCH, "m2-ultra", weights="q8_0", engine="llamacpp", batch=batch, context=512,
                        same_tokens=same_tokens)
    metal = {**d.engine.by_backend.get("metal", {}), "moe_matvec_per_pair": per_pair}
    d = replace(d, engine=replace(d.engine, by_backend={**d.engine.by_backend, "metal": metal}))
    ceiling, expected = estimates(ARCH, d)
    return tuple(next(c.bytes for c in e.breakdown if c.component == "weights") for e in (expected, ceiling))


def test_only_metal_reads_per_pair():
    llama = get_engine("llamacpp")
    assert {b.value: llama.on(b).moe_matvec_per_pair for b in Backend} == {
        "cuda": False, "hip": False, "vulkan": False, "metal": True}


def test_distinct_requests_read_an_expert_per_token():
    """Batch 4 of distinct requests: 4 x 8 = 32 expert reads per layer through mul_mv_id, where
    one read per distinct expert would be 128 x (1 - (120/128)^4) = 128 x (1 - 0.7724761962890625)
    = 29.123046875 experts; the difference, 2.876953125 experts x 5,013,504 bytes = 14,423,616
    bytes per layer, x 48 layers = 692,333,568 bytes = 0.692 GB more in the expected round; the ceiling (a kernel that shares the
    reads) is unchanged."""
    on, ceiling_on = _weights_gb(4, False, True)
    off, ceiling_off = _weights_gb(4, False, False)
    assert on - off == pytest.approx((32 - 128 * (1 - (120 / 128) ** 4)) * EXPERT_BYTES * LAYERS, rel=1e-9)
    assert on - off == pytest.approx(692_333_568, rel=1e-9)
    assert ceiling_on == pytest.approx(ceiling_off)


def test_identical_requests_still_read_per_token():
    """Batch 4 of identical requests routes every token to the same 8 experts, but mul_mv_id
    does not merge the pairs: 32 reads, not 8; 24 x 5,013,504 x 48 = 5,775,556,608 bytes more."""
    on, _ = _weights_gb(4, True, True)
    off, _ = _weights_gb(4, True, False)
    assert on - off == pytest.approx(24 * EXPERT_BYTES * LAYERS, rel=1e-9)
    assert on - off == pytest.approx(5_775_556_608, rel=1e-9)


def test_the_tiled_kernel_from_32_tokens_reads_each_expert_once():
    """Batch 32 is past Metal's mat-vec limit of 31: mul_mm_id groups the tokens per expert, so
    the per-pair flag changes nothing there."""
    on, _ = _weights_gb(32, False, True)
    off, _ = _weights_gb(32, False, False)
    assert on == pytest.approx(off)


def _weights_ms(efficiency: float, weights: str = "q8_0") -> float:
    """Expected weights time of one batch-1 round (ms) on an M2 Ultra (Metal) with the MoE
    mat-vec kernel at `efficiency` of its format's bandwidth."""
    d = make_deployment(ARCH, "m2-ultra", weights=weights, engine="llamacpp", batch=1, context=512)
    metal = {**d.engine.by_backend.get("metal", {}), "moe_matvec_efficiency": efficiency}
    d = replace(d, engine=replace(d.engine, by_backend={**d.engine.by_backend, "metal": metal}))
    _, expected = estimates(ARCH, d)
    return next(c.ms for c in expected.breakdown if c.component == "weights")


def test_the_moe_matvec_share_slows_the_routed_experts_only():
    """At batch 1 a round reads 8 experts x 48 layers x 5,013,504 bytes = 1,925,185,536 bytes of
    routed experts. At half the share they take twice as long: 1,925,185,536 B / (800 GB/s x the
    profile's Q8_0 share on LPDDR) more; the attention, shared and head weights are unchanged."""
    share = get_engine("llamacpp").bw_eff("q8_0", "lpddr")
    extra_ms = 8 * LAYERS * EXPERT_BYTES / (800e9 * share) * 1e3
    assert 8 * LAYERS * EXPERT_BYTES == 1_925_185_536
    assert _weights_ms(0.5) - _weights_ms(1.0) == pytest.approx(extra_ms, rel=1e-9)


def test_the_moe_matvec_share_follows_the_experts_into_another_format():
    """A lever to Q4_K_M keeps Metal's mat-vec kernel: the experts stay at its share, so the
    round's weights time scales with the experts' bytes (4.5 / 8.5 bits for the routed experts
    in the 4-bit GGUF's Q4_K) rather than jumping to the other backends' speed."""
    slow_q8, fast_q8 = _weights_ms(0.5), _weights_ms(1.0)
    slow_q4, fast_q4 = _weights_ms(0.5, "q4_k_m"), _weights_ms(1.0, "q4_k_m")
    # in both formats half the share doubles the routed experts' time; Q4_K_M's experts hold
    # 4.5-bit Q4_K and 6.5625-bit Q6_K tensors against Q8_0's 8.5 bits, so the added time is
    # between 4.5 / 8.5 = 0.53 and 6.5625 / 8.5 = 0.77 of Q8_0's (their formats' shares differ by < 1 %)
    ratio = (slow_q4 - fast_q4) / (slow_q8 - fast_q8)
    assert 4.5 / 8.5 * 0.99 < ratio < 6.5625 / 8.5 * 1.01
