"""The gap between the measured round and the ceiling round, term by term.

The ceiling reads every byte at datasheet bandwidth with no fixed latency; the model's
expected round adds what the engine profile says each part costs. Each term of the gap
carries its source: `model` (the engine profile), `log` (what the server's log showed,
timed by the model), `calibration` (a calibration file's measured bandwidth, kernel floor
and allreduce latency in the model's place) and `trace` (a profiler trace's busy and idle
time) when a measured figure takes the modelled one's place under the same term. What the terms do not cover is `unexplained`:
measured - ceiling - the rest, so the terms always sum to measured - ceiling; when it is
negative the model over-predicts the round by that much."""

from dataclasses import dataclass, replace
from enum import StrEnum
from math import ceil

from decodescope.arch import Arch
from decodescope.explain.observations import LogFacts, TraceFacts
from decodescope.model.actquant import quant_kernels_per_pass
from decodescope.model.deployment import Deployment
from decodescope.model.engines import EAGER_KERNEL_US, GRAPH_KERNEL_US
from decodescope.model.predict import Prediction, allreduce_alpha, ceiling_rates, expected_rates, peak_flops
from decodescope.model.round import draft_step_ops, draft_steps, micro_batches, sum_ops

MEMORY_PARTS = ("weights", "kv_cache", "state")
ROUNDS_PER_SGLANG_LINE = 40  # see inputs.SGLANG_ROUNDS_PER_LINE
CALIBRATION_PREFIX = "calibration "  # the source hardware.calibration.apply gives the numbers it replaced


class Term(StrEnum):
    BANDWIDTH = "bandwidth"
    KERNEL_FLOORS = "kernel_floors"
    ALLREDUCE = "allreduce"
    HOST = "host"
    IDLE = "idle"  # a trace's GPU idle: host and kernel floors measured together
    CUDA_GRAPHS_OFF = "cuda_graphs_off"
    PREFILL = "prefill"
    UNEXPLAINED = "unexplained"


class Source(StrEnum):
    MODEL = "model"
    LOG = "log"
    CALIBRATION = "calibration"
    TRACE = "trace"
    MEASURED = "measured"  # unexplained: measured minus everything else


LABELS = {Term.BANDWIDTH: "bandwidth not reached", Term.KERNEL_FLOORS: "kernel floors",
          Term.ALLREDUCE: "allreduce latency", Term.HOST: "host overhead",
          Term.IDLE: "GPU idle (host + kernel floors)",
          Term.CUDA_GRAPHS_OFF: "CUDA graphs off", Term.PREFILL: "prefill in the log windows",
          Term.UNEXPLAINED: "unexplained"}


@dataclass(frozen=True)
class GapTerm:
    term: Term
    ms: float  # per round
    source: Source
    note: str  # the assumption or the evidence, in words

    @property
    def label(self) -> str:
        return LABELS[self.term]

    def to_dict(self) -> dict:
        return {"term": self.term.value, "label": self.label, "ms": self.ms, "source": self.source.value,
                "note": self.note}


def _parts(arch: Arch, d: Deployment, p: Prediction) -> tuple[dict, dict]:
    """(ceiling, expected) ms per model component with the draft split into its own
    weights / kv_cache / state / allreduce / kernels, as round.estimate times it."""
    out = []
    for est, rates in ((p.ceiling, ceiling_rates(d)), (p.expected, expected_rates(d))):
        ms = {c.component: c.ms for c in est.breakdown if c.component != "draft"}
        if d.spec.k and any(c.component == "draft" for c in est.breakdown):
            dm = replace(d, batch=ceil(d.batch / micro_batches(d)))
            scale = draft_steps(dm) / d.spec.k
            ops = [op for s in range(d.spec.k) for op in draft_step_ops(arch, dm, rates, s)]
            for k, c in sum_ops(ops).items():
                ms[k] = ms.get(k, 0.0) + scale * c.ms
        out.append(ms)
    return out[0], out[1]


