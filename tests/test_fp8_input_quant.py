"""FP8 linear layers quantize their input first; what an engine does not fuse into the kernel
that produced the input runs as a kernel of its own (model/actquant.py, engines.toml
serving.<engine> fp8_quant_after). Each expectation counts those kernels by hand from the
architecture (layers, blocks) and the engine's source, and prices each at the profile's
kernel floor; a 16-bit checkpoint of the same model quantizes nothing, so the difference of
the two rounds' kernel time is exactly those kernels."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.engines import QuantAfter, engines, quant_after
from decodescope.model.predict import estimates


def _quant_ms(model: str, gpu: str, engine: str, build=None, **kw) -> float:
    """Expected kernel time of an FP8 round less that of the same round in bf16, ms (`build`:
    the deployment's own fp8_quant_after, as a validate row of an older build names it)."""
    arch = load_arch(model)
    kernels = [estimates(arch, replace(make_deployment(arch, gpu, weights=w, engine=engine, **kw),
                                       fp8_quant_after=build))[1].ms("kernels")
               for w in ("fp8", "bf16")]
    return kernels[0] - kernels[1]


def _floor_ms(engine: str) -> float:
    return engines()[engine].kernel_floor_us / 1e3


def test_sglang_quantizes_all_four_inputs_of_a_llama_layer():
    """SGLang: qkv (after the norm), o (after attention), gate_up (after the norm), down (after
    SiLU-and-mul) each get a quantization kernel: 32 layers x 4 = 128 kernels."""
    assert _quant_ms("llama-3.1-8b", "h100-sxm", "sglang") == pytest.approx(128 * _floor_ms("sglang"))


def test_vllm_fuses_all_but_the_attention_output():
    """vLLM V1 (torch.compile): norm+quant and SiLU-and-mul+quant fused, attention+quant off by
    default: one kernel per layer, before o_proj: 32."""
    assert _quant_ms("llama-3.1-8b", "h100-sxm", "vllm") == pytest.approx(32 * _floor_ms("vllm"))


def test_a_v0_build_fused_nothing():
    """A deployment that names its build's producers (validate rows of vLLM v0.6) overrides the profile."""
    everything = tuple(QuantAfter)
    assert _quant_ms("llama-3.1-8b", "h100-sxm", "vllm", build=everything) \
        == pytest.approx(128 * _floor_ms("vllm"))


def test_moe_inputs_are_quantized_inside_the_moe_op():
    """Qwen3-30B-A3B: 48 layers of attention + 128 routed experts, no shared expert. SGLang: 2 (attention)
    + 2 (the MoE op's two GEMMs) = 4 a layer, 192; vLLM: 1 (o_proj) + 2 (MoE) = 3 a layer, 144."""
    assert _quant_ms("qwen3-30b-a3b", "h100-sxm", "sglang") == pytest.approx(192 * _floor_ms("sglang"))
    assert _quant_ms("qwen3-30b-a3b", "h100-sxm", "vllm") == pytest.approx(144 * _floor_ms("vllm"))


def test_mla_with_a_shared_expert():
    """DeepSeek-V3 on 8 x H200: MLA with a q LoRA (q_a/kv_a after the norm, q_b after q_a's norm,
    o after attention: 3 inputs), 3 dense layers (+2) and 58 MoE layers (+2 routed, +2 shared
    expert). SGLang: 3 x 5 + 58 x 7 = 421. vLLM: only o_proj and the routed experts' 2: 3 x 1 + 58 x 3 = 177."""
    assert _quant_ms("deepseek-v3", "h200", "sglang", tp=8) == pytest.approx(421 * _floor_ms("sglang"))
    assert _quant_ms("deepseek-v3", "h200", "vllm", tp=8) == pytest.approx(177 * _floor_ms("vllm"))


def test_no_fp8_math_no_quantization():
    """An A100 has no FP8 tensor cores: both engines read FP8 weights with Marlin's weight-only
    kernel on 16-bit activations (serving weight_only_fallback), so nothing is quantized."""
    for engine in ("sglang", "vllm"):
        assert _quant_ms("llama-3.1-8b", "a100-sxm-80gb", engine) == pytest.approx(0.0, abs=1e-12)


def test_engines_that_fuse_or_were_not_read_add_nothing():
    assert _quant_ms("llama-3.1-8b", "h100-sxm", "trtllm") == pytest.approx(0.0, abs=1e-12)


def test_an_unknown_producer_is_refused():
    with pytest.raises(DecodescopeError, match="unknown producer"):
        quant_after(["norm", "residual"], "fp8_quant_after")


def test_the_model_says_how_many_kernels_quantize():
    """`decodescope model` prints the count and its time: 128 x the floor for SGLang's 8B."""
    from decodescope.model import predict
    arch = load_arch("llama-3.1-8b")
    notes = predict(arch, make_deployment(arch, "h100-sxm", weights="fp8", engine="sglang")).notes
    floor = engines()["sglang"].kernel_floor_us
    assert any(n.startswith("128 kernels a pass quantize FP8") and f"{128 * floor / 1e3:.2f} ms" in n for n in notes)
    arch_bf16 = predict(arch, make_deployment(arch, "h100-sxm", weights="bf16", engine="sglang")).notes
    assert not any("quantize FP8" in n for n in arch_bf16)


def test_explain_names_them_in_the_kernel_floor_term():
    """The gap's kernel-floor term says how many of its kernels quantize FP8 inputs."""
    from decodescope.explain.gap import Term, modelled_terms
    from decodescope.model import predict
    arch = load_arch("llama-3.1-8b")
    d = make_deployment(arch, "h100-sxm", weights="fp8", engine="vllm")
    floors = next(t for t in modelled_terms(arch, d, predict(arch, d)) if t.term is Term.KERNEL_FLOORS)
    assert "32 a pass quantize FP8 layers' inputs" in floors.note
