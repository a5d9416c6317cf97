"""The C reader of SGLang's quick lines (serverstats/_fastlog.c, logfast.py) gives exactly
what the Python path gives: the same record bytes, warm-up tags and summary, on real logs,
mutated logs, generated lines and hostile input. The Python path (block pattern, line by
line) is the independent reference: the C code is switched off by setting logfast.FAST to
None, as DECODESCOPE_PURE_PYTHON=1 does at import."""

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_logscan import mutate
from logfakes import sgl_decode, sgl_prefill, steady

from decodescope.serverstats import logfast, logfused, logio

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
needs_c = pytest.mark.skipif(logfast.FAST is None, reason="the C reader is not built (no C compiler at install)")


class Counting:
    """logfast.FAST that counts the records the C reader made."""

    def __init__(self, fast):
        self.fast, self.records, self.tally, self.kept = fast, 0, fast.tally, fast.kept

    def scan(self, *args):
        got = self.fast.scan(*args)
        self.records += got[3]
        return got


def scan(path, monkeypatch, fast: bool, size: int | None = None, continues: bool = False, counter=None):
    """scan_range of the whole file with records: (record bytes, tag bytes, summary, records)."""
    blocks = logio.line_blocks
    with monkeypatch.context() as m:
        m.setattr(logfast, "FAST", counter if fast else None)
        if size:
            m.setattr(logio, "line_blocks", lambda f, budget, **kw: blocks(f, budget, size, **kw))
        out, tags = io.BytesIO(), io.BytesIO()
        with open(path, "rb") as f:
            r = logfused.scan_range(f, os.path.getsize(path), "sglang" if continues else None, None, continues,
                                    out, tags)
    summary = r.scan.summary(r.engine, r.skipped_lines, r.rejected_lines).to_dict()
    return out.getvalue(), tags.getvalue(), summary, r.records


def both_paths_agree(path, monkeypatch, sizes=(None, 4096, 1024)) -> tuple:
    """scan()'s result (the last size's) and how many records the C reader made in all."""
    counter = Counting(logfast.FAST)
    for size in sizes:
        for continues in (False, True):
            c = scan(path, monkeypatch, True, size, continues, counter)
            assert c == scan(path, monkeypatch, False, size, continues), f"block size {size}, continues {continues}"
    return c, counter.records


@needs_c
@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_real_logs_read_the_same_in_c_and_python(tmp_path, monkeypatch, name):
    both_paths_agree(LOGS / name, monkeypatch, sizes=(None, 4096, 1024))


def _generated(seed: int) -> list[str]:
    """SGLang lines of the shapes real logs have, DP ranks, ms stamps, CR LF, noise."""
    rng = random.Random(seed)
    lines, t = [], 1.78e9
    for _ in range(40):
        ranks = rng.choice(["TP0", "TP0", "DP1 TP0", "DP0 TP0", "PP0 TP3 EP2"])
        lines.append(sgl_prefill(t, rng.choice([0, 1, 3]), ranks))
        lines += steady(t + 3, rng.randint(1, 40), running=rng.randint(1, 8), ranks=ranks)
        lines += ['[2026-05-12 00:05:35] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK'] * rng.randint(0, 3)
        t += rng.choice([200, 200, 200, -500])
    return lines


