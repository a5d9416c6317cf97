"""AMD and Apple GPUs added to decodescope/hardware/gpus.toml: each resolves by the names people
type, its memory bandwidth and one tensor rate equal the hand arithmetic from the quoted figures
(gpus.toml sources), and llama.cpp (its vendor's backend: HIP on AMD, Metal on Apple) models
Llama-3-8B Q4_K_M on it with an expected rate below the ceiling.

Hand arithmetic (GB/s and dense TFLOP/s; the quotes are in each GPU's sources table):

- MI355X: 8 TB/s = 8000. FP8 256 CUs x 8192 FLOP/clk/CU x 2.4 GHz = 5033.2; BF16 half of it
  = 2516.6 ('2.5 PFLOPS').
- MI300A: 5.3 TB/s = 5300. BF16 'Peak bfloat16 : 980.6 TFLOPs' (AMD data sheet, dense).
- MI210: '1.6TBps' = 1600. FP16 'FP16 Matrix ... 181 TFLOPS'.
- MI100: 2.4 Gbps x 4096 bit / 8 = 1228.8. FP16 'FP16/FP16 Matrix ... 184.6' (BF16, 92.3, is left
  out: bf16 must equal fp16 in the database).
- RX 7900 XT: '800 GB/s'. 84 CUs x 512 FLOP/clk/CU (RDNA3 WMMA) x 2.4 GHz = 103.2 (Tom's '103').
- RX 7900 GRE: '576 GB/s'. 80 x 512 x 2.245 GHz = 91.955.
- RX 9070 XT: 20 Gbps x 256 bit / 8 = 640. FP16 64 CUs x 1024 FLOP/clk/CU (RDNA4) x 2.97 GHz
  = 194.6; FP8 64 x 2048 x 2.97 = 389.3.
- RX 6800 XT: 2000 MHz GDDR6 (16 Gbps) x 256 bit / 8 = 512. FP16 packed = 2 x FP32 20.74 = 41.47.
- RX 6900 XT: '512 GB/s'. FP16 2 x 23.04 = 46.08.
- Radeon PRO W7900: '864 GB/s'. FP16 'TFLOPS 122.6'.
- M1 Max: 400. FP16 = FP32: 4096 ALUs x 2 x 1.296 GHz = 10.6.
- M1 Ultra: 800. 64 cores x 128 x 2 x 1.296 GHz = 21.2 ('21.2 TFLOP/s').
- M2 Max: 400. 38 cores x 128 x 2 x 1.398 GHz = 13.6.
- M3 Ultra: '819 GB/s'. 80 cores x 128 x 2 x 1.6 GHz = 32.8.
- M4 Pro: '273GB/s'. 2560 shaders x 2 x 1.47 GHz = 7.53.
"""


import pytest

from decodescope.hardware import get_gpu

# id, vendor, GB/s, (dtype, TFLOP/s) from the docstring's arithmetic
CASES = [
    ("mi355x", "amd", 8000, "fp8", 256 * 8192 * 2.4e9 / 1e12),
    ("mi300a", "amd", 5300, "bf16", 980.6),
    ("mi210", "amd", 1600, "fp16", 181),
    ("mi100", "amd", 2.4 * 4096 / 8, "fp16", 184.6),
    ("rx-7900-xt", "amd", 800, "bf16", 84 * 512 * 2.4e9 / 1e12),
    ("rx-7900-gre", "amd", 576, "fp16", 80 * 512 * 2.245e9 / 1e12),
    ("rx-9070-xt", "amd", 20 * 256 / 8, "fp16", 64 * 1024 * 2.97e9 / 1e12),
    ("rx-6800-xt", "amd", 16 * 256 / 8, "fp16", 2 * 20.74),
    ("rx-6900-xt", "amd", 512, "fp16", 2 * 23.04),
    ("radeon-pro-w7900", "amd", 864, "fp16", 122.6),
    ("m1-max", "apple", 400, "fp16", 4096 * 2 * 1.296e9 / 1e12),
    ("m1-ultra", "apple", 800, "fp16", 64 * 128 * 2 * 1.296e9 / 1e12),
    ("m2-max", "apple", 400, "fp16", 38 * 128 * 2 * 1.398e9 / 1e12),
    ("m3-ultra", "apple", 819, "fp16", 80 * 128 * 2 * 1.6e9 / 1e12),
    ("m4-pro", "apple", 273, "fp16", 2560 * 2 * 1.47e9 / 1e12),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("gpu_id, vendor, bw_gb_s, dtype, tflops", CASES, ids=IDS)
def test_bandwidth_and_tensor_rate_match_the_hand_arithmetic(gpu_id, vendor, bw_gb_s, dtype, tflops):
    gpu = get_gpu(gpu_id)
    assert gpu.vendor == vendor
    assert gpu.memory_bw_bytes_s == pytest.approx(bw_gb_s * 1e9)
    # the table rounds to 3 significant figures (10.6 for 10.617)
    assert gpu.flops[dtype] == pytest.approx(tflops * 1e12, rel=5e-3)


def test_rates_the_parts_lack_fall_back_as_documented():
    assert "fp8" in get_gpu("mi355x").flops and "fp4" in get_gpu("mi355x").flops  # CDNA4 has both
    assert "fp8" not in get_gpu("rx-7900-xt").flops  # RDNA3: no FP8
    assert get_gpu("rx-9070-xt").flops["fp8"] == pytest.approx(64 * 2048 * 2.97e9, rel=1e-3)  # RDNA4 does
    # MI100 lists fp16 only (its BF16 is half rate); RDNA2 and Apple have no BF16 math
    for gpu_id in ("mi100", "rx-6800-xt", "m4-pro"):
        gpu = get_gpu(gpu_id)
        assert "bf16" not in gpu.flops and gpu.peak_flops("bf16") == gpu.flops["fp16"]


def test_apus_and_apple_parts_have_no_pcie_host_link():
    for gpu_id in ("mi300a", "m1-max", "m1-ultra", "m2-max", "m3-ultra", "m4-pro"):
        gpu = get_gpu(gpu_id)
        assert gpu.pcie_gen == 0 and gpu.pcie_lanes == 0
    assert get_gpu("mi300a").link == "xgmi" and get_gpu("m3-ultra").link == "none"


@pytest.mark.parametrize(
    "typed, gpu_id",
    [
        ("AMD Instinct MI355X", "mi355x"),
        ("MI300A", "mi300a"),
        ("AMD Instinct MI210", "mi210"),
        ("gfx908", "mi100"),
        ("AMD Radeon RX 7900 XT", "rx-7900-xt"),
        ("7900xtx", "rx-7900-xtx"),  # the XT's aliases do not take the XTX's names
        ("Radeon RX 7900 GRE", "rx-7900-gre"),
        ("RX 9070 XT", "rx-9070-xt"),
        ("AMD Radeon RX 6800 XT", "rx-6800-xt"),
        ("6900xt", "rx-6900-xt"),
        ("AMD Radeon PRO W7900", "radeon-pro-w7900"),
        ("Apple M1 Max", "m1-max"),
        ("M1 Ultra", "m1-ultra"),
        ("apple m2 max", "m2-max"),
        ("Apple M3 Ultra", "m3-ultra"),
        ("M4 Pro", "m4-pro"),
    ],
)
def test_names_people_type_resolve(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id