def _calibrated(source: str) -> bool:
    """hardware.calibration.apply names the file it took a number from: "calibration FILE"."""
    return source.startswith(CALIBRATION_PREFIX)


def modelled_terms(arch: Arch, d: Deployment, p: Prediction) -> list[GapTerm]:
    """expected - ceiling, split by cause; the four terms sum to that difference. With a
    calibration file (`apply`) the weight stream and kernel floor are measured, and the
    allreduce latency too when it ran on several GPUs; the host time stays the profile's."""
    c, e = _parts(arch, d, p)

    def diff(*keys):
        return sum(e.get(k, 0.0) - c.get(k, 0.0) for k in keys)

    eng, why = d.profile, _nccl_note(d)
    quant = quant_kernels_per_pass(arch.layers, d)
    quant_why = f"; {quant} a pass quantize FP8 layers' inputs ({eng.id} does not fuse them)" if quant else ""
    cal = _calibrated(eng.source)
    src, link_src = (Source.CALIBRATION if cal else Source.MODEL,
                     Source.CALIBRATION if _calibrated(d.link.source) else Source.MODEL)
    bw_gb_s = eng.bw_efficiency * d.gpu.memory_bw_bytes_s / 1e9
    return [
        GapTerm(Term.BANDWIDTH, diff(*MEMORY_PARTS), src,
                f"weights, KV cache and state at the weight stream measured by calibrate, {bw_gb_s:.1f} GB/s "
                f"({eng.source.removeprefix(CALIBRATION_PREFIX)}), not the datasheet's "
                f"{d.gpu.memory_bw_bytes_s / 1e9:.0f} GB/s" if cal else
                f"weights, KV cache and state at the {eng.id} profile's achieved bandwidth, not the datasheet's"),
        GapTerm(Term.KERNEL_FLOORS, diff("kernels"), src,
                (f"{eng.kernel_floor_us:.2f} us per kernel whatever its bytes (measured by calibrate)" if cal else
                 f"{eng.kernel_floor_us:g} us per kernel whatever its bytes ({eng.id} profile)") + quant_why),
        GapTerm(Term.ALLREDUCE, diff("allreduce"), link_src,
                ("allreduce latency measured by calibrate, "
                 f"{d.link.allreduce_latency_s * 1e6:.1f} us" if link_src == Source.CALIBRATION else
                 "allreduce latency and link efficiency") + (f"; {why}" if why else "")),
        GapTerm(Term.HOST, diff("host"), Source.MODEL,
                f"CPU time not hidden behind the GPU: {eng.host_ms_per_pass:g} ms per pass, "
                f"{eng.host_ms_per_draft_step:g} ms per draft step ({eng.id} profile)"),
    ]


def _nccl_note(d: Deployment) -> str:
    return allreduce_alpha(d)[1] if d.gpus > 1 else ""


def log_terms(arch: Arch, d: Deployment, p: Prediction, kernels_ms: float, log: LogFacts | None) -> list[GapTerm]:
    """What the server log shows on top of the profile: windows decoded without CUDA
    graphs, and prefill batches that ran inside the decode windows."""
    if log is None:
        return []
    n = log.decode_windows
    off = log.cuda_graph_off_windows
    # the profile's floor is the launch in a graph plus what the kernel itself costs beyond its
    # bytes (fitted engines: more than 1.1 us); eagerly only the launch part grows
    kernels = kernels_ms * 1e3 / d.profile.kernel_floor_us  # kernels per round
    extra = off / n * kernels * (EAGER_KERNEL_US - GRAPH_KERNEL_US) * 1e-3 if off else 0.0  # ms
    graphs = GapTerm(Term.CUDA_GRAPHS_OFF, extra, Source.LOG,
                     f"{off} of {n} windows say `cuda graph: False`: each kernel launched eagerly at "
                     f"{EAGER_KERNEL_US:g} us, not {GRAPH_KERNEL_US:g} us in a graph" if off
                     else f"none of {n} windows says `cuda graph: False`")
    prefill = GapTerm(Term.PREFILL, _prefill_ms(arch, d, p, log) if log.prefill_batches else 0.0, Source.LOG,
                      f"{log.prefill_batches} prefill batches ({log.prefill_tokens} prompt tokens) ran inside the "
                      f"decode windows, spread over {ROUNDS_PER_SGLANG_LINE} rounds per window"
                      if log.prefill_batches else "no prefill line inside the decode windows")
    return [graphs, prefill]


