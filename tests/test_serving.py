"""A serving benchmark's time per output token (model/prefill.py serving): each decode
round also carries its share of the context passes of the requests that replace finished
ones, (in flight - 1) x accept_len / output per round (Little's law)."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.predict import estimates, expected_rates
from decodescope.model.prefill import prefill_ops, serving
from decodescope.validate.rows import Compare, load_cases

H100_BW = 3.35e12  # B/s, gpus.toml h100-sxm


def _llama7b(batch, **kw):
    arch = load_arch("llama-2-7b")
    return arch, make_deployment(arch, "h100-sxm", weights="bf16", kv="bf16", batch=batch, engine="sglang", **kw)


# One Llama-2-7B prompt of 128 tokens on one H100 at datasheet rates (the model of
# tests/test_prefill.py, at batch 1): every GEMM reads 2 B per parameter and does
# 2 x 128 = 256 FLOP with it, 128 FLOP per byte, under the H100's 989.5e12 / 3.35e12 =
# 295 FLOP/B ridge, so the 6,476,005,376 GEMM parameters take their bytes:
# 12,952,010,752 B / 3.35e12 = 3.866272 ms; the KV cache written, 32 layers x 128 x 2 x
# 4096 x 2 B = 67,108,864 B: 20.032 us (its FLOPs take 4.4 us); LM head on the last token,
# 262,144,000 B: 78.252 us; norms 65 x 4096 x 2 B: 0.159 us. Sum 3.964716 ms.
PROMPT_S = (12_952_010_752 + 67_108_864 + 262_144_000 + 65 * 4096 * 2) / H100_BW


def test_a_round_carries_the_other_requests_context_passes():
    """9 requests in flight, 128 tokens in and 256 out: the 8 others each end once in the
    256 rounds of one request, so a round carries 8 / 256 context passes of one prompt:
    8 / 256 x 3.964716 ms = 123.897 us on top of the decode round."""
    arch, d = _llama7b(9)
    assert PROMPT_S == pytest.approx(3.964716e-3, rel=1e-6)
    ceiling, expected = serving(arch, d, 128, 256)
    decode_ceiling, decode_expected = estimates(arch, d)
    assert ceiling.round_s - decode_ceiling.round_ms / 1e3 == pytest.approx(8 / 256 * PROMPT_S, rel=1e-9)
    assert ceiling.tok_s == pytest.approx(1 / ceiling.round_s, rel=1e-12)
    # the expected round adds the engine's context pass and its host time per pass
    one = make_deployment(arch, "h100-sxm", weights="bf16", kv="bf16", batch=1, engine="sglang")
    prompt_s = sum(op.time_s for op in prefill_ops(arch, one, expected_rates(one), 128)) + d.engine.host_ms_per_pass / 1e3
    assert expected.round_s - decode_expected.round_ms / 1e3 == pytest.approx(8 / 256 * prompt_s, rel=1e-9)
    assert prompt_s > PROMPT_S


def test_one_request_in_flight_waits_for_no_one():
    """At concurrency 1 the next request starts after this one ends: no context pass falls
    inside its decode, and the serving round is the decode round."""
    arch, d = _llama7b(1)
    ceiling, expected = serving(arch, d, 4096, 256)
    decode_ceiling, decode_expected = estimates(arch, d)
    assert ceiling.round_s == pytest.approx(decode_ceiling.round_ms / 1e3, rel=1e-12)
    assert expected.round_s == pytest.approx(decode_expected.round_ms / 1e3, rel=1e-12)


def test_speculation_ends_requests_sooner():
    """With 2.5 tokens a round a request of 256 tokens lasts 102.4 rounds, so the 8 others'
    context passes spread over fewer rounds: 8 x 2.5 / 256 per round, and the round yields
    2.5 tokens per request."""
    arch, d = _llama7b(9, spec="eagle:3", accept=2.5)
    ceiling, _ = serving(arch, d, 128, 256)
    decode_ceiling, _ = estimates(arch, d)
    assert ceiling.round_s - decode_ceiling.round_ms / 1e3 == pytest.approx(8 * 2.5 / 256 * PROMPT_S, rel=1e-9)
    assert ceiling.tok_s == pytest.approx(2.5 / ceiling.round_s, rel=1e-12)


def test_the_serving_rows_use_their_mean_lengths():
    """The SGLang cookbook and InferenceX rows are serving rows; their lengths are the
    benchmark's mean tokens in and out ('Total input tokens: 1273893' and 'Total generated
    tokens: 169680' over 320 prompts: 3980.9 and 530.25 -> 3981 and 530). The MLC blog of
    October 2024 ran three engines at a fixed 100 tokens in and 500 out ('Input 100, Output 500')."""
    cases, _ = load_cases()
    marked = {c.id: c for c in cases if c.compare is Compare.SERVING}
    assert {c.source for c in marked.values()} == {"CBR1", "CBV31", "CBQ3", "CBL4", "CBQN", "CBOSS", "INFX870", "MLCE"}
    assert (marked["CBR1-08"].prompt, marked["CBR1-08"].output) == (3981, 530)
    assert (marked["INFX870-04"].prompt, marked["INFX870-04"].output) == (1024, 1024)
    assert all(c.engine == "sglang" for c in marked.values() if c.source != "MLCE")
    blog = [c for c in marked.values() if c.source == "MLCE"]
    assert {(c.prompt, c.output) for c in blog} == {(100, 500)}
    assert {c.engine for c in blog} == {"mlc", "sglang", "vllm"} and len(blog) == 23
