"""Where each engine runs and where it was measured (engines.toml vendors / measured_on /
families): a deployment on a GPU its engine has no build for is refused, and a lever never
proposes an engine there, nor one whose costs no published row measured on that GPU maker,
nor one that does not serve the model."""

import collections

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import get_gpu
from decodescope.model import make_deployment, predict
from decodescope.model.engines import engines
from decodescope.validate.rows import load_cases


def test_measured_on_is_the_makers_of_the_published_rows():
    """engines.toml's measured_on is data about validate/data: equal to the GPU makers of each
    engine's rows, so that adding a row (or dropping one) cannot leave it stale."""
    cases, _ = load_cases()
    seen = collections.defaultdict(set)
    for c in cases:
        seen[c.deployment.engine.id].add(c.deployment.gpu.vendor)
    for e in engines().values():
        assert set(e.measured_on) == seen.get(e.id, set()), e.id


def test_tensorrt_llm_is_refused_on_an_amd_gpu():
    """TensorRT-LLM builds for NVIDIA GPUs only (its README); an MI300X run of it cannot exist."""
    arch = load_arch("llama-3.1-8b")
    with pytest.raises(DecodescopeError, match="engine trtllm does not run on"):
        predict(arch, make_deployment(arch, "mi300x", engine="trtllm"))


def _levers(model: str, gpu: str, **kw) -> list[str]:
    arch = load_arch(model)
    return [lv.lever for lv in predict(arch, make_deployment(arch, gpu, **kw), with_levers=True).levers]


def test_levers_on_an_amd_gpu_offer_only_engines_measured_there():
    """DeepSeek-V3 on 8 MI300X under SGLang's ROCm build is bound by kernel time at batch 1:
    engine levers are due. vLLM and TensorRT-LLM have no published AMD row (TensorRT-LLM no AMD
    build), transformers no row at all, gpt-fast serves no DeepSeek model: none is offered."""
    offered = _levers("deepseek-v3", "mi300x", tp=8, engine="sglang", context=915)
    engines_offered = {lv for lv in offered if lv.startswith("engine ")}
    assert engines_offered  # the round is latency-bound: some engine lever is due
    assert not engines_offered & {"engine vllm", "engine trtllm", "engine transformers", "engine gpt-fast"}


def test_gpu_levers_of_an_nvidia_only_engine_stay_on_nvidia():
    offered = _levers("llama-3.1-70b", "a100-sxm-80gb", tp=4, engine="trtllm")
    gpus = [lv.split()[1] for lv in offered if lv.startswith("gpu ")]
    assert gpus and all(get_gpu(g).vendor == "nvidia" for g in gpus)


@pytest.mark.parametrize("gpu, engine, said", [
    ("mi300x", "vllm", True),  # vLLM's rows: NVIDIA only
    ("h100-sxm", "vllm", False),
    ("arc-a770", "llamacpp", True),  # llama.cpp's rows: NVIDIA, AMD, Apple; none on Intel
    ("mi300x", "generic", False),  # an estimate everywhere, fitted nowhere: nothing carried over
])
def test_an_engine_fit_carried_to_an_unmeasured_gpu_maker_is_said(gpu, engine, said):
    arch = load_arch("llama-3.1-8b")
    notes = predict(arch, make_deployment(arch, gpu, engine=engine)).notes
    assert any("no published measurement on" in n for n in notes) == said
