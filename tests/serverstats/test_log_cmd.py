"""`decodescope log` end to end: a real process on files the tests write."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

# the reference case's two SGLang log lines, as shipped for `decodescope demo`
SEED = (Path(__file__).resolve().parents[2] / "decodescope" / "explain" / "data" / "reference-sglang.log").read_text()

VLLM = (
    "(APIServer pid=1) INFO 05-04 01:06:53 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 182.3 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, "
    "Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=1) INFO 05-04 01:06:53 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.93, "
    "Accepted throughput: 120.50 tokens/s, Drafted throughput: 187.20 tokens/s, Accepted: 1205 tokens, "
    "Drafted: 1872 tokens, Per-position acceptance rate: 0.812, 0.634, 0.488, Avg Draft acceptance rate: 64.4%\n"
)


def run(*args, stdin: bytes | None = None):
    return subprocess.run(
        [sys.executable, "-m", "decodescope", "log", *args], input=stdin, capture_output=True, timeout=120
    )


def seed_check(out: dict):
    assert out["engine"] == "sglang"
    assert [r["warmup"] for r in out["records"]] == [True, False]
    steady = out["records"][1]
    assert (steady["kind"], steady["accept_len"], steady["gen_tok_s"]) == ("decode", 3.08, 55.59)
    assert steady["fields"]["mamba num"] == 3
    s = out["summary"]
    # acceptance from both windows: (3.70 + 3.08) / 2; the round from the steady one
    assert s["accept_len"] == {"mean": pytest.approx(3.39), "min": 3.08, "max": 3.70, "n": 2}
    assert s["gen_tok_s"]["mean"] == 55.59
    assert s["round_ms"] == pytest.approx(1000 * 3.08 / 55.59)
    assert s["skipped_lines"] == 0


def test_seed_log_json_reports_the_steady_line_and_flags_the_first(tmp_path):
    f = tmp_path / "server.log"
    f.write_text(SEED)
    p = run(str(f), "--json")
    assert p.returncode == 0, p.stderr.decode()
    seed_check(json.loads(p.stdout))


def test_gzip_and_stdin_read_the_same_as_plain(tmp_path):
    f = tmp_path / "server.log.gz"
    f.write_bytes(gzip.compress(SEED.encode()))
    for p in (run(str(f), "--json"), run("-", "--json", stdin=SEED.encode())):
        assert p.returncode == 0, p.stderr.decode()
        seed_check(json.loads(p.stdout))


def test_table_shows_steady_figures_with_units(tmp_path):
    f = tmp_path / "server.log"
    f.write_text(SEED)
    p = run(str(f))
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    for text in ("3.08", "55.59", "55.4", "tok/s", "(ms)", "warm-up dropped: 1"):
        assert text in out, f"{text!r} missing from:\n{out}"


def test_no_records_gives_the_summary_alone(tmp_path):
    f = tmp_path / "server.log"
    f.write_text(SEED)
    out = json.loads(run(str(f), "--json", "--no-records").stdout)
    assert "records" not in out and out["summary"]["gen_tok_s"]["mean"] == 55.59


def test_vllm_log_is_detected_and_its_spec_line_kept(tmp_path):
    f = tmp_path / "vllm.log"
    f.write_text("noise\n" + VLLM)
    out = json.loads(run(str(f), "--json").stdout)
    assert out["engine"] == "vllm"
    assert [r["kind"] for r in out["records"]] == ["stats", "spec"]
    assert out["records"][1]["fields"]["Per-position acceptance rate"] == [0.812, 0.634, 0.488]
    assert out["summary"]["skipped_lines"] == 1


def test_binary_garbage_between_lines_is_skipped(tmp_path):
    f = tmp_path / "mixed.log"
    f.write_bytes(b"\x00\xff\xfe\x80garbage\n" + SEED.encode() + bytes(range(14, 256)) + b"\n\xc3\x28\n")
    p = run(str(f), "--json")
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    assert len(out["records"]) == 2 and out["summary"]["skipped_lines"] == 3


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (None, ["missing.log"], "no such log file"),
        ("dir", ["."], "is a directory"),
        ("noise", ["noise.log"], "no SGLang, vLLM, llama.cpp or TensorRT-LLM statistics or start-up line"),
        ("seed", ["server.log", "--engine", "vllm"], "for engine vllm"),
        ("badgz", ["cut.log.gz"], "cannot read"),
    ],
    ids=["missing", "directory", "no-recognised-line", "wrong-engine", "truncated-gzip"],
)
def test_bad_input_is_a_clear_error(tmp_path, setup, args, message):
    if setup == "noise":
        (tmp_path / "noise.log").write_text("hello\nworld\n")
    elif setup == "seed":
        (tmp_path / "server.log").write_text(SEED)
    elif setup == "badgz":
        (tmp_path / "cut.log.gz").write_bytes(gzip.compress((SEED * 500).encode())[:300])
    p = subprocess.run(
        [sys.executable, "-m", "decodescope", "log", *args], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert p.returncode == 2
    err = p.stderr.decode()
    assert message in err and "fix:" in err and "Traceback" not in err
