"""An engine without a custom allreduce (MLC: mlc-ai/mlc-llm pull request 1990 added
one-shot / two-shot kernels in March 2024 behind --allreduce-strategy, 'The flag defaults
to "ring"', i.e. NCCL) pays NCCL's latency for every allreduce, even on 2 GPUs with P2P,
where engines with a one-shot kernel pay the link's allreduce latency."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.engines import get_engine
from decodescope.model.predict import allreduce_alpha, expected_rates


def _deployment(engine: str):
    arch = load_arch("llama-2-70b")
    return make_deployment(arch, "a100-pcie-80gb", tp=2, link="pcie", weights="int4-g32", engine=engine)


def test_mlc_reduces_through_nccl():
    # gpus.toml [interconnect.pcie]: allreduce_latency_us = 6 (one-shot kernel), nccl_latency_us = 20
    assert allreduce_alpha(_deployment("vllm"))[0] == pytest.approx(6e-6)
    alpha, why = allreduce_alpha(_deployment("mlc"))
    assert alpha == pytest.approx(20e-6) and "NCCL" in why
    # expected rates: 20 us x the profile's fitted scale
    d = _deployment("mlc")
    assert expected_rates(d).allreduce_alpha_s == pytest.approx(20e-6 * get_engine("mlc").allreduce_latency_scale)


def test_other_engines_keep_their_custom_allreduce():
    assert not get_engine("mlc").custom_allreduce
    assert all(get_engine(e).custom_allreduce for e in ("vllm", "sglang", "trtllm", "gpt-fast"))


def _on(engine: str, gpus: int, link: str, gpu: str = "a100-pcie-80gb"):
    return make_deployment(load_arch("llama-2-70b"), gpu, tp=gpus, link=link, weights="int4-g32", engine=engine)


def test_nccls_latency_grows_by_two_hops_per_gpu():
    """NCCL's tuning model (src/graph/tuning.cc, quoted in gpus.toml): 2(n-1) hops on one node
    at 1.0 us each over PCIe and 0.47 us over NVLink. By hand, from the 2-GPU figures:
    PCIe (20 us on 2 GPUs): 4 GPUs 20 + 2 x 2 x 1.0 = 24 us, 8 GPUs 20 + 2 x 6 x 1.0 = 32 us;
    NVSwitch (6 us on 2 GPUs): 8 GPUs 6 + 2 x 6 x 0.47 = 11.64 us."""
    assert allreduce_alpha(_on("mlc", 2, "pcie"))[0] == pytest.approx(20e-6)
    assert allreduce_alpha(_on("mlc", 4, "pcie"))[0] == pytest.approx(24e-6)
    alpha, why = allreduce_alpha(_on("mlc", 8, "pcie"))
    assert alpha == pytest.approx(32e-6) and "among 8 GPUs" in why
    assert allreduce_alpha(_on("mlc", 8, "nvswitch", gpu="a100-sxm-80gb"))[0] == pytest.approx(11.64e-6)


def test_a_latency_measured_on_more_gpus_is_moved_from_there():
    """[interconnect.pcie-switch]: NCCL 19.4 us measured on 4 ranks behind one switch, so
    2 GPUs take 19.4 - 2 x 2 x 1.0 = 15.4 us and 8 take 19.4 + 2 x 4 x 1.0 = 27.4 us; vLLM on
    more than 2 PCIe GPUs falls back to NCCL and pays the same."""
    assert allreduce_alpha(_on("mlc", 2, "pcie-switch"))[0] == pytest.approx(15.4e-6)
    assert allreduce_alpha(_on("mlc", 8, "pcie-switch"))[0] == pytest.approx(27.4e-6)
    assert allreduce_alpha(_on("vllm", 8, "pcie-switch"))[0] == pytest.approx(27.4e-6)


def test_the_one_shot_kernel_does_not_grow():
    """vLLM's one-shot kernel over NVSwitch reads every peer at once: the link's 6 us at any count."""
    assert allreduce_alpha(_on("vllm", 8, "nvswitch", gpu="a100-sxm-80gb"))[0] == pytest.approx(6e-6)
