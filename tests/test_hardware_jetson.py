"""NVIDIA Jetson modules in the GPU database: each number equals the hand arithmetic from
the quoted datasheet figures, every module runs `decodescope model`, and an 8B bf16 model
does not fit the 8 GB Orin Nano.

Hand arithmetic (dense = sparse / 2; the sources are in gpus.toml):

- jetson-agx-orin-64gb: NVIDIA DS-10662-001 'Maximum Memory Bus Bandwidth (up to) 204.8 GB/s';
  'Up to 170 INT8 Sparse TOPS or 85 Sparse FP16 TFLOPS' -> INT8 170 / 2 = 85, FP16 85 / 2 = 42.5.
- jetson-agx-orin-32gb: same 204.8 GB/s; 'Up to 108 INT8 Sparse TOPS or 54 FP16 Sparse TFLOPS'
  -> INT8 108 / 2 = 54, FP16 54 / 2 = 27.
- jetson-orin-nx-16gb: '16GB 128-bit LPDDR5 102.4GB/s'; no GPU-only TOPS published: the AGX Orin
  64GB rate 85 / (64 TCs x 1.3 GHz) per TC per GHz, times 32 TCs x 0.918 GHz = 30.0 INT8,
  42.5 / (64 x 1.3) x 32 x 0.918 = 15.0 FP16.
- jetson-orin-nano-8gb: '8GB 128-bit LPDDR5 68 GB/s'; 'Up to 40 (Sparse) INT8 TOPs and 20 (Dense)'
  -> INT8 20, FP16 20 / 2 = 10.
- jetson-orin-nano-super: '68 GB/s to 102 GB/s', '67 TOPS INT8 sparse' -> INT8 67 / 2 = 33.5,
  FP16 33.5 / 2 = 16.75.
- jetson-agx-thor: '128GB LPDDR5x DRAM 4266 MHz 256-bit, 273 GB/s'; '2070 FP4 TFLOPS / 1035 FP8
  TFLOPS' (sparse) -> FP4 2070 / 2 = 1035, FP8 1035 / 2 = 517.5, BF16 2070 / 8 = 258.75.
"""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.hardware import get_gpu

JETSONS = [
    "jetson-agx-orin-64gb",
    "jetson-agx-orin-32gb",
    "jetson-orin-nx-16gb",
    "jetson-orin-nano-8gb",
    "jetson-orin-nano-super",
    "jetson-agx-thor",
]

# gpu id, memory GB, bandwidth GB/s (hand), tensor dtype, its dense rate in T(FL)OP/s (hand)
HAND = [
    ("jetson-agx-orin-64gb", 64, 204.8, "int8", 170 / 2),
    ("jetson-agx-orin-64gb", 64, 204.8, "bf16", 85 / 2),
    ("jetson-agx-orin-32gb", 32, 204.8, "int8", 108 / 2),
    ("jetson-agx-orin-32gb", 32, 204.8, "fp16", 54 / 2),
    ("jetson-orin-nx-16gb", 16, 128 * 6400 / 8 / 1000, "int8", 85 / (64 * 1.3) * 32 * 0.918),
    ("jetson-orin-nx-16gb", 16, 102.4, "bf16", 42.5 / (64 * 1.3) * 32 * 0.918),
    ("jetson-orin-nano-8gb", 8, 68, "int8", 40 / 2),
    ("jetson-orin-nano-8gb", 8, 68, "fp16", 40 / 2 / 2),
    ("jetson-orin-nano-super", 8, 102, "int8", 67 / 2),
    ("jetson-orin-nano-super", 8, 102, "bf16", 67 / 2 / 2),
    ("jetson-agx-thor", 128, 273, "fp4", 2070 / 2),
    ("jetson-agx-thor", 128, 273, "fp8", 1035 / 2),
    ("jetson-agx-thor", 128, 273, "bf16", 2070 / 8),
]


