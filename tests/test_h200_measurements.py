"""Measurements made once on an NVIDIA H200 (tests/data/h200/: a plain PyTorch decode loop
with random weights and CUDA graphs, by the script that `decodescope calibrate` and
`decodescope bench` replace; its probe.txt is read by tests/hardware/test_probe_parse.py):
the model's byte count must equal the real tensors', and no measured step may beat the
ceiling."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict

RESULTS = json.loads((Path(__file__).parent / "data" / "h200" / "gpu_check_results.json").read_text())
DECODE = RESULTS["sections"]["decode"]["configs"]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-8b"])
def test_weight_bytes_equal_the_real_tensors(model):
    arch = load_arch(model)
    p = predict(arch, make_deployment(arch, "h200"))
    assert p.weight_bytes_per_gpu == DECODE[model]["weight_bytes_per_step"]


@pytest.mark.parametrize("model, mode", [(m, k) for m in ("llama-3.1-8b", "qwen3-8b")
                                         for k in ("b1_graph", "b16_graph", "b1_eager")])
def test_measured_step_is_slower_than_the_ceiling(model, mode):
    run = DECODE[model][mode]
    arch = load_arch(model)
    p = predict(arch, make_deployment(arch, "h200", batch=run["batch"], context=1024))
    assert run["tok_s"] < p.ceiling.tok_s_total
