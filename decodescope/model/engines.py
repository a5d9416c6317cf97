"""Engine profiles: how close a serving engine gets to the hardware, and what it costs
per forward pass. Data in engines.toml, each number with its source or fit."""

import os
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cache

from decodescope.datafile import load_toml
from decodescope.errors import DecodescopeError

# one kernel launch as an H200 measured it (tests/data/h200/gpu_check_results.json): eagerly
# from PyTorch, and replayed in a CUDA graph; a profile's kernel floor may add the kernel's
# own cost beyond its bytes on top (fitted floors)
EAGER_KERNEL_US = 6.7
GRAPH_KERNEL_US = 1.1
# the parameters a backend may set apart from the profile's (EngineProfile.by_backend): those of
# kernels a build swaps (per-kernel cost, a format's kernels, the allreduce kernel), not the scheduler's
BACKEND_OVERRIDABLE = ("kernel_floor_us", "format_efficiency", "memory_efficiency", "allreduce_latency_scale",
                       "moe_matvec_max_tokens",
                       "moe_batched_slowdown", "moe_batched_slowdown_per_token", "fp8_gemm_us_per_k_block",
                       "moe_matvec_per_pair", "moe_matvec_efficiency", "moe_matvec_skips")


class QuantAfter(Enum):
    """What produces an FP8 linear layer's input, after which the activations are quantized
    (model/actquant.py): the norm before a block's projections, the mixer (attention, recurrence)
    before its output projection, the MLP's activation before its down projection, the MoE op
    before each of its expert GEMMs."""
    NORM = "norm"
    MIXER = "mixer"
    ACTIVATION = "activation"
    MOE = "moe"


class Backend(Enum):
    """The GPU backend an engine was built for: it picks the kernels that run (llama.cpp's
    ggml backends, SGLang's CUDA and ROCm builds; engines.toml says what differs between them)."""
    CUDA = "cuda"
    HIP = "hip"  # ROCm (llama.cpp: the ggml-cuda sources compiled by HIP)
    VULKAN = "vulkan"
    METAL = "metal"