def _prefill_ms(arch: Arch, d: Deployment, p: Prediction, log: LogFacts) -> float:
    """Each prefill batch reads the weights once (the expected weights row) and computes
    2 FLOP per active parameter per prompt token on its GPU's share; per decode round."""
    fl = peak_flops(d.gpu)["bf16"] * d.engine.flops_efficiency
    compute_ms = 1e3 * 2 * arch.params_active / (d.tp * d.pp) * log.prefill_tokens / fl
    total = log.prefill_batches * p.expected.ms("weights") + compute_ms
    return total / (ROUNDS_PER_SGLANG_LINE * max(1, log.decode_windows))


def trace_terms(arch: Arch, d: Deployment, p: Prediction, t: TraceFacts) -> list[GapTerm]:
    """A trace's median step in place of the modelled terms: busy time of the kernels that
    move the weights, KV cache and state, and of the collectives, above their ceiling time;
    GPU idle for host time and kernel floors together (a trace cannot tell them apart)."""
    c, _ = _parts(arch, d, p)
    of = f"median of {t.steps} decode steps in {', '.join(t.files)}"
    return [
        GapTerm(Term.BANDWIDTH, t.memory_ms - sum(c.get(k, 0.0) for k in MEMORY_PARTS), Source.TRACE,
                f"GEMM, attention and linear-attention kernels busy {t.memory_ms:.2f} ms per step ({of}) against "
                f"{sum(c.get(k, 0.0) for k in MEMORY_PARTS):.2f} ms for their bytes at datasheet bandwidth"),
        GapTerm(Term.ALLREDUCE, t.allreduce_ms - c.get("allreduce", 0.0), Source.TRACE,
                f"allreduce and collective kernels busy {t.allreduce_ms:.2f} ms per step ({of}) against "
                f"{c.get('allreduce', 0.0):.2f} ms at the ceiling"),
        GapTerm(Term.IDLE, t.idle_ms - c.get("host", 0.0) - c.get("kernels", 0.0), Source.TRACE,
                f"the GPU waited {t.idle_ms:.2f} ms per step on the host and between kernels ({of})"),
    ]


def gap(arch: Arch, d: Deployment, p: Prediction, measured_ms: float, log: LogFacts | None,
        trace: TraceFacts | None = None) -> tuple[GapTerm, ...]:
    """measured - ceiling as terms that sum to it exactly, `unexplained` last. A trace's
    measured terms replace the modelled ones; it also holds whatever the log's windows
    showed (eager launches, prefill), so the log terms are not added on top."""
    if trace:
        terms = trace_terms(arch, d, p, trace)
    else:
        terms = modelled_terms(arch, d, p)
        terms += log_terms(arch, d, p, terms[1].ms, log)
    rest = measured_ms - p.ceiling.round_ms - sum(t.ms for t in terms)
    note = ("what the terms above do not account for" if rest >= 0 else
            f"negative: the trace's terms exceed the measured gap by {-rest:.2f} ms" if trace else
            f"negative: the model's terms exceed the measured gap, it over-predicts the round by {-rest:.2f} ms")
    if trace:
        note += (f"; the trace's other kernels (norms, elementwise, copies, sampling) were busy "
                 f"{trace.other_ms:.2f} ms per step")
    return (*terms, GapTerm(Term.UNEXPLAINED, rest, Source.MEASURED, note))
