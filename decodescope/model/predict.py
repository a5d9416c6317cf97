"""predict(): the decode round of a deployment as a ceiling and an expected value."""

from dataclasses import dataclass

from decodescope.arch import Arch, MoE
from decodescope.errors import DecodescopeError
from decodescope.model.actquant import quant_note
from decodescope.model.deployment import Deployment, check
from decodescope.model.memory import MemoryFit, fit_options, memory_fit
from decodescope.model.ops import Rates, lm_head, routed_tokens, unique_layers, weight_ops
from decodescope.model.round import Estimate, estimate

DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4")
PCIE_LANE_BYTES_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}  # per direction
NETWORK_BYTES_S = 50e9  # one 400 Gb/s NIC per GPU (InfiniBand NDR / 400GbE), per direction


@dataclass(frozen=True)
class Prediction:
    """A deployment's decode round: ceiling, expected value, memory and levers."""
    arch: Arch
    deployment: Deployment
    ceiling: Estimate  # every byte and FLOP at datasheet rates; no fixed latencies (kernel floors, allreduce alpha, host)
    expected: Estimate  # the engine profile's achievable fractions, floors and host overhead
    weight_bytes_per_gpu: float  # weights one round reads per GPU: the table's weights row (batch B, per stage under PP)
    memory: MemoryFit
    compute_bound_batch: int | None  # smallest batch at which the weight GEMMs turn compute-bound
    notes: tuple[str, ...] = ()
    levers: tuple = ()  # levers.Lever, ranked by expected tok/s
    would_fit: tuple[str, ...] = ()  # when it does not fit: single flag changes that would

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
                "memory": {**self.memory.to_dict(), "would_fit": list(self.would_fit)}, "levers": [x.to_dict() for x in self.levers],
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


def link_peers(d: Deployment) -> int:
    """Peers each GPU reaches over a link of its own (GPU.link_peers) on its own link type, else 1."""
    return d.gpu.link_peers if d.link.id == d.gpu.link else 1


def allreduce_alpha(d: Deployment) -> tuple[float, str]:
    """(seconds, why): the engines' one-shot custom allreduce needs P2P, and on PCIe
    vLLM / SGLang use it for 2 GPUs only; otherwise NCCL's latency applies."""
    link, g = d.link, d.gpu
    if d.split_rows:
        return link.nccl_latency_s, (f"row split: one event wait and one peer copy per exchange, no allreduce "
                                     f"kernel: {link.nccl_latency_s * 1e6:g} us each (the link's NCCL latency)")
    nccl = link.nccl_latency_at(d.tp)
    if not d.engine.custom_allreduce:
        return nccl, (f"allreduce through NCCL ({d.engine.id} has no custom allreduce by default): "
                      f"{nccl * 1e6:g} us each among {d.tp} GPUs")
    if link.id.startswith("pcie") and (link.id == "pcie-sys" or not g.p2p or d.tp > 2):
        why = ("P2P is off between CPU sockets" if link.id == "pcie-sys" else
               f"{g.id} has no PCIe P2P" if not g.p2p else "more than 2 GPUs on PCIe")
        return nccl, f"allreduce through NCCL ({why}): {nccl * 1e6:g} us each among {d.tp} GPUs"
    return link.allreduce_latency_s, ""


def peak_flops(g) -> dict[str, float]:
    """Tensor FLOP/s by compute dtype. Without FP4 tensor cores NVFP4 math runs at the FP8
    rate (GPU.peak_flops falls back), while MXFP4 MoE kernels upcast to BF16 (Hopper:
    https://github.com/triton-lang/triton/tree/main/python/triton_kernels matmul_ogs,
    used by vLLM and SGLang for gpt-oss)."""
    out = {t: g.peak_flops(t) for t in DTYPES}
    out["mxfp4"] = g.flops["fp4"] if g.flops.get("fp4") else g.peak_flops("bf16")
    return out


def ceiling_rates(d: Deployment) -> Rates:
    g = d.gpu
    return Rates(bw=g.memory_bw_bytes_s, bw_by_format={}, flops=peak_flops(g),
                 kernel_floor_s=0.0, allreduce_alpha_s=0.0,
                 link_bw=link_bandwidth(d), link_peers=link_peers(d))


