"""explain from each kind of input: a real run file from `measure` against the scripted
server, a server log, points; and the errors for bad input."""

import json

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.explain.inputs import from_log

FLAGS = ["--gpu", "h100-sxm", "--spec", "ngram:3", "--engine", "sglang"]
# 3 tokens per chunk (2 accepted drafts + the bonus), one chunk every 5 ms: a 5 ms round
MODEL = "tpc=3,tokens=40,interval_ms=5,run=explain"


def explain(*args):
    return CliRunner().invoke(cli, ["explain", *args])


@pytest.mark.server
def test_a_run_file_gives_one_point_per_suite_and_the_servers_round(scripted_server, tmp_path):
    out = tmp_path / "run.jsonl"
    r = CliRunner().invoke(cli, ["measure", scripted_server.url, "--model", MODEL, "--suite", "code", "--suite",
                                 "prose", "--requests", "3", "--server-log", str(scripted_server.log),
                                 "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    suites = json.loads(r.stdout)["suites"]
    r = explain(str(out), "llama-3.1-8b", *FLAGS, "--json")
    assert r.exit_code == 0, r.output
    ex = json.loads(r.stdout)
    a = [s["accept_len"]["mean"] for s in suites]
    t = [s["decode_tok_s"]["p50"] for s in suites]
    # least squares through the origin: R = sum a^2 / sum a t
    assert ex["measured_round_ms"] == pytest.approx(1000 * sum(x * x for x in a) / sum(x * y for x, y in zip(a, t)))
    assert [p["round_ms"] for p in ex["observations"]["points"]] == pytest.approx([s["round_ms"] for s in suites])
    # the server sends a round every 5 ms (its loop keeps the schedule, so a late send makes
    # the next gap shorter): about 5 ms, within the jitter of a loaded 2-core machine
    assert ex["measured_round_ms"] == pytest.approx(5.0, rel=0.15)
    assert ex["accept_len"] == pytest.approx(3.0)  # --accept defaults to the points' mean


def test_a_log_gives_its_steady_window_and_drops_the_warm_up_line():
    from decodescope.cli.demo_cmd import DATA
    obs = from_log(str(DATA / "reference-sglang.log"))
    # line 2 only: 3.08 tokens per round at 55.59 tok/s = 55.41 ms; line 1 (2.89 tok/s) is warm-up
    assert [(p.accept_len, p.tok_s) for p in obs.points] == [(3.08, 55.59)]
    assert obs.points[0].round_ms == pytest.approx(1000 * 3.08 / 55.59)
    assert obs.log.decode_windows == 1 and obs.log.cuda_graph_off_windows == 0


def test_log_and_points_that_repeat_a_point_count_it_once():
    from decodescope.cli.demo_cmd import DATA
    r = explain("qwen3.6-27b", "--gpu", "rtx-a6000", "--tp", "2", "--link", "pcie-sys", "--spec", "mtp:3",
                "--engine", "sglang", "--log", str(DATA / "reference-sglang.log"), "--points", "3.08:55.59,3.98:72",
                "--json")
    assert r.exit_code == 0, r.output
    points = json.loads(r.stdout)["observations"]["points"]
    assert len(points) == 2 and len(points[0]["sources"]) == 2


@pytest.mark.parametrize("args,message", [
    (["qwen3.6-27b", "--gpu", "rtx-a6000"], "give a run file, --log FILE or --points"),
    (["qwen3.6-27b", "--points", "3:50"], "--gpu is required"),
    (["qwen3.6-27b", "--gpu", "rtx-a6000", "--points", "3:50"], "accept length up to 3, but no --spec"),
    (["qwen3.6-27b", "--gpu", "rtx-a6000", "--spec", "mtp:3", "--points", "3:50", "--target", "-1"], "> 0"),
    (["qwen3.6-27b", "--gpu", "rtx-a6000", "--spec", "mtp:3", "--points", "3,50"], "ACCEPT_LEN:TOK_S"),
    (["qwen3.6-27b", "--gpu", "rtx-a6000", "--spec", "mtp:3", "--log", "/nonexistent.log"], "cannot read"),
    (["no-such.jsonl", "qwen3.6-27b", "--gpu", "rtx-a6000", "--spec", "mtp:3"], "no-such.jsonl"),
])
def test_bad_input_is_one_clear_error_never_a_traceback(args, message, tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "decodescope", "explain", *args], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_log_with_no_decode_window_is_a_clear_error(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("nothing here\n")
    r = explain("qwen3.6-27b", "--gpu", "rtx-a6000", "--spec", "mtp:3", "--log", str(log))
    assert r.exit_code != 0 and "no steady decode window" in str(r.exception)
