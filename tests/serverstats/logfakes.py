"""Server log lines for the serverstats tests, written from the engines' own format strings
(SGLang scheduler_metrics_mixin.py, vLLM loggers.py and metrics.py, llama.cpp server.cpp): one
Row per format variant with the fields it must parse to, and builders of synthetic logs in those
formats. Not a test module: the test modules import from it."""

import time
from dataclasses import dataclass, field

import pytest


def local(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))


ANY = "any"  # the line has a timestamp, but this row does not pin it


@dataclass
class Row:
    name: str
    line: str
    engine: str
    kind: str
    accept_len: float | None = None
    gen_tok_s: float | None = None
    rank: str | None = None
    time_s: float | None | str = None
    fields: dict = field(default_factory=dict)  # a subset the record's fields must hold


SGLANG = [
    Row(
        "v1 gpu_id prefix, no timestamp",
        "[gpu_id=0] Decode batch. #running-req: 4, #token: 2048, token usage: 0.01, "
        "gen throughput (token/s): 312.45, #queue-req: 0",
        "sglang", "decode", None, 312.45, "gpu_id=0", None,
        {"#running-req": 4, "#token": 2048, "token usage": 0.01, "#queue-req": 0},
    ),
    Row(
        "v2 no rank prefix, accept len without rate",
        "[2025-01-10 08:00:00] Decode batch. #running-req: 8, #token: 5120, token usage: 0.03, "
        "accept len: 3.12, cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 0",
        "sglang", "decode", 3.12, 812.40, None, local("2025-01-10 08:00:00"),
        {"cuda graph": True, "#token": 5120},
    ),
    Row(
        "v2 sliding-window hybrid, no speculation",
        "[2025-01-10 08:00:00 TP0] Decode batch. #running-req: 2, #full token: 1000, "
        "full token usage: 0.01, #swa token: 500, swa token usage: 0.02, cuda graph: True, "
        "gen throughput (token/s): 100.00, #queue-req: 1",
        "sglang", "decode", None, 100.0, "TP0", ANY,
        {"#full token": 1000, "#swa token": 500, "swa token usage": 0.02},
    ),
    Row(
        "v2 PD decode server",
        "[2025-01-10 08:00:00 TP0] Decode batch. #running-req: 16, #token: 9000, token usage: 0.05, "
        "accept len: 2.50, pre-allocated usage: 0.10, #retracted-req: 0, cuda graph: True, "
        "gen throughput (token/s): 1500.00, #queue-req: 3",
        "sglang", "decode", 2.50, 1500.0, "TP0", ANY,
        {"pre-allocated usage": 0.10, "#retracted-req": 0},
    ),
    Row(
        "v3 forward iteration and trailing comma",
        "[2025-07-14 10:02:11 TP0] Decode batch [1234], #running-req: 1, #token: 238, token usage: 0.00, "
        "accept len: 3.08, accept rate: 0.69, cuda graph: True, gen throughput (token/s): 55.59, "
        "#queue-req: 0, ",
        "sglang", "decode", 3.08, 55.59, "TP0", local("2025-07-14 10:02:11"),
        {"forward_ct": 1234, "accept rate": 0.69, "#queue-req": 0},
    ),
    Row(
        "v3 hybrid GDN (mamba) under DP attention",
        "[2026-05-12 00:05:37 DP1 TP4] Decode batch, #running-req: 1, #full token: 238, "
        "full token usage: 0.00, mamba num: 3, mamba usage: 0.06, accept len: 3.08, accept rate: 0.69, "
        "cuda graph: True, gen throughput (token/s): 55.59, #queue-req: 0",
        "sglang", "decode", 3.08, 55.59, "DP1 TP4", local("2026-05-12 00:05:37"),
        {"mamba num": 3, "mamba usage": 0.06, "#full token": 238},
    ),
    Row(
        "v3 cpu graph",
        "[2025-07-14 10:02:11] Decode batch, #running-req: 1, #token: 40, token usage: 0.00, "
        "cpu graph: False, gen throughput (token/s): 7.25, #queue-req: 0, ",
        "sglang", "decode", None, 7.25, None, ANY, {"cpu graph": False},
    ),
    Row(
        "v3 PD decode with prealloc/transfer queues",
        "[2025-07-14 10:02:11 TP0] Decode batch, #running-req: 32, #token: 20000, token usage: 0.10, "
        "accept len: 1.90, accept rate: 0.47, pre-allocated usage: 0.05, #prealloc-req: 0, "
        "#transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 2400.00, "
        "#queue-req: 0, ",
        "sglang", "decode", 1.90, 2400.0, "TP0", ANY,
        {"#prealloc-req": 0, "#transfer-req": 1, "pre-allocated usage": 0.05},
    ),
    Row(
        "v4 ms timestamp, PP/EP ranks, npu graph, waiting-image-req",
        "[2025-10-01 10:00:00.250 PP1 TP1 EP1] Decode batch, #running-req: 3, #token: 900, "
        "token usage: 0.01, waiting-image-req: 2, npu graph: True, gen throughput (token/s): 90.00, "
        "#queue-req: 0",
        "sglang", "decode", None, 90.0, "PP1 TP1 EP1", local("2025-10-01 10:00:00") + 0.25,
        {"waiting-image-req": 2, "npu graph": True},
    ),
    Row(
        "v5 cached tokens, hisparse pools, musa graph, MFU and occupancy suffixes",
        "[2026-03-01 12:00:00 ATTN_CP0 MOE_DP1 TP0] Decode batch, #running-req: 2, #cached-token: 64, "
        "#gpu token: 300, gpu token usage: 0.02, #cpu token: 5000, cpu token usage: 0.10, "
        "accept len: 2.75, accept rate: 0.58, musa graph: True, gen throughput (token/s): 150.25, "
        "#queue-req: 0, est. decode TFLOPS/s (per GPU): 12.50, est. read BW (GB/s per GPU): 640.00, "
        "est. write BW (GB/s per GPU): 3.20, fwd occupancy: 91.50%",
        "sglang", "decode", 2.75, 150.25, "ATTN_CP0 MOE_DP1 TP0", ANY,
        {
            "#cached-token": 64, "#gpu token": 300, "#cpu token": 5000, "musa graph": True,
            "est. read BW (GB/s per GPU)": 640.0, "fwd occupancy": 91.5,
        },
    ),
    Row(
        "prefill v1 gpu_id",
        "[gpu_id=0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
        "cache hit rate: 0.00%, #running-req: 0, #queue-req: 0",
        "sglang", "prefill", None, None, "gpu_id=0", None,
        {"#new-seq": 1, "#new-token": 512, "cache hit rate": 0.0, "#running-req": 0},
    ),
    Row(
        "prefill v2",
        "[2025-01-10 08:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 9, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
        "sglang", "prefill", None, None, "TP0", ANY, {"#new-token": 9, "#running-req": 0},
    ),
    Row(
        "prefill v2 PD prefill server",
        "[2025-01-10 08:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 9, #cached-token: 0, "
        "token usage: 0.00, #unbootstrapped-req: 0, #queue-req: 0, #transferring-req: 1, "
        "input throughput (token/s): 1234.56 ",
        "sglang", "prefill", None, None, "TP0", ANY,
        {"#unbootstrapped-req": 0, "#transferring-req": 1, "input throughput (token/s)": 1234.56},
    ),
    Row(
        "prefill v3 PD with iteration",
        "[2025-07-14 10:02:11 TP0] Prefill batch [55], #new-seq: 2, #new-token: 4096, #cached-token: 128, "
        "token usage: 0.02, #running-req: 0, #queue-req: 0, #prealloc-req: 0, #inflight-req: 1, "
        "input throughput (token/s): 800.00, ",
        "sglang", "prefill", None, None, "TP0", ANY,
        {"forward_ct": 55, "#inflight-req": 1, "input throughput (token/s)": 800.0},
    ),
    Row(
        "prefill v4 with graph",
        "[2025-10-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, "
        "cuda graph: False",
        "sglang", "prefill", None, None, "TP0", ANY, {"cuda graph": False, "#running-req": 0},
    ),
    Row(
        "prefill v5 pending tokens, bootstrap queue, TFLOPS and occupancy",
        "[2026-03-01 12:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 2048, #cached-token: 0, "
        "#full token: 2048, full token usage: 0.01, mamba num: 1, mamba usage: 0.02, #pending-token: 0, "
        "#running-req: 1, #queue-req: 0, #bootstrap-req: 0, #inflight-req: 0, cuda graph: False, "
        "input throughput (token/s): 4000.00, est. prefill TFLOPS/s (per GPU): 55.10, "
        "fwd occupancy: 80.00%",
        "sglang", "prefill", None, None, "TP0", ANY,
        {"#pending-token": 0, "#bootstrap-req": 0, "est. prefill TFLOPS/s (per GPU)": 55.1},
    ),
]