@pytest.mark.parametrize("gpu_id, memory_gb, bw_gb_s, dtype, dense", HAND)
def test_bandwidth_and_tensor_rate_equal_the_datasheet_arithmetic(gpu_id, memory_gb, bw_gb_s, dtype, dense):
    gpu = get_gpu(gpu_id)
    assert gpu.memory_bytes == pytest.approx(memory_gb * 1e9)
    assert gpu.memory_bw_bytes_s == pytest.approx(bw_gb_s * 1e9)
    # the NX rates are stored rounded to 0.1 (30.015 -> 30.0, 15.008 -> 15.0)
    assert gpu.flops[dtype] == pytest.approx(dense * 1e12, rel=1e-3)


@pytest.mark.parametrize("gpu_id", JETSONS)
def test_every_jetson_is_one_unified_memory_device_with_sourced_numbers(gpu_id):
    gpu = get_gpu(gpu_id)
    assert gpu.vendor == "nvidia" and gpu.memory_type == "lpddr"
    assert gpu.link == "none" and gpu.link_bw_bytes_s == 0
    assert gpu.pcie_gen == 0 and gpu.pcie_lanes == 0
    for dtype in gpu.flops:
        assert gpu.sources[f"flops.{dtype}"].startswith(("https://", "derived"))
    assert "bf16" in gpu.flops and gpu.flops["bf16"] == gpu.flops["fp16"]


@pytest.mark.parametrize(
    "typed, gpu_id",
    [
        ("jetson-agx-orin", "jetson-agx-orin-64gb"),
        ("NVIDIA Jetson AGX Orin", "jetson-agx-orin-64gb"),
        ("Jetson AGX Orin 32GB", "jetson-agx-orin-32gb"),
        ("NVIDIA Jetson Orin NX 16GB", "jetson-orin-nx-16gb"),
        ("jetson_orin_nano", "jetson-orin-nano-8gb"),
        ("Orin Nano Super", "jetson-orin-nano-super"),
        ("Jetson T5000", "jetson-agx-thor"),
        ("NVIDIA Thor", "jetson-agx-thor"),  # the name deviceQuery prints on Thor
    ],
)
def test_jetson_names_resolve(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id


def test_super_clocks_outrun_the_original_nano_on_the_same_module():
    nano, sup = get_gpu("jetson-orin-nano-8gb"), get_gpu("jetson-orin-nano-super")
    assert nano.memory_bytes == sup.memory_bytes
    assert sup.memory_bw_bytes_s > nano.memory_bw_bytes_s
    assert sup.peak_flops("int8") > nano.peak_flops("int8")


def _model(*args):
    result = CliRunner().invoke(cli, ["model", "llama-3-8b", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("gpu_id", JETSONS)
def test_llama_3_8b_q4_k_m_on_llamacpp_models_below_its_ceiling(gpu_id):
    out = _model("--gpu", gpu_id, "--weights", "q4_k_m", "--engine", "llamacpp")
    assert out["hardware"]["gpu"] == gpu_id
    assert out["memory"]["fits"] is True
    assert 0 < out["expected"]["tok_s"] < out["ceiling"]["tok_s"]
    # one token reads every weight once: the ceiling cannot beat bandwidth / weight bytes
    assert out["ceiling"]["tok_s"] <= get_gpu(gpu_id).memory_bw_bytes_s / out["weight_bytes_per_gpu"]


def test_the_briefs_command_runs_as_a_real_process():
    run = subprocess.run(
        [sys.executable, "-m", "decodescope", "model", "llama-3-8b", "--gpu", "jetson-agx-orin",
         "--weights", "q4_k_m", "--engine", "llamacpp", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["hardware"]["gpu"] == "jetson-agx-orin-64gb"
    assert 0 < out["expected"]["tok_s"] < out["ceiling"]["tok_s"]


def test_8b_bf16_does_not_fit_the_8gb_orin_nano():
    """16 GB of bf16 weights (8.03e9 params x 2 bytes) against 8 GB of unified memory."""
    out = _model("--gpu", "jetson-orin-nano-8gb", "--weights", "bf16")
    assert out["memory"]["fits"] is False
    assert out["memory"]["capacity_bytes"] == pytest.approx(8e9)
    assert out["memory"]["weights_bytes"] > out["memory"]["capacity_bytes"]