@needs_c
@pytest.mark.parametrize("seed", range(4))
def test_mutated_logs_read_the_same_in_c_and_python(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    lines = _generated(seed)
    for i in rng.sample(range(len(lines)), len(lines) // 8):
        lines[i] = rng.choice([mutate(rng, lines[i]), lines[i].replace(":", ".5:", 1), lines[i] + "\r",
                               lines[i].replace(" TP0]", ".250 TP0]", 1), lines[i].replace("0.06", "0.0600000"),
                               lines[i].replace("True", "False"), lines[i].replace("#queue-req: 0", "#queue-req: 00")])
    f = tmp_path / "mutated.log"
    f.write_text("".join(x.replace("\n", "") + "\n" for x in lines))
    (records, _, summary, _), by_c = both_paths_agree(f, monkeypatch)
    assert summary["windows"] > 100 and by_c > 1000


@needs_c
@pytest.mark.parametrize("ranks", [("TP0",), ("DP0 TP0", "DP1 TP0")])
def test_windows_of_varied_round_times_read_the_same_in_c_and_python(tmp_path, monkeypatch, ranks):
    # as in a busy server's log: every window's round time a little different (several
    # round-time bins in each 10 s clock bucket), DP ranks taking turns, requests coming and going
    rng = random.Random(len(ranks))
    lines, t = [], 1.78e9
    for _ in range(300):
        running = rng.randint(1, 12)
        rank = rng.choice(ranks)
        lines.append(sgl_prefill(t, running - 1, rank))
        for _ in range(rng.randint(1, 12)):
            t += rng.choice([0.5, 2.2, 2.2, 9.0])
            accept = rng.uniform(2.5, 4.0)
            lines.append(sgl_decode(t, accept, running * accept / 0.0554 * rng.uniform(0.9, 1.1), running,
                                    rng.choice(ranks)))
    f = tmp_path / "busy.log"
    f.write_text("".join(x + "\n" for x in lines))
    (_, _, summary, _), by_c = both_paths_agree(f, monkeypatch, sizes=(None, 16384, 2048))
    assert summary["windows"] > 1000 and by_c > 5000


@needs_c
def test_hostile_bytes_read_the_same_in_c_and_python(tmp_path, monkeypatch):
    # a 10 MB line, binary garbage, a NUL, numbers of 400 digits, a line cut mid-stamp, no final line feed
    good = sgl_decode(1.78e9, 3.0, 60.0)
    digits = "9" * 400
    data = b"".join([
        (good + "\n").encode() * 50,
        b"x" * 10_000_000 + b" Decode batch, #running-req: 1\n",
        bytes(range(256)) * 40 + b"\n",
        (good.replace("#running-req: 1", "#running-req: " + digits) + "\n").encode(),
        (good.replace("2.89", "0." + digits).replace("60.00", digits + ".5") + "\n").encode(),
        (good.replace("TP0", "TP\u0663") + "\n").encode(),  # an Arabic-Indic digit: \d in Python's regex
        good.encode().replace(b"TP0", b"TP\x000") + b"\n",
        (good + "\n").encode() * 50,
        good[:12].encode(),
    ])
    f = tmp_path / "hostile.log"
    f.write_bytes(data)
    (_, _, summary, _), by_c = both_paths_agree(f, monkeypatch, sizes=(None, 4096))
    assert summary["windows"] >= 100 and by_c >= 100
    assert _cli_both_ways(f)["summary"]["windows"] >= 100


# ---------------------------------------------------------------- generated lines

_KEYS = ["#running-req", "accept len", "gen throughput (token/s)", "#queue-req", "cuda graph", "#token",
         "token usage", "odd%key", "ключ", "a: b", "#running-req"]
_DIGITS = st.text("0123456789", min_size=1, max_size=25)
# numbers near the quick path's edges: digits before / after the point (7), integer digits
# (18), trailing zeros, under 0.0001, the summary's ranges (running 1e7, accept 1..1000, gen 1e8)
_NUMBERS = st.one_of(
    st.integers(0, 10**20).map(str),
    st.builds(lambda i, f, z: f"{i}.{f}" + "0" * z, st.integers(0, 10**9), st.text("0123456789", min_size=1, max_size=9),
              st.integers(0, 3)),
    st.sampled_from(["0.0001", "0.00001", "0.0000", "0.000", "1000.0", "1000.0000001", "999.99", "0.9999", "1.0",
                     "100000000.0", "99999999.5", "9999999.0", "10000000", "10000001", "10000000.0", "10000000.5",
                     "0.000001", "0.0000010", "1000", "1001", "0", "00", "07", "999999999999999999",
                     "1000000000000000000", "5.00", "0.60", "100000000", "100000001"]),
)
_VALUES = st.one_of(
    _NUMBERS, _DIGITS, st.builds(lambda a, b: f"{a}.{b}", _DIGITS, _DIGITS), st.text("0123456789", min_size=380, max_size=420),
    st.sampled_from(["True", "False", "nan", "inf", "1e5", "-3", "", "00.5", "1e-7", "3 tok"]),
)
_GOOD_STAMPS = st.builds(
    lambda sec, ms, ranks: f"[2026-05-12 00:05:{sec}{ms}{ranks}] ",
    st.sampled_from(["00", "35", "59", "60", "99"]), st.sampled_from(["", ".123"]),
    st.sampled_from(["", " TP0", " DP1 TP4", " ATTN_CP0 TP10"]),
)
_STAMPS = st.one_of(_GOOD_STAMPS, st.builds(
    lambda day, sec, ms, ranks: f"[2026-05-{day} 00:05:{sec}{ms}{ranks}] ",
    st.sampled_from(["12", "99", "1x"]), st.sampled_from(["00", "35", "3"]), st.sampled_from(["", ".123", ".12", ".1234"]),
    st.sampled_from(["", " TP0", " tp0", " TP", " TP0 ", " ATTN_CP0 TP10"]),
))


@st.composite
def _good_line(draw):
    """A line of a quick shape but for its values: running, accept, gen and a few others."""
    keys = ["#running-req", "accept len", "gen throughput (token/s)", *draw(st.lists(st.sampled_from(_KEYS[3:8]),
                                                                                    max_size=3, unique=True))]
    keys = draw(st.permutations(keys))
    body = ", ".join(f"{k}: {draw(st.one_of(_NUMBERS, st.sampled_from(['True', 'False'])))}" for k in keys)
    kind = draw(st.sampled_from(["Decode batch, ", "Decode batch. ", "Prefill batch, "]))
    return draw(_GOOD_STAMPS) + kind + body + draw(st.sampled_from(["", "\r"]))


@st.composite
def _any_line(draw):
    marker = draw(st.sampled_from(["Decode batch", "Prefill batch", "Decode batchX", "INFO"]))
    sep = draw(st.sampled_from([", ", ". ", ",  ", ","]))
    pieces = draw(st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), min_size=1, max_size=6))
    body = ", ".join(f"{k}: {v}" for k, v in pieces)
    end = draw(st.sampled_from(["", "\r", " ", "\r\r"]))
    return draw(_STAMPS) + marker + sep + body + end


