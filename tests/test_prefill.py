"""End-to-end throughput of a static batch (context pass + decode steps), as TensorRT-LLM's
gptSessionBenchmark measured its v0.6.1 performance tables."""

import csv
import shutil
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.model.ops import unique_layers
from decodescope.model.predict import ceiling_rates
from decodescope.model.prefill import end_to_end, prefill_ops
from decodescope.validate.rows import DATA, Compare, load_cases

H100_BW = 3.35e12  # B/s, gpus.toml h100-sxm
H100_BF16 = 989.5e12  # FLOP/s dense, gpus.toml h100-sxm


def _llama7b(batch):
    arch = load_arch("llama-2-7b")
    return arch, make_deployment(arch, "h100-sxm", weights="bf16", kv="bf16", batch=batch)


def test_context_pass_ceiling_by_hand():
    """Llama-2-7B (32 layers, hidden 4096, MLP 11008, 32 KV heads of 128, vocab 32000),
    64 prompts of 128 tokens = 8,192 tokens on one H100 at datasheet rates:
    - GEMMs: 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 parameters, 2 FLOP
      each per token: 6,476,005,376 x 2 x 8,192 / 989.5e12 = 107.229 ms (8,192 FLOP per
      byte read, far above the 295 FLOP/B ridge: compute-bound);
    - attention per layer: writing the KV cache, 64 x 128 x 2 x 32 x 128 x 2 B =
      134,217,728 B / 3.35e12 = 40.065 us, above its FLOPs 64 x 128 x 4 x 32 x 128 x 64.5
      (mean prefix of 129/2 tokens) = 8.657e9 / 989.5e12 = 8.749 us; x 32 = 1.2821 ms;
    - LM head on the 64 last tokens only: 32000 x 4096 x 2 B = 262,144,000 B / 3.35e12 =
      78.25 us (memory-bound: 2 x 131,072,000 x 64 FLOP take 16.96 us);
    - norms: (32 x 2 + 1) x 4096 x 2 B / 3.35e12 = 0.16 us.
    Sum 108.589 ms."""
    arch, d = _llama7b(64)
    gemm = 6_476_005_376 * 2 * 8192 / H100_BF16
    attention = 32 * 134_217_728 / H100_BW
    head = 262_144_000 / H100_BW
    norms = 65 * 4096 * 2 / H100_BW
    assert gemm == pytest.approx(0.107229, rel=1e-5)
    got = sum(op.time_s for op in prefill_ops(arch, d, ceiling_rates(d), 128))
    assert got == pytest.approx(gemm + attention + head + norms, rel=1e-9)
    assert got == pytest.approx(0.108589, rel=1e-5)


def test_one_output_token_is_the_context_pass_alone():
    """The context pass yields the first token: 64 x 1 tokens / 108.589 ms = 589.4 tok/s."""
    arch, d = _llama7b(64)
    ceiling, expected = end_to_end(arch, d, 128, 1)
    assert ceiling.decode_s == 0.0
    assert ceiling.tok_s_total == pytest.approx(64 / 0.108589, rel=1e-5)
    assert expected.tok_s_total < ceiling.tok_s_total


def test_decode_steps_at_a_growing_context():
    """128 in, 129 out: 128 decode steps with 128..255 tokens cached. A step's time is
    linear in the cache (KV bytes), so the steps take 128 x the step at the mean cache,
    (128 + 255) / 2 = 191.5 tokens, as the decode model gives it for that context."""
    arch, d = _llama7b(8)
    ceiling, expected = end_to_end(arch, d, 128, 129)
    mid = make_deployment(arch, "h100-sxm", weights="bf16", kv="bf16", batch=8, context=191.5)
    p = predict(arch, mid)
    assert ceiling.decode_s == pytest.approx(128 * p.ceiling.round_ms / 1e3, rel=1e-9)
    assert expected.decode_s == pytest.approx(128 * p.expected.round_ms / 1e3, rel=1e-9)
    assert ceiling.tok_s_total == pytest.approx(8 * 129 / (ceiling.prefill_s + ceiling.decode_s))


