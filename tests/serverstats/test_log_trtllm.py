"""TensorRT-LLM in `decodescope log`: the PyTorch backend's per-iteration line and the
IterationStats JSON of trtllm-serve's /metrics, on real excerpts (tests/data/logs, URLs in
SOURCES). Every expectation is worked out by hand from the lines. Where a test needs a
variant no public excerpt shows (a speculative iteration, the later field names), it
edits a real line the way TensorRT-LLM's own source writes it, and says so."""

import json
import subprocess
import sys
import time

import pytest
from test_log_real import LOGS, WIDE, lines, same, summary

from decodescope.serverstats import logformats
from decodescope.serverstats.logscan import scan_file
from decodescope.serverstats.serverlog import detect_engine, parse_line, parse_log
from decodescope.serverstats.trtllm_log import parse_trtllm

ITER = "trtllm_iter_scheduled_padded.log"  # TensorRT-LLM#3914, with num_scheduled_requests
OLD = "trtllm_iter_before_scheduled.log"  # the same line before that PR
METRICS = "trtllm_metrics_json_trt_backend.log"  # TensorRT-LLM#6364, /metrics, TensorRT backend
CONTEXT = "trtllm_executor_stats_context.log"  # TensorRT-LLM#3376, a context iteration
BANNER = "trtllm_serve_version_banner.log"  # TensorRT-LLM#2667: trtllm-serve 0.16.0's first line
TRTLLM = (ITER, OLD, METRICS, CONTEXT, BANNER)

# 10 generation requests in 0.005060911178588867 s, no draft tokens (16 < 2 x 10): 1 token
# each, 10 / 0.005060911178588867 = 1975.929 tok/s, 197.593 per request, round 5.0609 ms
ITER_TOK_S, ITER_ROUND_MS = 1975.929, 5.060911


def _line(name: str) -> str:
    return lines(name)[0]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "decodescope", *args], capture_output=True, timeout=120, env=WIDE)


def _words(out: bytes) -> bytes:
    """Terminal output with rich's line wrapping undone."""
    return b" ".join(out.split())


# ---------------------------------------------------------------- the iteration line


def test_a_generation_iteration_is_a_window_of_requests_over_its_wall_time():
    p = parse_log(lines(ITER))
    (r,) = p.records
    assert p.engine == "trtllm" and (r.kind, r.rank, r.accept_len) == ("decode", "rank 0", 1.0)
    assert r.gen_tok_s == pytest.approx(ITER_TOK_S, abs=1e-3)
    assert r.fields["num_scheduled_requests"] == 10 and r.fields["num_generation_tokens"] == 16
    assert r.fields["elapsed_time"] == 0.005060911178588867 and r.fields["currank_total_requests"] == "0/0"
    assert r.time_s == time.mktime((2025, 4, 28, 9, 56, 44, 0, 0, -1))  # timestamp = 2025-04-28 09:56:44, local
    s = summary(ITER)
    assert s.gen_tok_s_per_req.mean == pytest.approx(ITER_TOK_S / 10, abs=1e-3)
    assert s.round_ms == pytest.approx(ITER_ROUND_MS, abs=1e-6)  # = the iteration's wall time


def test_a_line_from_before_num_scheduled_requests_gives_no_rate():
    # num_generation_tokens 16 counts CUDA-graph padding (TensorRT-LLM#3914): the requests are unknown
    (r,) = parse_log(lines(OLD)).records
    assert (r.kind, r.gen_tok_s, r.accept_len) == ("decode", None, None)
    p = _cli("log", str(LOGS / OLD))
    assert p.returncode == 0 and b"Traceback" not in p.stderr
    assert b"whose decode lines give no rate" in _words(p.stdout)
    assert b"only with num_scheduled_requests" in _words(p.stdout)