def _line():
    return st.one_of(_good_line(), _any_line())


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line(), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_generated_lines_read_the_same_in_c_and_python(tmp_path, monkeypatch, lines, rng):
    # each line's shape is learnt from an earlier copy of it, so the C reader meets it in a block
    lines = [x for line in lines for x in (line, line, line)]
    rng.shuffle(lines)
    f = tmp_path / "generated.log"
    # 2 KiB of lines first: the C reader starts at the second block, once the log is known to be SGLang's
    f.write_text("".join(x + "\n" for x in ([sgl_decode(1.78e9, 3.0, 60.0)] * 8 + lines)))
    both_paths_agree(f, monkeypatch, sizes=(2048, 1024))


@needs_c
@needs_c
def test_values_at_the_summarys_limits_read_the_same_in_c_and_python(tmp_path, monkeypatch):
    # running up to 1e7, accept 1..1000, gen up to 1e8 (logvalues.checked): integers around
    # each limit (one shape: every value an integer), decimals of 1 to 9 places (another)
    rng = random.Random(5)
    limits = [(10**7, 1000, 10**8), (1, 1, 0), (0, 0, 1)]
    lines = []
    for _ in range(1000):
        r, a, g = (x + rng.choice([-1, 0, 0, 1]) for x in rng.choice(limits))
        lines.append(f"[2026-05-12 00:05:{rng.randint(10, 59)} TP0] Decode batch, #running-req: {r}, "
                     f"accept len: {a}, gen throughput (token/s): {g}")
        lines.append(f"[2026-05-12 00:05:{rng.randint(10, 59)} TP0] Decode batch, #running-req: {rng.randint(0, 9)}, "
                     f"accept len: {rng.uniform(0.99, 1.01):.{rng.randint(1, 9)}f}, "
                     f"gen throughput (token/s): {rng.uniform(0, 2e-6):.{rng.randint(1, 9)}f}")
    f = tmp_path / "edges.log"
    f.write_text("".join(x + "\n" for x in lines))
    (_, _, summary, _), by_c = both_paths_agree(f, monkeypatch, sizes=(None, 2048))
    assert by_c > 400 and summary["rejected_lines"] > 300


_EDGES = ["0.0001", "0.00010", "0.00001", "0.000010", "0.0000", "0.000", "0.0", "0.00", "5.00", "0.60", "1234567.1234567",
          "12345678.1", "1.12345678", "1.123456780", "1.1234567", "9999999999999999999", "999999999999999999",
          "18446744073709551616", "0", "00", "01", "1000", "1001", "10.10", "7", "1.0", "1000.0", "1000.1"]