def weight_kernels(d: Deployment) -> set[str]:
    """The kernel families (format_efficiency keys) the target's and the draft's weights use."""
    return d.weights.kernels | (d.draft_weights or d.weights).kernels


def expected_rates(d: Deployment) -> Rates:
    g, e = d.gpu, d.profile
    fmts = weight_kernels(d)
    alpha_s, nccl_reason = allreduce_alpha(d)
    return Rates(bw=g.memory_bw_bytes_s * e.bw_eff("bf16", g.memory_type),
                 bw_by_format={f: g.memory_bw_bytes_s * e.bw_eff(e.kernel_on(f, g.flops), g.memory_type) for f in fmts},
                 flops={t: f * e.flops_efficiency for t, f in peak_flops(g).items()},
                 kernel_floor_s=e.kernel_floor_us * 1e-6,
                 allreduce_alpha_s=alpha_s * e.allreduce_latency_scale,
                 link_bw=link_bandwidth(d) * allreduce_bw_efficiency(d, nccl_reason), link_peers=link_peers(d),
                 kv_per_query_head=d.kv_per_query_head,
                 moe_batched=moe_batched(d), fp8_k_block_s=e.fp8_gemm_us_per_k_block * 1e-6,
                 moe_matvec_per_pair=e.moe_matvec_per_pair, moe_matvec_eff=e.moe_matvec_efficiency)


def allreduce_bw_efficiency(d: Deployment, nccl_reason: str) -> float:
    """Achievable share of the link's bandwidth in an allreduce: the engine's own P2P
    kernels' where they run over NVLink (allreduce_alpha gave no `nccl_reason`), else
    the link's (NCCL's, from nccl-tests)."""
    custom = d.engine.custom_allreduce_bw_efficiency
    if custom and d.link.id in ("nvlink", "nvswitch") and not d.split_rows and not nccl_reason:
        return custom
    return d.link.bw_efficiency


def moe_batched(d: Deployment) -> tuple:
    """Rates.moe_batched of the deployment's engine on its backend: () where it has no batched MoE kernel."""
    p = d.profile
    if not p.moe_matvec_max_tokens:
        return ()
    limit = p.moe_matvec_max_tokens if d.moe_matvec_max_tokens is None else d.moe_matvec_max_tokens
    if d.weights.name in p.moe_matvec_skips:
        limit = 0  # no mat-vec shader for these experts: the batched kernel at every batch
    return (limit, p.moe_batched_slowdown, p.moe_batched_slowdown_per_token)


def batched_moe_note(arch: Arch, d: Deployment) -> tuple[str, ...]:
    """Why the expected weights row is slow where the engine's batched MoE kernel runs."""
    costs, tokens = moe_batched(d), d.batch * d.spec.tokens_per_verify
    if not costs or tokens <= costs[0] or not any(_moe(x) for x in arch.layers):
        return ()
    limit, slowdown, per_token = costs
    when = (f"at every batch: its mat-vec kernel does not take {d.weights.name} experts" if not limit
            else f"above {limit} token(s) per pass ({tokens} here)")
    return (f"{d.engine.id} ({d.runs_on.value}) multiplies the MoE experts with a batched kernel {when}: it adds "
            f"{slowdown:g}x the mat-vec kernel's time for one token's experts, + {per_token:g}x per token each "
            f"touched expert multiplies (engine profile)",)


def estimates(arch: Arch, d: Deployment) -> tuple[Estimate, Estimate]:
    """(ceiling, expected) of one round."""
    check(arch, d)
    return ceiling_estimate(arch, d), expected_estimate(arch, d)


def ceiling_estimate(arch: Arch, d: Deployment) -> Estimate:
    """The round at datasheet rates, of a deployment `check` passed."""
    return estimate(arch, d, ceiling_rates(d), 0.0, 0.0)


def expected_estimate(arch: Arch, d: Deployment) -> Estimate:
    """The round at the engine's achievable rates, of a deployment `check` passed."""
    e = d.engine
    return estimate(arch, d, expected_rates(d), e.host_ms_per_pass, e.host_ms_per_draft_step)


