"""The calibration file: what `model --calibration` takes from it (hand arithmetic on a
file written here), and the refusals (missing, not JSON, old schema, another device)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.hardware.calibration import SCHEMA, AllreducePoint, Calibration, Gemv, apply, load, save
from decodescope.model import make_deployment, predict

ROOT = Path(__file__).parents[2]
LLAMA = str(ROOT / "tests" / "data" / "hardware" / "llama-334m.json")

CPU_CAL = Calibration(
    device="cpu", device_name="test CPU (2 CPUs)", memory_bytes=16e9, versions={"torch": "2.13.0"},
    copy_bw_bytes_s=10e9, copy_bw_best_bytes_s=12e9, matmul_flops={"fp32": 100e9, "bf16": 50e9},
    launch_eager_us=10.0,
    # weight stream at batch 1: (3 calls x 5 GB/s x 100 us + 1 x 2 GB/s x 200 us) / (3 x 100 + 200) us
    #   = (1.5e12 + 0.4e12) / 500 = 3.8 GB/s
    gemv=(Gemv(1024, 4096, 1, "fp32", 100.0, 5e9, count=3), Gemv(4096, 1024, 1, "fp32", 200.0, 2e9, count=1),
          Gemv(1024, 4096, 8, "fp32", 150.0, 4e9, count=3)),
    created="2026-11-30T00:00:00Z")


def test_weight_stream_is_the_gemv_mix_at_the_nearest_batch():
    assert CPU_CAL.weight_bw(1) == pytest.approx(3.8e9)
    assert CPU_CAL.weight_bw(2) == pytest.approx(3.8e9)  # |log 2/1| < |log 2/8|
    assert CPU_CAL.weight_bw(16) == pytest.approx(4e9)  # only batch 8 measured there
    assert replace(CPU_CAL, gemv=()).weight_bw(1) == 10e9  # no GEMV: the copy bandwidth


def test_cpu_expected_uses_the_measured_numbers():
    arch = load_arch(LLAMA)
    d, notes = apply(CPU_CAL, make_deployment(arch, "cpu", weights="fp32", context=64, engine="gpt-fast"))
    # the CPU's ceiling is its best copy, its FLOP/s the fp32 matmul
    assert d.gpu.memory_bw_bytes_s == 12e9 and d.gpu.flops["bf16"] == 100e9
    assert d.engine.bw_efficiency == pytest.approx(3.8e9 / 12e9)
    assert d.engine.kernel_floor_us == 10.0 and d.engine.flops_efficiency == pytest.approx(1.0)
    p = predict(arch, d)
    # weights read per step: linear weights 16 x 1024 x 1024 x 14.5 (q 1, k 0.25, v 0.25, o 1, gate 4, up 4,
    # down 4) + LM head 32000 x 1024 = 276,037,632 at 4 bytes = 1,104,150,528 B, and 33 RMSNorm vectors
    # (2 per layer + final) of 1024 counted at 2 bytes = 67,584 B: 1,104,218,112 B / 3.8 GB/s = 290.584 ms
    assert p.expected.ms("weights") == pytest.approx(1_104_218_112 / 3.8e9 * 1e3, rel=1e-6)
    # kernel floors: (8 attention + 4 MLP kernels) x 16 layers + 4 (norm, head, sample) = 196 x 10 us
    assert p.expected.ms("kernels") == pytest.approx(196 * 10e-3)
    assert "weight stream 3.8 GB/s (GEMV at batch 1)" in notes[0] and "kernel launch 10.00 us (eager)" in notes[0]
    assert "not measured: host time per pass" in notes[1]


def test_gpu_calibration_keeps_the_datasheet_ceiling_and_measures_allreduce():
    cal = replace(CPU_CAL, device="h100-sxm", device_name="NVIDIA H100 80GB HBM3", copy_bw_bytes_s=2.8e12,
                  gemv=(), matmul_flops={"bf16": 700e12}, launch_graph_us=2.0, gpus=2,
                  allreduce=(AllreducePoint(4096, 8.0), AllreducePoint(1 << 20, 30.0)))
    arch = load_arch("llama-3.1-8b")
    d, notes = apply(cal, make_deployment(arch, "h100-sxm", tp=2, engine="vllm"))
    assert d.gpu.memory_bw_bytes_s == 3350e9  # datasheet stays the ceiling
    assert d.engine.bw_efficiency == pytest.approx(2.8e12 / 3350e9)
    assert d.engine.flops_efficiency == pytest.approx(700 / 989.5)
    # vLLM runs CUDA graphs: the measured in-graph launch (2.0 us) plus what its profile's floor
    # (engines.toml 4.5 us) holds beyond the 1.1 us launch it was measured against: 2.0 + 3.4
    assert d.engine.kernel_floor_us == pytest.approx(5.4)
    assert d.link.allreduce_latency_s == pytest.approx(8e-6) and d.engine.allreduce_latency_scale == 1.0
    assert "allreduce latency 8.0 us (2 GPUs)" in notes[0]


def test_round_trip_through_the_file(tmp_path):
    f = tmp_path / "cal.json"
    save(CPU_CAL, f)
    assert json.loads(f.read_text())["schema"] == SCHEMA
    assert replace(load(f, "cpu"), source="") == CPU_CAL


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("{not json", "is not a calibration file"),
    ('{"device": "cpu"}', "no 'schema' field"),
    ('{"schema": 0, "device": "cpu"}', "has calibration schema 0; this decodescope reads schema 1"),
])
def test_bad_files_are_refused_with_the_reason(tmp_path, content, message):
    f = tmp_path / "cal.json"
    if content is not None:
        f.write_text(content)
    with pytest.raises(DecodescopeError, match=message):
        load(f)


def test_a_file_of_another_device_is_refused(tmp_path):
    f = tmp_path / "cal.json"
    save(CPU_CAL, f)
    with pytest.raises(DecodescopeError, match="measured on 'cpu' .* not on 'h100-sxm'"):
        load(f, "h100-sxm")


def model(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "decodescope", "model", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_model_cli_with_calibration_says_what_was_measured(tmp_path):
    f = tmp_path / "cpu.json"
    save(CPU_CAL, f)
    r = model(LLAMA, "--gpu", "cpu", "--weights", "fp32", "--engine", "gpt-fast", "--calibration", str(f), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["hardware"]["memory_bw_bytes_s"] == 12e9
    assert any(n.startswith("measured by calibrate on test CPU") for n in d["notes"])
    assert d["hardware"]["sources"]["memory_bw_bytes_s"].startswith("measured by calibrate")


def test_model_cli_refusals():
    r = model(LLAMA, "--gpu", "cpu")
    assert r.returncode == 2 and "--gpu cpu has no datasheet bandwidth" in r.stderr
    assert "decodescope calibrate --device cpu" in r.stderr and "Traceback" not in r.stderr


def test_model_cli_refuses_a_calibration_of_another_device(tmp_path):
    f = tmp_path / "cpu.json"
    save(CPU_CAL, f)
    r = model("llama-3.1-8b", "--gpu", "h100", "--calibration", str(f))
    assert r.returncode == 2 and "was measured on 'cpu'" in r.stderr and "Traceback" not in r.stderr


def test_a_cpu_gemv_faster_than_its_copy_raises_the_ceiling_a_gpu_gemv_is_capped_at_the_datasheet():
    # a CPU copy reads each destination line before writing it, so its 12 GB/s (read + write
    # counted) understates the bus: a GEMV that read 20 GB/s is the CPU's ceiling
    cal = replace(CPU_CAL, gemv=(Gemv(128, 256, 1, "fp32", 1.0, 20e9),))
    arch = load_arch(LLAMA)
    d, _ = apply(cal, make_deployment(arch, "cpu", weights="fp32", engine="gpt-fast"))
    assert d.gpu.memory_bw_bytes_s == 20e9 and d.engine.bw_efficiency == 1.0
    p = predict(arch, d)
    assert p.expected.tok_s < p.ceiling.tok_s
    # a GPU's ceiling is its datasheet (H100 SXM 3.35 TB/s): a GEMV at 9 TB/s sat in cache
    gpu = replace(cal, device="h100-sxm", gemv=(Gemv(128, 256, 1, "bf16", 1.0, 9e12),))
    d, _ = apply(gpu, make_deployment(arch, "h100", weights="bf16", engine="gpt-fast"))
    assert d.gpu.memory_bw_bytes_s == 3.35e12 and d.engine.bw_efficiency == 1.0


def test_a_lever_to_another_gpu_runs_that_gpus_profile_not_this_devices_measurement(tmp_path):
    f = tmp_path / "cpu.json"
    save(CPU_CAL, f)
    r = model(LLAMA, "--gpu", "cpu", "--weights", "fp32", "--engine", "gpt-fast", "--context", "64",
              "--calibration", str(f), "--json")
    assert r.returncode == 0, r.stderr
    lever = next(x for x in json.loads(r.stdout)["levers"] if x["lever"].startswith("gpu gb200"))
    # GB200 (8 TB/s) with gpt-fast's own profile (engines.toml: bw_efficiency 0.799, kernel floor
    # 4.5 us, host 0.0026 ms per pass), one request at 64 tokens of context:
    #   weights 1,104,218,112 B + KV cache 16 layers x 2 (K, V) x 4 heads x 64 dims x 2 B x 65 tokens
    #   = 1,064,960 B: 1,105,283,072 B / (8e12 x 0.799) B/s = 0.172917 ms
    #   kernel floors 196 x 4.5 us = 0.882 ms; host 0.0026 ms
    #   round 1.057517 ms -> 945.6 tok/s
    # (with the CPU's measured 3.8 / 12 GB/s efficiency and 10 us floor instead it would be ~3.4 ms)
    assert lever["tok_s"] == pytest.approx(1e3 / (1_105_283_072 / (8e12 * 0.799) * 1e3 + 0.882 + 0.0026), rel=1e-6)


def test_a_fitted_kernel_floor_keeps_its_kernel_cost_on_top_of_the_measured_launch():
    # SGLang's profile floor is fitted above a bare in-graph launch (engines.toml); a
    # calibration replaces only the launch: floor = measured 2.0 us + (profile floor - 1.1 us,
    # the H200's in-graph launch that profile was fitted against)
    cal = replace(CPU_CAL, device="h100-sxm", device_name="NVIDIA H100 80GB HBM3", copy_bw_bytes_s=2.8e12,
                  gemv=(), matmul_flops={"bf16": 700e12}, launch_graph_us=2.0, gpus=1, allreduce=())
    plain = make_deployment(load_arch("llama-3.1-8b"), "h100-sxm", engine="sglang")
    d, notes = apply(cal, plain)
    assert plain.engine.kernel_floor_us > 1.1
    assert d.engine.kernel_floor_us == pytest.approx(2.0 + plain.engine.kernel_floor_us - 1.1)
    assert "kernel launch 2.00 us (in a CUDA graph) + the profile's own kernel cost" in notes[0]
