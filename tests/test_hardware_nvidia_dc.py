"""More NVIDIA data-centre parts (GH200, H200 NVL, A800, L20) and the 8 GB RTX 4060 Ti /
5060 Ti in the GPU database: each bandwidth and one tensor rate equal the hand arithmetic
from the quoted figures, the names nvidia-smi prints resolve, and the link each part
assumes by default is the one its sources describe. (Every GPU running `decodescope model`
on llama.cpp is checked in tests/test_hardware.py.)

Hand arithmetic (the quotes and URLs are in gpus.toml; dense = sparse / 2):

- gh200-96gb: '96GB HBM3@4TB/s' -> 4000 GB/s; the GPU is an H100: FP8 '3,958*' sparse / 2 = 1979.
  Between superchips: '1x 400Gbe Infiniband' (NVIDIA's MLPerf system) -> 400 / 8 = 50 GB/s.
- gh200-144gb: '144 GB' HBM3e, launch figure '5 TB/s' -> 5000 GB/s; bf16 1979 / 2 = 989.5.
- h200-nvl: '141 GB at 4.8 TB/s' -> 4800 GB/s; bridge '900 GB/s per GPU' bidirectional / 2 = 450;
  bf16 is the H200 SXM 989.5 taken as an UPPER BOUND (lower power limit, no NVL figure quoted).
- a800-sxm-80gb: A100 SXM 80GB memory '2,039GB/s'; NVLink '400 GB/s' / 2 = 200; INT8 '623.74' ~ 624.
- a800-pcie-80gb: A100 PCIe 80GB memory '1,935GB/s'; BF16 '311.87' ~ 312.
- l20: 2.25 GHz x 8 x 384 bit / 8 = 864 GB/s; FP16 '119.5' dense (measured 115.12 on one card);
  FP8 = 2 x 119.5 = 239 (the L40S ratio 362.05 -> 733).
- rtx-4060-ti-8gb: 18 Gbps x 128 bit / 8 = 288 GB/s; 136 TCs x 2.535 GHz x 128 = 44.13 bf16; PCIe 4.0 x8.
- rtx-5060-ti-8gb: 28 Gbps x 128 bit / 8 = 448 GB/s; 8 x 144 x 2.572 x 128 = 379.3 fp4; PCIe 5.0 x8.
"""

import pytest

from decodescope.hardware import get_gpu

# id: (memory GB, memory GB/s, dtype, T(FL)OP/s by the hand arithmetic above)
HAND = {
    "gh200-96gb": (96, 4000, "fp8", 3958 / 2),
    "gh200-144gb": (144, 5000, "bf16", 1979 / 2),
    "h200-nvl": (141, 4800, "bf16", 1979 / 2),
    "a800-sxm-80gb": (80, 2039, "int8", 623.74),
    "a800-pcie-80gb": (80, 1935, "bf16", 311.87),
    "l20": (48, 2.25 * 8 * 384 / 8, "fp8", 2 * 119.5),
    "rtx-4060-ti-8gb": (8, 18 * 128 / 8, "bf16", 136 * 2.535 * 128 / 1000),
    "rtx-5060-ti-8gb": (8, 28 * 128 / 8, "fp4", 8 * 144 * 2.572 * 128 / 1000),
}


@pytest.mark.parametrize("gpu_id", sorted(HAND))
def test_memory_bandwidth_and_tensor_rate_equal_the_hand_arithmetic(gpu_id):
    memory_gb, bw_gb_s, dtype, rate = HAND[gpu_id]
    gpu = get_gpu(gpu_id)
    assert gpu.memory_bytes == pytest.approx(memory_gb * 1e9)
    assert gpu.memory_bw_bytes_s == pytest.approx(bw_gb_s * 1e9, rel=1e-3)
    # the database rounds to 2 decimals of a TFLOP/s (311.87 -> 312, 623.74 -> 624)
    assert gpu.flops[dtype] == pytest.approx(rate * 1e12, rel=2e-3)


