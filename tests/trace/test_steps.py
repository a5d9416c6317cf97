"""Step boundaries and per-step busy time against independent sums over the real traces."""

import gzip
import json

import pytest
from tracefiles import EAGER, GRAPH, load, public, write

from decodescope.trace.reader import read_trace
from decodescope.trace.steps import Phase, StepSource, find_steps
from decodescope.trace.summary import analyse

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _sum_by_gpu_annotation(doc: dict) -> list[float]:
    """Straightforward sum, ms: each GPU-side `decode_step` span (on the stream) and the
    durations of the GPU events that start inside it. Independent of the tool's CPU-range
    and correlation matching."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                   if e.get("cat") == "gpu_user_annotation" and e["name"] == "decode_step")
    gpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU]
    return [sum(e["dur"] for e in gpu if s <= e["ts"] < end) / 1e3 for s, end in spans]


@pytest.mark.parametrize("path", [EAGER, GRAPH], ids=["eager", "graph"])
def test_busy_per_step_within_1pct_of_a_plain_sum(path):
    want = _sum_by_gpu_annotation(load(path))
    r = find_steps(read_trace(str(path)))
    assert r.source is StepSource.USER_RANGE and len(r.steps) == len(want) == 5
    for step, w in zip(r.steps, want):
        assert step.phase is Phase.DECODE  # "decode_step" says so
        assert step.busy_ms == pytest.approx(w, rel=0.01)
        assert sum(step.by_class.values()) == pytest.approx(step.busy_ms, rel=1e-9)
        assert step.idle_ms == pytest.approx(step.wall_ms - step.busy_ms, abs=1e-9)


def test_graph_step_wall_is_the_launch_to_launch_period():
    doc = load(GRAPH)
    # first GPU event of each step by hand: the earliest GPU start inside each GPU-side span
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                   if e.get("cat") == "gpu_user_annotation")
    gpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU]
    firsts = [min(e["ts"] for e in gpu if s <= e["ts"] < end) for s, end in spans]
    lasts = [max(e["ts"] + e["dur"] for e in gpu if s <= e["ts"] < end) for s, end in spans]
    r = find_steps(read_trace(str(GRAPH)))
    for step, a, b, last in zip(r.steps, firsts, firsts[1:], lasts):
        assert step.wall_ms == pytest.approx((b - a) / 1e3, abs=1e-5)
        assert step.idle_between_ms == pytest.approx(max(0.0, b - last) / 1e3, abs=1e-5)
    # the H200 graph replay of a Llama-8B-shaped decode: about 7.1 ms per step, 91 % busy
    assert 6.5 < r.steps[0].wall_ms < 8 and r.steps[0].busy_ms / r.steps[0].wall_ms > 0.85


def _without(doc: dict, cats: set) -> dict:
    return {**doc, "traceEvents": [e for e in doc["traceEvents"] if e.get("cat") not in cats]}


def test_cuda_graph_launches_when_no_annotation(tmp_path):
    doc = load(GRAPH)
    path = write(_without(doc, {"user_annotation", "gpu_user_annotation"}), tmp_path / "g.json.gz")
    r = find_steps(read_trace(str(path)))
    assert r.source is StepSource.CUDA_GRAPH and len(r.steps) == 5
    for step, w in zip(r.steps, _sum_by_gpu_annotation(doc)):
        assert step.busy_ms == pytest.approx(w, rel=0.01)


def test_idle_gaps_when_nothing_else(tmp_path):
    """A public training trace with its markers and launch calls removed: its five
    ProfilerStep ranges are separated by GPU gaps of 157-386 µs, against a median gap of
    0.8 µs between kernels (read off the trace), so the gaps give the same five steps."""
    src = public("ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    doc = load(src)
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    path = write(_without(doc, {"user_annotation", "gpu_user_annotation", "cuda_runtime", "cuda_driver"}),
                 tmp_path / "g.json")
    r = find_steps(read_trace(str(path)))
    assert r.source is StepSource.IDLE_GAP and len(r.steps) == len(marks) == 5
    assert sum(s.kernels for s in r.steps) == sum(1 for e in doc["traceEvents"] if e.get("cat") in GPU)


def _renamed(tmp_path, names: list[str], fname: str):
    """The H200 graph trace with its five `decode_step` ranges renamed as an engine names them."""
    doc = load(GRAPH)
    cpu = sorted((e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    for e, n in zip(cpu, names):
        e["name"] = n
    return write(doc, tmp_path / fname)


def test_sglang_step_names_and_phases(tmp_path):
    names = ["step[EXTEND bs=1 toks=12]", "step[DECODE bs=1]", "draft step[DECODE bs=1]",
             "step[TARGET_VERIFY bs=1]", "step[DECODE bs=1]"]
    r = find_steps(read_trace(str(_renamed(tmp_path, names, "x-TP-0.trace.json.gz"))))
    assert r.source is StepSource.SGLANG
    assert [s.phase for s in r.steps] == [Phase.PREFILL, Phase.DECODE, Phase.DRAFT, Phase.VERIFY, Phase.DECODE]


def test_vllm_step_names_and_phases(tmp_path):
    names = ["execute_context_1(12)_generation_0(0)"] + ["execute_context_0(0)_generation_1(1)"] * 4
    path = _renamed(tmp_path, names, "dp0_pp0_tp3_dcp0_ep0_rank7.1764000000.pt.trace.json.gz")
    r = find_steps(read_trace(str(path)))
    assert r.source is StepSource.VLLM
    assert [s.phase for s in r.steps] == [Phase.PREFILL] + [Phase.DECODE] * 4
    rank = analyse([str(path)]).ranks[0]  # no distributedInfo in this trace: both from the name
    assert (rank.tp_rank, rank.rank, len(rank.steps), rank.steps_found) == (3, 7, 4, 5)


def test_profiler_steps_on_a_public_nccl_trace():
    path = public("nccl_parser_config_nccl_data.json.gz")
    doc = load(path)
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    r = find_steps(read_trace(str(path)))
    assert r.source is StepSource.PROFILER_STEP and len(r.steps) == len(marks) == 3
    assert all(s.by_class.get("allreduce", 0) > 1 for s in r.steps)  # ncclKernel_AllReduce_RING_LL_Sum_float


def test_overlap_counted_once_on_a_multi_stream_trace():
    """trace_diff's NCCL runs on its own stream, overlapping compute: busy is the union."""
    path = public("trace_diff_control_control.json.gz")
    doc = load(path)
    gpu = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU)
    union, cur = 0.0, float("-inf")  # the union of all GPU intervals, by hand
    for s, e in gpu:
        if e > cur:
            union += e - max(s, cur)
            cur = e
    r = find_steps(read_trace(str(path)))
    total = sum(s.busy_ms for s in r.steps) + r.outside_ms
    assert total == pytest.approx(union / 1e3, rel=1e-6)
    assert sum(e - s for s, e in gpu) / 1e3 > total * 1.05  # the streams do overlap in this trace


def test_no_gpu_events():
    r = find_steps(read_trace(str(public("cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))))
    assert r.source is StepSource.NONE and r.steps == ()


def test_gzip_and_plain_read_alike(tmp_path):
    plain = tmp_path / "eager.json"
    plain.write_bytes(gzip.decompress(EAGER.read_bytes()))
    a, b = find_steps(read_trace(str(EAGER))), find_steps(read_trace(str(plain)))
    assert json.dumps([s.to_dict() for s in a.steps]) == json.dumps([s.to_dict() for s in b.steps])