VLLM = [
    Row(
        "v1 early stats line",
        "INFO 05-04 01:06:53 [loggers.py:111] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 182.3 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%",
        "vllm", "stats", None, 182.3, "Engine 000", local("2025-05-04 01:06:53"),
        {"Running": 4, "Waiting": 0, "GPU KV cache usage": 1.2, "Avg prompt throughput": 0.0},
    ),
    Row(
        "v1 current with process tag and optional parts",
        "(APIServer pid=1) INFO 05-04 01:06:53 [loggers.py:271] Engine 001: Avg prompt throughput: 512.5 tokens/s, "
        "Avg generation throughput: 95.0 tokens/s, Running: 2 reqs, Waiting: 1 reqs, Deferred: 0 reqs, "
        "Preemptions: 3, GPU KV cache usage: 10.5%, Prefix cache hit rate: 45.0%, "
        "External prefix cache hit rate: 12.5%, MM cache hit rate: 0.0%",
        "vllm", "stats", None, 95.0, "Engine 001", ANY,
        {"Deferred": 0, "Preemptions": 3, "External prefix cache hit rate": 12.5, "MM cache hit rate": 0.0},
    ),
    Row(
        "v1 data-parallel aggregate",
        "(APIServer pid=7) INFO 05-04 01:07:03 [loggers.py:271] 4 Engines Aggregated: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 700.0 tokens/s, Running: 16 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%",
        "vllm", "stats", None, 700.0, "4 Engines Aggregated", ANY, {"Running": 16},
    ),
    Row(
        "v0 engine, 2024 prefix without brackets",
        "INFO 07-18 10:00:00 metrics.py:341] Avg prompt throughput: 12.5 tokens/s, "
        "Avg generation throughput: 34.6 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, "
        "GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.",
        "vllm", "stats", None, 34.6, None, local("2025-07-18 10:00:00"),
        {"Swapped": 0, "Pending": 0, "CPU KV cache usage": 0.0},
    ),
    Row(
        "v0 speculative metrics: accept len from emitted x k / draft tokens",
        "INFO 07-18 10:00:05 metrics.py:363] Speculative metrics: Draft acceptance rate: 0.500, "
        "System efficiency: 0.600, Number of speculative tokens: 4, Number of accepted tokens: 1000, "
        "Number of draft tokens: 2000, Number of emitted tokens: 1500.",
        "vllm", "spec", 3.0, None, None, ANY,
        {"Draft acceptance rate": 0.5, "Number of emitted tokens": 1500},
    ),
    Row(
        "v1 April 2025: no acceptance length in the line",
        "INFO 04-10 09:00:00 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 100.0%, "
        "Accepted: 66 tokens, Drafted: 66 tokens",
        "vllm", "spec", None, None, None, ANY,
        {"Draft acceptance rate": 100.0, "Accepted": 66, "Drafted": 66},
    ),
    Row(
        "v1 Sep 2025: per-position list last",
        "INFO 09-10 12:00:00 [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: 88.8%, "
        "Mean acceptance length: 5.44, Accepted throughput: 120.50 tokens/s, "
        "Drafted throughput: 135.70 tokens/s, Accepted: 1205 tokens, Drafted: 1357 tokens, "
        "Per-position acceptance rate: 0.950, 0.900, 0.880",
        "vllm", "spec", 5.44, None, None, ANY,
        {"Per-position acceptance rate": [0.95, 0.9, 0.88], "Drafted": 1357},
    ),
    Row(
        "v1 current: mean first, avg draft rate last",
        "(EngineCore_DP0 pid=30) INFO 09-10 12:00:00 [metrics.py:96] SpecDecoding metrics: "
        "Mean acceptance length: 2.93, Accepted throughput: 120.50 tokens/s, "
        "Drafted throughput: 187.20 tokens/s, Accepted: 1205 tokens, Drafted: 1872 tokens, "
        "Per-position acceptance rate: 0.812, 0.634, 0.488, Avg Draft acceptance rate: 64.4%",
        "vllm", "spec", 2.93, None, None, local("2025-09-10 12:00:00"),
        {"Per-position acceptance rate": [0.812, 0.634, 0.488], "Avg Draft acceptance rate": 64.4},
    ),
]

