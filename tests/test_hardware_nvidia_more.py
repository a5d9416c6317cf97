"""More NVIDIA GeForce, workstation and older data-centre GPUs in the GPU database: each
bandwidth and one tensor rate equal the hand arithmetic from the quoted figures, every card
resolves by the names nvidia-smi prints, and runs `decodescope model` as a real process.

Hand arithmetic (the quotes and URLs are in gpus.toml). Per-tensor-core dense rates are
anchored on cards already in the database: GeForce Ampere 256 FLOP/clk FP16-accumulate,
halved for FP32 accumulate (RTX 3090 328 x 1.695 GHz x 256 = 142.3); GeForce Ada 128 FLOP/clk
FP32-accumulate (RTX 4090 512 x 2.52 x 128 = 165.15); GeForce Blackwell 128 (RTX 5090
680 x 2.407 x 128 = 209.5); workstation Ampere 256 (RTX A6000 336 x 1.8 x 256 = 154.8).

- rtx-3060: 360 GB/s; 112 TCs x 1.777 GHz x 128 = 25.48 bf16.
- rtx-3080: 760 GB/s; 272 x 1.71 x 128 = 59.54 bf16.
- rtx-3070: 448 GB/s; 184 x 1.725 x 128 = 40.63 bf16.
- rtx-4060-ti-16gb: 18 Gbps x 128 bit / 8 = 288 GB/s; 136 x 2.535 x 128 = 44.13 bf16; PCIe 4.0 x8.
- rtx-4070: 504 GB/s; 184 x 2.475 x 128 = 58.29 bf16.
- rtx-4070-ti-super: 21 Gbps x 256 / 8 = 672 GB/s; 8448 CUDA / 32 = 264 TCs x 2.61 x 128 = 88.20.
- rtx-4080: 717 GB/s (22.4 x 256 / 8 = 716.8); 304 x 2.505 x 128 = 97.47; FP8 FP16-acc '390' / 2 = 194.95 fp8.
- rtx-4080-super: 23 x 256 / 8 = 736 GB/s; 320 x 2.55 x 128 = 104.45 bf16.
- rtx-5060-ti-16gb: 28 x 128 / 8 = 448 GB/s; 144 x 2.572 x 128 = 47.41 bf16; FP4 8 x 47.41 = 379.3; PCIe 5.0 x8.
- rtx-5070-ti: 28 x 256 / 8 = 896 GB/s; 280 x 2.452 x 128 = 87.88 bf16.
- rtx-5080: 960 GB/s; 'FP4 900.42 TFLOPS Tensor' dense / 8 = 112.55 bf16 (336 x 2.617 x 128 = 112.55).
- rtx-2080-ti: 616 GB/s; FP32 13.45 TFLOPS x 8 (Turing tensor/FP32 ratio) = 107.6 FP16-acc, / 2 = 53.8 fp16.
- p40: 346 GB/s; '47 TOPS' INT8; fp16 slot = FP32 shader rate 11.76 (FP16 is 1/64 rate on GP102).
- v100-pcie-32gb: 900 GB/s; '112 TFLOPS' tensor fp16 (640 x 128 x 1.37 GHz = 112.1).
- rtx-a4000: 448 GB/s; 'Tensor performance 153.4 TFLOPS' sparse / 2 = 76.7 bf16.
- rtx-a5000: 768 GB/s; 256 x 1.695 x 256 = 111.08 bf16.
- rtx-5000-ada: 576 GB/s; 'BF16 ... 261.12 TFLOPS Tensor' (400 x 2.55 x 256 = 261.1).
- rtx-4000-ada: 360 GB/s; 'BF16 ... 106.91 TFLOPS Tensor' (192 x 2.175 x 256 = 106.9).
"""


import pytest

from decodescope.hardware import get_gpu