@pytest.mark.parametrize("tokens,rate", [
    (19, ITER_TOK_S),  # 19 < 2 x 10: padding only, one token per request
    (20, None),  # 10 requests with 1 draft token each, unpadded: acceptance unknown
    (40, None),  # 10 requests x (1 + 3 MTP draft tokens)
])
def test_an_iteration_that_verified_draft_tokens_gives_no_rate(tokens, rate):
    # the real line with another num_generation_tokens (model_engine.py counts 1 + the draft
    # tokens per generation request, over the padded batch)
    line = _line(ITER).replace("'num_generation_tokens': 16", f"'num_generation_tokens': {tokens}")
    r = parse_line(line)
    assert r.kind == "decode" and r.fields["num_scheduled_requests"] == 10
    assert r.gen_tok_s == (pytest.approx(rate, abs=1e-3) if rate else None)
    assert r.accept_len == (1.0 if rate else None)


def test_the_later_field_names_read_the_same():
    # the real line as py_executor.py writes it since host_step_time replaced elapsed_time
    # (milliseconds), with kv_cache_util (TensorRT-LLM#14206) and the per-rank counters after
    # states (TensorRT-LLM#16323)
    line = (_line(ITER).replace("elapsed_time = 0.005060911178588867s",
                                "host_step_time = 5.060911178588867ms, prev_device_step_time = N/A")
            .replace("num_scheduled_requests: 10", "kv_cache_util = 0.12, num_scheduled_requests: 10")
            .rstrip("\n") + ", num_active = 14, num_fetched = 3, num_dummy = 1, num_unscheduled = 5\n")
    r = parse_line(line)
    assert r.gen_tok_s == pytest.approx(ITER_TOK_S, abs=1e-3) and r.accept_len == 1.0
    assert r.fields["host_step_time"] == 5.060911178588867 and r.fields["prev_device_step_time"] == "N/A"
    assert (r.fields["kv_cache_util"], r.fields["num_active"], r.fields["num_unscheduled"]) == (0.12, 14, 5)


def test_warmup_context_and_idle_iterations_in_a_run():
    # the real line as a run: a context iteration (num_ctx_requests 1), the first generation
    # iteration 10x slower (0.05 s: it carries the context's GPU work), three steady ones,
    # then an idle iteration (0 scheduled)
    real = _line(ITER)
    ctx = real.replace("'num_ctx_requests': 0", "'num_ctx_requests': 1")
    first = real.replace("elapsed_time = 0.005060911178588867s", "elapsed_time = 0.05s")
    idle = real.replace("num_scheduled_requests: 10", "num_scheduled_requests: 0")
    p = parse_log([ctx, first, real, real, real, idle])
    assert [r.kind for r in p.records] == ["prefill"] + ["decode"] * 5
    assert [r.warmup for r in p.records[1:]] == [True, False, False, False, True]
    s = p.summary
    # first window: round 0.05 s > 1.5 x the 5.06 ms median; the idle one: 0 tok/s
    assert (s.windows, s.warmup_windows) == (5, 2)
    assert s.gen_tok_s.mean == pytest.approx(ITER_TOK_S, abs=1e-3) and s.gen_tok_s.n == 3
    assert s.round_ms == pytest.approx(ITER_ROUND_MS, abs=1e-6)


# ---------------------------------------------------------------- IterationStats JSON (/metrics)


def test_a_metrics_json_iteration_of_the_tensorrt_backend():
    # 1 generation request, avgNumDecodedTokensPerIter 1.0, iterLatencyMS 13.021209:
    # 1 / 0.013021209 s = 76.7978 tok/s, round 13.021209 ms; the paste's trailing ',' kept
    p = parse_log(lines(METRICS))
    (r,) = p.records
    assert p.engine == "trtllm" and (r.kind, r.accept_len, r.rank) == ("decode", 1.0, None)
    assert r.gen_tok_s == pytest.approx(76.7978, abs=1e-4)
    assert r.fields["numScheduledRequests"] == 1 and r.fields["kvCacheStats"]["tokensPerBlock"] == 32
    # "07-25-2025 16:54:34.140189", local time
    assert r.time_s == pytest.approx(time.mktime((2025, 7, 25, 16, 54, 34, 0, 0, -1)) + 0.140189)
    assert summary(METRICS).round_ms == pytest.approx(13.021209, abs=1e-6)


