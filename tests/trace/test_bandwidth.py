"""Achieved GEMM bandwidth where shapes were recorded: a public A100 trace (record_shapes=True)."""

import pytest
from tracefiles import EAGER, load, public

from decodescope.trace.summary import analyse

DIMS = [[1024, 647, 96], [1024, 96, 30]]
# bmm of fp32 [1024, 647, 96] x [1024, 96, 30] -> [1024, 647, 30]:
# (1024*647*96 + 1024*96*30 + 1024*647*30) elements x 4 bytes
# = (63,602,688 + 2,949,120 + 19,875,840) x 4 = 345,710,592 bytes per call
BYTES = 345_710_592


def test_bmm_bandwidth_by_hand():
    path = public("trace_diff_control_control.json.gz")
    doc = load(path)
    ev = doc["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::bmm"
           and e["args"].get("Input Dims") == DIMS]
    launches = [e for e in ev if e.get("cat") == "cuda_runtime"]
    kernels = {}
    for e in ev:
        if e.get("cat") == "kernel":
            kernels.setdefault(e["args"]["correlation"], []).append(e)
    # the kernels launched from the op's thread while it ran (every one a cuBLAS / CUTLASS GEMM)
    per_op = [[k for r in launches if r["tid"] == o["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]
               for k in kernels.get(r["args"]["correlation"], [])] for o in ops]
    assert len(ops) == 12 and all(per_op)
    assert all("gemm" in k["name"] for ks in per_op for k in ks)
    us = sum(k["dur"] for ks in per_op for k in ks)
    got = next(g for r in analyse([str(path)]).ranks for g in r.gemm_bandwidth if g.dims == str(DIMS))
    assert (got.op, got.dtype, got.calls, got.bytes) == ("bmm", "float", 12, BYTES)
    assert got.ms == pytest.approx(us / 1e3, rel=1e-6)
    assert got.gb_s == pytest.approx(BYTES * 12 / (us * 1e3), rel=1e-6)
    assert got.gb_s < 2039  # below the A100 80 GB's 2039 GB/s (datasheet)


def test_no_shapes_no_figure():
    """The H200 traces were recorded without shapes: no bandwidth, and nothing invented."""
    assert analyse([str(EAGER)]).ranks[0].gemm_bandwidth == ()
