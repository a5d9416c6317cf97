"""predict(): the decode round of a deployment as a ceiling and an expected value."""

from dataclasses import dataclass, replace

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.deployment import Deployment, check
from decodescope.model.memory import MemoryFit, memory_fit, stage_layers
from decodescope.model.ops import Rates, head_ops, repeated_ops
from decodescope.model.round import Estimate, estimate, verify_ops

DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4")
PCIE_LANE_BYTES_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}  # per direction
NETWORK_BYTES_S = 50e9  # one 400 Gb/s NIC per GPU (InfiniBand NDR / 400GbE), per direction


@dataclass(frozen=True)
class Prediction:
    arch: Arch
    deployment: Deployment
    ceiling: Estimate  # every byte and FLOP at datasheet rates; no fixed latencies (kernel floors, allreduce alpha, host)
    expected: Estimate  # the engine profile's achievable fractions, floors and host overhead
    weight_bytes_per_gpu: float  # weights one forward pass reads per GPU at batch 1 (largest stage)
    memory: MemoryFit
    compute_bound_batch: int | None  # smallest batch at which the weight GEMMs turn compute-bound
    notes: tuple[str, ...] = ()
    levers: tuple = ()  # levers.Lever, ranked by expected tok/s

    def to_dict(self) -> dict:
        a, d = self.arch, self.deployment
        return {"model": a.summary(), "deployment": d.to_dict(), "hardware": hardware_dict(d),
                "params_total": a.params_total, "params_active": a.params_active,
                "params_read_per_token": a.params_read_per_token,
                "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
                "tokens_per_round": d.spec.accept_len, "verify_tokens": d.spec.tokens_per_verify,
                "ceiling": self.ceiling.to_dict(), "expected": self.expected.to_dict(),
                "breakdown": [c.to_dict() for c in self.expected.breakdown],
                "bound": self.expected.bound, "compute_bound_batch": self.compute_bound_batch,
                "memory": self.memory.to_dict(), "levers": [x.to_dict() for x in self.levers],
                "notes": list(self.notes)}


def link_bandwidth(d: Deployment) -> float:
    """Bytes/s per direction between two GPUs of the deployment (inf on one GPU)."""
    gpu, link = d.gpu, d.link
    if d.gpus == 1:
        return float("inf")
    if link.id == gpu.link and gpu.link_bw_bytes_s:
        bw = gpu.link_bw_bytes_s
    elif link.id.startswith("pcie"):
        bw = PCIE_LANE_BYTES_S.get(gpu.pcie_gen, 0.0) * gpu.pcie_lanes
    elif link.id == "network":
        bw = NETWORK_BYTES_S
    else:
        bw = gpu.link_bw_bytes_s
    if not bw:
        raise DecodescopeError(f"{gpu.name} has no {link.id} link to another GPU in the database",
                               "use one GPU, or name the link with --link (pcie, network)")
    return bw


def allreduce_alpha(d: Deployment) -> tuple[float, str]:
    """(seconds, why): the engines' one-shot custom allreduce needs P2P, and on PCIe
    vLLM / SGLang use it for 2 GPUs only; otherwise NCCL's latency applies."""
    link, g = d.link, d.gpu
    if link.id.startswith("pcie") and (link.id == "pcie-sys" or not g.p2p or d.tp > 2):
        why = ("P2P is off between CPU sockets" if link.id == "pcie-sys" else
               f"{g.id} has no PCIe P2P" if not g.p2p else "more than 2 GPUs on PCIe")
        return link.nccl_latency_s, f"allreduce through NCCL ({why}): {link.nccl_latency_s * 1e6:g} us each"
    return link.allreduce_latency_s, ""


def ceiling_rates(d: Deployment) -> Rates:
    g = d.gpu
    return Rates(bw=g.memory_bw_bytes_s, bw_by_format={}, flops={t: g.peak_flops(t) for t in DTYPES},
                 kernel_floor_s=0.0, allreduce_alpha_s=0.0,
                 link_bw=link_bandwidth(d))


def expected_rates(d: Deployment) -> Rates:
    g, e = d.gpu, d.engine
    fmts = d.weights.kernels | (d.draft_weights or d.weights).kernels
    return Rates(bw=g.memory_bw_bytes_s * e.bw_eff("bf16", g.memory_type),
                 bw_by_format={f: g.memory_bw_bytes_s * e.bw_eff(f, g.memory_type) for f in fmts},
                 flops={t: g.peak_flops(t) * e.flops_efficiency for t in DTYPES},
                 kernel_floor_s=e.kernel_floor_us * 1e-6,
                 allreduce_alpha_s=allreduce_alpha(d)[0] * e.allreduce_latency_scale,
                 link_bw=link_bandwidth(d) * d.link.bw_efficiency)


def estimates(arch: Arch, d: Deployment) -> tuple[Estimate, Estimate]:
    """(ceiling, expected) of one round."""
    check(arch, d)
    e = d.engine
    return (estimate(arch, d, ceiling_rates(d), 0.0, 0.0),
            estimate(arch, d, expected_rates(d), e.host_ms_per_pass, e.host_ms_per_draft_step))


def predict(arch: Arch, d: Deployment, with_levers: bool = False) -> Prediction:
    """Model one decode round of `arch` served as `d` (and, if asked, its levers)."""
    ceiling, expected = estimates(arch, d)
    found = ()
    if with_levers:
        from decodescope.model.levers import levers  # levers re-run this module's estimates
        found = tuple(levers(arch, d, expected.tok_s))
    notes = arch.notes + ((allreduce_alpha(d)[1],) if d.gpus > 1 and allreduce_alpha(d)[1] else ())
    return Prediction(arch, d, ceiling, expected, max(stage_read_bytes(arch, d)), memory_fit(arch, d),
                      compute_bound_batch(arch, d), notes, found)


def stage_read_bytes(arch: Arch, d: Deployment) -> list[float]:
    """Weight bytes one batch-1, one-token forward pass reads per GPU, per pipeline stage."""
    one, r = replace(d, batch=1), ceiling_rates(d)
    stages = [repeated_ops(tuple(s), d.weights, one, 1, 1, r) for s in stage_layers(arch, d)]
    stages[-1] += head_ops(arch, d.weights, one, 1, 1, r)
    return [sum(op.bytes for op in ops if op.component == "weights") for ops in stages]


def compute_bound_batch(arch: Arch, d: Deployment, limit: int = 1 << 16) -> int | None:
    """Smallest batch at which the weight GEMMs of a verify pass take longer on the
    tensor cores than reading the weights (datasheet rates)."""
    r = ceiling_rates(d)

    def compute_bound(b: int) -> bool:
        ops = [op for op in verify_ops(arch, replace(d, batch=b), r) if op.component == "weights"]
        return sum(op.time_s for op in ops if op.bound == "compute") > sum(
            op.time_s for op in ops if op.bound == "memory")

    lo, hi = 1, 1
    while not compute_bound(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(hi * 2, limit)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if not compute_bound(mid) else (lo, mid)
    return hi


def hardware_dict(d: Deployment) -> dict:
    g, link = d.gpu, d.link
    return {"gpu": g.id, "name": g.name, "memory_bytes": g.memory_bytes,
            "memory_bw_bytes_s": g.memory_bw_bytes_s, "flops": dict(g.flops),
            "link": link.id, "link_bw_bytes_s": link_bandwidth(d) if d.gpus > 1 else None,
            "allreduce_latency_s": allreduce_alpha(d)[0],
            "sources": {**g.sources, "allreduce_latency_s": link.source}}