@pytest.mark.parametrize(
    "gpu_id, link, per_direction_gb_s, pcie_gen, pcie_lanes",
    [
        ("gh200-96gb", "network", 400 / 8, 0, 0),  # NVLink-C2C goes to the CPU, not to a GPU
        ("gh200-144gb", "network", 400 / 8, 0, 0),
        ("h200-nvl", "nvlink", 900 / 2, 5, 16),  # bridged cards, no switch
        ("a800-sxm-80gb", "nvswitch", 400 / 2, 4, 16),  # the A100 board with NVLink cut to 400 GB/s
        ("a800-pcie-80gb", "pcie", 31.5, 4, 16),
        ("l20", "pcie", 31.5, 4, 16),
        ("rtx-4060-ti-8gb", "pcie", 15.75, 4, 8),
        ("rtx-5060-ti-8gb", "pcie", 31.5, 5, 8),
    ],
)
def test_default_link_is_the_one_the_sources_describe(gpu_id, link, per_direction_gb_s, pcie_gen, pcie_lanes):
    gpu = get_gpu(gpu_id)
    assert gpu.link == link
    assert gpu.link_bw_bytes_s == pytest.approx(per_direction_gb_s * 1e9)
    assert (gpu.pcie_gen, gpu.pcie_lanes) == (pcie_gen, pcie_lanes)


def test_gh200_and_a800_compute_is_their_parents_and_only_memory_or_link_differs():
    h100, a100 = get_gpu("h100-sxm"), get_gpu("a100-sxm-80gb")
    for gid in ("gh200-96gb", "gh200-144gb", "h200-nvl"):
        assert get_gpu(gid).flops == h100.flops
    a800 = get_gpu("a800-sxm-80gb")
    assert a800.flops == a100.flops and a800.memory_bw_bytes_s == a100.memory_bw_bytes_s
    assert a800.link_bw_bytes_s == pytest.approx(a100.link_bw_bytes_s * 400 / 600)


def test_the_8gb_cards_have_the_16gb_cards_compute_and_bandwidth_but_half_the_memory():
    for small, big in (("rtx-4060-ti-8gb", "rtx-4060-ti-16gb"), ("rtx-5060-ti-8gb", "rtx-5060-ti-16gb")):
        s, b = get_gpu(small), get_gpu(big)
        assert s.flops == b.flops and s.memory_bw_bytes_s == b.memory_bw_bytes_s
        assert s.memory_bytes == b.memory_bytes / 2
        assert s.p2p is False


@pytest.mark.parametrize(
    "typed, gpu_id",
    [
        ("NVIDIA GH200 480GB", "gh200-96gb"),  # as nvidia-smi prints the 96 GB HBM3 part
        ("NVIDIA GH200 96GB HBM3", "gh200-96gb"),
        ("GH200", "gh200-96gb"),  # the bare name: the original, most deployed part
        ("NVIDIA GH200 144GB HBM3e", "gh200-144gb"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("h200-sxm", "h200"),  # the SXM part keeps the bare name
        ("NVIDIA A800-SXM4-80GB", "a800-sxm-80gb"),
        ("A800", "a800-sxm-80gb"),  # as "a100" -> the SXM 80 GB part
        ("NVIDIA A800 80GB PCIe", "a800-pcie-80gb"),
        ("NVIDIA L20", "l20"),
        ("rtx-4060-ti-8gb", "rtx-4060-ti-8gb"),
        ("4060ti-8gb", "rtx-4060-ti-8gb"),
        ("5060 Ti 8GB", "rtx-5060-ti-8gb"),
        # nvidia-smi prints no capacity: the bare name stays with the 16 GB cards
        ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti-16gb"),
        ("4060 ti", "rtx-4060-ti-16gb"),
        ("NVIDIA GeForce RTX 5060 Ti", "rtx-5060-ti-16gb"),
    ],
)
def test_names_people_type_resolve(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id


def test_l20_and_the_dc_parts_keep_peer_to_peer_and_hbm_where_they_have_it():
    assert get_gpu("l20").p2p and get_gpu("l20").memory_type == "gddr"
    assert all(get_gpu(g).memory_type == "hbm" for g in ("gh200-96gb", "gh200-144gb", "h200-nvl", "a800-pcie-80gb"))
