"""`decodescope trace` end to end on the H200 traces: JSON, table and CSV agree; many ranks."""

import csv
import json
import re
import shutil
import statistics

from tracefiles import EAGER, GRAPH, load, run, write


def _json(*args) -> dict:
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_fields_and_table_agree(tmp_path):
    d = _json(GRAPH)
    for key in ("steps", "step_ms", "by_class", "idle_ms", "busy_ms", "unknown_kernels", "ranks"):
        assert key in d, key
    assert d["steps"] == 5 and set(d["step_ms"]) >= {"p50", "p90"}
    assert d["unknown_kernels"] == {}  # every kernel of a plain PyTorch Llama decode has a class
    table = run(GRAPH).stdout
    for cls, ms in d["by_class"].items():
        assert re.search(rf"│ {cls}\s+│\s+{ms:.3f} │", table), cls
    assert re.search(rf"│ GPU idle .*│\s+{d['idle_ms']:.3f} │", table)
    assert f"p50 {d['step_ms']['p50']:.3f} ms" in table


def test_csv_has_one_row_per_step(tmp_path):
    out = tmp_path / "steps.csv"
    d = _json(EAGER, "--csv", out)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == d["steps"] == 5
    assert abs(statistics.median(float(r["wall_ms"]) for r in rows) - d["step_ms"]["p50"]) < 1e-6  # CSV: 6 decimals
    for r in rows:  # classes add up to busy, busy + idle to wall
        classes = sum(float(v) for k, v in r.items() if k.endswith("_ms") and k not in (
            "start_ms", "wall_ms", "busy_ms", "idle_ms", "idle_between_ms"))
        assert 0 <= float(r["idle_between_ms"]) <= float(r["idle_ms"])
        assert abs(classes - float(r["busy_ms"])) < 1e-5
        assert abs(float(r["busy_ms"]) + float(r["idle_ms"]) - float(r["wall_ms"])) < 1e-5


def test_ranks_by_file_name_clock_skew_and_a_straggler(tmp_path):
    """Three TP ranks (SGLang names): two copies of the graph trace, one an hour later on
    its host clock, and one whose GPU timeline runs 1.2x slower (every GPU event's start,
    from the first one, and duration x 1.2). The slow rank's busy time is 1.2x the others'
    median, 20 % above it (> the 5 % threshold); the skewed copy's figures equal the
    original's, and the skew is reported."""
    doc = load(GRAPH)
    shutil.copy(GRAPH, tmp_path / "p-TP-0.trace.json.gz")
    late = json.loads(json.dumps(doc))
    for e in late["traceEvents"]:
        if isinstance(e.get("ts"), int | float):
            e["ts"] += 3600e6
    write(late, tmp_path / "p-TP-1.trace.json.gz")
    slow = json.loads(json.dumps(doc))
    gpu = [e for e in slow["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in gpu)
    for e in gpu:
        e["ts"], e["dur"] = t0 + (e["ts"] - t0) * 1.2, e["dur"] * 1.2
    write(slow, tmp_path / "p-TP-2.trace.json.gz")
    d = _json(*sorted(tmp_path.glob("*.gz")))
    assert [r["tp_rank"] for r in d["ranks"]] == [0, 1, 2]
    r0, r1, r2 = d["ranks"]
    assert abs(r0["busy_ms"] - r1["busy_ms"]) < 1e-6 and abs(r0["step_ms"]["p50"] - r1["step_ms"]["p50"]) < 1e-6
    assert any("3600 s apart" in p for p in d["problems"])
    assert [s["file"].endswith("p-TP-2.trace.json.gz") for s in d["stragglers"]] == [True]
    assert abs(d["stragglers"][0]["excess_pct"] - 20) < 0.01


def test_missing_file():
    r = run("/nonexistent/trace.json")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot read" in r.stderr
