"""Intel Arc GPUs added to decodescope/hardware/gpus.toml and the vendor "intel" wired into
engines.toml: each card resolves by the names people type, its memory bandwidth and one tensor
rate equal the hand arithmetic from the quoted figures (gpus.toml sources), llama.cpp runs it on
its Vulkan backend (serving.llamacpp backend_by_vendor intel = "vulkan", so the fitted
engine.llamacpp by_backend.vulkan values apply), and the engines without an Intel build refuse.

Hand arithmetic (GB/s and dense TFLOP/s; the quotes are in each GPU's sources table). An XMX
engine runs 128 FP16/BF16 or 256 INT8 ops per clock on Alchemist (16 per Xe-core); Xe2's run
FP16/BF16 at half their INT8 rate (Arc Pro B60: 'BF16 98.3 TFLOPS Tensor', 'INT8 196.61 TOPS'):

- Arc A770 16GB: '560 GB/s'. 512 XMX x 128 x 2.1 GHz = 137.6 FP16; x 256 = 275.3 INT8.
- Arc A750: '512 GB/s'. 448 XMX x 128 x 2.05 GHz = 117.6 FP16; x 256 = 235.1 INT8.
- Arc B580: '456 GB/s' (19 Gbps x 192 bit / 8). INT8 '233 TOPS'; FP16 233 / 2 = 116.5.
- Arc B570: '380 GB/S' (19 Gbps x 160 bit / 8). INT8 '203 TOPS'; FP16 203 / 2 = 101.5.
- Arc Pro B60 24GB: '456 GB/s'. INT8 '197 TOPS' (dense); BF16 '98.3 TFLOPS'.

Host links: A770 / A750 PCIe 4.0 x16 (31.5 GB/s per direction), B580 / B570 PCIe 4.0 x8
(15.75), Pro B60 PCIe 5.0 x8 (31.5). None has a GPU-to-GPU link or published peer-to-peer.

llama.cpp's SYCL backend is not modelled: decodescope.model.engines.Backend has no "sycl"
member, so --backend sycl is refused as unknown and Intel GPUs take Vulkan.
"""

import json
import subprocess
import sys

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import get_gpu
from decodescope.model import make_deployment, predict
from decodescope.model.engines import Backend, engines

