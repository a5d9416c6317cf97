"""The streaming reader against the standard library's whole-file json.load on real traces."""

import gzip

import pytest
from tracefiles import EAGER, GRAPH, load, public, run, write

from decodescope.trace.ranges import read
from decodescope.trace.reader import read_trace

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _gpu_events(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU]


@pytest.mark.parametrize("path", [EAGER, GRAPH], ids=["eager", "graph"])
def test_h200_gpu_events_match_json_load(path):
    doc = load(path)
    want = sorted((float(e["ts"]), float(e["dur"])) for e in _gpu_events(doc))
    t = read_trace(str(path))
    assert t.problems == []
    got = sorted((ev[0] + t.origin_us, ev[1] - ev[0]) for ev in t.gpu)
    assert len(got) == len(want)
    # a µs timestamp near 5e12 as a double carries ~0.001 µs of rounding
    assert all(abs(a[0] - b[0]) < 2e-3 and abs(a[1] - b[1]) < 2e-3 for a, b in zip(got, want))
    assert t.device_name == doc["deviceProperties"][0]["name"] == "NVIDIA H200"


def test_graph_launches_and_their_kernels():
    doc = load(GRAPH)
    launches = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch"}
    t = read_trace(str(GRAPH))
    assert {c for _, c in t.graph_launches} == launches and len(launches) == 5
    # all kernels of one graph replay carry the launch's correlation id
    in_graphs = sum(1 for ev in t.gpu if ev[3] in launches)
    assert in_graphs == sum(1 for e in _gpu_events(doc) if e["args"].get("correlation") in launches) > 4000


@pytest.mark.parametrize("name, rank, world", [
    ("nccl_parser_config_nccl_data.json.gz", 0, 2),
    ("trace_diff_control_control.json.gz", 3, 8),
    ("ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0, 1),
    ("triton_example_triton_example.json.gz", None, None),
])
def test_public_traces_match_json_load(name, rank, world):
    path = public(name)
    doc = load(path)
    t = read_trace(str(path))
    assert t.problems == []
    assert len(t.gpu) == len(_gpu_events(doc))
    assert sum(ev[1] - ev[0] for ev in t.gpu) == pytest.approx(sum(float(e["dur"]) for e in _gpu_events(doc)))
    info = doc.get("distributedInfo") or {}
    assert (t.rank, t.world_size) == (info.get("rank"), info.get("world_size")) == (rank, world)


def test_compact_json_takes_the_careful_path(tmp_path):
    """Another writer's layout (no spaces, other key order): same events, found event by event."""
    doc = load(GRAPH)
    for e in doc["traceEvents"]:
        e.pop("ph", None) if e.get("cat") == "ac2g" else None
    path = write({"traceEvents": doc["traceEvents"], "deviceProperties": doc["deviceProperties"]},
                 tmp_path / "compact.json")
    t = read_trace(str(path))
    assert len(t.gpu) == len(_gpu_events(load(GRAPH)))
    assert len(t.graph_launches) == 5


def test_truncated_gzip_reports_what_it_read(tmp_path):
    data = EAGER.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    t = read_trace(str(cut))
    assert any("ends early" in p for p in t.problems)
    full = len(_gpu_events(load(EAGER)))
    assert 0 < len(t.gpu) < full
    r = run(cut)
    assert "Traceback" not in r.stderr
    assert "ends early" in r.stdout and "decode steps" in r.stdout


def test_invalid_json_in_the_middle_skips_one_event(tmp_path):
    text = gzip.decompress(EAGER.read_bytes())
    key = b'"ts": 5146452547540.015, "dur": 6.368,'  # one kernel (the second layer norm, by hand from the file)
    assert text.count(key) == 1
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.replace(key, b'"ts": 5146452547540.015, "dur": 6.368 oops,'))
    t = read_trace(str(bad))
    assert t.problems == ["1 events are not valid JSON and were skipped"]
    assert len(t.gpu) == len(_gpu_events(load(EAGER))) - 1
    r = run(bad)
    assert r.returncode == 0 and "not valid JSON" in r.stdout and "Traceback" not in r.stderr


def test_not_a_trace(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"hello": [1, 2, 3]}')
    r = run(p)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "not a torch-profiler Chrome trace" in r.stdout
    assert "nothing to read" in r.stderr and "not a torch-profiler Chrome trace" in r.stderr


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_byte_ranges_read_like_one_pass(tmp_path, monkeypatch, workers):
    """A plain file read in byte ranges by parallel processes (done for large files; the
    threshold lowered here so that the 11 MB eager trace is split)."""
    plain = tmp_path / "eager.json"
    plain.write_bytes(gzip.decompress(EAGER.read_bytes()))
    one = read_trace(str(plain))
    monkeypatch.setattr("decodescope.trace.ranges.PARALLEL_BYTES", 1)
    many = read(str(plain), workers)
    assert many.problems == [] and many.device_name == "NVIDIA H200"
    assert sorted((s, e, many.names[n], c) for s, e, n, c in many.gpu) == \
        sorted((s, e, one.names[n], c) for s, e, n, c in one.gpu)
    assert many.launch_ts == one.launch_ts and sorted(many.annotations) == sorted(one.annotations)
