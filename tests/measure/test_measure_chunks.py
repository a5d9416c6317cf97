"""Chunks that carry several tokens, against a real local server that sends them
(tests/scripted_server.py): one decode round of 3 tokens every 20 ms, the first 4 rounds
held back and sent with the 5th (as text held until it is valid UTF-8), a role chunk
first. The truth is the server's own send stamps and per-chunk token counts (--send-log),
read here independently of the client: tokens after the first chunk / (last - first send).
By hand: 3 tokens / 20 ms = 150 tok/s."""

import json
import sys

import pytest
from conftest import ROOT, assert_summary_reproduced, free_port, start, stop

from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server

ROUNDS, TPC, HOLD, INTERVAL_MS = 20, 3, 4, 20.0
MODEL = f"tokens={ROUNDS},tpc={TPC},hold={HOLD},interval_ms={INTERVAL_MS}"
# first chunk: the 4 held rounds and its own, 5 x 3 = 15 tokens; then 15 chunks of 3
CHUNKS = (15,) + (3,) * 15
ARGS = ("--suite", "code", "--requests", "3", "--warmup", "0", "--json")


@pytest.fixture(scope="module")
def vllm_like(tmp_path_factory):
    """A scripted server that names itself vllm in /v1/models and logs its send times."""
    folder = tmp_path_factory.mktemp("chunks")
    port, send_log = free_port(), folder / "send.jsonl"
    cmd = [sys.executable, str(ROOT / "tests/scripted_server.py"), "--port", str(port)]
    cmd += ["--send-log", str(send_log), "--owned-by", "vllm"]
    proc = start(cmd, f"http://127.0.0.1:{port}/health", folder / "output.txt", 30)
    yield f"http://127.0.0.1:{port}", send_log
    stop(proc)


def truth_tok_s(send_log, response_id: str) -> float:
    (sent,) = [r for r in map(json.loads, send_log.read_text().splitlines()) if r["id"] == response_id]
    assert tuple(sent["tokens"]) == CHUNKS
    return sum(sent["tokens"][1:]) / ((sent["t_ns"][-1] - sent["t_ns"][0]) / 1e9)


@pytest.mark.parametrize(
    "api, args, source",
    [
        ("chat", (), "usage"),  # continuous usage on every chunk
        ("completions", (), "usage"),
        ("chat", ("--logprobs",), "logprobs"),  # the server sends no running usage
        ("completions", ("--logprobs",), "logprobs"),
    ],
)
def test_decode_rate_is_within_5_percent_of_the_servers_own_send_stamps(vllm_like, measure, api, args, source):
    url, send_log = vllm_like
    cusage = "" if source == "usage" else ",cusage=0"
    m = measure(url, "--model", f"{MODEL}{cusage},run={api}{source}", "--api", api, *args, *ARGS)
    assert m.exit_code == 0, m.stderr
    for r in read_run(m.run_file).requests:
        assert (r.chunk_tokens, r.chunk_source, r.output_tokens) == (CHUNKS, source, 60)
        assert r.decode_tok_s == pytest.approx(truth_tok_s(send_log, r.response_id), rel=0.05)
        # by hand, 45 tokens in 300 ms; the server keeps an absolute schedule, so a first
        # chunk sent d ms late (a loaded 2-core machine: 27 ms seen) gives 45 / (300 - d) ms
        # and 25 % covers d up to 60 ms; a miscount (60 tokens: 200 tok/s) still fails
        assert r.decode_tok_s == pytest.approx(150, rel=0.25)
    (g,) = m.json()["suites"]
    # the role chunk, sent at once, is no token: TTFT covers the 5 rounds before the first
    # content chunk (100 ms), plus the request's own way to the server and back
    assert (HOLD + 1) * INTERVAL_MS <= g["ttft_ms"]["min"] < 2 * (HOLD + 1) * INTERVAL_MS
    # 16 chunks per request: 15 of 3 tokens, 1 of 15; p99 of 48 values: between the 47th and 48th
    assert (g["tokens_per_chunk"]["n"], g["tokens_per_chunk"]["p50"]) == (48, 3)
    assert g["tokens_per_chunk"]["mean"] == pytest.approx(60 / 16)
    assert g["tokens_per_chunk"]["source"] == [source]
    # the client's view of a round: 3 tokens per chunk after the first, one chunk per 20 ms
    assert g["client_accept_len"] == pytest.approx(3.0)
    assert g["client_round_ms"] == pytest.approx(INTERVAL_MS, rel=0.25)  # lag as above
    # vllm bench serve's TPOT counts all 59 tokens after the first over the 15 gaps
    # (300 ms by hand): 300 / 59 = 5.08 ms, faster than the true 20 / 3 = 6.67 ms per token;
    # the span itself from the server's send stamps, as it may lag its schedule
    spans_ms = sorted(45 / truth_tok_s(send_log, r.response_id) * 1e3 for r in read_run(m.run_file).requests)
    assert g["tpot_ms"]["p50"] == pytest.approx(spans_ms[1] / 59, rel=0.05)
    assert g["tpot_ms"]["p50"] == pytest.approx(300 / 59, rel=0.25)


