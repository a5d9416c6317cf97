"""`decodescope log` under hostile input: pipes, closed stdin, gzip on stdin, numbers
that overflow or fall out of range, endless lines. Each case: no traceback, no hang
(a time limit), bounded memory, and nothing lost or made up."""

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodescope.serverstats.logscan import scan_log
from decodescope.serverstats.serverlog import parse_line, parse_log

# the reference case's two SGLang log lines, as shipped for `decodescope demo`
SEED = (Path(__file__).resolve().parents[2] / "decodescope" / "explain" / "data" / "reference-sglang.log").read_text()
STEADY = SEED.splitlines()[1]
CMD = [sys.executable, "-m", "decodescope", "log"]


def strict(text: str) -> dict:
    """JSON that must hold no NaN or Infinity."""
    def bad(c):
        raise AssertionError(f"non-finite {c} in the output")
    return json.loads(text, parse_constant=bad)


def no_traceback(p):
    err = p.stderr.decode(errors="replace") if isinstance(p.stderr, bytes) else p.stderr
    assert "Traceback" not in err, err


# ---------------------------------------------------------------- pipes and stdin


def test_fifo_with_a_writer_is_read_once_and_whole(tmp_path):
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w") as f:
            f.write(SEED)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    p = subprocess.run([*CMD, str(fifo), "--json"], capture_output=True, timeout=30)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert [r["gen_tok_s"] for r in strict(p.stdout)["records"]] == [2.89, 55.59]


def test_process_substitution_loses_no_line(tmp_path):
    # 300 lines (~75 kB): the first 8 kB must not be eaten by a sniff of the pipe
    f = tmp_path / "server.log"
    f.write_text(STEADY.replace("55.59", "55.60") + "\n" + (STEADY + "\n") * 299)
    p = subprocess.run(
        ["bash", "-c", '"$0" -m decodescope log <(cat "$1") --json', sys.executable, str(f)],
        capture_output=True, timeout=60,
    )
    no_traceback(p)
    out = strict(p.stdout)
    assert len(out["records"]) == 300 and out["records"][0]["gen_tok_s"] == 55.60


def test_gzip_on_stdin_is_read():
    p = subprocess.run([*CMD, "-", "--json"], input=gzip.compress(SEED.encode()), capture_output=True, timeout=30)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert [r["gen_tok_s"] for r in strict(p.stdout)["records"]] == [2.89, 55.59]


