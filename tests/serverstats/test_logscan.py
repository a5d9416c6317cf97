"""The summary pass for large logs (few-field SGLang reading, parallel byte ranges)
gives exactly what parsing every record in one pass gives."""

import io
import json
import random

import pytest
from logfakes import LLAMACPP, SEED, SGLANG, VLLM, sgl_decode, sgl_prefill, steady, vllm_spec, vllm_stats

from decodescope.serverstats.logformats import Rejected, _facts, parse_sglang, sglang_facts
from decodescope.serverstats.logscan import scan_file, scan_log
from decodescope.serverstats.logsummary import WarmupScan
from decodescope.serverstats.serverlog import parse_log, write_records

ODD_SGLANG = [
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: x, accept len: 3.0, gen throughput (token/s): 5.00",
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, accept len: n/a, gen throughput (token/s): 5.00",
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 5.00 tok",
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, gen throughput (token/s): nan, #queue-req: 0",
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, #queue-req: 0",
    "[2026-05-12 00:05:35 TP0] Decode batch [7], #running-req: 2, gen throughput (token/s): 9.00\n",
    "[2026-05-12 00:05:35 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 5.00\r\n",
    "[2026-05-99 00:05:35 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 5.00",
    "junk [2026-05-12 00:05:35 DP0 TP1] Prefill batch, #new-seq: 1, #running-req: 0, #queue-req: 0",
    "Prefill batch, #running-req: , #queue-req: 0",
    "Decode batchX, #running-req: 1, gen throughput (token/s): 5.00",
]


def rejected_or(fn, line):
    try:
        return fn(line)
    except Rejected:
        return "rejected"


@pytest.mark.parametrize("line", [r.line for r in SGLANG] + ODD_SGLANG)
def test_sglang_fast_path_reads_what_the_full_parser_reads(line):
    full = rejected_or(lambda x: _facts(parse_sglang(x)), line)
    fast = rejected_or(sglang_facts, line)
    if full == "rejected":
        assert fast == "rejected"
    elif full is None:
        assert fast is None
    else:
        assert fast is not None
        assert fast[:3] == full[:3]
        assert fast[3:] == pytest.approx(full[3:], nan_ok=True)


def same(a, b):
    """Summaries equal up to float summation order (partial sums join in another order),
    segment by segment."""
    _same_figures(a, b)
    rest = ("engine", "windows", "warmup_windows", "records", "skipped_lines", "rejected_lines")
    assert [getattr(a, k) for k in rest] == [getattr(b, k) for k in rest]
    assert len(a.segments) == len(b.segments)
    for x, y in zip(a.segments, b.segments):
        _same_figures(x, y)
        rest = ("first_line", "last_line", "reason", "dp_ranks", "lower_bound", "windows", "warmup_windows")
        assert [getattr(x, k) for k in rest] == [getattr(y, k) for k in rest]
    return True


def _same_figures(a, b):
    for k in ("accept_len", "gen_tok_s", "gen_tok_s_total", "gen_tok_s_per_req"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None) == (y is None), k
        if x:
            assert (x.n, x.min, x.max) == (y.n, pytest.approx(y.min, rel=1e-12), pytest.approx(y.max, rel=1e-12)), k
            assert x.mean == pytest.approx(y.mean, rel=1e-12), k
    assert (a.round_ms is None) == (b.round_ms is None)
    if a.round_ms is not None:
        assert a.round_ms == pytest.approx(b.round_ms, rel=1e-12)