@needs_c
@pytest.mark.parametrize("field", ["accept len", "gen throughput (token/s)", "token usage"])
def test_values_at_the_quick_forms_edges_read_the_same_in_c_and_python(tmp_path, monkeypatch, field):
    # each edge value a dozen times in a row: the first copy teaches Python its shape, the
    # C reader meets the others in the next blocks; between them the usual line
    def line(i, value):
        values = {"accept len": "3.5", "gen throughput (token/s)": "60.5", "token usage": "0.5"} | {field: value}
        return (f"[2026-05-12 00:{i // 60 % 60:02d}:{i % 60:02d} TP0] Decode batch, #running-req: 1, "
                + ", ".join(f"{k}: {v}" for k, v in values.items()))

    lines = [line(i, "3.5") for i in range(20)]
    for v in _EDGES:
        lines += [line(len(lines) + i, v) for i in range(12)] + [line(len(lines) + 12 + i, "3.5") for i in range(4)]
    f = tmp_path / "edges.log"
    f.write_text("".join(x + "\n" for x in lines))
    _, by_c = both_paths_agree(f, monkeypatch, sizes=(1024,))
    assert by_c > len(lines) // 2


# ---------------------------------------------------------------- the C reader itself


@needs_c
def test_the_c_reader_reads_a_decode_line_into_its_row_and_record():
    from decodescope.serverstats.logshapes import shape_of
    from decodescope.serverstats.logvalues import local_epoch

    line = ("[2026-05-12 00:05:37.250 DP1 TP0] Decode batch, #running-req: 2, accept len: 3.50, "
            "gen throughput (token/s): 60.00")
    shape = shape_of("decode", line[line.index("#running"):], {})
    ps = logfused._Pass("sglang", None, False, io.BytesIO(), io.BytesIO(), 100)
    rows, batch = [], []
    data = (line + "\nINFO: other\nrest: Decode batch, odd").encode()
    got = logfast.FAST.scan(data, 0, 10, logfast.specs(shape, None), ps.fast, rows, batch, 100)
    # line 11 quick, line 12 skipped, line 13 handed back (it holds "batch"), nothing after it
    assert got == (len(data) + 1, 13, 1, 1, "rest: Decode batch, odd")
    (kind, series, running, accept, gen, time_s, line_no), = rows
    assert (kind, series, running, accept, gen, line_no) == ("decode", ("sglang", "DP1 TP0"), 2, 3.5, 60.0, 11)
    # local time 2026-05-12 00:05:37 plus 0.250 s; running an int
    assert type(running) is int and time_s == local_epoch("2026-05-12 00:05:37") + 0.25
    record = json.loads(batch[0].replace("\x00", "null"))  # the warm-up flag is written in later
    # line 11 of a range that starts after 100 lines; the values as the line prints them, less trailing zeros
    assert (record["line_no"], record["rank"], record["accept_len"], record["gen_tok_s"]) == (111, "DP1 TP0", 3.5, 60.0)
    assert record["fields"] == {"#running-req": 2, "accept len": 3.5, "gen throughput (token/s)": 60.0}


@needs_c
@pytest.mark.parametrize("junk", [b"", b"\n", b"\n\n\n", b"[", b"[2026-05-12 00:05:3", b"\xff" * 100])
def test_the_c_reader_takes_short_and_empty_blocks(junk):
    ps = logfused._Pass("sglang", None, False, None, None, 0)
    rows = []
    pos, line_no, skipped, n, line = logfast.FAST.scan(junk, 0, 0, (None, None), ps.fast, rows, None, 0)
    lines = junk.count(b"\n") + 1
    assert (pos, line_no, skipped, n, line, rows) == (len(junk) + 1, lines, lines, 0, None, [])


def test_pure_python_switch_turns_the_c_reader_off():
    env = {**os.environ, "DECODESCOPE_PURE_PYTHON": "1"}
    code = "from decodescope.serverstats import logfast; print(logfast.FAST)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


def _cli_both_ways(path) -> dict:
    """`decodescope log FILE --json` with and without the C reader: the same bytes, parsed."""
    cmd = [sys.executable, "-m", "decodescope", "log", str(path), "--json"]
    fast = subprocess.run(cmd, capture_output=True, check=True).stdout
    pure = subprocess.run(cmd, capture_output=True, check=True, env={**os.environ, "DECODESCOPE_PURE_PYTHON": "1"}).stdout
    assert fast == pure
    return json.loads(fast)


@needs_c
def test_log_json_is_byte_identical_with_and_without_the_c_reader(tmp_path):
    f = tmp_path / "server.log"
    f.write_text("".join(x + "\n" for x in _generated(7)) * 60)  # ~3 MB: several blocks
    assert len(_cli_both_ways(f)["records"]) > 10000


# ---------------------------------------------------------------- the settings pass


def _settings_both_ways(path, monkeypatch):
    from decodescope.serverstats.logsettings import log_settings

    fast = log_settings(str(path))
    with monkeypatch.context() as m:
        m.setattr(logfast, "FAST", None)
        assert fast == log_settings(str(path))
    return fast


