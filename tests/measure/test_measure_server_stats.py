"""The server's own statistics read during a run, from a real server's log and /metrics:
the scripted server emits 3 tokens per chunk (one decode round of 3-step speculation
accepting 2 drafts + the bonus), so accept_len is 3 and gen throughput 3 tokens per
interval per running request."""

import json
import threading
import time

import pytest
from conftest import assert_summary_reproduced

from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server

MODEL = "tpc=3,tokens=40,interval_ms=5,run=stats"  # 40 rounds of 5 ms: 600 tok/s per stream


@pytest.fixture(scope="module")
def stats_run(scripted_server, tmp_path_factory):
    from click.testing import CliRunner

    from decodescope.cli.main import cli

    out = tmp_path_factory.mktemp("stats") / "run.jsonl"
    args = [
        "measure",
        scripted_server.url,
        "--model",
        MODEL,
        "--suite",
        "code",
        "--suite",
        "prose",
        "--requests",
        "3",
        "--server-log",
        str(scripted_server.log),
        "--metrics-url",
        scripted_server.url + "/metrics",
        "--metrics-interval",
        "0.1",
        "--out",
        str(out),
        "--json",
    ]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout), out


def test_each_suite_gets_the_servers_accept_len_from_its_log(stats_run):
    summary, _ = stats_run
    for suite in summary["suites"]:
        assert suite["accept_len"]["source"] == "server_log"
        assert suite["accept_len"]["mean"] == pytest.approx(3.0)
        assert suite["server_gen_tok_s"]["mean"] == pytest.approx(600, rel=0.25)
    assert summary["accept_len"]["mean"] == pytest.approx(3.0)


def test_the_round_time_ties_the_clients_rate_to_the_servers_acceptance(stats_run):
    summary, _ = stats_run
    for suite in summary["suites"]:  # 3 tokens per 5 ms round
        assert suite["round_ms"] == pytest.approx(5.0, rel=0.1)
        assert suite["round_ms"] == 1000 * suite["accept_len"]["mean"] / suite["decode_tok_s"]["p50"]


def test_metrics_scrapes_and_log_lines_are_appended_to_the_run_file(stats_run):
    _, out = stats_run
    run = read_run(out)
    kinds = {s["type"] for s in run.samples}
    assert kinds == {"server_log", "metrics"}
    metrics = [s for s in run.samples if s["type"] == "metrics" and s["accept_len"] is not None]
    assert metrics and all(s["accept_len"] == pytest.approx(3.0) for s in metrics), "1 + accepted / drafts"
    assert all(s["data"]["engine"] == "vllm" for s in metrics)


def test_samples_straddling_warmup_or_idle_time_are_left_out(stats_run):
    summary, out = stats_run
    run = read_run(out)
    log_samples = [s for s in run.samples if s["type"] == "server_log"]
    counted = sum(g["accept_len"]["n"] for g in summary["suites"])
    assert 0 < counted < len(log_samples), "the warm-up's lines and each suite's first line must not count"
    assert_summary_reproduced(out)


def test_metrics_alone_also_give_accept_len(scripted_server, measure):
    metrics = ("--metrics-url", scripted_server.url + "/metrics", "--metrics-interval", "0.1")
    m = measure(scripted_server.url, *f"--model {MODEL} --suite code --requests 3 --json".split(), *metrics)
    (suite,) = m.json()["suites"]
    assert suite["accept_len"]["source"] == "metrics"
    assert suite["accept_len"]["mean"] == pytest.approx(3.0)


def test_a_metrics_url_that_answers_404_warns_and_the_run_goes_on(scripted_server, measure):
    bad = scripted_server.url + "/nothing"
    m = measure(scripted_server.url, "--model", MODEL, "--suite", "code", "--requests", "2", "--metrics-url", bad, "--json")
    assert m.exit_code == 0, m.stderr
    assert "cannot scrape" in m.stderr and "HTTP 404" in m.stderr
    assert m.json()["requests_ok"] == 2
    assert not [s for s in read_run(m.run_file).samples if s["type"] == "metrics"]


# one request's lines as llama-server writes them (tools/server/server-context.cpp print_timing)
LLAMACPP_LINES = (
    "slot print_timing: id  0 | task 1 | prompt eval time =       2.00 ms /     7 tokens (    0.29 ms per token,"
    "  3500.00 tokens per second)\n"
    "slot print_timing: id  0 | task 1 |        eval time =     100.00 ms /    30 tokens (    3.33 ms per token,"
    "   300.00 tokens per second)\n"
    "slot print_timing: id  0 | task 1 |       total time =     102.00 ms /    37 tokens\n"
)


def test_a_server_log_that_appears_during_the_run_is_waited_for_and_read_whole(scripted_server, measure, tmp_path):
    log = tmp_path / "later.log"

    def server_starts_logging():  # as a server started after measure writes its log
        time.sleep(0.4)
        log.write_text(LLAMACPP_LINES)

    threading.Thread(target=server_starts_logging, daemon=True).start()
    model = "tokens=10,interval_ms=50,run=latelog"  # 0.5 s per request, 2 s in all
    m = measure(scripted_server.url, "--model", model, "--suite", "code", "--requests", "4", "--server-log", str(log))
    assert m.exit_code == 0, m.stderr
    assert "waiting for the server log" in m.stderr
    logged = [s for s in read_run(m.run_file).samples if s["type"] == "server_log"]
    rates = [s["gen_tok_s"] for s in logged if s["gen_tok_s"] is not None]
    assert rates == [300.0], "the eval line, written before the first poll, is read"


def test_a_llamacpp_log_gives_each_request_its_own_decode_rate_and_accept_len(scripted_server, measure):
    """llama-server logs one request per line, as it finishes: every measured request of a
    suite and level is counted there (c=1 and c=3, 3 requests each), its rate as a
    per-request figure, never as the server's total."""
    args = ["--model", "tpc=3,tokens=30,interval_ms=5,run=lcpp", "--suite", "code", "--concurrency", "1,3"]
    m = measure(scripted_server.url, *args, "--requests", "3", "--server-log", str(scripted_server.llamacpp_log), "--json")
    assert m.exit_code == 0, m.stderr
    for g in m.json()["suites"]:
        assert g["server_decode_tok_s"]["n"] == 3 and g["accept_len"]["n"] == 3, g["concurrency"]
        assert g["server_decode_tok_s"]["mean"] == pytest.approx(600, rel=0.25), "3 tokens per 5 ms round"
        assert g["accept_len"]["mean"] == pytest.approx(3.0)
        assert "server_gen_tok_s" not in g
    assert_summary_reproduced(m.run_file)


def test_show_gives_the_same_figures_from_a_file_and_from_a_pipe(stats_run):
    """From a file, show reads the server samples a second time instead of holding them;
    from a pipe it must hold them: both ways give one summary, the run's own."""
    import subprocess
    import sys

    summary, out = stats_run
    cmd = [sys.executable, "-m", "decodescope", "show", "--json"]
    from_file = json.loads(subprocess.run([*cmd, str(out)], capture_output=True, check=True).stdout)
    piped = subprocess.run([*cmd, "/dev/stdin"], input=out.read_bytes(), capture_output=True, check=True).stdout
    from_pipe = json.loads(piped)
    assert from_file["suites"][0]["accept_len"]["n"] > 0, "server samples must count"
    assert {k: v for k, v in from_file.items() if k != "run_file"} == {k: v for k, v in from_pipe.items() if k != "run_file"}
    assert_summary_reproduced(out)
