"""`decodescope measure` as a user runs it, against the real scripted server."""

import json
import os

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli

pytestmark = pytest.mark.server

DIST_KEYS = {"mean", "p50", "p90", "p99"}


def test_json_has_per_suite_results_and_the_run_file(scripted_server, measure):
    m = measure(
        scripted_server.url, *"--model tokens=5,run=cli --suite repetitive --suite code --requests 2 --json".split()
    )
    out = m.json()
    assert [g["name"] for g in out["suites"]] == ["repetitive", "code"]
    for g in out["suites"]:
        assert (g["requests_ok"], g["requests_failed"]) == (2, 0)
        for key in ("ttft_ms", "itl_ms", "decode_tok_s"):
            assert DIST_KEYS <= set(g[key]) and g[key]["mean"] > 0
    assert out["run_file"] == str(m.run_file)


def test_tables_name_each_suite_and_carry_units(scripted_server, measure):
    m = measure(scripted_server.url, "--model", "tokens=5,run=cli", "--suite", "prose", "--requests", "2")
    assert m.exit_code == 0
    for text in ("prose", "concurrency 1", "TTFT (ms)", "inter-chunk gap (ms)", "(tok/s)", "run file:"):
        assert text in m.output


def test_model_defaults_to_the_first_served_id_and_out_to_runs(scripted_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        cli, ["measure", scripted_server.url + "/v1", "--suite", "code", "--requests", "1", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["run_file"].startswith("runs/") and os.path.exists(out["run_file"])
    header = json.loads(open(out["run_file"]).readline())
    assert header["model"] == "scripted"


def test_completions_api_and_reasoning_chunks_are_timed(scripted_server, measure):
    m = measure(
        scripted_server.url, *"--model tokens=6,run=cmpl --api completions --suite code --requests 1 --json".split()
    )
    assert m.json()["suites"][0]["output_tokens"]["mean"] == 6
    m = measure(
        scripted_server.url, *"--model tokens=6,reasoning=4,usage=0,run=think --suite code --requests 1 --json".split()
    )
    g = m.json()["suites"][0]
    assert g["output_tokens"]["mean"] == 6, "4 reasoning + 2 content chunks, all tokens"
    assert g["token_count_source"] == ["chunks"], "no usage from the server: said so"


def test_a_stream_without_done_line_but_with_finish_reason_is_ok(scripted_server, measure):
    m = measure(
        scripted_server.url, "--model", "tokens=4,done=0,run=nodone", "--suite", "code", "--requests", "1", "--json"
    )
    assert m.json()["requests_ok"] == 1


def test_a_sweep_ends_with_one_row_per_suite_and_level_from_the_same_figures(scripted_server, measure):
    args = "--model tokens=5,interval_ms=5,run=sweep --suite code --suite prose --concurrency 1,2 --requests 2"
    m = measure(scripted_server.url, *args.split())
    assert m.exit_code == 0, m.output
    sweep = m.output[m.output.index("sweep (c: requests in flight") :]
    shown = CliRunner().invoke(cli, ["show", str(m.run_file), "--json"])
    rows = [line for line in sweep.splitlines() if line.startswith("│")]
    expect = [(g["name"], g["concurrency"], g["decode_tok_s"]["p50"]) for g in json.loads(shown.stdout)["suites"]]
    assert len(rows) == 4
    for row, (name, c, p50) in zip(rows, sorted(expect, key=lambda e: e[0] != "code")):
        cells = [x.strip() for x in row.strip("│").split("│")]
        assert cells[:3] == [name, f"c={c}", f"{p50:.1f}"], "a suite's levels together, figures as in the JSON"


def test_one_load_level_prints_no_sweep(scripted_server, measure):
    m = measure(scripted_server.url, *"--model tokens=3,run=nosweep --suite code --requests 1".split())
    assert m.exit_code == 0 and "sweep" not in m.output