# id: (memory GB/s, dtype, TFLOP/s by the hand arithmetic above)
HAND = {
    "rtx-3060": (360, "bf16", 112 * 1.777 * 128 / 1000),
    "rtx-3080": (760, "bf16", 272 * 1.71 * 128 / 1000),
    "rtx-3070": (448, "bf16", 184 * 1.725 * 128 / 1000),
    "rtx-4060-ti-16gb": (18 * 128 / 8, "bf16", 136 * 2.535 * 128 / 1000),
    "rtx-4070": (504, "bf16", 184 * 2.475 * 128 / 1000),
    "rtx-4070-ti-super": (21 * 256 / 8, "bf16", 8448 / 32 * 2.61 * 128 / 1000),
    "rtx-4080": (717, "fp8", 389.9 / 2),
    "rtx-4080-super": (23 * 256 / 8, "bf16", 320 * 2.55 * 128 / 1000),
    "rtx-5060-ti-16gb": (28 * 128 / 8, "fp4", 8 * 144 * 2.572 * 128 / 1000),
    "rtx-5070-ti": (28 * 256 / 8, "bf16", 280 * 2.452 * 128 / 1000),
    "rtx-5080": (960, "bf16", 900.42 / 8),
    "rtx-2080-ti": (616, "fp16", 8 * 13.45 / 2),
    "p40": (346, "int8", 47),
    "v100-pcie-32gb": (900, "fp16", 112),
    "rtx-a4000": (448, "bf16", 153.4 / 2),
    "rtx-a5000": (768, "bf16", 256 * 1.695 * 256 / 1000),
    "rtx-5000-ada": (576, "bf16", 261.12),
    "rtx-4000-ada": (360, "bf16", 106.91),
}
GEFORCE = [g for g in HAND if g.startswith("rtx-") and g[4].isdigit() and not g.endswith("-ada")]


@pytest.mark.parametrize("gpu_id", sorted(HAND))
def test_bandwidth_and_tensor_rate_equal_the_hand_arithmetic(gpu_id):
    bw_gb_s, dtype, tflops = HAND[gpu_id]
    gpu = get_gpu(gpu_id)
    assert gpu.memory_bw_bytes_s == pytest.approx(bw_gb_s * 1e9, rel=1e-3)
    # the database rounds to 2 decimals of a TFLOP/s
    assert gpu.flops[dtype] == pytest.approx(tflops * 1e12, rel=2e-3)


@pytest.mark.parametrize("gpu_id", ["rtx-2080-ti", "p40", "v100-pcie-32gb"])
def test_pascal_turing_volta_have_no_bf16_or_fp8_tensor_math(gpu_id):
    gpu = get_gpu(gpu_id)
    assert not {"bf16", "fp8", "fp4"} & set(gpu.flops)
    assert gpu.peak_flops("bf16") == gpu.flops["fp16"]  # falls back, as t4 and v100-sxm do


def test_geforce_cards_have_no_p2p_and_workstation_cards_keep_the_default():
    assert len(GEFORCE) == 12
    assert all(get_gpu(g).p2p is False for g in GEFORCE)
    assert all(get_gpu(g).p2p for g in ("rtx-a4000", "rtx-a5000", "rtx-5000-ada", "rtx-4000-ada"))


@pytest.mark.parametrize(
    "typed, gpu_id",
    [
        ("NVIDIA GeForce RTX 3060", "rtx-3060"),  # as nvidia-smi prints them
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "rtx-4070-ti-super"),
        ("NVIDIA GeForce RTX 4080 SUPER", "rtx-4080-super"),
        ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti-16gb"),
        ("NVIDIA GeForce RTX 5060 Ti", "rtx-5060-ti-16gb"),
        ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"),
        ("Tesla P40", "p40"),
        ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),
        ("NVIDIA RTX A4000", "rtx-a4000"),
        ("NVIDIA RTX 5000 Ada Generation", "rtx-5000-ada"),
        ("NVIDIA RTX 4000 Ada Generation", "rtx-4000-ada"),
        ("4070ti-super", "rtx-4070-ti-super"),
        ("5070ti", "rtx-5070-ti"),
        ("Tesla V100-SXM2-32GB", "v100-sxm"),  # the SXM card keeps its own id
    ],
)
def test_names_people_type_resolve(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id
