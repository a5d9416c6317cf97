"""Server log lines, one row per format variant, built from the engines' own format
strings (SGLang scheduler_metrics_mixin.py, vLLM loggers.py, llama.cpp server.cpp), and the
warm-up rule on synthetic logs in those formats."""

import io
import json

import pytest

from decodescope.serverstats.logsummary import WarmupScan
from logfakes import (
    ANY,
    LLAMACPP,
    ROUND_S,
    SEED,
    SGLANG,
    VLLM,
    local,
    sgl_decode,
    sgl_prefill,
    steady,
    vllm_spec,
    vllm_stats,
)

from decodescope.serverstats.serverlog import (
    LogReader,
    detect_engine,
    parse_line,
    parse_log,
    summarize,
    write_records,
)


@pytest.mark.parametrize("row", SGLANG + VLLM + LLAMACPP, ids=lambda r: f"{r.engine}: {r.name}")
def test_each_format_variant_parses_to_its_fields(row):
    rec = parse_line(row.line, year=2025)
    assert rec is not None, "line not recognised"
    assert (rec.engine, rec.kind, rec.rank) == (row.engine, row.kind, row.rank)
    assert rec.accept_len == pytest.approx(row.accept_len)
    assert rec.gen_tok_s == pytest.approx(row.gen_tok_s)
    if row.time_s != ANY:
        assert rec.time_s == pytest.approx(row.time_s)
    for k, v in row.fields.items():
        assert rec.fields.get(k) == v, f"field {k!r}: {rec.fields.get(k)!r}"
    assert parse_line(row.line, engine=row.engine, year=2025) == rec, "engine hint changes the result"


@pytest.mark.parametrize(
    "line",
    [
        "",
        "INFO:     127.0.0.1:5678 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "[2026-05-12 00:05:35 TP0] Decode batch size must be positive",  # marker, wrong shape
        "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, #full tok",  # cut mid-line
        "INFO 05-04 01:06:53 [loggers.py:111] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: n/a",
        "slot print_timing: id  0 | task 0 | eval time = garbage",
        "slot print_timing: id  0 | task 0 | eval time = ... ms / 5 tokens (... ms per token, ... tokens per second)",
        "slot print_timing: id  0 | task 0 | draft acceptance = ... (   24 accepted /    38 generated)",
        "\x00\x01\xff\xfe\ufffd\ufffd Decode batch\x00, \x00: \x00",
        "\ufffd" * 5000,
        "Decode batch, " + ", ".join(f"k{i}: {i}" for i in range(2000)),  # no gen throughput
    ],
    ids=["empty", "http-access", "marker-in-prose", "truncated", "bad-number", "bad-llamacpp", "dots-llamacpp", "dots-draft", "binary", "long-garbage", "huge-no-rate"],
)
def test_unrecognised_or_garbled_line_is_none_not_an_error(line):
    assert parse_line(line) is None


def test_nan_and_inf_rates_are_rejected_lines_that_never_poison_the_summary():
    lines = [
        SEED[1],
        SEED[1].replace("55.59", "nan"),
        SEED[1].replace("3.08", "nan"),
        SEED[1].replace("55.59", "inf"),
        "slot print_timing: id  0 | task 0 | prompt eval time =       0.00 ms /     1 tokens "
        "(    0.00 ms per token,      inf tokens per second)",
    ]
    result = parse_log(lines)
    s = result.summary
    assert (s.gen_tok_s.mean, s.accept_len.mean, s.gen_tok_s.n) == (55.59, 3.08, 1)
    # the three SGLang lines with nan / inf are rejected; the llama.cpp line is another
    # engine's (skipped): llama.cpp's own inf for a 0 ms phase is no error in its log
    assert (result.rejected_lines, result.skipped_lines, s.warmup_windows) == (3, 1, 0)


def test_unknown_lines_are_counted_and_skipped():
    lines = [
        "random noise",
        SGLANG[4].line,
        "\x00\x00 binary \xff",
        b"\xff\xfe not utf-8 \x80",
        SGLANG[5].line,
    ]
    result = parse_log(lines)
    assert result.skipped_lines == 3
    assert [r.line_no for r in result.records] == [2, 5]
    assert result.summary.skipped_lines == 3