def test_the_static_batch_tables_are_end_to_end_and_nothing_else_is():
    """TensorRT-LLM's v0.6.1 and v0.9.0 tables time session.generate(), prompts included, and
    so does vLLM's benchmark_latency.py in llm-perf-bench pull request 35 (256 output tokens over
    the mean latency of a whole request, its default 32-token prompt included); the
    trtllm-bench rows (in-flight batching) and every other row are not marked."""
    cases, _ = load_cases()
    marked = {c.id: c for c in cases if c.compare is Compare.END_TO_END}
    assert set(marked) == {c.id for c in cases if c.source in ("TRTPERF", "TRTPERF9")} | {"LPB35-02"}
    assert (marked["LPB35-02"].prompt, marked["LPB35-02"].output) == (32, 256)
    assert (marked["TRTPERF9-11"].prompt, marked["TRTPERF9-11"].output) == (128, 2048)
    assert (marked["TRTPERF-03"].prompt, marked["TRTPERF-03"].output) == (128, 2048)
    assert (marked["TRTPERF-13"].prompt, marked["TRTPERF-13"].output) == (2048, 2048)


def test_per_gpu_tables_are_multiplied_by_tp():
    """Every table of the file gives out tok/s per GPU (the A100 and L40S headers say so in
    the file's next revision, same values): the row's value is the quoted cell x TP."""
    with open(DATA / "public.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["source_key"] in ("TRTPERF", "TRTPERF9")]
    for r in rows:
        cell = float(r["quote"].strip().strip("|").split("|")[-1].replace(",", ""))
        assert float(r["value"]) == cell * int(r["n_gpu"]), r["id"]
    assert {r["id"]: r["value"] for r in rows if r["id"] in ("TRTPERF-08", "TRTPERF-09")} == \
        {"TRTPERF-08": "1564", "TRTPERF-09": "2100"}  # 782 x 2, 525 x 4
    assert next(r["value"] for r in rows if r["id"] == "TRTPERF9-11") == "10900"  # v0.9.0 H100: 2,725 x 4


def test_end_to_end_rows_need_whole_lengths(tmp_path):
    """An end_to_end row whose input_len is not a token count, and an unknown compare
    kind, are each skipped with one reason; the other rows still load."""
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    pub = tmp_path / "public.csv"
    text = pub.read_text(encoding="utf-8")
    pub.write_text(text.replace(",112,128,2048,", ",112,about 128,2048,", 1), encoding="utf-8")
    dep = tmp_path / "deployments.csv"
    lines = dep.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [ln.replace(",end_to_end,", ",sometimes,") if ln.startswith("TRTPERF-02,") else ln for ln in lines]
    dep.write_text("".join(lines), encoding="utf-8")
    cases, skipped = load_cases(tmp_path)
    why = {s.id: s.reason for s in skipped}
    assert "input_len" in why["TRTPERF-01"] and "about 128" in why["TRTPERF-01"]
    assert "sometimes" in why["TRTPERF-02"]
    assert "TRTPERF-03" in {c.id for c in cases}


@pytest.mark.parametrize("config", ["deepseek-ai__DeepSeek-V4-Flash.json", "dots-studio__dots3-note-prev.trimmed.json"])
def test_pooled_and_windowed_attention_layers_are_timed_in_prefill(config):
    """DeepSeek-V4's compressed attention and dots3's sliding-window MLA keep a cache that is
    not one row per token (PooledKV); their prompts' attention is work all the same: one
    "prefill attention" op per distinct attention layer, none left out."""
    arch = load_arch(str(Path(__file__).parent / "data" / "configs" / config))
    d = make_deployment(arch, "h200", tp=8, batch=1, context=0)
    ops = prefill_ops(arch, d, ceiling_rates(d), 4096)
    attention_ops = [op for op in ops if op.name == "prefill attention"]
    assert len(attention_ops) == len(unique_layers(arch.layers))
    assert all(op.time_s > 0 for op in attention_ops)
