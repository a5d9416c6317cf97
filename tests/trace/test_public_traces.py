"""Public traces from other people's machines (tests/data/traces, sources in SOURCES.md),
against an independent reading with json and gzip."""

import csv
import gzip
import json
import re
import shutil
import zlib
from decimal import Decimal
from pathlib import Path

import pytest
from tracefiles import EAGER, GRAPH, ROOT, load, public, run, write

from decodescope.trace.reader import read_trace
from decodescope.trace.steps import StepSource, find_steps

DATA = ROOT / "tests" / "data" / "traces"
OLD = DATA / "hta_old_categories_inference_rank_1.json.gz"
ROCM = DATA / "hta_rocm6_mi250_minitoy_train.json.gz"
SAMPLED = DATA / "hta_sampled_rank-0.json.gz"


def by_hand(path: Path, step: str = r"ProfilerStep#\d+", doc: dict | None = None) -> list[tuple[str, float, float, int]]:
    """(label, wall ms, busy ms, GPU events) per ProfilerStep#N range that launched GPU work:
    a GPU event belongs to the range its launch call (same correlation id) starts in; wall runs
    from the step's first GPU start to the next step's; busy is the union of its GPU events."""
    if doc is None:
        with gzip.open(path) as f:
            doc = json.load(f, parse_float=Decimal)  # exact: a double holds epoch µs only to ~0.25 µs
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ranges = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
                    if e.get("cat") == "user_annotation" and re.fullmatch(step, e["name"]))
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime"
              and "correlation" in e.get("args", {})}
    groups: list[list[dict]] = [[] for _ in ranges]
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            t = launch.get(e["args"].get("correlation"), e["ts"])
            for g, (s, end, _) in zip(groups, ranges):
                if s <= t <= end:
                    g.append(e)
                    break
    firsts = [min(e["ts"] for e in g) for g in groups if g]
    out = []
    for g, (_, _, label) in zip(groups, ranges):
        if not g:
            continue
        first, last = min(e["ts"] for e in g), max(e["ts"] + e["dur"] for e in g)
        end = min((x for x in firsts if x > first), default=last)
        busy, cur = 0, None
        for s, e in sorted((e["ts"], e["ts"] + e["dur"]) for e in g):
            if cur is None or e > cur:
                busy += e - (s if cur is None else max(s, cur))
                cur = e
        out.append((label, float((end - first) / 1000), float(busy / 1000), len(g)))
    return out


@pytest.mark.parametrize("path", [ROCM, SAMPLED], ids=["rocm", "sampled"])
def test_steps_match_a_reading_by_hand(path, tmp_path):
    want = by_hand(path)
    assert len(want) == (1 if path == ROCM else 2)  # the ROCm trace's ProfilerStep#2 launched nothing
    r = run(path, "--steps", "all", "--csv", tmp_path / "s.csv", "--json")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    got = [(x["label"], float(x["wall_ms"]), float(x["busy_ms"]), int(x["kernels"])) for x in rows]
    assert [g[0] for g in got] == [w[0] for w in want] and [g[3] for g in got] == [w[3] for w in want]
    for g, w in zip(got, want):
        assert g[1] == pytest.approx(w[1], abs=1e-5) and g[2] == pytest.approx(w[2], abs=1e-5)
    j = json.loads(r.stdout)
    assert j["steps"] == len(want) and j["ranks"][0]["step_source"] == str(StepSource.PROFILER_STEP)


