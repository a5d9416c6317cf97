"""Findings from real start-up lines (tests/data/startup/), one test per finding class,
their rendering, and bad input (random lines: no exception, no hang)."""

import json
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from decodescope.report.settings_table import print_settings
from decodescope.serverstats.findings import FindingId, findings, findings_json, rules
from decodescope.serverstats.settings import read_settings

DATA = Path(__file__).parent.parent / "data" / "startup"


def _found(name: str):
    with open(DATA / name, encoding="utf-8") as f:
        segs = read_settings(f)
    assert len(segs) == 1
    return segs[0], findings(segs[0])


def test_every_finding_class_has_a_real_line():
    covered = {f.id for name in ("llamacpp-2023-llava-2x3090.log", "vllm-0.7.3-ray-eager.log",
                                 "sglang-2026-custom-ar-8gpu.log", "vllm-0.8.0-attention-fallback-t4.log",
                                 "reference-sglang-qwen3.6-27b.log") for f in _found(name)[1]}
    assert covered == set(FindingId) == set(rules())


def test_partial_offload_as_share_of_layers():
    _, found = _found("llamacpp-2023-llava-2x3090.log")  # "offloaded 0/35 layers to GPU" on line 11
    assert [(f.id, f.line, f.evidence) for f in found] == [
        (FindingId.PARTIAL_OFFLOAD, 11, "offloaded 0/35 layers to GPU")]
    assert found[0].cost.startswith("35 of 35 layers (100 %) run on the CPU")  # 35 - 0 = 35 on the CPU
    _, found = _found("llm-llama-cpp-2023-1of35.log")  # offloaded 1/35 on line 4: 34 of 35 on the CPU = 97 %
    assert [(f.id, f.line) for f in found] == [(FindingId.PARTIAL_OFFLOAD, 4)]
    assert found[0].cost.startswith("34 of 35 layers (97 %) run on the CPU")
    _, full = _found("ik-llamacpp-a6000-full-offload.log")  # 62/62: nothing on the CPU
    assert full == []


def test_eager_mode_costs_host_time_per_kernel():
    _, found = _found("vllm-0.7.3-ray-eager.log")  # enforce_eager=True in the engine config line
    assert [(f.id, f.line, f.evidence) for f in found] == [(FindingId.CUDA_GRAPHS_OFF, 1, "enforce_eager=True")]
    # measured on an H200 (tests/data/h200/gpu_check_results.json): an eager launch 6.7 us per
    # kernel, a kernel inside a CUDA graph 1.1 us: +5.6 us per kernel
    assert "~6.7 µs" in found[0].cost and "~1.1 µs" in found[0].cost and "+5.6 µs" in found[0].cost
    assert "--enforce-eager" in found[0].fix


def test_custom_allreduce_off_counts_every_rank():
    _, found = _found("sglang-2026-custom-ar-8gpu.log")  # 7 lines, first on line 1 (TP7)
    f = found[0]
    assert (f.id, f.line, f.count) == (FindingId.CUSTOM_ALLREDUCE_OFF, 1, 7)
    assert "more than two PCIe-only GPUs" in f.evidence
    # gpus.toml pcie-switch: NCCL 19.4 us - one-shot 4.0 us = +15.4 us per allreduce
    assert f.cost.startswith("+15.4 µs per allreduce")
    # vLLM 0.24 on 4 x RTX 3090 (TP 4) with the custom allreduce switched off in the engine config
    _, found = _found("vllm-0.24.0-mtp3-tp4-fp8.log")
    assert [(f.id, f.line, f.evidence) for f in found] == [
        (FindingId.CUSTOM_ALLREDUCE_OFF, 1, "disable_custom_all_reduce=True")]


def test_attention_fallback():
    for name in ("vllm-0.8.0-attention-fallback-t4.log", "vllm-0.4.3-attention-fallback.log"):
        seg, found = _found(name)
        assert [(f.id, f.line) for f in found] == [(FindingId.ATTENTION_FALLBACK, 1)]
        assert "Cannot use FlashAttention-2 backend" in found[0].evidence
        assert seg.settings.attention_backend == "XFormers"  # what it fell back to, line 2


def test_reference_case_piecewise_graphs_off():
    _, found = _found("reference-sglang-qwen3.6-27b.log")
    assert [(f.id, f.line) for f in found] == [(FindingId.PIECEWISE_CUDA_GRAPH_OFF, 1)]
    assert "--enforce-piecewise-cuda-graph" in found[0].fix


def test_clean_logs_have_no_findings():
    for name in ("vllm-0.6.6-pp2.log", "vllm-0.7.1-v0-tp2.log", "llamafile-rtx4080.log", "sglang-0.2-gptq-tp2.log"):
        assert _found(name)[1] == []


def test_terminal_and_json_say_the_same():
    with open(DATA / "llamacpp-2023-llava-2x3090.log", encoding="utf-8") as f:
        segs = read_settings(f)
    out = findings_json(segs)
    json.dumps(out)  # serialisable
    assert out["settings"]["offloaded_layers"] == 0 and out["settings"]["total_layers"] == 35
    assert [x["id"] for x in out["findings"]] == ["partial_offload"]
    console = Console(record=True, width=240)
    print_settings([(s, findings(s)) for s in segs], console)
    text = console.export_text()
    assert "NVIDIA GeForce RTX 3090, NVIDIA GeForce RTX 3090" in text
    assert "partial_offload" in text and out["findings"][0]["cost"][:40] in text
    assert "2048" in text  # context (tokens), the same value as JSON's
    assert out["settings"]["context"] == 2048


MARKERS = ["server_args=ServerArgs(", "ServerArgs(tp_size=", "non-default args: {", "args: Namespace(",
           "engine (v0.1) with config: ", "vLLM API server version ", "found 2 CUDA devices:", "  Device 0: X, ",
           "offloaded 3/", "print_info: file type   = ", "llama_context: n_ctx = ", "type_k = '",
           "Custom allreduce is disabled because ", "Cannot use X backend ", "] Using ", "speculative_config=",
           "'speculative_config': '{", "SpeculativeConfig(", "(((((", "[[[[", "'", '"', "\\"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.builds(lambda a, m, b: a + m + b, st.text(max_size=200), st.sampled_from(MARKERS),
                          st.text(max_size=200)) | st.text(max_size=400), max_size=30))
def test_random_lines_never_raise(lines):
    for seg in read_settings(lines):
        findings(seg)
        json.dumps(findings_json([seg]))


def test_a_huge_line_is_cut_and_read_fast():
    line = "server_args=ServerArgs(model_path='m', tp_size=2, x=" + "[" * 200_000 + "'" * 100_000
    t = time.perf_counter()
    segs = read_settings([line, "(" * 1_000_000])
    assert time.perf_counter() - t < 5  # two lines capped at 65,536 characters each
    assert segs[0].settings.tp == 2
