"""The run file: appended as the run goes, read back whole or cut off."""

import json

import pytest
from conftest import assert_summary_reproduced

from decodescope.errors import DecodescopeError
from decodescope.measure.runfile import RunWriter, read_run

pytestmark = pytest.mark.server


@pytest.fixture
def finished_run(scripted_server, measure):
    m = measure(
        scripted_server.url, *"--model tokens=6,run=runfile --suite code --suite prose --requests 3 --json".split()
    )
    assert m.exit_code == 0
    return m


def test_layout_is_header_requests_summary(finished_run):
    kinds = [json.loads(line)["type"] for line in finished_run.run_file.read_text().splitlines()]
    assert kinds[0] == "header" and kinds[-1] == "summary"
    assert kinds.count("request") == 7, "1 warm-up + 2 suites x 3"
    header = json.loads(finished_run.run_file.read_text().splitlines()[0])
    assert header["schema"] == 1 and header["model"] == "tokens=6,run=runfile"
    assert header["suites"] == ["code", "prose"] and header["url"].startswith("http://127.0.0.1:")
    assert header["start_time"] and header["command"] == "measure"


def test_read_run_recomputes_the_saved_summary(finished_run):
    run = read_run(finished_run.run_file)
    assert run.complete and len(run.requests) == 7
    assert_summary_reproduced(finished_run.run_file)
    assert finished_run.json()["run_file"] == str(finished_run.run_file)


def test_a_run_cut_off_mid_line_reads_back_without_its_summary(finished_run, tmp_path):
    lines = finished_run.run_file.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:5]) + "\n" + lines[5][: len(lines[5]) // 2])  # killed while writing line 6
    run = read_run(cut)
    assert not run.complete
    assert len(run.requests) == 4
    assert run.summary["requests_ok"] == 3 and run.summary["warmup_requests"] == 1


def test_a_file_that_is_not_a_run_is_a_clear_error(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "request"}\n')
    with pytest.raises(DecodescopeError, match="no header line"):
        read_run(path)


def test_non_finite_numbers_become_null_so_the_file_stays_json(tmp_path):
    w = RunWriter(tmp_path / "r.jsonl", {"url": "http://x"})
    w.write({"type": "metrics", "time_s": 1.0, "gen_tok_s": float("nan"), "data": {"x": [float("inf")]}})
    w.close()
    line = (tmp_path / "r.jsonl").read_text().splitlines()[1]
    assert json.loads(line)["gen_tok_s"] is None and "NaN" not in line


def test_an_existing_run_file_is_never_overwritten(tmp_path):
    (tmp_path / "r.jsonl").write_text("precious\n")
    with pytest.raises(DecodescopeError, match="exists"):
        RunWriter(tmp_path / "r.jsonl", {})
    assert (tmp_path / "r.jsonl").read_text() == "precious\n"


def show(*args: str):
    from click.testing import CliRunner

    from decodescope.cli.main import cli

    return CliRunner().invoke(cli, ["show", *map(str, args)])


def test_show_prints_the_same_figures_as_the_run_did(finished_run):
    r = show(finished_run.run_file, "--json")
    assert r.exit_code == 0, r.output
    shown = json.loads(r.stdout)
    assert shown.pop("complete") is True and shown.pop("header")["model"] == "tokens=6,run=runfile"
    assert (shown.pop("skipped_lines"), shown.pop("skipped_why")) == (0, [])
    assert shown == finished_run.json(), "measure --json and show --json are one summary"


def test_show_tables_a_run_cut_off_mid_line_and_says_so(finished_run, tmp_path):
    lines = finished_run.run_file.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
    r = show(cut)
    assert r.exit_code == 0, r.output
    assert "code — concurrency 1 — 3 ok, 0 failed" in r.stdout and "TTFT (ms)" in r.stdout
    assert "cut off" in r.stdout


def test_show_of_a_file_that_is_not_a_run_exits_2_with_the_fix(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "x.jsonl"
    path.write_text("hello\n")
    p = subprocess.run([sys.executable, "-m", "decodescope", "show", str(path)], capture_output=True, text=True)
    assert p.returncode == 2 and "not a decodescope run file" in p.stderr and "measure --out" in p.stderr
