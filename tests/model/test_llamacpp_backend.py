"""llama.cpp's backend (CUDA, HIP, Vulkan, Metal) picks the kernel that multiplies a MoE
layer's experts: the mat-vec one up to a number of tokens per pass that differs per backend
(current builds: CUDA 8, HIP 4 for the K-quants on RDNA3, Vulkan 8, Metal 31), a tiled one
above it whose cost differs per backend too (engines.toml serving.llamacpp quotes the ggml
source). Expectations derived by hand below; the test profile's numbers are chosen here."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.deployment import check
from decodescope.model.engines import Backend
from decodescope.model.predict import estimates, predict

ARCH = load_arch("qwen3-30b-a3b")  # 48 MoE layers, 128 experts, 8 per token
# one expert (gate, up, down of 2048 x 768) in Q8_0 (8.5 bits per weight): 3 x 1,572,864 x 8.5 / 8
# = 5,013,504 bytes; one token's 8 experts: 40,108,032 bytes per layer
ONE_TOKEN_BYTES = 8 * 3 * 2048 * 768 * 8.5 / 8
# test costs: CUDA's tiled kernel 1.0 + 0.25 per token, Vulkan's 3.0 + 1.5 per token
COSTS = ({"cuda": 1.0, "vulkan": 3.0}, {"cuda": 0.25, "vulkan": 1.5})


def _costed(profile, costs):
    """`profile` with the CUDA costs as its own and Vulkan's as its vulkan by_backend (the
    structure engines.toml uses); HIP and Metal keep their mat-vec limits and take the profile's
    (engines.toml's fitted Metal costs dropped here)."""
    (slow, per_token), over = ((costs[0]["cuda"], costs[1]["cuda"]) if costs else (0.0, 0.0)), {
        b: {k: v for k, v in o.items() if not k.startswith("moe_batched")} for b, o in profile.by_backend.items()}
    vulkan = dict(over.get("vulkan", {}))
    if costs:
        vulkan |= {"moe_batched_slowdown": costs[0]["vulkan"], "moe_batched_slowdown_per_token": costs[1]["vulkan"]}
    return replace(profile, moe_batched_slowdown=slow, moe_batched_slowdown_per_token=per_token,
                   by_backend={**over, "vulkan": vulkan})


def _extra_ms(gpu: str, batch: int, backend: str | None, memory: str, weights: str = "q8_0") -> float:
    """Expected round with the test costs less the round without them (ms), identical requests."""
    d = make_deployment(ARCH, gpu, weights=weights, engine="llamacpp", batch=batch, context=512,
                        same_tokens=True, backend=backend)
    base = replace(d.engine, memory_efficiency={memory: 0.8}, format_efficiency={"q8_0": 1.0})
    priced, free = _costed(base, COSTS), _costed(base, None)
    return (estimates(ARCH, replace(d, engine=priced))[1].round_ms
            - estimates(ARCH, replace(d, engine=free))[1].round_ms)


def test_each_backend_prices_its_own_tiled_kernel():
    """RTX 3090 (936 GB/s, GDDR at 0.8: 748.8 GB/s), batch 9 of identical requests: past the
    mat-vec limit of 8 of CUDA and Vulkan. One token's experts read in 40,108,032 / 748.8e9 s =
    53.5631 us per layer; each touched expert multiplies 9 x 8 / 8 = 9 tokens.
    CUDA:   53.5631 x (1.0 + 0.25 x 9) = 174.080 us per layer, x 48 = 8.356 ms.
    Vulkan: 53.5631 x (3.0 + 1.5 x 9) = 883.791 us per layer, x 48 = 42.422 ms."""
    read_us = ONE_TOKEN_BYTES / (936e9 * 0.8) * 1e6
    assert read_us == pytest.approx(53.5631, abs=1e-4)
    assert _extra_ms("rtx-3090", 9, "cuda", "gddr") == pytest.approx(8.356, abs=1e-3)
    assert _extra_ms("rtx-3090", 9, "vulkan", "gddr") == pytest.approx(42.422, abs=1e-3)


def test_the_mat_vec_limit_differs_per_backend():
    """Radeon 8060S (256 GB/s, LPDDR at 0.8: 204.8 GB/s). HIP takes the mat-vec kernel up to 4
    tokens, Vulkan up to 8. At batch 5 only HIP runs the tiled kernel, priced with CUDA's costs
    (the same ggml-cuda kernels): 40,108,032 / 204.8e9 s = 195.840 us per layer, x (1.0 + 0.25 x 5)
    = 440.640 us, x 48 = 21.151 ms. Vulkan pays from 9 tokens: 195.840 x (3.0 + 1.5 x 9) =
    3231.36 us, x 48 = 155.105 ms."""
    assert _extra_ms("radeon-8060s", 4, "hip", "lpddr") == pytest.approx(0.0, abs=1e-9)
    assert _extra_ms("radeon-8060s", 5, "hip", "lpddr") == pytest.approx(21.151, abs=1e-3)
    assert _extra_ms("radeon-8060s", 8, "vulkan", "lpddr") == pytest.approx(0.0, abs=1e-9)
    assert _extra_ms("radeon-8060s", 9, "vulkan", "lpddr") == pytest.approx(155.105, abs=1e-3)


def test_vulkan_runs_bf16_experts_through_the_tiled_kernel_from_one_token():
    """ggml-vulkan.cpp ggml_vk_use_mul_mat_vec_id: 'src2->ne[1] <= 8' and the experts F32, F16
    or quantized: BF16 experts take mul_mm_id at every batch. Radeon 8060S at 204.8 GB/s, batch 1:
    one token's 8 BF16 experts, 8 x 3 x 2048 x 768 x 2 = 75,497,472 bytes per layer, read in
    368.640 us; each touched expert multiplies 1 x 8 / 8 = 1 token: 368.640 x (3.0 + 1.5 x 1) =
    1658.880 us per layer, x 48 = 79.626 ms. F16 experts and BF16 on HIP keep the mat-vec kernel."""
    assert 8 * 3 * 2048 * 768 * 2 / 204.8e9 * 1e6 == pytest.approx(368.640, abs=1e-3)
    assert _extra_ms("radeon-8060s", 1, "vulkan", "lpddr", "bf16") == pytest.approx(79.626, abs=1e-3)
    assert _extra_ms("radeon-8060s", 1, "vulkan", "lpddr", "fp16") == pytest.approx(0.0, abs=1e-9)
    assert _extra_ms("radeon-8060s", 1, "hip", "lpddr", "bf16") == pytest.approx(0.0, abs=1e-9)


def test_a_dense_bf16_model_on_vulkan_keeps_the_mat_vec_kernel():
    """The skip is of the MoE kernel: a dense model has no experts to send anywhere else."""
    dense = load_arch("qwen3-8b")
    d = make_deployment(dense, "radeon-8060s", weights="bf16", engine="llamacpp", backend="vulkan")
    hip = replace(d, backend=Backend.HIP)
    assert d.runs_on is Backend.VULKAN and hip.runs_on is Backend.HIP
    assert estimates(dense, d)[1].round_ms == pytest.approx(estimates(dense, hip)[1].round_ms, rel=1e-9)


def test_the_other_backend_is_a_lever_where_its_kernels_are_faster():
    """BF16 experts on Vulkan run the tiled kernel; the HIP build of the same GPU keeps the
    mat-vec kernel, so `backend hip` is offered, at the expected tok/s of a HIP run. A dense
    model runs the same kernels on both: no backend lever."""
    d = make_deployment(ARCH, "radeon-8060s", weights="bf16", engine="llamacpp", backend="vulkan")
    offered = {lv.lever: lv for lv in predict(ARCH, d, with_levers=True).levers}
    hip = estimates(ARCH, replace(d, backend=Backend.HIP))[1].tok_s
    assert offered["backend hip"].tok_s == pytest.approx(hip)
    assert offered["backend hip"].gain > 0.5
    dense = load_arch("qwen3-8b")
    d = make_deployment(dense, "radeon-8060s", weights="bf16", engine="llamacpp", backend="vulkan")
    assert not [lv for lv in predict(dense, d, with_levers=True).levers if lv.lever.startswith("backend")]


def test_metal_keeps_the_mat_vec_kernel_below_32_tokens():
    """ggml-metal-ops.cpp: 'ne21_mm_id_min = 32': mul_mv_id below 32 tokens per pass."""
    assert _extra_ms("m3-max", 31, None, "lpddr") == pytest.approx(0.0, abs=1e-9)
    assert _extra_ms("m3-max", 32, None, "lpddr") > 1.0


def test_single_token_decode_is_the_same_on_every_backend():
    """One token per pass runs the mat-vec kernel on every backend: the round does not change,
    nor does a dense model's at any batch."""
    def round_ms(arch, gpu, backend, batch=1):
        d = make_deployment(arch, gpu, weights="q8_0", engine="llamacpp", batch=batch, backend=backend)
        return estimates(arch, d)[1].round_ms

    assert round_ms(ARCH, "rtx-3090", "cuda") == pytest.approx(round_ms(ARCH, "rtx-3090", "vulkan"), rel=1e-12)
    assert round_ms(ARCH, "radeon-8060s", "hip") == pytest.approx(round_ms(ARCH, "radeon-8060s", "vulkan"), rel=1e-12)
    dense = load_arch("qwen3-8b")
    assert round_ms(dense, "rtx-3090", "cuda", 16) == pytest.approx(round_ms(dense, "rtx-3090", "vulkan", 16),
                                                                    rel=1e-12)


def test_the_default_backend_follows_the_gpu_vendor():
    def runs_on(gpu, engine="llamacpp", backend=None):
        return make_deployment(ARCH, gpu, engine=engine, backend=backend).runs_on

    assert runs_on("gb10") is Backend.CUDA
    assert runs_on("radeon-8060s") is Backend.HIP
    assert runs_on("m3-max") is Backend.METAL
    assert runs_on("radeon-8060s", backend="Vulkan") is Backend.VULKAN
    assert runs_on("h100-sxm", engine="vllm") is None
    d = make_deployment(ARCH, "radeon-8060s", engine="llamacpp", backend="vulkan")
    assert d.to_dict()["backend"] == "vulkan"
    # a lever onto an Apple GPU cannot keep Vulkan: that GPU's own backend runs
    assert replace(d, gpu=make_deployment(ARCH, "m3-max").gpu).runs_on is Backend.METAL


@pytest.mark.parametrize("gpu, engine, backend, says", [
    ("radeon-8060s", "llamacpp", "opencl", "use one of: cuda hip vulkan metal"),
    ("radeon-8060s", "llamacpp", "cuda", "cuda runs on nvidia GPUs"),
    ("m3-max", "llamacpp", "vulkan", "vulkan runs on nvidia or amd or intel GPUs"),
    ("h100-sxm", "vllm", "cuda", "--backend applies to --engine sglang or llamacpp"),
])
def test_a_backend_that_cannot_run_is_refused(gpu, engine, backend, says):
    with pytest.raises(DecodescopeError) as e:
        check(ARCH, make_deployment(ARCH, gpu, engine=engine, backend=backend))
    assert says in f"{e.value.what} {e.value.fix}"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "decodescope", "model", "qwen3-30b-a3b", "--engine", "llamacpp",
                           "--weights", "q8_0", *args], capture_output=True, text=True,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_cli_backend_flag():
    """--backend reaches the JSON and the terminal header; without it the vendor's usual one runs."""
    r = _cli("--gpu", "radeon-8060s", "--batch", "9", "--same-tokens", "--backend", "vulkan", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["deployment"]["backend"] == "vulkan"
    assert any("llamacpp (vulkan)" in n and "above 8 token(s)" in n for n in out["notes"])
    r = _cli("--gpu", "radeon-8060s")
    assert r.returncode == 0, r.stderr
    assert "engine llamacpp (hip backend)" in r.stdout


@pytest.mark.parametrize("args, says", [
    (("--gpu", "radeon-8060s", "--backend", "opencl"), "--backend 'opencl' unknown"),
    (("--gpu", "radeon-8060s", "--backend", "metal"), "--backend metal does not run on"),
    (("--gpu", "h100-sxm", "--backend", "cuda", "--engine", "vllm"), "engine vllm has no backend choice"),
])
def test_cli_backend_bad_values(args, says):
    r = _cli(*args)
    assert r.returncode != 0
    assert says in r.stderr and "Traceback" not in r.stderr


def test_validate_rows_carry_their_backend_and_build():
    """deployments.csv names each llama.cpp row's backend as its source does, and the 2025
    builds' switch at one token where a row ran one; the fit prices each backend's rows with
    their own costs (Vulkan's and Metal's their own, HIP's the profile's: the CUDA kernels)."""
    from decodescope.validate.fit import candidate_params
    from decodescope.validate.rows import load_cases

    cases = {c.id: c for c in load_cases()[0] if c.engine == "llamacpp"}
    d = {i: cases[i].deployment for i in ("DGXB-02", "LI16134-02", "SHM-11", "SHM-08", "XD-19", "SPARK-03")}
    assert (d["DGXB-02"].runs_on, d["DGXB-02"].moe_matvec_max_tokens) == (Backend.CUDA, 1)  # build 6918
    assert (d["LI16134-02"].runs_on, d["LI16134-02"].moe_matvec_max_tokens) == (Backend.VULKAN, 1)  # build 6527
    assert (d["SHM-11"].runs_on, d["SHM-11"].moe_matvec_max_tokens) == (Backend.VULKAN, None)  # a 2026 build
    assert d["SHM-08"].runs_on is Backend.HIP
    assert d["XD-19"].runs_on is Backend.METAL
    assert d["SPARK-03"].backend is None and d["SPARK-03"].runs_on is Backend.CUDA  # not stated: NVIDIA's usual
    params = candidate_params("llamacpp", list(cases.values()))
    assert {"moe_batched_slowdown", "moe_batched_slowdown_per_token", "moe_batched_slowdown@vulkan",
            "moe_batched_slowdown_per_token@vulkan"} <= set(params)
    # Metal's kernels (the M2 Ultra rows): its MoE mat-vec kernel's share and its tiled kernel's costs, not
    # per-format efficiencies of its own (the mat-vec kernel's slowness follows the experts into any format)
    assert {"moe_batched_slowdown@metal", "moe_batched_slowdown_per_token@metal",
            "moe_matvec_efficiency@metal"} <= set(params)
    assert not [p for p in params if p.startswith("format_efficiency") and p.endswith("@metal")]
    assert not [p for p in params if p.endswith(("@hip", "@cuda"))]