def test_nanosecond_timestamps_match_to_the_nanosecond(tmp_path):
    # newer Kineto writes epoch µs with three decimals (~1.7e15.xxx): read exactly by hand with
    # Decimal, the five ProfilerStep walls and busy times agree to 1 ns (csv rounds to 1e-6 ms)
    path = public("ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    want = by_hand(path)
    assert len(want) == 5
    r = run(path, "--steps", "all", "--csv", tmp_path / "s.csv")
    assert r.returncode == 0, r.stderr
    got = [(x["label"], float(x["wall_ms"]), float(x["busy_ms"]), int(x["kernels"]))
           for x in csv.DictReader(open(tmp_path / "s.csv"))]
    assert [g[0] for g in got] == [w[0] for w in want] and [g[3] for g in got] == [w[3] for w in want]
    for g, w in zip(got, want):
        assert g[1] == pytest.approx(w[1], abs=1.5e-6) and g[2] == pytest.approx(w[2], abs=1.5e-6)


def test_old_category_names_are_read():
    # Kernels (ts µs, dur µs) 1665536373729077+4 elementwise, ..730531+6 gemv, ..730669+15 cutlass
    # GEMM, ..730701+5 elementwise. No step markers, no graph launches: steps from idle gaps.
    # Gaps 1450, 132, 17 µs; median 132 -> threshold 10 x 132 = 1320 µs: one cut, after kernel 1.
    steps = find_steps(read_trace(str(OLD)))
    assert steps.source is StepSource.IDLE_GAP
    a, b = steps.steps
    assert a.kernels == 1 and a.wall_ms == pytest.approx(1.454) and a.busy_ms == pytest.approx(0.004)
    # the last step: 730531 to its last end 730706 = 175 µs; busy 6 + 15 + 5 = 26 µs
    assert b.kernels == 3 and b.wall_ms == pytest.approx(0.175) and b.busy_ms == pytest.approx(0.026)
    assert b.by_class == pytest.approx({"gemm": 0.021, "elementwise": 0.005})


def _as_begin_end(doc: dict) -> dict:
    """Each complete ("X") step range rewritten as a "B" / "E" pair, as other trace writers do."""
    events = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            end = {"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]}
            e = {k: v for k, v in e.items() if k != "dur"} | {"ph": "B"}
            events += [e, end]
        else:
            events.append(e)
    return doc | {"traceEvents": events}


def test_begin_end_pairs_are_ranges(tmp_path):
    with gzip.open(SAMPLED) as f:
        doc = _as_begin_end(json.load(f))
    path = tmp_path / "be.json"
    path.write_text(json.dumps(doc, indent=2))
    found = find_steps(read_trace(str(path)))
    assert found.source is StepSource.PROFILER_STEP
    want = by_hand(SAMPLED)  # the same ranges as complete events
    got = [(s.label, s.wall_ms, s.busy_ms, s.kernels) for s in found.steps]
    assert [g[0] for g in got] == [w[0] for w in want] and [g[3] for g in got] == [w[3] for w in want]
    assert all(g[1] == pytest.approx(w[1]) and g[2] == pytest.approx(w[2]) for g, w in zip(got, want))


def test_an_end_without_begin_is_reported(tmp_path):
    with gzip.open(SAMPLED) as f:
        doc = _as_begin_end(json.load(f))
    first_b = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "B")
    del doc["traceEvents"][first_b]  # its "E" is left alone, and the step range is gone
    path = tmp_path / "be.json"
    path.write_text(json.dumps(doc))
    t = read_trace(str(path))
    assert any('1 "B" / "E" events have no partner' in p for p in t.problems)


def test_an_empty_event_list_is_not_called_truncated(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n]}')
    assert read_trace(str(path)).problems == []
    r = run(path)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "truncated" not in r.stdout + r.stderr


def test_a_profiler_folder_is_read_as_its_trace_files(tmp_path):
    # vLLM and SGLang write one trace per rank into the folder named by VLLM_TORCH_PROFILER_DIR /
    # SGLANG_TORCH_PROFILER_DIR, next to other files (vLLM's profiler_out_N.txt tables)
    (tmp_path / "r0.pt.trace.json.gz").write_bytes(SAMPLED.read_bytes())
    (tmp_path / "profiler_out_0.txt").write_text("Name  Self CPU %\n")
    # and the front end's CPU-only trace (vLLM worker name "async_llm"), which is no rank
    cpu_only = {"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "frontend_span", "pid": 1, "tid": 1,
                                 "ts": 1, "dur": 2}]}
    (tmp_path / "async_llm.1733000000.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(cpu_only).encode()))
    r = run(tmp_path, "--steps", "all", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["steps"] == len(by_hand(SAMPLED)) == 2 and len(d["ranks"]) == 1 and d["problems"] == []
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(empty)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "no .json or .json.gz files in the folder" in r.stderr


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "no-closing-bracket"])
def test_a_bare_event_list_is_read(tmp_path, closed):
    # Chrome's trace format also allows the file to be just the list of events, its "]" optional
    with gzip.open(SAMPLED) as f:
        text = json.dumps(json.load(f)["traceEvents"], indent=1)
    path = tmp_path / "array.json"
    path.write_text(text if closed else text.rstrip()[:-1])
    t = read_trace(str(path))
    assert t.problems == []
    got = [(s.label, s.wall_ms, s.busy_ms, s.kernels) for s in find_steps(t).steps]
    want = by_hand(SAMPLED)
    assert [g[0] for g in got] == [w[0] for w in want] and [g[3] for g in got] == [w[3] for w in want]
    assert all(g[1] == pytest.approx(w[1]) and g[2] == pytest.approx(w[2]) for g, w in zip(got, want))