LLAMACPP = [
    Row(
        "prompt eval",
        "slot print_timing: id  0 | task 0 | prompt eval time =    1234.56 ms /   512 tokens "
        "(    2.41 ms per token,   414.83 tokens per second)",
        "llamacpp", "prefill", None, None, "slot 0", None,
        {"time_ms": 1234.56, "tokens": 512, "tokens_per_second": 414.83, "task": 0},
    ),
    Row(
        "eval",
        "slot print_timing: id  1 | task 7 |        eval time =    1234.56 ms /   128 tokens "
        "(    9.65 ms per token,   103.68 tokens per second)",
        "llamacpp", "decode", None, 103.68, "slot 1", None,
        {"tokens": 128, "ms_per_token": 9.65, "task": 7},
    ),
    Row(
        "total",
        "slot print_timing: id  0 | task 0 |       total time =    2469.12 ms /   640 tokens",
        "llamacpp", "stats", None, None, "slot 0", None, {"time_ms": 2469.12, "tokens": 640},
    ),
    Row(
        "draft acceptance with mean len",
        "slot print_timing: id  0 | task 0 | draft acceptance = 0.63158 (   24 accepted /    38 generated), "
        "mean len =  2.85",
        "llamacpp", "spec", 2.85, None, "slot 0", None,
        {"draft_acceptance": 0.63158, "accepted": 24, "generated": 38},
    ),
    Row(
        "oldest draft acceptance rate: no mean",
        "slot print_timing: id  0 | task 3 | draft acceptance rate = 0.57576 (   19 accepted /    33 generated)",
        "llamacpp", "spec", None, None, "slot 0", None, {"accepted": 19, "generated": 33},
    ),
    Row(
        "single-line variant with per-position rates",
        "slot print_timing: id  0 | task 0 | draft acceptance = 0.63158 (   24 accepted /    38 generated), "
        "mean acceptance length =  2.85, acceptance rate per position = (0.900, 0.600, 0.350)",
        "llamacpp", "spec", 2.85, None, "slot 0", None,
        {"acceptance_rate_per_position": [0.9, 0.6, 0.35]},
    ),
    Row(
        "periodic progress during a long generation",
        "slot print_timing: id 0 | task 0 | n_gen = 10219, tg = 86.54 t/s, tg_3s = 117.03 t/s",
        "llamacpp", "stats", None, None, "slot 0", None, {"n_gen": 10219, "tg": 86.54, "tg_3s": 117.03},
    ),
    Row(
        "2024 LOG_INFO form with key=value tail",
        "INFO [           print_timings] generation eval time =    1234.56 ms /   128 runs   "
        "(    9.65 ms per token,   103.68 tokens per second) | tid=\"139\" timestamp=1717000000 "
        "id_slot=2 id_task=5 t_token_generation=1234.56 n_decoded=128 t_token=9.65 n_tokens_second=103.68",
        "llamacpp", "decode", None, 103.68, "slot 2", 1717000000.0, {"tokens": 128, "task": 5},
    ),
    Row(
        "--log-timestamps elapsed prefix",
        "0.06.895.980 I slot print_timing: id  0 | task 0 |        eval time =     500.00 ms /    50 tokens "
        "(   10.00 ms per token,   100.00 tokens per second)",
        "llamacpp", "decode", None, 100.0, "slot 0", None, {"log_elapsed_s": pytest.approx(6.89598)},
    ),
]