def test_engine_is_detected_from_the_first_recognised_line():
    assert detect_engine(["noise", VLLM[0].line, SGLANG[0].line]) == "vllm"
    assert detect_engine(["noise", LLAMACPP[1].line]) == "llamacpp"
    assert detect_engine(["noise"]) is None
    assert parse_log(["noise", SGLANG[1].line]).engine == "sglang"


def test_an_engine_hint_ignores_other_engines_lines():
    result = parse_log([SGLANG[4].line, VLLM[0].line], engine="vllm")
    assert [r.engine for r in result.records] == ["vllm"]
    assert result.skipped_lines == 1


def test_vllm_timestamps_take_the_given_year():
    rec = parse_line(VLLM[0].line, year=2024)
    assert rec.time_s == pytest.approx(local("2024-05-04 01:06:53"))


def test_records_serialise_to_json_without_nan():
    import json

    line = (
        "INFO 09-10 12:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.00, "
        "Accepted: 0 tokens, Drafted: 0 tokens, Avg Draft acceptance rate: nan%"
    )
    d = parse_line(line).to_dict()
    assert d["fields"]["Avg Draft acceptance rate"] is None
    json.loads(json.dumps(d, allow_nan=False))


# ---------------------------------------------------------------- warm-up


def flags(lines, **kw):
    return [r.warmup for r in parse_log(lines, **kw).records if r.kind != "prefill"]


def test_seed_lines_first_is_warmup_second_is_steady():
    result = parse_log(SEED)
    assert [r.warmup for r in result.records] == [True, False]
    s = result.summary
    # acceptance from both windows, (3.70 + 3.08) / 2 = 3.39: idle time does not change
    # which draft tokens were accepted; the rate and the round from the steady one
    assert (s.accept_len.mean, s.accept_len.n, s.gen_tok_s.mean) == (pytest.approx(3.39), 2, 55.59)
    assert s.round_ms == pytest.approx(1000 * 3.08 / 55.59)
    assert (s.windows, s.warmup_windows) == (2, 1)


def test_steady_run_loses_no_window_even_its_first():
    assert flags(steady(1e9, 30)) == [False] * 30


def test_first_window_after_each_idle_gap_is_warmup():
    lines, t = [], 1.78e9
    for _ in range(4):  # four requests, 30 s apart, one at a time
        lines.append(sgl_prefill(t))
        lines.append(sgl_decode(t + 1.0, 3.5, 3.5 * 40 / 30.0))  # window spans 30 s idle + prefill
        lines += steady(t + 3.0, 10)
        t += 60
    expected = ([True] + [False] * 10) * 4
    assert flags(lines) == expected
    s = parse_log(lines).summary
    assert s.gen_tok_s.n == 40 and s.warmup_windows == 4
    assert s.round_ms == pytest.approx(ROUND_S * 1000, rel=0.02)


def test_back_to_back_request_keeps_its_first_window():
    lines = steady(1e9, 10) + [sgl_prefill(1e9 + 23)] + steady(1e9 + 24, 10)
    assert flags(lines) == [False] * 20


def test_idle_gap_without_prefill_line_is_caught_as_slow_outlier():
    lines = steady(1e9, 10)
    lines.append(sgl_decode(1e9 + 100, 3.2, 3.2 * 40 / 80.0))  # grep'd excerpt: 80 s window
    lines += steady(1e9 + 102, 10)
    assert flags(lines) == [False] * 10 + [True] + [False] * 10


def test_log_starting_mid_run_keeps_its_first_line():
    lines = [sgl_decode(1e9, 3.08, 55.59)] + steady(1e9 + 2, 5)
    assert flags(lines) == [False] * 6


def test_data_parallel_ranks_are_separate_series():
    a = steady(1e9, 8, ranks="DP0 TP0", round_s=0.050)
    b = steady(1e9 + 1, 8, ranks="DP1 TP0", round_s=0.060)
    lines = [x for pair in zip(a, b) for x in pair]
    lines.insert(2, sgl_prefill(1e9 + 2, ranks="DP1 TP0"))  # DP1 idles; DP0 does not
    lines.insert(4, sgl_decode(1e9 + 3, 3.0, 3.0 * 40 / 20.0, ranks="DP1 TP0"))
    result = parse_log(lines)
    warm = [(r.rank, r.line_no) for r in result.records if r.warmup]
    assert warm == [("DP1 TP0", 5)]


