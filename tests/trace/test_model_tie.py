"""`trace --model`: the H200 CUDA-graph trace of a Llama-3.1-8B-shaped decode loop next to
the model of Llama-3.1-8B on an H200 (batch 1), both from real subprocesses."""

import json
import subprocess
import sys

from tracefiles import GRAPH, ROOT, run
from test_cli import _json


def test_terms_next_to_the_model():
    d = _json(GRAPH, "--model", "llama-3.1-8b", "--gpu", "h200")
    rows = {r["term"]: r for r in d["model"]["rows"]}
    m = json.loads(subprocess.run([sys.executable, "-m", "decodescope", "model", "llama-3.1-8b", "--gpu", "h200",
                                   "--json"], capture_output=True, text=True, cwd=ROOT, check=True).stdout)
    model = {c["component"]: c["ms"] for c in m["expected"]["breakdown"]}
    assert rows["GEMM <-> weights"]["measured_ms"] == d["by_class"]["gemm"]
    assert rows["GEMM <-> weights"]["model_ms"] == model["weights"]
    assert rows["GPU idle <-> host + kernel floors"]["measured_ms"] == d["idle_ms"]
    assert rows["GPU idle <-> host + kernel floors"]["model_ms"] == model["host"] + model["kernels"]
    assert rows["step <-> round"]["model_ms"] == m["expected"]["round_ms"]
    # the loop's GEMMs read the 15.0 GB of bf16 weights once per step; the model charges
    # that at the H200's effective bandwidth: measured 3.97 ms vs modelled 3.91 ms
    assert abs(rows["GEMM <-> weights"]["measured_ms"] / model["weights"] - 1) < 0.10


def test_model_needs_a_gpu():
    r = run(GRAPH, "--model", "llama-3.1-8b")
    assert r.returncode == 2 and "--model needs --gpu" in r.stderr and "Traceback" not in r.stderr