def _metrics_with(**changes) -> str:
    obj = json.loads(_line(METRICS).rstrip().rstrip(","))
    for key, value in changes.items():
        if key in obj["inflightBatchingStats"]:
            obj["inflightBatchingStats"][key] = value
        elif value is None:
            obj.pop(key)
        else:
            obj[key] = value
    return json.dumps(obj)


def test_speculative_iterations_count_the_accepted_draft_tokens():
    # the real object with specDecodingStats as py_executor.py _update_iter_stats fills it:
    # 4 generation requests, 2 of them drafted, 3 draft tokens accepted: (4 + 3) tokens in
    # 13.021209 ms = 537.58 tok/s, accept 7 / 4 = 1.75 tokens per request and round (not
    # acceptanceLength 2.5, which averages only the 2 requests that drafted)
    spec = {"numDraftTokens": 6, "numAcceptedTokens": 3, "numRequestsWithDraftTokens": 2,
            "acceptanceLength": 2.5, "iterLatencyMS": 1.2, "draftOverhead": 0.09}
    r = parse_line(_metrics_with(numGenRequests=4, numScheduledRequests=4, specDecodingStats=spec))
    assert r.accept_len == 1.75 and r.gen_tok_s == pytest.approx(7 / 0.013021209, abs=1e-3)
    # 1.75 x 4 requests / 537.58 tok/s = 13.021209 ms: the round is the iteration's time
    assert parse_log([_metrics_with(numGenRequests=4, numScheduledRequests=4, specDecodingStats=spec)]
                     ).summary.round_ms == pytest.approx(13.021209, abs=1e-6)


def test_the_pytorch_backend_reports_no_decoded_tokens_per_iteration():
    # TensorRT-LLM#6364: the PyTorch backend's objects carry avgNumDecodedTokensPerIter 0.0;
    # specDecodingStats null says no speculation (PyExecutor creates it whenever one is set),
    # so 1 token per request; an object without the key says nothing: no rate
    r = parse_line(_metrics_with(avgNumDecodedTokensPerIter=0.0))
    assert r.accept_len == 1.0 and r.gen_tok_s == pytest.approx(76.7978, abs=1e-4)
    r = parse_line(_metrics_with(avgNumDecodedTokensPerIter=0.0, specDecodingStats=None))
    assert r.kind == "decode" and (r.accept_len, r.gen_tok_s) == (None, None)


def test_a_context_iteration_is_a_prefill_record():
    # TensorRT-LLM#3376: numContextRequests 1, 16000 context tokens, iterLatencyMS 0.0
    p = parse_log(lines(CONTEXT))
    assert [r.kind for r in p.records] == ["prefill"] and p.summary.windows == 0
    out = _cli("log", str(LOGS / CONTEXT))
    assert out.returncode == 0 and b"without a decode line (1 prefill)" in _words(out.stdout)


# ---------------------------------------------------------------- detection, scan paths, CLI


def test_no_other_engines_log_is_read_as_tensorrt_llm_nor_the_reverse():
    for path in sorted(LOGS.glob("*.log")):
        text = path.read_text().splitlines(keepends=True)
        if path.name in TRTLLM:
            assert detect_engine(text) == "trtllm", path.name
            for line in text:
                assert logformats.parse_sglang(line) is None and logformats.parse_vllm(line, 2025) is None
                assert logformats.parse_llamacpp(line) is None
        else:
            assert detect_engine(text) != "trtllm", path.name
            assert all(parse_trtllm(line) is None for line in text), path.name