@dataclass(frozen=True)
class EngineProfile:
    """What a serving engine achieves: efficiencies, fixed costs and the formats it serves (engines.toml)."""
    id: str
    description: str
    bw_efficiency: float  # achieved / datasheet memory bandwidth on decode weight streams
    flops_efficiency: float  # achieved / datasheet tensor FLOP/s on compute-bound GEMMs
    kernel_floor_us: float  # time every kernel costs whatever its bytes (launch, ramp, tail)
    host_ms_per_pass: float  # CPU work per forward pass not hidden behind the GPU (schedule, sample)
    host_ms_per_draft_step: float  # the same per speculative draft step
    allreduce_latency_scale: float  # engine's small-allreduce latency / the link's typical alpha
    # a MoE layer's expert matmuls above moe_matvec_max_tokens tokens per pass take
    # (1 + slowdown + slowdown_per_token x tokens per touched expert) x the mat-vec kernel's time
    moe_batched_slowdown: float = 0.0
    moe_batched_slowdown_per_token: float = 0.0
    # achieved bandwidth of a format's kernels relative to bf16 ("int4" covers int4-gN)
    format_efficiency: dict[str, float] = field(default_factory=dict)
    # bandwidth efficiency by memory technology where the engine's kernels differ (hbm/gddr/unified)
    memory_efficiency: dict[str, float] = field(default_factory=dict)
    # memory: the engine gives memory_fraction of the device to weights + caches, less
    # memory_reserve_gb (CUDA context, activations, graphs) where it keeps no fraction back
    memory_fraction: float = 0.9
    memory_fraction_by_tp: dict[str, float] = field(default_factory=dict)  # TP >= key -> fraction, where it varies
    memory_reserve_gb: float = 0.0
    # tokens per pass the MoE mat-vec kernel takes, above which a batched kernel runs; 0: one kernel for all
    moe_matvec_max_tokens: int = 0
    # weight formats whose experts the mat-vec kernel does not take (a backend without that
    # shader): a checkpoint in one of them runs the batched kernel from one token per pass on
    moe_matvec_skips: tuple[str, ...] = ()
    # us per 128-deep K block of a dense FP8 GEMM whose kernel gives each output tile to one
    # workgroup that walks all of K (model/kloop.py); 0: its kernels split K, the roofline stands
    fp8_gemm_us_per_k_block: float = 0.0
    # the mat-vec kernel multiplies each (token, routed expert) pair on its own, reading that
    # expert's weights once per pair: no read shared by the tokens routed to one expert
    moe_matvec_per_pair: bool = False
    # share of its format's bandwidth the MoE mat-vec kernel reaches on a routed expert's weights,
    # where a backend's kernel for them is slower than its dense one (Metal's mul_mv_id): a
    # kernel's property, so it follows the experts into every weight format a lever proposes
    moe_matvec_efficiency: float = 1.0
    backend_by_vendor: dict[str, str] = field(default_factory=dict)  # GPU vendor -> its usual backend
    backend_vendors: dict[str, tuple[str, ...]] = field(default_factory=dict)  # backend -> GPU vendors it runs on
    vendors: tuple[str, ...] = ()  # the GPU makers the engine runs on; (): any
    measured_on: tuple[str, ...] = ()  # the GPU makers published rows measured it on (none: an estimate)
    families: tuple[str, ...] = ()  # the model_types it serves; (): not listed, taken as any
    # per backend (Backend values), the values that replace the profile's own where that backend's
    # kernels differ (BACKEND_OVERRIDABLE): fitted ([engine.X]) or read in the source ([serving.X]);
    # a backend or a parameter not named here keeps the profile's value
    by_backend: dict[str, dict] = field(default_factory=dict)
    pp_micro_batches: bool = True  # under PP the batch is split into micro-batches that fill the pipeline
    embedding_on_gpu: bool = True  # False: the token-embedding table stays in host memory
    lm_head_shard: str = "vocab"  # "vocab": split over TP ranks, logits gathered; "rep": every rank holds it
    lm_head_quantized: bool = False  # the LM head takes the weight format's bits (else 16-bit)
    state_commit_after_verify: bool = False  # accepted linear-attention state copied into the cache after a verify
    custom_allreduce: bool = True  # a one-shot P2P allreduce for small messages; False: always NCCL's latency
    # share of the NVLink bandwidth the engine's own (P2P) allreduce kernels reach; 0: the link's (NCCL's)
    custom_allreduce_bw_efficiency: float = 0.0
    splits: tuple[str, ...] = ("tp", "pp")  # how the engine splits a model over GPUs
    formats: tuple[str, ...] = ("fp8", "int4-g128", "nvfp4")  # weight formats it serves, offered as levers
    # a format whose math the GPU lacks (FP8 below compute capability 8.9) is read by a weight-only
    # kernel instead: format_efficiency key -> the key of that kernel's family (fp8 -> Marlin W8A16: int8)
    weight_only_fallback: dict[str, str] = field(default_factory=dict)
    # the producers after which the engine quantizes an FP8 GEMM's input in a kernel of its own
    # (not fused into the producer's kernel); (): every one fused, or not read (model/actquant.py)
    fp8_quant_after: tuple[QuantAfter, ...] = ()
    source: str = ""
    fields_source: str = ""  # where the structural fields above (memory, head, embedding, state) come from

    def runs_on_vendor(self, vendor: str) -> bool:
        return not self.vendors or vendor in self.vendors

    def serves(self, model_type: str) -> bool:
        return not self.families or model_type in self.families

    def usable_fraction(self, tp: int) -> float:
        """memory_fraction, or the one for the largest TP key not above tp."""
        keys = [int(k) for k in self.memory_fraction_by_tp if int(k) <= tp]
        return self.memory_fraction_by_tp[str(max(keys))] if keys else self.memory_fraction

    def on(self, backend: Backend | None) -> "EngineProfile":
        """The profile as it runs on `backend`: its by_backend values in place of its own."""
        over = self.by_backend.get(backend.value, {}) if backend else {}
        if not over:
            return self
        shares = ("format_efficiency", "memory_efficiency")  # per format / memory technology: merged key by key
        plain = {k: tuple(v) if isinstance(v, list) else v for k, v in over.items() if k not in shares}
        merged = {k: {**getattr(self, k), **over.get(k, {})} for k in shares}
        return replace(self, **plain, **merged, by_backend={})

    def kernel_on(self, fmt: str, gpu_flops: dict[str, float]) -> str:
        """The format_efficiency key of the kernels that read `fmt` on a GPU with these tensor
        FLOP/s by dtype: its weight-only fallback where the GPU has no math for it."""
        fallback = self.weight_only_fallback.get(fmt)
        return fallback if fallback and not gpu_flops.get(fmt) else fmt

    def bw_eff(self, fmt: str, memory_type: str) -> float:
        family = "int4" if fmt.startswith("int4") else fmt
        base = self.memory_efficiency.get(memory_type, self.bw_efficiency)
        return base * self.format_efficiency.get(family, 1.0)