def test_batched_windows_give_the_per_request_round_time():
    lines = steady(1e9, 12, running=8)
    s = parse_log(lines).summary
    assert s.gen_tok_s.mean == pytest.approx(8 * s.gen_tok_s_per_req.mean)
    assert s.round_ms == pytest.approx(ROUND_S * 1000, rel=0.02)


def test_vllm_partial_and_idle_intervals_are_warmup_and_spec_lines_follow_them():
    lines = [
        vllm_stats("01:00:00", 0.0, 0),  # idle
        vllm_stats("01:00:10", 40.0, 4), vllm_spec("01:00:10", 2.5),  # started mid-interval
        vllm_stats("01:00:20", 160.0, 4), vllm_spec("01:00:20", 2.8),
        vllm_stats("01:00:30", 150.0, 4), vllm_spec("01:00:30", 2.6),
        vllm_stats("01:00:40", 60.0, 0), vllm_spec("01:00:40", 2.9),  # finished mid-interval
    ]
    result = parse_log(lines, year=2025)
    assert [r.warmup for r in result.records] == [True, True, True, False, False, False, False, True, True]
    s = result.summary
    assert s.accept_len.mean == pytest.approx(2.7)
    assert s.gen_tok_s.mean == pytest.approx(155.0)
    assert s.round_ms == pytest.approx(1000 * 2.7 / (155.0 / 4))


def test_llamacpp_requests_pair_eval_speed_with_draft_acceptance():
    lines = []
    for task, (tok_s, mean) in enumerate([(20.0, 2.0), (100.0, 2.5), (104.0, 3.0), (98.0, 2.0)]):
        lines += [
            f"slot print_timing: id  0 | task {task} | prompt eval time =     100.00 ms /   100 tokens "
            "(    1.00 ms per token,  1000.00 tokens per second)",
            f"slot print_timing: id  0 | task {task} |        eval time =    1000.00 ms /   {int(tok_s)} tokens "
            f"(   {1000 / tok_s:.2f} ms per token,   {tok_s:.2f} tokens per second)",
            f"slot print_timing: id  0 | task {task} |       total time =    1100.00 ms /   200 tokens",
            f"slot print_timing: id  0 | task {task} | draft acceptance = 0.50000 (   10 accepted /    20 generated), "
            f"mean len =  {mean:.2f}",
        ]
    result = parse_log(lines)
    warm = [r.fields["task"] for r in result.records if r.warmup]
    assert warm == [0, 0]  # the slow first request: its eval line and its draft line
    s = result.summary
    assert s.gen_tok_s_per_req.mean == pytest.approx((100 + 104 + 98) / 3)
    assert s.gen_tok_s is None, "each line is one request: the server's total over requests is not in the log"
    # every request's acceptance counts, the slow first one's too: (2.0 + 2.5 + 3.0 + 2.0) / 4
    assert s.accept_len.mean == pytest.approx(2.375) and s.warmup_windows == 1
    # the round pairs the steady requests' acceptance and rate: (2.5 + 3.0 + 2.0) / 3 = 2.5
    assert s.round_ms == pytest.approx(1000 * 2.5 / ((100 + 104 + 98) / 3))


def test_summarize_and_a_second_streaming_pass_agree_with_parse_log():
    lines = SEED + steady(1.8e9, 5) + [sgl_prefill(1.8e9 + 50)] + [sgl_decode(1.8e9 + 60, 3.0, 5.0)] + steady(1.8e9 + 62, 5)
    whole = parse_log(lines)
    assert summarize(whole.records, whole.skipped_lines) == whole.summary
    scan = WarmupScan()
    for rec in LogReader(lines):
        scan.add(rec)
    out = io.BytesIO()
    write_records(out, lines, "sglang", None, scan.limits())
    assert json.loads(b"[" + out.getvalue() + b"]") == [r.to_dict() for r in whole.records]
    assert scan.summary("sglang", 0) == whole.summary
