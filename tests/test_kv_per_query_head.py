"""TensorRT-LLM's masked MHA kernel of v0.5 / v0.6.1 launches one thread block per query
head and request (grid {num_heads, batch_size} in decoderMaskedMultiheadAttentionLaunch.h;
docs/source/gpt_attention.md at 138f96d45f90b9667426f7c47297d8c06bafac73: 'the "vanilla"
implementation that uses a single CUDA thread-block per head'), so under grouped-query
attention each KV head's cache is streamed once per query head of its group. The expected
estimate costs those reads at memory bandwidth; the ceiling reads the cache once."""

import csv
import shutil
from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.predict import ceiling_rates, expected_rates
from decodescope.model.ops import attention_op
from decodescope.validate.rows import DATA, load_cases

# Llama-2-70B: 64 query heads, 8 KV heads, head_dim 128. At TP 4 one GPU holds 16 query
# heads and 2 KV heads. One decode token over a cache of 1000 + 1 tokens in FP8 reads
# K and V: 1001 x 2 x 2 heads x 128 x 1 B = 512,512 B per request per layer; 480 requests:
# 246,005,760 B. Read once per query head: x 16 / 2 = 8 -> 1,968,046,080 B.
ONCE = 480 * 1001 * 2 * 2 * 128
PER_QUERY_HEAD = 8 * ONCE


def _deployment(per_query_head: bool):
    arch = load_arch("llama-2-70b")
    d = make_deployment(arch, "h100-sxm", tp=4, weights="fp8", kv="fp8", batch=480, context=1000, engine="trtllm")
    return arch, replace(d, kv_per_query_head=per_query_head)


def _attention(per_query_head: bool, rates):
    arch, d = _deployment(per_query_head)
    return attention_op(arch.layers[0].mixer, d, d.batch, 1, rates(d))


def test_grouped_query_attention_read_once_per_query_head():
    assert _attention(False, expected_rates).bytes == ONCE
    assert _attention(True, expected_rates).bytes == PER_QUERY_HEAD
    # at the profile's bandwidth: 1,968,046,080 B / (3.35e12 B/s x bw_efficiency)
    arch, d = _deployment(True)
    op = _attention(True, expected_rates)
    assert op.time_s == pytest.approx(PER_QUERY_HEAD / (3.35e12 * d.engine.bw_efficiency))


def test_the_ceiling_reads_the_cache_once():
    assert _attention(True, ceiling_rates).bytes == ONCE


def test_multi_head_attention_is_unchanged():
    """Llama-2-7B has as many KV heads as query heads: nothing to repeat."""
    arch = load_arch("llama-2-7b")
    d = make_deployment(arch, "h100-sxm", kv="fp8", batch=4, context=100, engine="trtllm")
    ops = [attention_op(arch.layers[0].mixer, replace(d, kv_per_query_head=flag), 4, 1,
                        expected_rates(replace(d, kv_per_query_head=flag))) for flag in (False, True)]
    assert ops[0].bytes == ops[1].bytes == 4 * 101 * 2 * 32 * 128  # 4 requests x 101 tokens x K,V x 32 heads x 128


def test_only_the_v0_6_tables_are_marked():
    cases, _ = load_cases()
    assert {c.id for c in cases if c.deployment.kv_per_query_head} == {c.id for c in cases if c.source == "TRTPERF"}


def test_column_is_checked(tmp_path):
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "deployments.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    row = next(r for r in rows if r["id"] == "TRTPERF-03")
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerow({**row, "kv_per_query_head": "sometimes"})
    _, skipped = load_cases(tmp_path)
    assert any(s.id == "TRTPERF-03" and "kv_per_query_head 'sometimes'" in s.reason for s in skipped)