def test_closed_stdin_is_one_clear_error():
    p = subprocess.run([*CMD, "-"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                       preexec_fn=lambda: os.close(0))
    no_traceback(p)
    assert p.returncode != 0 and b"standard input" in p.stderr


def test_an_endless_line_is_not_held_whole_in_memory():
    # 200 MB without a line feed (a /dev/zero-like source), then the reference case's lines
    size = 200_000_000

    def feed(pipe):
        block = b"\0" * (1 << 20)
        try:
            for _ in range(size // len(block)):
                pipe.write(block)
            pipe.write(b"\n" + SEED.encode())
        finally:
            pipe.close()

    # the child reports its own peak, VmHWM of its address space (ru_maxrss would carry the
    # parent's over exec, RUSAGE_CHILDREN the largest child so far)
    wrapper = (
        "import runpy, sys\n"
        "sys.argv = ['decodescope', 'log', '-', '--json']\n"
        "try:\n    runpy.run_module('decodescope', run_name='__main__')\n"
        "finally:\n"
        "    hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM')][0].split()[1]\n"
        "    print('MAXRSS', hwm, file=sys.stderr)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", wrapper], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    threading.Thread(target=feed, args=(proc.stdin,), daemon=True).start()
    out, err = proc.stdout.read(), proc.stderr.read()  # communicate() would close stdin first
    proc.wait(timeout=120)
    assert "Traceback" not in err.decode()
    assert proc.returncode == 0, err
    rss_mb = int(err.decode().split("MAXRSS")[1]) / 1024
    assert rss_mb < 150, f"peak memory {rss_mb:.0f} MB"
    assert [r["gen_tok_s"] for r in strict(out)["records"]] == [2.89, 55.59]


# ---------------------------------------------------------------- numbers

VLLM_OK = (
    "(APIServer pid=1) INFO 05-07 04:56:17 [loggers.py:271] Engine 000: Avg prompt throughput: 2.5 tokens/s, "
    "Avg generation throughput: 123.8 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 17.5%"
)
LCPP_OK = (
    "slot print_timing: id  0 | task 1 |        eval time =    1000.00 ms /   100 tokens "
    "(   10.00 ms per token,   100.00 tokens per second)"
)
HOSTILE = [  # (id, a good line of the same engine, the hostile line)
    ("gen-1e308", STEADY, STEADY.replace("55.59", "1e308")),
    ("gen-5e-324", STEADY, STEADY.replace("55.59", "5e-324")),
    ("gen-negative", STEADY, STEADY.replace("55.59", "-55.59")),
    ("gen-nan", STEADY, STEADY.replace("55.59", "nan")),
    ("gen-400-digits", STEADY, STEADY.replace("55.59", "9" * 400)),
    ("running-400-digits", STEADY, STEADY.replace("#running-req: 1", "#running-req: " + "9" * 400)),
    ("running-5000-digits", STEADY, STEADY.replace("#running-req: 1", "#running-req: " + "9" * 5000)),
    ("running-negative", STEADY, STEADY.replace("#running-req: 1", "#running-req: -3")),
    ("accept-half", STEADY, STEADY.replace("accept len: 3.08", "accept len: 0.5")),
    ("accept-1e308", STEADY, STEADY.replace("accept len: 3.08", "accept len: 1e308")),
    ("accept-inf", STEADY, STEADY.replace("accept len: 3.08", "accept len: inf")),
    ("vllm-400-digit-counts", VLLM_OK,
     "INFO 05-07 04:56:18 metrics.py:341] Speculative metrics: Draft acceptance rate: 0.5, "
     f"System efficiency: 0.5, Number of speculative tokens: 3, Number of accepted tokens: {'9' * 400}, "
     f"Number of draft tokens: 7, Number of emitted tokens: {'9' * 400}."),
    ("vllm-gen-1e308", VLLM_OK, VLLM_OK.replace("123.8", "1e308")),
    ("vllm-running-negative", VLLM_OK, VLLM_OK.replace("Running: 1", "Running: -1")),
    ("vllm-accept-half", VLLM_OK,
     "(APIServer pid=1) INFO 05-07 04:56:17 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 0.50, "
     "Accepted: 10 tokens, Drafted: 20 tokens"),
    ("llamacpp-accept-half", LCPP_OK,
     "slot print_timing: id  0 | task 1 | draft acceptance = 0.5 (  10 accepted /  20 generated), mean len =  0.50"),
    ("llamacpp-400-digit-tokens", LCPP_OK, LCPP_OK.replace("100 tokens (", "9" * 400 + " tokens (")),
    # llama.cpp prints rates with %.2f: 1e308 comes as 309 digits
    ("llamacpp-gen-1e308", LCPP_OK, LCPP_OK.replace("100.00 tokens per second", "1" + "0" * 308 + ".00 tokens per second")),
]


@pytest.mark.parametrize("good,line", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_an_out_of_range_number_rejects_its_line_and_nothing_else(tmp_path, good, line):
    f = tmp_path / "server.log"
    f.write_text(f"{good}\n{line}\n{good}\n")
    p = subprocess.run([*CMD, str(f), "--json"], capture_output=True, timeout=60)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    out = strict(p.stdout)
    s = out["summary"]
    assert s["rejected_lines"] == 1
    assert [r["line_no"] for r in out["records"]] == [1, 3]
    for r in out["records"]:
        assert r["accept_len"] is None or r["accept_len"] >= 1
        assert r["gen_tok_s"] is None or 0 <= r["gen_tok_s"] <= 1e8
    table = subprocess.run([*CMD, str(f)], capture_output=True, timeout=60)
    no_traceback(table)
    assert table.returncode == 0 and b"rejected" in table.stdout


def test_a_huge_count_in_another_field_keeps_the_line_and_valid_json(tmp_path):
    f = tmp_path / "server.log"
    f.write_text(SEED + STEADY.replace("#full token: 238", "#full token: " + "7" * 400) + "\n")
    p = subprocess.run([*CMD, str(f), "--json"], capture_output=True, timeout=60)
    no_traceback(p)
    out = strict(p.stdout)
    assert len(out["records"]) == 3 and out["summary"]["rejected_lines"] == 0


# ---------------------------------------------------------------- properties

REAL = [
    STEADY,
    "(APIServer pid=5020) INFO 05-19 10:30:43 [loggers.py:271] Engine 000: Avg prompt throughput: 3279.0 tokens/s, "
    "Avg generation throughput: 1004.4 tokens/s, Running: 8 reqs, Waiting: 7 reqs, GPU KV cache usage: 82.5%",
    "(APIServer pid=5020) INFO 05-19 10:30:43 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.77, "
    "Accepted: 6418 tokens, Drafted: 7254 tokens, Per-position acceptance rate: 0.929, 0.840",
    "[53409]        eval time =   14323.78 ms /   192 tokens (   74.60 ms per token,    13.40 tokens per second)",
    "[53409] draft acceptance rate = 0.81944 (  118 accepted /   144 generated)",
]
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**500), max_value=10**500).map(str),
    st.sampled_from(["1e308", "5e-324", "-0", "nan", "inf", "0.5", "9" * 400, "", "1e-400", "0x10"]),
)


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL), st.data())
def test_any_number_in_any_place_of_a_real_line_never_raises(line, data):
    import re

    spots = [m.span() for m in re.finditer(r"\d+(?:\.\d+)?", line)]
    a, b = data.draw(st.sampled_from(spots))
    mutated = line[:a] + data.draw(NUMBERS) + line[b:]
    lines = [SEED.splitlines()[0], mutated, STEADY]
    result = parse_log(lines)
    for rec in result.records:
        for v in (rec.accept_len, rec.gen_tok_s):
            assert v is None or (math.isfinite(v) and v >= 0)
        if rec.accept_len is not None:
            assert rec.accept_len >= 1
        json.dumps(rec.to_dict(), allow_nan=False)
    s = scan_log(lines).summary()
    json.dumps(s.to_dict(), allow_nan=False)


@settings(max_examples=300, deadline=2000)
@given(st.text(max_size=400))
def test_any_text_is_a_record_or_nothing(text):
    for engine in (None, "sglang", "vllm", "llamacpp"):
        rec = parse_line(text, engine)
        assert rec is None or rec.engine in ("sglang", "vllm", "llamacpp")
    scan_log([text, text + "\n"]).summary()
