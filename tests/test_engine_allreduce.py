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
