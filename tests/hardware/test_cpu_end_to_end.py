"""The project's own check of the model on real hardware: a Llama-shaped model of 0.31 B
parameters in fp32 on this machine's CPU. `calibrate` measures the CPU (GEMV at the
model's own shapes, launch cost), `bench` times a real transformers decode loop with
random weights, and `decodescope model --gpu cpu --calibration` must expect a step time
within 25 % of the measured one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch, load_config
from decodescope.hardware import bench
from decodescope.hardware.calibrate import CPU_SIZES, calibrate, model_shapes, small
from decodescope.hardware.calibration import save

pytest.importorskip("torch", reason="calibrate and bench need torch")
pytest.importorskip("transformers", reason="bench needs transformers")

ROOT = Path(__file__).parents[2]
LLAMA = str(ROOT / "tests" / "data" / "hardware" / "llama-334m.json")
CONTEXT, STEPS = 64, 8


def test_model_expected_step_within_25_percent_of_bench_on_this_cpu(tmp_path):
    arch = load_arch(LLAMA)
    assert arch.params_total >= 300e6  # 308.8 M: 16 layers x 15.2 M + embedding and head 2 x 32.8 M
    cal = calibrate("cpu", shapes=model_shapes(arch), sizes=small(CPU_SIZES), batches=(1,))
    f = tmp_path / "cpu.json"
    save(cal, f)
    measured = bench.run(load_config(LLAMA), bench.BenchConfig(device="cpu", dtype="fp32", context=CONTEXT,
                                                                 steps=STEPS))
    # the same deployment as bench: one request, the cache at its mean length over the timed steps
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", LLAMA, "--gpu", "cpu", "--weights", "fp32",
                        "--engine", bench.ENGINE, "--context", str(CONTEXT + bench.WARMUP + STEPS // 2),
                        "--calibration", str(f), "--json"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    expected_ms = json.loads(r.stdout)["expected"]["round_ms"]
    ratio = expected_ms / measured.p50
    print(f"expected {expected_ms:.1f} ms, measured p50 {measured.p50:.1f} ms (p90 {measured.p90:.1f}), "
          f"ratio {ratio:.3f}; weight stream {cal.weight_bw(1) / 1e9:.2f} GB/s, copy {cal.copy_bw_bytes_s / 1e9:.2f} GB/s")
    assert 0.75 <= ratio <= 1.25
