"""SGLang's ROCm build runs other kernels than its CUDA build (aiter's block-wise FP8 GEMM,
attention and MoE kernels: engines.toml serving.sglang quotes the SGLang source), so its
deployments on AMD GPUs run the `hip` backend, whose fitted values (engine.sglang by_backend)
replace the profile's own; every other backend and parameter keeps the profile's value.
Expectations derived by hand below; the test profiles' numbers are chosen here."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.deployment import check
from decodescope.model.engines import Backend, _checked_backends, get_engine
from decodescope.model.predict import estimates
from decodescope.validate.fit import Sample, candidate_params, fit, leave_one_source_out, neutral, value, with_values
from decodescope.validate.rows import DATA, load_cases

ARCH = load_arch("llama-3.1-8b")
# test profile: kernel floor 5 us on CUDA, 7 us on HIP; fp8 kernels at 1.0 on CUDA, 0.5 on HIP
TEST = replace(get_engine("sglang"), kernel_floor_us=5.0, bw_efficiency=0.8, format_efficiency={"fp8": 1.0},
               by_backend={"hip": {"kernel_floor_us": 7.0, "format_efficiency": {"fp8": 0.5}}})


def _parts(gpu: str, engine, weights: str = "bf16") -> dict[str, float]:
    d = replace(make_deployment(ARCH, gpu, weights=weights, engine="sglang", context=512), engine=engine)
    return {c.component: c.ms for c in estimates(ARCH, d)[1].breakdown}


def test_the_gpu_vendor_picks_the_build():
    assert make_deployment(ARCH, "mi300x", engine="sglang").runs_on is Backend.HIP
    assert make_deployment(ARCH, "h100-sxm", engine="sglang").runs_on is Backend.CUDA
    assert make_deployment(ARCH, "mi300x", engine="sglang", backend="hip").to_dict()["backend"] == "hip"


def test_hip_takes_its_own_kernel_floor_and_the_cuda_build_keeps_the_profiles():
    """The kernels row is (kernels per round) x floor; the count is the model's, the same on
    both GPUs (same model, TP 1): HIP's row / CUDA's = 7 us / 5 us = 1.4. Without the
    by_backend entry the HIP row is the 5 us one: its ratio to CUDA's is 1."""
    hip, cuda = _parts("mi300x", TEST)["kernels"], _parts("h100-sxm", TEST)["kernels"]
    assert hip / cuda == pytest.approx(7.0 / 5.0, rel=1e-9)
    plain = _parts("mi300x", replace(TEST, by_backend={}))["kernels"]
    assert plain / cuda == pytest.approx(1.0, rel=1e-9)


def test_hip_takes_its_own_fp8_efficiency():
    """fp8 weights stream at bandwidth x 0.8 x the format's efficiency: the override at 0.5
    prices the fp8 linear layers exactly as a profile whose own fp8 figure is 0.5 does on
    that GPU, and leaves the bf16 model (no fp8 kernel) as it was."""
    over = _parts("mi300x", TEST, "fp8")
    same = _parts("mi300x", replace(TEST, by_backend={}, format_efficiency={"fp8": 0.5}, kernel_floor_us=7.0), "fp8")
    assert over == pytest.approx(same, rel=1e-12)
    assert _parts("mi300x", TEST)["weights"] == pytest.approx(
        _parts("mi300x", replace(TEST, by_backend={}))["weights"], rel=1e-12)


@pytest.mark.parametrize("gpu, backend, says", [
    ("mi300x", "cuda", "cuda runs on nvidia GPUs"),
    ("h100-sxm", "hip", "hip runs on amd GPUs"),
    ("mi300x", "vulkan", "engine sglang has no vulkan build"),
])
def test_sglang_refuses_a_build_the_gpu_cannot_run(gpu, backend, says):
    with pytest.raises(DecodescopeError) as e:
        check(ARCH, make_deployment(ARCH, gpu, engine="sglang", backend=backend))
    assert says in f"{e.value.what} {e.value.fix}"


@pytest.mark.parametrize("by_backend, says", [
    ({"hip": {"host_ms_per_pass": 1.0}}, "by_backend sets host_ms_per_pass"),
    ({"rocm": {"kernel_floor_us": 7.0}}, "unknown backend(s) rocm"),
])
def test_engines_toml_by_backend_is_checked(by_backend, says):
    with pytest.raises(DecodescopeError) as e:
        _checked_backends(replace(TEST, by_backend=by_backend))
    assert says in e.value.what


def test_a_fitted_name_at_a_backend_lands_in_that_backend_only():
    p = with_values(TEST, {"kernel_floor_us@hip": 9.0, "format_efficiency.fp8@hip": 0.25})
    assert p.on(Backend.HIP).kernel_floor_us == 9.0 and p.on(Backend.HIP).format_efficiency["fp8"] == 0.25
    assert p.on(Backend.CUDA).kernel_floor_us == 5.0 and p.on(Backend.CUDA).format_efficiency["fp8"] == 1.0
    assert value(p, "kernel_floor_us@hip") == 9.0 and value(p, "kernel_floor_us") == 5.0


@pytest.fixture(scope="module")
def sglang_samples():
    cases = [c for c in load_cases(DATA)[0] if c.engine == "sglang"]
    params = candidate_params("sglang", cases)
    start = neutral(get_engine("sglang"), params)
    samples = [Sample.of(c, start, params) for c in cases if c.comparable]
    params = [p for p in params if any(p in s.linear.params for s in samples)]
    return samples, start, {p: value(start, p) for p in params}


def test_rows_on_hip_do_not_move_the_cuda_values(sglang_samples):
    """The profile's own values fitted on every row equal those fitted on the NVIDIA rows
    alone (no MI300X row in the search): the ROCm rows only fit by_backend.hip."""
    samples, _, v0 = sglang_samples
    assert {"kernel_floor_us@hip", "format_efficiency.fp8@hip"} <= set(v0)
    everything = fit(samples, v0)
    cuda = [s for s in samples if not s.id.startswith(("CBV31", "CBL4"))]
    alone = fit(cuda, {p: v for p, v in v0.items() if "@" not in p})
    assert {p: everything[p] for p in alone} == pytest.approx(alone, rel=1e-9)


def test_a_hip_parameter_without_rows_keeps_the_cuda_value(sglang_samples):
    """Held out, the DeepSeek-V3.1 FP8 rows (CBV31) leave no FP8 row on HIP: fp8@hip is not
    fitted and HIP's fp8 is the profile's own, not the neutral start (1.0)."""
    samples, start, v0 = sglang_samples
    values = leave_one_source_out(samples, v0)["CBV31"]
    assert "format_efficiency.fp8@hip" not in values and "kernel_floor_us@hip" in values
    hip = with_values(start, values).on(Backend.HIP)
    assert hip.format_efficiency["fp8"] == values["format_efficiency.fp8"] != 1.0


def test_the_gap_explanation_names_the_floor_the_backend_runs():
    """The kernel-floor term of the gap between ceiling and expected says the floor that
    priced it: on the MI300X the ROCm build's 7 us (test profile), on the H100 the CUDA 5 us."""
    from decodescope.explain.gap import Term, modelled_terms
    from decodescope.model.predict import predict

    for gpu, says in (("mi300x", "7 us per kernel"), ("h100-sxm", "5 us per kernel")):
        d = replace(make_deployment(ARCH, gpu, engine="sglang", context=512), engine=TEST)
        floors = next(t for t in modelled_terms(ARCH, d, predict(ARCH, d)) if t.term is Term.KERNEL_FLOORS)
        assert says in floors.note
