"""FP8 weights on a GPU without FP8 tensor cores: vLLM and SGLang read them with the Marlin
weight-only kernel (vllm/model_executor/layers/quantization/fp8.py: use_marlin = not
has_device_capability(89); SGLang's fp8.py: can_auto_enable_marlin_fp8()), so their stream
runs at that kernel family's efficiency (engines.toml serving weight_only_fallback), not at
the efficiency of the FP8 GEMMs of an H100."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.engines import get_engine
from decodescope.model.predict import expected_rates
from decodescope.validate.fit import candidate_params
from decodescope.validate.rows import load_cases

LLAMA = load_arch("llama-3.1-8b")


def _fp8_bandwidth(gpu: str, engine: str) -> float:
    return expected_rates(make_deployment(LLAMA, gpu, weights="fp8", engine=engine)).bw_by_format["fp8"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fp8_weights_on_ampere_stream_at_the_weight_only_kernels_share(engine):
    p = get_engine(engine)
    # RTX 3090 (GA102, compute capability 8.6): 936 GB/s, no FP8 tensor cores
    assert _fp8_bandwidth("rtx-3090", engine) == pytest.approx(936e9 * p.bw_efficiency * p.format_efficiency["int8"])
    # H100 SXM: 3.35 TB/s, FP8 tensor cores: the FP8 GEMMs' own share
    assert _fp8_bandwidth("h100-sxm", engine) == pytest.approx(3.35e12 * p.bw_efficiency * p.format_efficiency["fp8"])


def test_an_engine_without_a_fallback_keeps_the_formats_share():
    p = get_engine("gpt-fast")
    assert p.weight_only_fallback == {}
    assert _fp8_bandwidth("a100-sxm-80gb", "gpt-fast") == pytest.approx(2.039e12 * p.bw_efficiency * p.format_efficiency["fp8"])


def test_the_fit_prices_such_a_row_with_the_kernel_it_runs():
    # CLUB-05: FP8 Qwen3.6-27B on two RTX 3090s under vLLM informs the int8 share, not the fp8 one
    [row] = [c for c in load_cases()[0] if c.id == "CLUB-05"]
    names = candidate_params("vllm", [row])
    assert "format_efficiency.int8" in names and "format_efficiency.fp8" not in names


def test_the_model_says_when_a_format_runs_on_a_weight_only_kernel():
    from decodescope.model import predict
    on_ampere = predict(LLAMA, make_deployment(LLAMA, "rtx-3090", weights="fp8", engine="vllm")).notes
    assert any("fp8 weights on rtx-3090 (no fp8 tensor cores)" in n and "int8 kernels" in n for n in on_ampere)
    on_hopper = predict(LLAMA, make_deployment(LLAMA, "h100-sxm", weights="fp8", engine="vllm")).notes
    assert not any("weight-only" in n for n in on_hopper)
