"""A backend's own share of a memory technology's bandwidth (engines.toml by_backend
memory_efficiency): MLC reaches about half of an Apple chip's LPDDR through its Metal
kernels and 0.78 of a Jetson AGX Orin's LPDDR5 through CUDA (46.9 tok/s for a 4-bit
Llama-2-7B, jetson-containers' MLC documentation); one lpddr share for both put that row
at -42 %."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict
from decodescope.model.engines import Backend, EngineProfile, get_engine
from decodescope.validate.fit import candidate_params, linearise, neutral
from decodescope.validate.rows import load_cases


def _profile(**kw) -> EngineProfile:
    base = dict(id="x", description="", bw_efficiency=0.7, flops_efficiency=0.6, kernel_floor_us=1.1,
                host_ms_per_pass=0.0, host_ms_per_draft_step=0.0, allreduce_latency_scale=1.0)
    return EngineProfile(**{**base, **kw})


def test_a_backend_share_replaces_only_its_memory_technology():
    p = _profile(memory_efficiency={"lpddr": 0.8, "gddr": 0.9},
                 by_backend={"metal": {"memory_efficiency": {"lpddr": 0.5}}})
    metal, cuda = p.on(Backend.METAL), p.on(Backend.CUDA)
    assert metal.memory_efficiency == {"lpddr": 0.5, "gddr": 0.9}  # gddr kept, key by key
    assert cuda.memory_efficiency == {"lpddr": 0.8, "gddr": 0.9}
    # a 4-bit weight stream on LPDDR: share x format efficiency (1.0 here)
    assert metal.bw_eff("int4-g32", "lpddr") == pytest.approx(0.5)
    assert cuda.bw_eff("int4-g32", "lpddr") == pytest.approx(0.8)


def _weights_ms(gpu: str) -> tuple[float, float]:
    """(weights ms, weights bytes) of MLC's Llama-2-7B at 4.0 bits a weight, one token."""
    arch = load_arch("llama-2-7b")
    r = predict(arch, make_deployment(arch, gpu, weights="bpw:4.0", engine="mlc", context=80))
    [w] = [b for b in r.expected.breakdown if b.component == "weights"]
    return w.ms, w.bytes


@pytest.mark.parametrize("gpu, bw_gb_s, backend", [("jetson-agx-orin-64gb", 204.8, None), ("m3-max", 400.0, Backend.METAL)])
def test_mlc_reads_lpddr_at_its_backends_share(gpu, bw_gb_s, backend):
    """The same bytes at the datasheet bandwidth (gpus.toml: AGX Orin 204.8 GB/s, 40-core M3
    Max 400 GB/s) times the share of the backend that runs: CUDA's on the Jetson, Metal's on
    the Mac."""
    mlc = get_engine("mlc")
    share = mlc.on(backend).memory_efficiency["lpddr"]
    ms, nbytes = _weights_ms(gpu)
    assert ms == pytest.approx(nbytes / (bw_gb_s * 1e9 * share) * 1e3, rel=1e-6)
    assert (share < 0.6) == (backend is Backend.METAL)


def test_a_metal_row_fits_metals_share_and_a_cuda_row_the_profiles():
    cases = {c.id: c for c in load_cases()[0]}
    metal, jetson = cases["WLB-01"], cases["JCMLC-01"]
    params = candidate_params("mlc", [metal, jetson])
    assert "memory_efficiency.lpddr@metal" in params and "memory_efficiency.lpddr" in params
    start = neutral(get_engine("mlc"), params)
    assert linearise(metal, start, params).m == "memory_efficiency.lpddr@metal"
    assert linearise(jetson, start, params).m == "memory_efficiency.lpddr"