@needs_c
def test_the_settings_pass_reads_the_same_with_the_c_line_filter(tmp_path, monkeypatch):
    # every real log, and all of them in one file; then start-up lines among statistics
    # lines, inside a line longer than a block (1 MiB) and one past the 1 M characters the
    # text pass reads of a line, after binary garbage, with CR LF and without a final line feed
    real = sorted(LOGS.glob("*.log")) + sorted((LOGS.parent / "startup").glob("*.log"))
    found = 0
    for p in real:
        found += len(_settings_both_ways(p, monkeypatch))
    joined = tmp_path / "joined.log"
    joined.write_bytes(b"".join(p.read_bytes() for p in real))
    found += len(_settings_both_ways(joined, monkeypatch))
    args = (LOGS.parent / "startup" / "sglang-0.5.4-ngram-cut.log").read_bytes()
    stats = "".join(x + "\n" for x in _generated(1)).encode()
    hostile = tmp_path / "hostile.log"
    hostile.write_bytes(stats + args + stats + b"x" * (1 << 20) + b" server_args=ServerArgs(tp_size=4)\r\n" + stats
                        + "é".encode() * 600_000 + b" ServerArgs(tp_size=8)\n" + bytes(range(256)) * 50 + b"\n"
                        + b"[2026-05-12 00:00:00] server_args=ServerArgs(tp_size=3, model_path='m')\n"
                        + stats + args.replace(b"\n", b"\r\n") + b"Capture cuda graph end")
    segments = _settings_both_ways(hostile, monkeypatch)
    # the lines past 65536 characters are not read (settings.MAX_LINE); the tp_size=3 line is
    assert found > 40 and [s.settings.tp for s in segments] == [None, 3, None]


@needs_c
def test_flags_fill_each_byte_0_in_order_and_a_miscount_is_an_error():
    fast = logfast.FAST
    assert (fast.count(b"\x00a\x00\x00", 0), fast.fill(b"{\x00},{\x00}", [b"true", b"false"])) == (3, b"{true},{false}")
    assert fast.fill(b"", []) == b"" and fast.count(b"", 0) == 0 and fast.count(b"a\nb\n\n", 10) == 3
    # the last two: more empty marks than bytes 0 (an output size below 0 before the copy)
    for chunk, marks in [(b"a\x00", []), (b"a", [b"x"]), (b"\x00\x00", [b"x"]), (b"a", [b"", b"", b""]), (b"", [b""])]:
        with pytest.raises(ValueError):
            fast.fill(chunk, marks)


@needs_c
def test_a_line_of_300_pieces_is_left_to_python_and_reads_the_same(tmp_path, monkeypatch):
    # more pieces than the C reader takes (256): its lines go to Python, with the same output
    extra = ", ".join(f"k{i}: {i}" for i in range(300))
    lines = [sgl_decode(1.78e9 + 2 * i, 3.0, 60.0) + ", " + extra for i in range(400)]
    f = tmp_path / "wide.log"
    f.write_text("".join(x + "\n" for x in lines))
    (_, _, summary, _), by_c = both_paths_agree(f, monkeypatch, sizes=(None, 65536))
    assert summary["windows"] == 400 and by_c == 0


@needs_c
def test_a_llamacpp_device_list_reads_the_same_with_the_c_line_filter(tmp_path, monkeypatch):
    # the list stays open over skipped statistics lines and closes at the first other line:
    # devices 0 and 1 (a decode line between them), not the stray device 2 after a plain line
    decode = sgl_decode(1.78e9, 3.0, 60.0)
    lines = ["ggml_cuda_init: found 2 CUDA devices:", "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6",
             decode, "  Device 1: NVIDIA GeForce RTX 3090, compute capability 8.6", "llm_load_tensors: plain text",
             "  Device 2: NVIDIA A100-SXM4-80GB, compute capability 8.0"]
    f = tmp_path / "devices.log"
    text = "".join(x + "\n" for x in lines)
    # the "found" line ends exactly where the C filter's first 1 MiB block does: the list is cut across blocks
    fill = (1 << 20) - len(lines[0]) - 1
    for head in ("", ("y" * 99 + "\n") * (fill // 100) + "y" * (fill % 100 - 1) + "\n"):
        f.write_text(head + text + text)
        segments = _settings_both_ways(f, monkeypatch)
        assert [s.settings.gpus for s in segments] == [("NVIDIA GeForce RTX 3090",) * 2]