def test_the_parallel_scan_of_a_tensorrt_llm_log_is_the_one_pass(tmp_path):
    # the run of test_warmup_context_and_idle_iterations_in_a_run, 40 steady iterations on each side of the idle one
    real = _line(ITER)
    ctx = real.replace("'num_ctx_requests': 0", "'num_ctx_requests': 1")
    first = real.replace("elapsed_time = 0.005060911178588867s", "elapsed_time = 0.05s")
    idle = real.replace("num_scheduled_requests: 10", "num_scheduled_requests: 0")
    log = tmp_path / "iter.log"
    log.write_text("".join([ctx, first] + [real] * 40 + [idle] + [real] * 40))
    whole = parse_log(log.read_text().splitlines(keepends=True)).summary
    scanned = scan_file(str(log), workers=4, min_bytes=1)
    assert len(scanned.parts) == 4 and same(scanned.summary(), whole)
    # 82 windows: the slow first one and the idle one warm-up, 80 steady at 1975.929 tok/s
    assert (whole.windows, whole.warmup_windows, whole.gen_tok_s.n) == (82, 2, 80)
    assert whole.gen_tok_s.mean == pytest.approx(ITER_TOK_S, abs=1e-3)


def test_table_and_json_agree_and_explain_reads_the_log(tmp_path):
    p = _cli("log", str(LOGS / ITER), "--json")
    d = json.loads(p.stdout)
    assert d["engine"] == "trtllm" and d["records"][0]["engine"] == "trtllm"
    assert d["summary"]["gen_tok_s"]["mean"] == pytest.approx(ITER_TOK_S, abs=1e-3)
    assert d["summary"]["round_ms"] == pytest.approx(ITER_ROUND_MS, abs=1e-6)
    table = _cli("log", str(LOGS / ITER)).stdout.decode()
    assert "trtllm log, steady state" in table and "1975.93" in table and "5.1" in table
    e = _cli("explain", "llama-3.1-8b", "--gpu", "h100-sxm", "--log", str(LOGS / ITER), "--json")
    assert e.returncode == 0, e.stderr
    x = json.loads(e.stdout)
    assert x["measured_round_ms"] == pytest.approx(ITER_ROUND_MS, abs=1e-6) and x["accept_len"] == 1.0
    assert x["measured_tok_s"] == pytest.approx(ITER_TOK_S / 10, abs=1e-3)


def test_engine_trtllm_on_another_engines_log_is_one_clear_error():
    p = _cli("log", str(LOGS / "sglang_eagle3.log"), "--engine", "trtllm")
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    assert b"TensorRT-LLM statistics" in _words(p.stderr) and b"for engine trtllm" in _words(p.stderr)


def test_attention_dp_ranks_are_series_whose_rates_add_up():
    # since TensorRT-LLM#13649 each attention-DP rank has its own object ("attentionDpRank"):
    # the real object as rank 0 (1 request) and as rank 1 with 3 requests, same iteration and
    # time: 1 / 0.013021209 + 3 / 0.013021209 = 76.7978 + 230.3935 = 307.191 tok/s in total,
    # each rank's round 13.021209 ms
    rank1 = _metrics_with(numGenRequests=3, numScheduledRequests=3, attentionDpRank=1)
    s = parse_log([_metrics_with(attentionDpRank=0), rank1]).summary
    assert s.dp_ranks == 2 and s.warmup_windows == 0
    assert s.gen_tok_s_total.mean == pytest.approx(4 / 0.013021209, abs=1e-3)
    assert s.round_ms == pytest.approx(13.021209, abs=1e-6)
    assert parse_line(rank1).rank == "attention DP 1"


def test_the_version_line_is_a_start_up_line_that_opens_a_run(tmp_path):
    # the banner, the real iteration line, the banner again (a restart), the line again:
    # two runs (lines 1-2 and 3-4), each 1975.929 tok/s; the settings say engine and version
    log = tmp_path / "restart.log"
    log.write_text("".join(lines(BANNER, ITER, BANNER, ITER)))
    s = summary(str(log))
    assert [(g.first_line, g.reason.value) for g in s.segments] == [(1, "server start-up"), (3, "server start-up")]
    assert all(g.gen_tok_s.mean == pytest.approx(ITER_TOK_S, abs=1e-3) for g in s.segments)
    d = json.loads(_cli("log", str(log), "--json", "--no-records").stdout)
    assert (d["settings"]["engine"], d["settings"]["version"]) == ("trtllm", "0.16.0")
    e = _cli("explain", "llama-3.1-8b", "--gpu", "h100-sxm", "--log", str(log))
    assert e.returncode == 0 and b"engine trtllm" in _words(e.stdout)