def test_without_per_chunk_counts_the_split_is_flagged_as_an_estimate(vllm_like, measure):
    url, _ = vllm_like
    m = measure(url, "--model", f"{MODEL},cusage=0,run=even", *ARGS)
    (g,) = m.json()["suites"]
    assert g["tokens_per_chunk"]["source"] == ["even"] and g["tokens_per_chunk"]["p50"] is None
    assert g["tokens_per_chunk"]["mean"] == pytest.approx(60 / 16)
    for r in read_run(m.run_file).requests:
        assert r.chunk_source == "even" and r.chunk_tokens is None


def test_a_local_tokenizer_counts_each_chunk(vllm_like, measure, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    # one token per word the server sends ("t4.2 "): 20 rounds x 3 words
    words = ["<unk>"] + [f"t{i}.{j}" for i in range(ROUNDS) for j in range(TPC)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    url, send_log = vllm_like
    model = f"{MODEL},cusage=0,usage=0,run=tok"  # nothing from the server but text
    m = measure(url, "--model", model, "--tokenizer", str(tmp_path), *ARGS)
    assert m.exit_code == 0, m.stderr
    for r in read_run(m.run_file).requests:
        assert (r.chunk_tokens, r.chunk_source, r.token_count_source) == (CHUNKS, "tokenizer", "tokenizer")
        assert r.decode_tok_s == pytest.approx(truth_tok_s(send_log, r.response_id), rel=0.05)


def test_llamacpp_timings_give_the_servers_own_rate_per_request(vllm_like, measure):
    url, _ = vllm_like
    m = measure(url, "--model", f"{MODEL},timings=1,run=timings", *ARGS)
    (g,) = m.json()["suites"]
    # the scripted timings: 60 tokens over the 19 rounds after the first (380 ms) = 158 tok/s
    assert g["server_decode_tok_s"]["source"] == "timings"
    assert g["server_decode_tok_s"]["p50"] == pytest.approx(60 / 0.38, rel=0.05)


def test_goodput_counts_the_requests_within_every_limit(vllm_like, measure):
    url, _ = vllm_like
    # TTFT is the 5 held rounds, ~100 ms; TPOT ~5.1 ms (above)
    loose = measure(url, "--model", f"{MODEL},run=slo", *ARGS, "--slo", "ttft_ms=1000,tpot_ms=50")
    (g,) = loose.json()["suites"]
    assert g["goodput"] == pytest.approx(g["request_throughput"]) and g["request_throughput"] > 0
    assert_summary_reproduced(loose.run_file)  # the limits are in the run file
    tight = measure(url, "--model", f"{MODEL},run=slo", *ARGS, "--slo", "ttft_ms=50")
    assert tight.json()["suites"][0]["goodput"] == 0
    assert "goodput" not in measure(url, "--model", f"{MODEL},run=slo", *ARGS).json()["suites"][0]