def mixed_log(seed: int) -> list[str]:
    """Requests with idle gaps, back-to-back requests, DP ranks and noise."""
    rng = random.Random(seed)
    lines, t = [], 1.78e9
    for _ in range(40):
        ranks = rng.choice(["DP0 TP0", "DP1 TP0"])
        if rng.random() < 0.5:
            lines.append(sgl_prefill(t, 0, ranks))
            lines.append(sgl_decode(t + 1, 3.3, 3.3 * 40 / rng.uniform(5, 40), 1, ranks))
        else:
            lines.append(sgl_prefill(t, 1, ranks))
        lines += steady(t + 3, rng.randint(1, 6), ranks=ranks)
        lines += ["INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK"] * rng.randint(0, 3)
        if rng.random() < 0.2:
            lines.append(sgl_decode(t + 30, 3.0, 3.0 / rng.uniform(0.2, 0.4), 1, ranks))  # grep'd idle gap
        t += 60
    return [x if x.endswith("\n") else x + "\n" for x in lines]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_pass_scan_equals_parse_log(seed):
    lines = mixed_log(seed)
    assert same(scan_log(lines).summary(), parse_log(lines).summary)


@pytest.mark.parametrize(
    "lines",
    [[x + "\n" for x in SEED], mixed_log(3), [r.line + "\n" for r in VLLM + LLAMACPP]],
    ids=["seed", "mixed-sglang", "vllm-and-llamacpp"],
)
@pytest.mark.parametrize("workers", [2, 3, 7])
def test_parallel_byte_ranges_join_into_the_one_pass_result(tmp_path, lines, workers):
    f = tmp_path / "server.log"
    f.write_text("".join(lines))
    whole = parse_log(lines, year=2025)
    part = scan_file(str(f), year=2025, workers=workers, min_bytes=0)
    assert same(part.summary(), whole.summary)
    # the flags a second pass gives from the joined scan are the one-pass flags
    out = io.BytesIO()
    write_records(out, lines, part.engine, 2025, part.scan.limits())
    again = json.loads(b"[" + out.getvalue() + b"]")
    assert [r["warmup"] for r in again] == [r.warmup for r in whole.records]


def test_every_cut_point_joins_exactly():
    lines = mixed_log(4)[:120]
    whole = parse_log(lines)
    for cut in range(len(lines) + 1):
        head = scan_log(lines[:cut])
        tail = scan_log(lines[cut:], continues=True)
        head.scan.extend(tail.scan)
        assert same(head.scan.summary("sglang", whole.skipped_lines), whole.summary), f"cut at line {cut}"


def test_vllm_spec_line_at_a_cut_takes_the_window_before_the_cut():
    lines = [
        vllm_stats("01:00:00", 0.0, 0),
        vllm_stats("01:00:10", 40.0, 4),
        vllm_spec("01:00:10", 2.5),
        vllm_stats("01:00:20", 160.0, 4),
        vllm_spec("01:00:20", 2.8),
    ]
    whole = parse_log(lines, year=2025)
    for cut in range(len(lines) + 1):
        head = scan_log(lines[:cut], year=2025)
        head.scan.extend(scan_log(lines[cut:], year=2025, continues=True).scan)
        assert same(head.scan.summary("vllm", 0), whole.summary)


def test_only_a_scan_from_the_top_can_be_extended():
    with pytest.raises(ValueError):
        WarmupScan(continues=True).extend(WarmupScan(continues=True))


def test_parallel_scan_of_a_file_without_statistics_counts_its_lines(tmp_path):
    f = tmp_path / "noise.log"
    f.write_text("hello\n" * 1000)
    result = scan_file(str(f), workers=2, min_bytes=0)
    assert (result.engine, result.skipped_lines, result.summary().records) == (None, 1000, {})


def mutate(rng: random.Random, line: str) -> str:
    chars = list(line)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(chars) + 1)
        op = rng.random()
        if op < 0.4 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(i, rng.choice("0123456789.,: -[]%nax\x00\ufffd"))
        else:
            chars[i:i] = list(rng.choice([", ", ": ", "nan", "inf", "...", "Decode batch, "]))
    return "".join(chars)