@pytest.mark.parametrize("old,new,rejected", [
    ("num_scheduled_requests: 10", "num_scheduled_requests: -10", 1),  # a negative count
    ("num_scheduled_requests: 10", "num_scheduled_requests: 1e400", 1),  # inf
    ("elapsed_time = 0.005060911178588867s", "elapsed_time = 1e-300s", 1),  # 1e301 tok/s
    ("elapsed_time = 0.005060911178588867s", "elapsed_time = nans", 0),  # no time: a decode line without a rate
    ("'num_generation_tokens': 16", "'num_generation_tokens': 99999999999999999999", 1),
])
def test_hostile_figures_are_rejected_or_give_no_rate(tmp_path, old, new, rejected):
    # the real line with one figure out of range; the real line after it still counts
    log = tmp_path / "hostile.log"
    log.write_text(_line(ITER).replace(old, new) + _line(ITER))
    p = _cli("log", str(log), "--json")
    assert p.returncode == 0 and b"Traceback" not in p.stderr
    s = json.loads(p.stdout)["summary"]
    assert s["rejected_lines"] == rejected and s["records"]["decode"] == 2 - rejected
    assert s["gen_tok_s"]["mean"] == pytest.approx(ITER_TOK_S, abs=1e-3) and s["gen_tok_s"]["n"] == 1


def test_hostile_json_objects_are_rejected_or_skipped(tmp_path):
    # the real object with a 30-digit request count (rejected), iterLatencyMS NaN (no rate),
    # then cut in the middle (skipped): only the last, unchanged object gives a rate
    log = tmp_path / "hostile.jsonl"
    log.write_text("\n".join([_metrics_with(numScheduledRequests=10**30), _metrics_with(iterLatencyMS=float("nan")),
                              _line(METRICS)[:300], _line(METRICS)]))
    s = json.loads(_cli("log", str(log), "--json", "--no-records").stdout)["summary"]
    assert (s["rejected_lines"], s["skipped_lines"], s["records"]) == (1, 1, {"decode": 2})
    assert s["gen_tok_s"]["n"] == 1 and s["gen_tok_s"]["mean"] == pytest.approx(76.7978, abs=1e-4)


def test_a_metrics_page_saved_as_one_line_is_one_clear_error(tmp_path):
    # `curl /metrics > page.json` keeps the list on one line: the error says how to split it
    page = tmp_path / "page.json"
    page.write_text("[" + _line(METRICS).strip().rstrip(",") + "," + _line(METRICS).strip().rstrip(",") + "]\n")
    p = _cli("log", str(page))
    assert p.returncode == 2 and b"Traceback" not in p.stderr and b"jq -c '.[]'" in _words(p.stderr)


def test_a_nan_inside_a_nested_stats_object_is_null_in_every_json():
    # the real object with specDecodingStats.draftOverhead NaN (0/0 in a drafter-less iteration):
    # record_json (orjson) and to_dict (json) both write null, never the non-JSON NaN
    spec = {"numDraftTokens": 0, "numAcceptedTokens": 0, "numRequestsWithDraftTokens": 0,
            "acceptanceLength": 0.0, "iterLatencyMS": 0.0, "draftOverhead": float("nan")}
    r = parse_line(_metrics_with(specDecodingStats=spec))
    assert json.loads(json.dumps(r.to_dict(), allow_nan=False))["fields"]["specDecodingStats"]["draftOverhead"] is None
    assert json.loads(r.to_json())["fields"]["specDecodingStats"]["draftOverhead"] is None
    assert r.accept_len == 1.0  # 0 accepted of 1 request: (1 + 0) / 1