def test_two_runs_of_one_rank_in_a_folder_are_named(tmp_path):
    # two /start_profile calls into the same folder: two files that both say rank 0
    # (distributedInfo in the trace)
    for run_id in ("1733000000", "1733000100"):
        (tmp_path / f"{run_id}.pt.trace.json.gz").write_bytes(SAMPLED.read_bytes())
    r = run(tmp_path, "--steps", "all", "--json")
    assert r.returncode == 0, r.stderr
    assert any("several files for the same rank" in p and "(0, None)" in p for p in json.loads(r.stdout)["problems"])


def test_a_list_without_event_boundaries_is_refused_in_bounded_memory(tmp_path):
    # 80 MB of numbers where events should be: no "}, {" boundary, so no event can be cut out;
    # the reader gives up after 64 MB instead of holding the whole list
    path = tmp_path / "numbers.json"
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
        f.write("1234567, " * 10_000_000)
        f.write("0]}")
    t = read_trace(str(path))
    assert t.gpu == [] and any("no boundary between events in 64 MB" in p for p in t.problems)


def test_ranks_on_hosts_booted_apart_are_on_one_clock(tmp_path):
    # Newer Kineto counts ts from a point of the host's clock and gives that point as
    # baseTimeNanoseconds. A rank on a host booted 3 days later (259200 s): every ts
    # 259200e6 µs smaller, its base 259200e9 ns larger; base + ts is the same wall-clock time,
    # so this is no clock skew (the +1 h copy in test_cli, with its base unchanged, is one).
    doc = load(GRAPH)
    assert doc["baseTimeNanoseconds"] > 0
    shutil.copy(GRAPH, tmp_path / "p-TP-0.trace.json.gz")
    other = json.loads(json.dumps(doc))
    for e in other["traceEvents"]:
        if isinstance(e.get("ts"), int | float):
            e["ts"] -= 259200e6
    other["baseTimeNanoseconds"] += 259200 * 10**9
    write(other, tmp_path / "p-TP-1.trace.json.gz")
    r = run(*sorted(tmp_path.glob("*.gz")), "--json")
    assert r.returncode == 0, r.stderr
    assert not any("apart" in p for p in json.loads(r.stdout)["problems"])


@pytest.mark.parametrize("name", ["probe.txt", "gpu_check_results.json"])
def test_a_file_that_is_no_trace_gets_one_error_saying_so(name):
    # real files of this repository that are no traces: a text report and a JSON document
    r = run(ROOT / "tests" / "data" / "h200" / name)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(err) == 2
    assert "nothing to read" in err[0] and "not a torch-profiler Chrome trace" in err[0]
    assert "export_chrome_trace" in err[1]


def test_several_gpus_in_one_file_are_named(tmp_path):
    # one process driving two GPUs: the graph trace's GPU events copied onto device 1 ("pid" 1)
    doc = load(GRAPH)
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    doc["traceEvents"] += [e | {"pid": 1} for e in gpu]
    r = run(write(doc, tmp_path / "two.json.gz"), "--json")
    assert r.returncode == 0, r.stderr
    assert any("GPU events on 2 devices (pid 0, 1)" in p for p in json.loads(r.stdout)["problems"])
    assert not any("devices" in p for p in json.loads(run(GRAPH, "--json").stdout)["problems"])


def test_the_step_a_truncated_file_ends_in_is_left_out(tmp_path):
    # the eager H200 trace (5 decode_step ranges of 965 GPU events) with its gzip cut at 60 %
    data = EAGER.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) * 6 // 10])
    # by hand: what zlib gives of the cut file, closed after its last whole event, read by json
    text = zlib.decompressobj(wbits=31).decompress(cut.read_bytes()).decode()
    partial = json.loads(text[: text.rfind("\n  },\n  {") + 4] + "]}", parse_float=Decimal)
    full, read = by_hand(EAGER, "decode_step"), by_hand(EAGER, "decode_step", partial)
    assert [w[3] for w in full] == [965] * 5
    whole = [r for r, w in zip(read, full) if r[3] == w[3]]  # steps with all their GPU events read
    assert 0 < len(whole) < len(read) <= 5  # the cut falls inside a step
    r = run(cut, "--steps", "all", "--csv", tmp_path / "s.csv")
    assert r.returncode == 0, r.stderr
    assert f"step {len(whole)} (decode_step) is cut short by the end of the file" in " ".join(r.stdout.split())
    rows = csv.DictReader(open(tmp_path / "s.csv"))
    got = [(x["label"], float(x["wall_ms"]), float(x["busy_ms"]), int(x["kernels"])) for x in rows]
    assert [g[3] for g in got] == [w[3] for w in whole]
    for g, w in zip(got, full):  # the steps kept are the complete trace's steps
        assert g[1] == pytest.approx(w[1], abs=1e-5) and g[2] == pytest.approx(w[2], abs=1e-5)
