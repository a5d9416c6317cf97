"""show against hostile run files: a line that does not fit the run-file schema is
counted and skipped, the rest shows as it would without it; a file that is no run file
at all is one clear error; memory does not follow the file's size."""

import gzip
import json
import os
import random
import threading

import pytest
from click.testing import CliRunner
from conftest import run_cli

from decodescope.cli.main import cli
from decodescope.errors import DecodescopeError
from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def real_run(scripted_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("show") / "run.jsonl"
    args = ["measure", scripted_server.url, "--model", "tokens=6,run=show-hostile", "--suite", "code"]
    r = CliRunner().invoke(cli, [*args, "--requests", "3", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    return out


def show_json(path) -> tuple[int, dict | None, str]:
    r = CliRunner().invoke(cli, ["show", str(path), "--json"])
    assert r.exception is None or isinstance(r.exception, SystemExit | DecodescopeError), repr(r.exception)
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else None), r.stderr


def request_line(real_run, **changes) -> str:
    line = next(json.loads(x) for x in real_run.read_text().splitlines() if '"type": "request"' in x)
    return json.dumps(line | changes, allow_nan=True)


BAD = {  # each a line a hostile or damaged file may hold, and why it is skipped
    "binary": (lambda run: os.urandom(300).replace(b"\n", b"").decode("latin-1"), "not JSON"),
    "a list": (lambda run: "[1, 2]", "a JSON list"),
    "null": (lambda run: "null", "a JSON NoneType"),
    "a number": (lambda run: "42", "a JSON int"),
    "warmup a string": (lambda run: request_line(run, warmup="false"), 'warmup is "false"'),
    "negative tokens": (lambda run: request_line(run, output_tokens=-100), "output_tokens is -100"),
    "tokens a bool": (lambda run: request_line(run, output_tokens=True), "output_tokens is true"),
    "tokens 1e400": (lambda run: request_line(run).replace('"output_tokens": 6', '"output_tokens": 1e400'),
                     "output_tokens is Infinity"),
    "a 400-digit count": (lambda run: request_line(run).replace('"output_tokens": 6', '"output_tokens": 1' + "0" * 400),
                          "output_tokens is 1000"),
    "ttft a string": (lambda run: request_line(run, ttft_ms="fast"), 'ttft_ms is "fast"'),
    "gaps NaN": (lambda run: request_line(run, itl_ms=[float("nan")]), "itl_ms is [NaN]"),
    "gaps null": (lambda run: request_line(run, itl_ms=None), "itl_ms is null"),
    "no suite": (lambda run: request_line(run, suite=None), "suite is null"),
    "concurrency 0": (lambda run: request_line(run, concurrency=0), "concurrency is 0"),
    "ok with an error": (lambda run: request_line(run, error_kind="http"), "ok with an error_kind"),
    "missing fields": (lambda run: '{"type": "request"}', "no suite"),
    "accept len 0.5": (lambda run: '{"type": "metrics", "time_s": 1.0, "window_s": 1.0, "accept_len": 0.5, '
                       '"gen_tok_s": 10.0, "warmup": false}', "accept_len is 0.5"),
    "accept len 1e308": (lambda run: '{"type": "server_log", "time_s": 1.0, "window_s": 1.0, "accept_len": 1e308, '
                         '"gen_tok_s": 10.0, "warmup": false}', "accept_len is 1e+308"),
    "summary interrupted a string": (lambda run: '{"type": "summary", "interrupted": "yes"}', "interrupted is not"),
    "unknown type": (lambda run: '{"type": "hello"}', 'unknown line type "hello"'),
    "100k-deep": (lambda run: "[" * 100_000 + "]" * 100_000, "not JSON"),
}


@pytest.mark.parametrize("name", BAD)
def test_a_bad_line_is_counted_and_skipped_and_the_rest_shows(name, real_run, tmp_path):
    make, why = BAD[name]
    lines = real_run.read_text().splitlines()
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("\n".join([*lines[:2], make(real_run), *lines[2:]]) + "\n", encoding="latin-1")
    code, shown, stderr = show_json(hostile)
    assert code == 0, stderr
    assert shown["skipped_lines"] == 1 and why in shown["skipped_why"][0], shown["skipped_why"]
    assert shown["skipped_why"][0].startswith("line 3: ")
    _, clean, _ = show_json(real_run)
    strip = ("run_file", "skipped_lines", "skipped_why")
    assert {k: v for k, v in shown.items() if k not in strip} == {k: v for k, v in clean.items() if k not in strip}
    table = CliRunner().invoke(cli, ["show", str(hostile)])
    assert table.exit_code == 0 and "1 lines skipped" in table.stdout


def test_a_gzipped_run_file_shows_as_the_plain_one(real_run, tmp_path):
    packed = tmp_path / "run.jsonl.gz"
    packed.write_bytes(gzip.compress(real_run.read_bytes()))
    _, shown, _ = show_json(packed)
    _, clean, _ = show_json(real_run)
    assert shown["skipped_lines"] == 0 and shown["suites"] == clean["suites"]


def test_a_gzipped_run_file_through_a_pipe_shows_whole(real_run, tmp_path):
    """As `show <(ssh host cat run.jsonl.gz)` does: the gzip sniff peeks, it does not consume."""
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(gzip.compress(real_run.read_bytes())), daemon=True)
    writer.start()
    _, shown, stderr = show_json(fifo)
    writer.join(10)
    _, clean, _ = show_json(real_run)
    assert shown is not None, stderr
    assert shown["skipped_lines"] == 0 and shown["suites"] == clean["suites"] and shown["complete"]


def test_a_truncated_gzip_keeps_what_came_before_the_damage(real_run, tmp_path):
    packed = gzip.compress(real_run.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 3 // 4])
    code, shown, stderr = show_json(cut)
    assert code == 0, stderr
    assert not shown["complete"] and shown["skipped_lines"] == 1 and "cannot be read on" in shown["skipped_why"][0]


@pytest.mark.parametrize("content", [os.urandom(5000), b"", b"null\n", b"[]\n", b'{"type": "header", "schema": "1"}\n'])
def test_a_file_that_is_no_run_is_one_clear_error(content, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(DecodescopeError, match="run.file"):
        read_run(path)
    code, _, _ = show_json(path)
    assert code != 0


def test_show_memory_does_not_follow_the_file_size(real_run, tmp_path):
    """100 MB of lines the summary does not keep (junk, 1 MB error texts) cost no memory:
    the file is streamed, not read whole (before: 816 MB for a 100 MB file)."""
    lines = real_run.read_text().splitlines()
    failed = request_line(real_run, ok=False, error_kind="http", error="x" * 2**20)
    big = tmp_path / "big.jsonl"
    with big.open("w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
        for _ in range(50):
            f.write(failed + "\n" + "junk " * 200_000 + "\n")  # 1 MB + 1 MB per round
        f.write(lines[-1] + "\n")
    assert big.stat().st_size > 100e6
    code, stderr, small_mb, _ = run_cli(["show", str(real_run), "--json"], 60)
    assert code == 0, stderr
    code, stderr, big_mb, _ = run_cli(["show", str(big), "--json"], 60)
    assert code == 0, stderr
    # one line at a time: the largest line (1 MB) and its JSON, not the file
    assert big_mb - small_mb < 30, f"{small_mb:.0f} MB -> {big_mb:.0f} MB"


def test_show_memory_stays_flat_with_many_gaps(real_run, tmp_path):
    """50 MB of realistic requests (255 inter-chunk gaps each, spread over many distinct
    values) take no more memory than a 3-request run: the summary is added up as the lines
    stream in and the gaps counted in 1 µs bins."""
    lines = real_run.read_text().splitlines()
    rng = random.Random(0)
    line = json.loads(request_line(real_run))
    big = tmp_path / "gaps.jsonl"
    with big.open("w") as f:
        f.write(lines[0] + "\n")
        for i in range(9200):  # ~5.5 KB a line
            gaps = [rng.uniform(15.0, 45.0) for _ in range(255)]  # ms
            f.write(json.dumps(line | {"itl_ms": gaps, "start_s": i, "end_s": i + 1, "output_tokens": 256}) + "\n")
        f.write(lines[-1] + "\n")
    assert big.stat().st_size > 50e6
    code, stderr, small_mb, _ = run_cli(["show", str(real_run), "--json"], 60)
    assert code == 0, stderr
    code, stderr, big_mb, _ = run_cli(["show", str(big), "--json"], 120)
    assert code == 0, stderr
    # 30,000 distinct 1 µs bins (15-45 ms) x ~100 B a bin: ~3 MB, plus one line at a time
    assert big_mb - small_mb < 25, f"{small_mb:.0f} MB -> {big_mb:.0f} MB"  # before: 36 -> 135 MB


def test_show_memory_stays_flat_with_many_server_samples(real_run, tmp_path):
    """50 MB of server-log sample lines: they count for a suite only once every suite's
    window is known, so show reads them a second time rather than holding them."""
    lines = real_run.read_text().splitlines()
    sample = {"type": "server_log", "window_s": 1.0, "accept_len": 3.0, "gen_tok_s": 55.0, "warmup": False}
    big = tmp_path / "samples.jsonl"
    with big.open("w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
        for i in range(440_000):  # ~115 B a line
            f.write(json.dumps(sample | {"time_s": i * 1e-3}) + "\n")
        f.write(lines[-1] + "\n")
    assert big.stat().st_size > 50e6
    code, stderr, small_mb, _ = run_cli(["show", str(real_run), "--json"], 60)
    assert code == 0, stderr
    code, stderr, big_mb, _ = run_cli(["show", str(big), "--json"], 120)
    assert code == 0, stderr
    assert big_mb - small_mb < 25, f"{small_mb:.0f} MB -> {big_mb:.0f} MB"  # before: 36 -> 401 MB


def test_names_without_end_are_not_held(real_run, tmp_path):
    """A hostile file naming a new suite or error kind on every line: 1000 suites are
    shown, the rest counted as skipped; past 20 error kinds a suite counts "other"."""
    lines = real_run.read_text().splitlines()
    path = tmp_path / "names.jsonl"
    failed = [request_line(real_run, suite="x", warmup=False, ok=False, error_kind=f"kind{i}") for i in range(25)]
    named = [request_line(real_run, suite=f"s{i}", warmup=False) for i in range(1200)]
    path.write_text("\n".join([lines[0], *failed, *named, lines[-1]]) + "\n")
    code, shown, stderr = show_json(path)
    assert code == 0, stderr
    assert len(shown["suites"]) == 1000 and shown["skipped_lines"] == 201, "x, s0..s998 shown; s999..s1199 not"
    assert "more than 1000 suites and load levels" in shown["skipped_why"][0]
    errors = shown["suites"][0]["errors"]
    assert len(errors) == 21 and errors["other"] == 5, "kind0..kind19, then 5 more as other"
