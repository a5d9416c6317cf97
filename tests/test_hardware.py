"""The GPU database: every required part resolves by the names people type, every number
has a source, the numbers obey the physics between them, and `decodescope gpus` prints
the same values as JSON that it holds in memory."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.errors import DecodescopeError
from decodescope.hardware import all_gpus, all_interconnects, get_gpu, get_interconnect
from decodescope.hardware.db import NUMERIC_KEYS, _raw, normalize

REQUIRED_IDS = """h100-sxm h100-pcie h100-nvl h200 h20 h800 b200 gb200 b300 a100-sxm-40gb a100-sxm-80gb
a100-pcie-40gb a100-pcie-80gb a10 a10g a40 l4 l40 l40s t4 v100-sxm rtx-a6000 rtx-6000-ada
rtx-pro-6000 rtx-3090 rtx-3090-ti rtx-4090 rtx-5090 mi250x-gcd mi300x mi325x rx-7900-xtx
radeon-8060s gb10 m2-ultra m3-max m4-max""".split()

REQUIRED_INTERCONNECTS = "nvlink nvswitch pcie-switch pcie pcie-sys xgmi network none".split()


@pytest.mark.parametrize("gpu_id", REQUIRED_IDS)
def test_every_required_id_resolves_to_itself(gpu_id):
    assert get_gpu(gpu_id).id == gpu_id


@pytest.mark.parametrize(
    "typed, gpu_id",
    [
        ("RTX A6000", "rtx-a6000"),  # the reference deployment, as nvidia-smi prints it
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("a6000", "rtx-a6000"),
        ("rtx_a6000", "rtx-a6000"),
        ("A100-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("h200-sxm", "h200"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("nvidia geforce rtx 3090 ti", "rtx-3090-ti"),
        ("Tesla T4", "t4"),
        ("Tesla V100-SXM2-32GB", "v100-sxm"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
        ("MI250X", "mi250x-gcd"),  # the package is two GPUs; one GCD is what a rank sees
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Radeon RX 7900 XTX", "rx-7900-xtx"),
        ("DGX Spark", "gb10"),
        ("Apple M4 Max", "m4-max"),
        ("  H100  ", "h100-sxm"),
    ],
)
def test_names_people_type_resolve_case_and_separator_insensitively(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id


@pytest.mark.parametrize(
    "typed, closest",
    [
        ("rtx-a600", "rtx-a6000"),
        ("h10", "h100-sxm"),
        ("mi300", "mi300x"),
        ("l40x", "l40s"),
    ],
)
def test_unknown_gpu_names_the_closest_ids_and_how_to_list_them(typed, closest):
    with pytest.raises(DecodescopeError) as e:
        get_gpu(typed)
    assert f"'{typed}'" in e.value.what
    assert closest in e.value.fix
    assert "decodescope gpus" in e.value.fix


def test_unknown_gpu_far_from_everything_still_says_how_to_list():
    with pytest.raises(DecodescopeError) as e:
        get_gpu("zzzz-qqqq-9999")
    assert "decodescope gpus" in e.value.fix


def test_no_alias_is_claimed_by_two_gpus_or_shadows_another_id():
    owner = {}
    for g in all_gpus():
        for name in (g.id, *g.aliases):
            key = normalize(name)
            assert owner.setdefault(key, g.id) == g.id, f"{name} claimed by {owner[key]} and {g.id}"


@pytest.mark.parametrize("gpu_id", sorted(_raw()["gpu"]))
def test_every_number_of_every_gpu_has_a_source(gpu_id):
    table = _raw()["gpu"][gpu_id]
    sources = table["sources"]
    for key in (*NUMERIC_KEYS, "link", "memory_type", "p2p", "link_peers"):
        if key in table:
            text = sources.get(key, "")
            assert text.startswith(("https://", "derived", "project reference gpu-specs.md")), (
                f"{gpu_id}.{key} source must be a URL with a quote or a derivation: {text!r}"
            )
    assert set(sources) <= {*NUMERIC_KEYS, "link", "memory_type", "p2p", "link_peers"}, \
        f"{gpu_id}: a source for a number that is not there"


@pytest.mark.parametrize("ic_id", REQUIRED_INTERCONNECTS)
def test_every_required_interconnect_has_latency_efficiency_and_source(ic_id):
    ic = get_interconnect(ic_id)
    assert 0 <= ic.allreduce_latency_s < 100e-6
    assert 0 < ic.bw_efficiency <= 1
    assert ic.source


def test_reference_case_sys_allreduce_is_slower_than_nvlink_and_pcie_switch():
    sys_alpha = get_interconnect("pcie-sys").allreduce_latency_s
    assert sys_alpha > get_interconnect("pcie-switch").allreduce_latency_s
    assert sys_alpha > get_interconnect("nvswitch").allreduce_latency_s


def test_unknown_interconnect_lists_the_known_ones():
    with pytest.raises(DecodescopeError) as e:
        get_interconnect("infiniband-magic")
    assert "pcie-sys" in e.value.fix


@pytest.mark.parametrize("gpu", all_gpus(), ids=lambda g: g.id)
def test_physical_invariants_hold(gpu):
    assert gpu.memory_bytes > 1e9 and gpu.memory_bw_bytes_s > 1e10
    assert gpu.memory_type in ("hbm", "gddr", "lpddr")
    f = gpu.flops
    assert f, "every part has at least one tensor (or shader-derived) rate"
    if "fp8" in f:
        assert f["fp8"] >= gpu.peak_flops("bf16"), "fp8 tensor math is never slower than bf16"
    if "fp4" in f:
        assert f["fp4"] >= f["fp8"]
    if "bf16" in f and "fp16" in f:
        assert f["bf16"] == f["fp16"], "both are the FP32-accumulate rate"
    assert gpu.link in {ic.id for ic in all_interconnects()}
    assert (gpu.link == "none") == (gpu.link_bw_bytes_s == 0)
    assert (gpu.pcie_gen == 0) == (gpu.pcie_lanes == 0)


@pytest.mark.parametrize(
    "hbm, gddr",
    [
        ("a100-pcie-40gb", "a40"),  # Ampere
        ("a100-pcie-40gb", "rtx-a6000"),
        ("a100-pcie-40gb", "rtx-3090-ti"),
        ("h100-pcie", "l40s"),  # Hopper vs Ada (same 4N process)
        ("h100-pcie", "rtx-6000-ada"),
        ("h100-pcie", "rtx-4090"),
        ("b200", "rtx-pro-6000"),  # Blackwell
        ("b200", "rtx-5090"),
        ("mi300x", "rx-7900-xtx"),  # CDNA3 vs RDNA3
    ],
)
def test_hbm_parts_outrun_gddr_parts_of_the_same_generation(hbm, gddr):
    assert get_gpu(hbm).memory_type == "hbm" and get_gpu(gddr).memory_type == "gddr"
    assert get_gpu(hbm).memory_bw_bytes_s > get_gpu(gddr).memory_bw_bytes_s


@pytest.mark.parametrize(
    "gpu_id, bf16_tflops, sparse_tflops",
    [
        ("h100-sxm", 989.5, 1979),
        ("a100-sxm-80gb", 312, 624),
        ("rtx-a6000", 154.8, 309.7),
        ("l40s", 362.05, 733),
    ],
)
def test_tensor_rates_are_dense_not_the_sparse_headline(gpu_id, bf16_tflops, sparse_tflops):
    assert get_gpu(gpu_id).peak_flops("bf16") == pytest.approx(bf16_tflops * 1e12)
    assert get_gpu(gpu_id).peak_flops("bf16") < sparse_tflops * 1e12


def test_reference_gpu_bf16_is_the_tensor_rate_not_the_fp32_cuda_core_rate():
    a6000 = get_gpu("rtx-a6000")
    assert a6000.memory_bw_bytes_s == 768e9
    assert a6000.peak_flops("bf16") == pytest.approx(154.8e12)  # the original investigation used 38.7e12 (FP32 CUDA cores)


@pytest.mark.parametrize(
    "gpu_id, dtype, falls_back_to",
    [
        ("rtx-a6000", "fp8", "bf16"),  # Ampere runs fp8 weights as bf16 math
        ("t4", "bf16", "fp16"),  # Turing has no bf16
        ("m4-max", "bf16", "fp16"),
        ("h100-sxm", "fp4", "fp8"),
    ],
)
def test_missing_dtypes_fall_back_to_the_next_wider_one(gpu_id, dtype, falls_back_to):
    gpu = get_gpu(gpu_id)
    assert dtype not in gpu.flops
    assert gpu.peak_flops(dtype) == gpu.flops[falls_back_to]


def test_gpus_json_round_trips_every_gpu_in_si_units():
    result = CliRunner().invoke(cli, ["gpus", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == [g.id for g in all_gpus()]
    by_id = {r["id"]: r for r in rows}
    assert by_id["rtx-a6000"]["memory_bw_bytes_s"] == 768e9
    assert by_id["h100-sxm"]["flops"]["fp8"] == 1979e12
    assert by_id["rtx-a6000"]["sources"]["memory_bw_bytes_s"].startswith("https://")


def test_gpus_id_json_shows_one_gpu_with_its_sources():
    result = CliRunner().invoke(cli, ["gpus", "RTX A6000", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    assert row["id"] == "rtx-a6000" and row["link"] == "pcie"
    assert "flops.bf16" in row["sources"]


def test_gpus_id_table_shows_every_number_with_its_source():
    result = CliRunner().invoke(cli, ["gpus", "h200"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "4,800" in result.output and "https://aiwiki.ai/wiki/nvidia_h200" in result.output


def test_gpus_table_lists_every_gpu():
    result = CliRunner().invoke(cli, ["gpus"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert all(g.id in result.output for g in all_gpus())


def test_gpus_links_lists_every_interconnect_as_json():
    result = CliRunner().invoke(cli, ["gpus", "--links", "--json"])
    assert result.exit_code == 0, result.output
    ids = [r["id"] for r in json.loads(result.output)]
    assert set(REQUIRED_INTERCONNECTS) <= set(ids)


def test_gpus_with_unknown_id_exits_2_with_the_fix_on_stderr():
    run = subprocess.run(
        [sys.executable, "-m", "decodescope", "gpus", "rtx-a600"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert "rtx-a6000" in run.stderr and "decodescope gpus" in run.stderr


def test_gpus_json_from_a_real_process_parses():
    run = subprocess.run([sys.executable, "-m", "decodescope", "gpus", "--json"], capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert len(json.loads(run.stdout)) == len(all_gpus())


@pytest.mark.parametrize("gpu", all_gpus(), ids=lambda g: g.id)
def test_every_gpu_models_llama3_8b_on_llamacpp_below_its_ceiling(gpu):
    """Llama-3-8B q4_k_m (4.66 GB read a token) on llama.cpp on each GPU of the database: an
    answer, on the backend engines.toml gives its vendor (serving.llamacpp backend_by_vendor:
    nvidia cuda, amd hip, apple metal, intel vulkan), expected above 0 and below the ceiling, and the ceiling
    no faster than the datasheet bandwidth over the bytes read."""
    from decodescope.arch import load_arch
    from decodescope.model import make_deployment, predict

    arch = load_arch("llama-3-8b")
    d = make_deployment(arch, gpu.id, weights="q4_k_m", engine="llamacpp")
    assert d.runs_on.value == {"nvidia": "cuda", "amd": "hip", "apple": "metal", "intel": "vulkan"}[gpu.vendor]
    p = predict(arch, d)
    assert 0 < p.expected.tok_s < p.ceiling.tok_s <= gpu.memory_bw_bytes_s / p.weight_bytes_per_gpu
