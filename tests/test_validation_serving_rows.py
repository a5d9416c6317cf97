"""The serving-benchmark rows of data/public.csv (SGLang cookbook pages, InferenceX issue
870, vLLM PR 23151): each published Mean TPOT turned into per-user tok/s, and each
deployment's context taken from the benchmark's own token totals."""

import csv
import re

import pytest

from decodescope.validate.rows import DATA, load_cases

PREFIXES = ("CBR1-", "CBV31-", "CBQ3-", "CBL4-", "CBQN-", "CBOSS-", "INFX870-", "VLLM23151-")


def _rows(name: str) -> dict[str, dict]:
    with open(DATA / name, newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f) if r["id"].startswith(PREFIXES)}


def test_every_quoted_mean_tpot_becomes_per_user_tok_s():
    rows = _rows("public.csv")
    quoted = {i: float(m.group(1)) for i, r in rows.items() if (m := re.search(r"Mean TPOT \(ms\): ([\d.]+)", r["quote"]))}
    assert len(quoted) == len(rows) - 4  # the 4 InferenceX rows quote a table row instead
    for i, tpot in quoted.items():
        assert float(rows[i]["value"]) == pytest.approx(1000 / tpot, abs=0.05), i


def test_inferencex_rows_take_their_column_of_the_quoted_table():
    rows = _rows("public.csv")
    # | Mean TPOT (ms) | 12.8 | 17.2 | 25.6 | 34.6 | at concurrency 8, 16, 32, 64:
    # 1000 / 12.8 = 78.125, 1000 / 17.2 = 58.14, 1000 / 25.6 = 39.06, 1000 / 34.6 = 28.90
    assert [float(rows[f"INFX870-0{k}"]["value"]) for k in range(1, 5)] == [78.1, 58.1, 39.1, 28.9]
    assert [int(rows[f"INFX870-0{k}"]["batch"]) for k in range(1, 5)] == [8, 16, 32, 64]


def test_context_is_mean_prompt_plus_half_the_mean_output():
    deps = _rows("deployments.csv")
    # DeepSeek-R1 on 8 x B200, 1k/1k at concurrency 1: 'Total input tokens: 6101',
    # 'Total generated tokens: 4210' over 10 prompts -> 610.1 + 421.0 / 2 = 820.6 -> 821
    assert int(deps["CBR1-01"]["context"]) == 821
    # 8k/1k at concurrency 64: 1273893 / 320 = 3980.9, 169680 / 320 = 530.25 -> 4246.0
    assert int(deps["CBR1-08"]["context"]) == 4246
    # gpt-oss-120b, ShareGPT, 100 prompts: 33178 / 100 + 21251 / 100 / 2 = 331.78 + 106.26 -> 438
    assert int(deps["CBOSS-01"]["context"]) == 438


def test_the_serving_rows_all_run():
    cases, skipped = load_cases()
    ran = {c.id for c in cases}
    assert set(_rows("deployments.csv")) <= ran
    assert not [s for s in skipped if s.id.startswith(PREFIXES)]
