"""An 8-GPU MI300X board joins every GPU to each of the other 7 by a link of its own (64 GB/s
per direction each, 448 GB/s in all: gpus.toml mi300x link_peers): an allreduce among n of
them streams over n - 1 links at once, not over one. Expectations below are worked by hand
from the ring allreduce's 2(n-1)/n x message bytes and the datasheet link figures.

Why it matters: vLLM's ROCm build ran Llama-3.1-405B FP8 on 8 x MI300X at batch 128 (2048 in,
2048 out) at 2089.28 tok/s end to end (ROCm/vllm docs/dev-docker/README.md at 040de12, 'MI300X
Latency (sec)': 125.471 s); over one link per GPU the model's ceiling for that run was 1644 tok/s,
below the measurement."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.ops import allreduce_op
from decodescope.model.predict import ceiling_rates

MIB = 1 << 20


def _allreduce_s(gpu: str, tp: int, link: str | None = None) -> float:
    arch = load_arch("llama-3.1-70b")
    rates = ceiling_rates(make_deployment(arch, gpu, tp=tp, link=link))
    return allreduce_op("mixer allreduce", MIB, tp, rates).time_s


@pytest.mark.parametrize("tp, links", [(2, 1), (4, 3), (8, 7)])
def test_an_mi300x_allreduce_uses_one_link_per_peer(tp, links):
    wire = 2 * (tp - 1) / tp * MIB  # bytes each GPU sends in a ring allreduce
    assert _allreduce_s("mi300x", tp) == pytest.approx(wire / (64e9 * links), rel=1e-9)
    # 8 GPUs: 1.75 MiB over 7 x 64 GB/s = 4.096 us; over one link it was 28.7 us
    if tp == 8:
        assert _allreduce_s("mi300x", 8) == pytest.approx(4.096e-6, rel=1e-3)


def test_a_switched_link_keeps_its_per_gpu_bandwidth():
    """An H100 on NVSwitch reaches every peer through the switch at its 450 GB/s per direction in
    all: the figure is already the GPU's total, nothing to multiply."""
    assert _allreduce_s("h100-sxm", 8) == pytest.approx(2 * 7 / 8 * MIB / 450e9, rel=1e-9)


def test_mi300x_cards_over_pcie_share_one_link():
    """--link pcie: the mesh is not what joins them, so no peer gets a link of its own."""
    pcie_gen5_x16 = _allreduce_s("mi300x", 8, link="pcie")
    assert pcie_gen5_x16 > _allreduce_s("mi300x", 8) * 3


@pytest.mark.parametrize("peers", [0, 7.5, "7"])
def test_a_link_peers_entry_must_be_a_whole_number(peers):
    """gpus.toml is data: a peer count that is not a whole number >= 1 is one clear error."""
    import copy

    from decodescope.errors import DecodescopeError
    from decodescope.hardware.db import _gpu, _raw

    table = copy.deepcopy(_raw()["gpu"]["mi300x"])
    table["link_peers"] = peers
    with pytest.raises(DecodescopeError, match="link_peers"):
        _gpu("mi300x", table)
