"""Requests that all decode the same token (a benchmark feeding one token id to every
sequence, as llama.cpp's llama-batched-bench did: `common_batch_add(batch, 0, pp + i,
{ j }, true)` in tools/batched-bench/batched-bench.cpp, e.g. ggml-org/llama.cpp commit
0a1f01792b770ef0f41729956665880e109b2660; later versions draw `get_token_rand()`): the
router sends them all to the experts of one request; KV cache is still per request."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.validate.rows import load_cases

# Qwen3-30B-A3B: 48 layers, 128 experts of which 8 per token, each expert a gate, up and
# down projection of 2048 x 768: 3 x 2048 x 768 = 4,718,592 parameters, 2 bytes in bf16
EXPERT_BYTES = 3 * 2048 * 768 * 2
LAYERS = 48


def _bytes(p, component):
    return next(c.bytes for c in p.ceiling.breakdown if c.component == component)


def _run(batch, same_tokens):
    arch = load_arch("qwen3-30b-a3b")
    return predict(arch, make_deployment(arch, "h100-sxm", weights="bf16", batch=batch, context=512,
                                         same_tokens=same_tokens))


def test_identical_requests_read_the_experts_of_one_request():
    one, same = _run(1, False), _run(8, True)
    assert _bytes(same, "weights") == pytest.approx(_bytes(one, "weights"))
    assert _bytes(same, "kv_cache") == pytest.approx(8 * _bytes(one, "kv_cache"))  # still per request


def test_distinct_requests_spread_over_the_experts():
    """8 distinct tokens touch 128 x (1 - (1 - 8/128)^8) experts: (15/16)^8 = 0.596719,
    so 51.620 experts per layer against 8 for one token: 43.620 more experts read."""
    one, many = _run(1, False), _run(8, False)
    extra = LAYERS * 43.620 * EXPERT_BYTES
    assert _bytes(many, "weights") - _bytes(one, "weights") == pytest.approx(extra, rel=1e-4)


def test_the_batched_bench_rows_are_marked_and_nothing_else_is():
    cases, _ = load_cases()
    marked = {c.id for c in cases if c.deployment.same_tokens}
    assert marked == {c.id for c in cases if c.source == "DGXB"}
