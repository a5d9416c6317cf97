"""Requests that all decode the same token (a benchmark feeding one token id to every
sequence, as llama.cpp's llama-batched-bench did: `common_batch_add(batch, 0, pp + i,
{ j }, true)` in tools/batched-bench/batched-bench.cpp, e.g. ggml-org/llama.cpp commit
0a1f01792b770ef0f41729956665880e109b2660; later versions draw `get_token_rand()`): the
router sends them all to the experts of one request; KV cache is still per request."""

import csv
import shutil

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.validate.rows import DATA, load_cases

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
    # llama-batched-bench runs of 2025: the DGX Spark benches and llama.cpp issue 16134
    assert marked == {c.id for c in cases if c.source in ("DGXB", "LI16134")}


def test_same_tokens_column_is_optional_and_checked(tmp_path):
    """An older deployments.csv without the column reads as 'no'; a value other than
    yes / no / empty is the row's one clear reason to be skipped."""
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "deployments.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    fields = [k for k in rows[0] if k != "same_tokens"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fields, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(r for r in rows if r["id"].startswith(("DGXB-1", "GF-")))
    cases, _ = load_cases(tmp_path)
    assert cases and not any(c.deployment.same_tokens for c in cases)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerow({**rows[0], "same_tokens": "maybe"})
    _, skipped = load_cases(tmp_path)
    assert any(s.id == rows[0]["id"] and "same_tokens 'maybe'" in s.reason for s in skipped)
