"""A layer that runs another layer's weights (Layer.reuses: Zamba2's shared attention blocks,
Dory's looped layers): its weights are read on every pass through it but held and counted once;
its KV cache is its own. Expectations by hand on Llama-3.1-8B's layers (32 of 218,112,000
parameters each: q, o 4096^2; k, v 1024 x 4096; gate, up, down 3 x 14336 x 4096; two norms)."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.model.memory import memory_need

LAYER = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096


@pytest.fixture(scope="module")
def pair():
    """Llama-3.1-8B, and the same with its last 8 layers re-running the 8 before them (a loop)."""
    base = load_arch("llama-3.1-8b")
    looped = replace(base, layers=base.layers[:24] + tuple(replace(x, reuses=True) for x in base.layers[16:24]))
    return base, looped


def test_a_reused_layer_is_counted_once_and_read_every_pass(pair):
    base, looped = pair
    assert base.params_total - looped.params_total == 8 * LAYER
    assert looped.params_read_per_token == base.params_read_per_token  # 32 passes either way


def test_it_holds_no_weights_but_its_own_kv_cache(pair):
    base, looped = pair
    d_base, d_looped = (make_deployment(a, "h100-sxm", context=1000) for a in pair)
    held_base, per_req_base = memory_need(base, d_base)
    held_looped, per_req_looped = memory_need(looped, d_looped)
    assert held_base[0] - held_looped[0] == 8 * LAYER * 2  # bf16: 2 B a parameter
    assert per_req_looped == per_req_base  # every pass keeps its own K/V (32 layers x 1001 tokens)


def test_the_round_reads_the_reused_weights_again(pair):
    """Same bytes per round as the unlooped model: 32 layer passes, each streaming its weights."""
    base, looped = pair
    p_base, p_looped = (predict(a, make_deployment(a, "h100-sxm", context=1000)) for a in pair)
    assert p_looped.expected.round_ms == pytest.approx(p_base.expected.round_ms, rel=1e-9)