def unmeasured_note(d: Deployment) -> tuple[str, ...]:
    """The engine's fitted costs carried over to a GPU maker no published row of it was measured on
    (engines.toml measured_on): said, as the expected value is then unchecked there."""
    e, vendor = d.engine, d.gpu.vendor
    if not e.measured_on or vendor in e.measured_on or vendor == "cpu":
        return ()
    return (f"engine {e.id}: no published measurement on {vendor} GPUs fits or checks its profile (measured on "
            f"{', '.join(e.measured_on)}): the expected value carries that fit over, unchecked",)


def weight_only_note(d: Deployment) -> tuple[str, ...]:
    """Formats the GPU has no math for, which the engine reads with a weight-only kernel instead."""
    e, g = d.engine, d.gpu
    swapped = sorted(f for f in weight_kernels(d) if e.kernel_on(f, g.flops) != f)
    return tuple(f"{f} weights on {g.id} (no {f} tensor cores): {e.id} reads them with its weight-only kernel in "
                 f"16-bit math, at its {e.kernel_on(f, g.flops)} kernels' bandwidth share" for f in swapped)


def predict(arch: Arch, d: Deployment, with_levers: bool = False, max_positions: int | None = None) -> Prediction:
    """Model one decode round of `arch` served as `d` (and, if asked, its levers).
    max_positions: the config's max_position_embeddings, to flag a longer context."""
    ceiling, expected = estimates(arch, d)
    found = ()
    if with_levers:
        from decodescope.model.levers import levers  # levers re-run this module's estimates
        found = tuple(levers(arch, d, expected.tok_s, expected.bound))
    notes = arch.notes + ((allreduce_alpha(d)[1],) if d.gpus > 1 and allreduce_alpha(d)[1] else ())
    notes += batched_moe_note(arch, d) + unmeasured_note(d) + weight_only_note(d) + quant_note(arch.layers, d)
    end = d.context + d.spec.tokens_per_verify
    if max_positions and end > max_positions:
        # a learned position table (GPT-2, OPT) has no row past its end: engines refuse such requests
        learned = any(t.name == "position_embeddings" for t in arch.input_tables)
        notes += (f"context {end} tokens is beyond the model's max_position_embeddings {max_positions}: "
                  + ("its learned position table has no row past it, so engines refuse the request" if learned
                     else "it was not trained that long (quality, not speed, is at stake)"),)
    weights = next((c.bytes for c in expected.breakdown if c.component == "weights"), 0.0)
    m = memory_fit(arch, d)
    return Prediction(arch, d, ceiling, expected, weights, m, compute_bound_batch(arch, d), notes, found,
                      () if m.fits else fit_options(arch, d, m))


def compute_bound_batch(arch: Arch, d: Deployment, limit: int = 1 << 16) -> int | None:
    """Smallest batch at which the weight GEMMs of a verify pass take longer on the
    tensor cores than reading the weights (datasheet rates)."""
    r = ceiling_rates(d)
    t = d.spec.tokens_per_verify
    layers = unique_layers(arch.layers)
    head = [arch.final_norm, lm_head(arch, d)]

    def compute_bound(b: int) -> bool:
        time = {"compute": 0.0, "memory": 0.0}
        for tensors, moe, n in [(layer.tensors(), _moe(layer), n) for layer, n in layers] + [(head, None, 1)]:
            for op in weight_ops(tensors, moe, d.weights, d, b * t, r, routed=routed_tokens(d, b, t)):
                time[op.bound] += n * op.time_s
        return time["compute"] > time["memory"]

    lo, hi = 1, 1
    while not compute_bound(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(hi * 2, limit)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if not compute_bound(mid) else (lo, mid)
    return hi


def _moe(layer) -> MoE | None:
    return layer.mlp if isinstance(layer.mlp, MoE) else None


def hardware_dict(d: Deployment) -> dict:
    g, link = d.gpu, d.link
    return {"gpu": g.id, "name": g.name, "memory_bytes": g.memory_bytes,
            "memory_bw_bytes_s": g.memory_bw_bytes_s, "flops": dict(g.flops),
            "link": link.id, "link_bw_bytes_s": link_bandwidth(d) if d.gpus > 1 else None,
            "allreduce_latency_s": allreduce_alpha(d)[0],
            "sources": {**g.sources, "allreduce_latency_s": link.source}}