@pytest.mark.parametrize("seed", range(5))
def test_mutated_real_lines_never_crash_and_both_paths_agree(seed):
    rng = random.Random(seed)
    real = [r.line for r in SGLANG] + mixed_log(seed)[:60]
    lines = [mutate(rng, rng.choice(real)) if rng.random() < 0.7 else rng.choice(real) for _ in range(1500)]
    whole = parse_log(lines)
    assert same(scan_log(lines).summary(), whole.summary)
    for engine_lines in ([r.line for r in VLLM], [r.line for r in LLAMACPP]):
        parse_log([mutate(rng, rng.choice(engine_lines)) for _ in range(500)], year=2025)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("seed", range(3))
def test_records_of_the_one_pass_scan_equal_parse_logs_on_mutated_lines(tmp_path, seed, workers):
    # scan_file with records: each line parsed once for the summary and the record; a line off
    # the quick path (a mutated value, a new shape, another engine) must come out as parse_log reads it;
    # in byte ranges too (a range may start with lines whose stamp is unreadable, then an older stamp)
    from decodescope.serverstats.logscan import copy_scanned_records

    rng = random.Random(seed)
    real = [r.line for r in SGLANG] + mixed_log(seed)[:60]
    for pool, year in ((real, None), ([r.line for r in VLLM], 2025), ([r.line for r in LLAMACPP], None)):
        lines = [(mutate(rng, rng.choice(pool)) if rng.random() < 0.5 else rng.choice(pool)).replace("\n", "") + "\n"
                 for _ in range(800)]
        f = tmp_path / "mutated.log"
        f.write_text("".join(lines))
        folder = tmp_path / f"records-{len(pool)}"
        folder.mkdir()
        result = scan_file(str(f), year=year, workers=workers, min_bytes=0, records=str(folder))
        out = io.BytesIO()
        copy_scanned_records(result, out)
        whole = parse_log(lines, year=year)
        assert same(result.summary(), whole.summary)
        assert json.loads(b"[" + out.getvalue() + b"]") == [r.to_dict() for r in whole.records]


@pytest.mark.parametrize("size", [7, 64, 1 << 20])
def test_line_blocks_read_the_lines_capped_bytes_reads(tmp_path, size):
    # blocks of `size` bytes: lines cut across blocks, a line longer than a block, one of
    # MAX_LINE bytes or more (cut there), bytes that are not UTF-8, CR LF, no final line feed
    from decodescope.serverstats import logio

    data = (b"a\nbb\r\n" + "é€".encode() * 5 + b"\n\xff\xfe broken \xe2\x82\n" + b"x" * 100 + b"\n"
            + b"y" * (logio.MAX_LINE + 10) + b"\nz" * 50 + b"\nlast without a line feed")
    f = tmp_path / "tricky.log"
    f.write_bytes(data)
    for start in (0, 3):  # from a line start, as scan_file cuts, and from the middle of one
        with open(f, "rb") as a, open(f, "rb") as b:
            a.seek(start)
            b.seek(start)
            want = list(logio.capped_bytes(a, len(data) - start))
            got = [line + ("\n" if ended or i < len(lines) - 1 else "")
                   for text, ended in logio.line_blocks(b, len(data) - start, size)
                   for lines in [text.split("\n")] for i, line in enumerate(lines)]
        assert got == want


def test_a_stretch_that_starts_a_new_segment_tags_its_first_window_as_a_first_window():
    # the clock goes back 600 s at line 2: a new segment (time went back), whose first window
    # (round time 2x the steady one's, 2 x ROUND_S) is suspect, so warm-up (> 1.5x the median);
    # a stretch scanned apart from line 2 on must not take it for a window that follows others
    from logfakes import ROUND_S

    t0 = 1_778_544_000.0
    lines = [sgl_decode(t0 + 600, 2.0, 2.0 / ROUND_S), sgl_decode(t0, 2.0, 2.0 / (2 * ROUND_S)), *steady(t0 + 2.2, 6)]
    whole = parse_log(lines)
    assert [s.reason.value for s in whole.summary.segments] == ["log start", "time went back"]
    assert [r.warmup for r in whole.records] == [False, True] + [False] * 6
    for cut in range(len(lines) + 1):
        head = scan_log(lines[:cut])
        head.scan.extend(scan_log(lines[cut:], "sglang", continues=True).scan)
        assert same(head.scan.summary("sglang", 0), whole.summary), f"cut at line {cut}"