# ---------------------------------------------------------------- synthetic logs

SEED = [
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, #full token: 115, full token usage: 0.00, "
    "mamba num: 3, mamba usage: 0.06, accept len: 3.70, accept rate: 0.90, cuda graph: True, "
    "gen throughput (token/s): 2.89, #queue-req: 0",
    "[2026-05-12 00:05:37 TP0] Decode batch, #running-req: 1, #full token: 238, full token usage: 0.00, "
    "mamba num: 3, mamba usage: 0.06, accept len: 3.08, accept rate: 0.69, cuda graph: True, "
    "gen throughput (token/s): 55.59, #queue-req: 0",
]


def sgl_decode(t: float, accept: float, tok_s: float, running: int = 1, ranks: str = "TP0") -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return (
        f"[{stamp} {ranks}] Decode batch, #running-req: {running}, #full token: 238, "
        f"full token usage: 0.00, mamba num: 3, mamba usage: 0.06, accept len: {accept:.2f}, "
        f"accept rate: {(accept - 1) / 3:.2f}, cuda graph: True, gen throughput (token/s): {tok_s:.2f}, "
        "#queue-req: 0"
    )


def sgl_prefill(t: float, running: int = 0, ranks: str = "TP0") -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return (
        f"[{stamp} {ranks}] Prefill batch, #new-seq: 1, #new-token: 27, #cached-token: 0, "
        f"#full token: 0, full token usage: 0.00, mamba num: 0, mamba usage: 0.00, "
        f"#running-req: {running}, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False"
    )


ROUND_S = 0.0554  # the reference case's round time
ACCEPTS = [3.08, 3.33, 3.77, 3.98, 3.5, 2.9]


def steady(t0: float, n: int, running: int = 1, ranks: str = "TP0", round_s: float = ROUND_S):
    """n decode windows of 40 rounds each, constant round time, varying acceptance."""
    out = []
    for i in range(n):
        a = ACCEPTS[i % len(ACCEPTS)]
        out.append(sgl_decode(t0 + 2.2 * i, a, a * running / round_s, running, ranks))
    return out


def vllm_stats(t: str, gen: float, running: int) -> str:
    return (
        f"(APIServer pid=1) INFO 05-04 {t} [loggers.py:271] Engine 000: Avg prompt throughput: 50.0 tokens/s, "
        f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
    )


def vllm_spec(t: str, mean: float) -> str:
    return (
        f"(APIServer pid=1) INFO 05-04 {t} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: {mean:.2f}, "
        "Accepted throughput: 100.00 tokens/s, Drafted throughput: 150.00 tokens/s, Accepted: 1000 tokens, "
        "Drafted: 1500 tokens, Per-position acceptance rate: 0.800, 0.600, 0.400, Avg Draft acceptance rate: 66.7%"
    )