# id, GB/s, (dtype, TFLOP/s) from the docstring's arithmetic
CASES = [
    ("arc-a770", 560, "fp16", 512 * 128 * 2.1e9 / 1e12),
    ("arc-a750", 512, "int8", 448 * 256 * 2.05e9 / 1e12),
    ("arc-b580", 19 * 192 / 8, "bf16", 233 / 2),
    ("arc-b570", 19 * 160 / 8, "int8", 203),
    ("arc-pro-b60", 456, "bf16", 98.3),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("gpu_id, bw_gb_s, dtype, tflops", CASES, ids=IDS)
def test_bandwidth_and_tensor_rate_match_the_hand_arithmetic(gpu_id, bw_gb_s, dtype, tflops):
    gpu = get_gpu(gpu_id)
    assert gpu.vendor == "intel" and gpu.memory_type == "gddr"
    assert gpu.memory_bw_bytes_s == pytest.approx(bw_gb_s * 1e9)
    # the table rounds to one decimal (137.6 for 137.63)
    assert gpu.flops[dtype] == pytest.approx(tflops * 1e12, rel=5e-4)
    # XMX: BF16 and FP16 one rate, INT8 twice it; no FP8 units, so FP8 runs at the BF16 rate
    assert gpu.flops["bf16"] == gpu.flops["fp16"]
    assert gpu.flops["int8"] == pytest.approx(2 * gpu.flops["bf16"], rel=5e-3)
    assert "fp8" not in gpu.flops and gpu.peak_flops("fp8") == gpu.flops["bf16"]


@pytest.mark.parametrize("gpu_id, gen, lanes, link_gb_s", [
    ("arc-a770", 4, 16, 31.5), ("arc-a750", 4, 16, 31.5),
    ("arc-b580", 4, 8, 15.75), ("arc-b570", 4, 8, 15.75), ("arc-pro-b60", 5, 8, 31.5),
])
def test_host_link_is_pcie_without_peer_to_peer(gpu_id, gen, lanes, link_gb_s):
    gpu = get_gpu(gpu_id)
    assert (gpu.pcie_gen, gpu.pcie_lanes, gpu.link, gpu.p2p) == (gen, lanes, "pcie", False)
    assert gpu.link_bw_bytes_s == pytest.approx(link_gb_s * 1e9)


@pytest.mark.parametrize("typed, gpu_id", [
    ("Intel Arc A770", "arc-a770"),
    ("A770 16GB", "arc-a770"),
    ("arc_a750", "arc-a750"),
    ("Intel Arc B580", "arc-b580"),
    ("B570", "arc-b570"),
    ("Intel Arc Pro B60", "arc-pro-b60"),
])
def test_names_people_type_resolve(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id


def test_llamacpp_runs_intel_on_vulkan_with_its_fitted_vulkan_values():
    arch = load_arch("llama-3-8b")
    d = make_deployment(arch, "arc-b580", weights="q4_k_m", engine="llamacpp")
    assert d.runs_on is Backend.VULKAN
    fitted = engines()["llamacpp"].by_backend["vulkan"]
    assert d.profile.moe_batched_slowdown == fitted["moe_batched_slowdown"]
    # --backend vulkan says the same; a CUDA build does not run on an Intel GPU
    assert make_deployment(arch, "arc-b580", weights="q4_k_m", engine="llamacpp", backend="vulkan").runs_on is Backend.VULKAN
    with pytest.raises(DecodescopeError, match="--backend cuda does not run on"):
        predict(arch, make_deployment(arch, "arc-b580", weights="q4_k_m", engine="llamacpp", backend="cuda"))


def test_sycl_is_not_a_backend_here():
    arch = load_arch("llama-3-8b")
    with pytest.raises(DecodescopeError, match="--backend 'sycl' unknown"):
        make_deployment(arch, "arc-b580", weights="q4_k_m", engine="llamacpp", backend="sycl")


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "exllamav2"])
def test_engines_without_an_intel_build_refuse(engine):
    arch = load_arch("llama-3-8b")
    with pytest.raises(DecodescopeError, match=f"engine {engine} does not run on Intel Arc B580"):
        predict(arch, make_deployment(arch, "arc-b580", engine=engine))


@pytest.mark.parametrize("engine", ["vllm", "mlc"])
def test_engines_with_an_intel_build_answer(engine):
    """vLLM (XPU) and MLC (Vulkan) list Intel GPUs; neither was measured there, so neither is a lever."""
    arch = load_arch("llama-3-8b")
    p = predict(arch, make_deployment(arch, "arc-pro-b60", engine=engine))
    assert 0 < p.expected.tok_s < p.ceiling.tok_s
    assert "intel" not in engines()[engine].measured_on


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "decodescope", *args], capture_output=True, text=True, timeout=120)


def test_cli_llama3_8b_q4_k_m_on_b580_runs_vulkan_below_its_ceiling():
    run = _cli("model", "llama-3-8b", "--gpu", "arc-b580", "--weights", "q4_k_m", "--engine", "llamacpp", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["deployment"]["backend"] == "vulkan"
    assert 0 < out["expected"]["tok_s"] < out["ceiling"]["tok_s"]
    assert out["ceiling"]["tok_s"] <= 456e9 / out["weight_bytes_per_gpu"]


def test_cli_refuses_sglang_on_intel_with_one_clear_error():
    run = _cli("model", "llama-3-8b", "--gpu", "arc-b580", "--engine", "sglang")
    assert run.returncode == 2
    assert "engine sglang does not run on Intel Arc B580 12GB (intel)" in run.stderr
    assert "Traceback" not in run.stderr


def test_cli_gpus_lists_the_b580():
    run = _cli("gpus", "arc-b580", "--json")
    assert run.returncode == 0, run.stderr
    gpu = json.loads(run.stdout)
    assert (gpu["id"], gpu["vendor"], gpu["memory_bw_bytes_s"]) == ("arc-b580", "intel", 456e9)