def _fused(path, monkeypatch, quick: bool, continues: bool):
    """scan_range of the whole file in 4 KiB blocks: (records, tags, summary), with the block
    pattern and the column tally (quick) or line by line and add_facts per line."""
    import os

    from decodescope.serverstats import logcolumns, logfused, logio

    blocks = logio.line_blocks
    with monkeypatch.context() as m:
        m.setattr(logio, "line_blocks", lambda f, budget, **kw: blocks(f, budget, 4096, **kw))
        if not quick:
            m.setattr(logfused._Pass, "block_pattern", lambda self: None)
            m.setattr(logcolumns, "_steady_run", lambda scan, rows, codes: False)
        out, tags = io.BytesIO(), io.BytesIO()
        with open(path, "rb") as f:
            r = logfused.scan_range(f, os.path.getsize(path), "sglang" if continues else None, None, continues,
                                    out, tags)
    return out.getvalue(), tags.getvalue(), r.scan.summary(r.engine, r.skipped_lines, r.rejected_lines).to_dict()


@pytest.mark.parametrize("seed", range(3))
def test_block_pattern_and_column_tally_give_what_line_by_line_gives(tmp_path, monkeypatch, seed):
    # an independent path: each line matched on its own, each window tallied by add_facts
    # (the one-pass scan's own code); the block pattern and the column tally must give the same
    # bytes and the same sums, exactly. Long steady runs of one series (the column tally's case)
    # between DP ranks, idle prefills, clock jumps, ms stamps, CR LF and mutated lines
    rng = random.Random(seed)
    lines, t = [], 1.78e9
    for _ in range(60):
        ranks = rng.choice(["TP0", "TP0", "DP1 TP0", "DP0 TP0"])
        lines.append(sgl_prefill(t, rng.choice([0, 1, 3]), ranks))
        n = rng.randint(1, 60)
        if ranks == "DP0 TP0":  # two DP ranks logging in turn, their windows in the same clock buckets
            pairs = zip(steady(t + 3, n, running=2, ranks=ranks), steady(t + 3.5, n, running=3, ranks="DP1 TP0"))
            lines += [x for pair in pairs for x in pair]
        else:
            lines += steady(t + 3, n, running=rng.randint(1, 8), ranks=ranks)
        lines += ["INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK"] * rng.randint(0, 3)
        t += rng.choice([200, 200, 200, -500])
    for i in rng.sample(range(len(lines)), len(lines) // 10):
        lines[i] = rng.choice([mutate(rng, lines[i]), lines[i].replace(":00 ", ":00.250 ", 1), lines[i] + "\r"])
    f = tmp_path / "sglang.log"
    f.write_text("".join(x.replace("\n", "") + "\n" for x in lines))
    for continues in (False, True):
        quick = _fused(f, monkeypatch, True, continues)
        assert quick == _fused(f, monkeypatch, False, continues)
        assert quick[2]["windows"] > 1000


def test_a_prefill_line_with_a_generation_rate_is_no_window(tmp_path):
    # a prefill line that also prints "gen throughput" (a custom or future format) is a prefill
    # record, not a decode window: 1 window (the decode line: 2.0 tok/s), and no crash
    lines = ["[2026-05-12 00:00:00 TP0] Prefill batch, #new-seq: 1, #running-req: 3, gen throughput (token/s): 5.0\n",
             "[2026-05-12 00:00:02 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 2.0\n"]
    f = tmp_path / "prefill_rate.log"
    f.write_text("".join(lines))
    for summary in (parse_log(lines).summary, scan_log(lines).summary(), scan_file(str(f)).summary()):
        assert (summary.records, summary.windows, summary.gen_tok_s.mean) == ({"prefill": 1, "decode": 1}, 1, 2.0)