@cache
def engines() -> dict[str, EngineProfile]:
    data = load_toml(os.path.join(os.path.dirname(__file__), "engines.toml"))
    serving = data.get("serving", {})
    out = {}
    for k, v in data["engine"].items():
        extra = {f: tuple(x) if isinstance(x, list) else x for f, x in serving.get(k, {}).items()}
        extra["backend_vendors"] = {b: tuple(x) for b, x in extra.get("backend_vendors", {}).items()}
        # a backend's values from the source (serving) and fitted (engine) make one by_backend
        read, fitted = extra.pop("by_backend", {}), v.get("by_backend", {})
        by_backend = {b: {**read.get(b, {}), **fitted.get(b, {})} for b in {*read, *fitted}}
        extra["fp8_quant_after"] = quant_after(extra.get("fp8_quant_after", ()), f"serving.{k}.fp8_quant_after")
        if "vendors" not in extra and extra["backend_vendors"]:  # the makers its builds run on
            extra["vendors"] = tuple(sorted({x for vs in extra["backend_vendors"].values() for x in vs}))
        out[k] = _checked_backends(EngineProfile(id=k, **{**v, "by_backend": by_backend}, **extra))
    return out


def quant_after(names, where: str) -> tuple[QuantAfter, ...]:
    """QuantAfter members by value; a name outside them is refused (a typo would price nothing)."""
    known = {q.value for q in QuantAfter}
    odd = [n for n in names if n not in known]
    if odd:
        raise DecodescopeError(f"{where}: unknown producer(s) {', '.join(map(str, odd))}", f"use {', '.join(sorted(known))}")
    return tuple(QuantAfter(n) for n in names)


def _checked_backends(e: EngineProfile) -> EngineProfile:
    """Refuse a backend name engines.toml spells outside Backend (a typo would price nothing)."""
    known = {b.value for b in Backend}
    named = set(e.backend_by_vendor.values()) | set(e.backend_vendors) | set(e.by_backend)
    if named - known:
        raise DecodescopeError(f"engines.toml: engine {e.id} names unknown backend(s) {', '.join(sorted(named - known))}",
                               f"use {', '.join(sorted(known))}")
    odd = {k for over in e.by_backend.values() for k in over} - set(BACKEND_OVERRIDABLE)
    if odd:
        raise DecodescopeError(f"engines.toml: engine {e.id} by_backend sets {', '.join(sorted(odd))}",
                               f"a backend may set only {', '.join(BACKEND_OVERRIDABLE)}")
    return e


def get_engine(name: str) -> EngineProfile:
    key = name.strip().lower()
    if key not in engines():
        raise DecodescopeError(f"unknown engine '{name}'", f"use one of: {' '.join(engines())}")
    return engines()[key]
