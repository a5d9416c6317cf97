"""Fit an engine profile's free parameters to published rows, from a neutral start.
Loaded profiles are never changed: every candidate is a new frozen EngineProfile.

The search does not run the model for every candidate. A row's expected round is, by
the model's construction, linear in the fixed costs (kernel floor, allreduce latency
scale, host times) and, for memory-bound operators, in 1 / bandwidth efficiency. A few
model runs per row at the neutral start give those coefficients (`Linear`); the search
then costs arithmetic only. Reported errors always come from the model itself."""

import math
import statistics
from dataclasses import dataclass, replace

from decodescope.model.engines import Backend, EngineProfile
from decodescope.validate.rows import Case

# (low, high) per parameter group; the measured bounds come from an NVIDIA H200
# (tests/data/h200/gpu_check_results.json, README "Measured on an NVIDIA H200")
BOUNDS = {
    "bw_efficiency": (0.3, 0.90),  # high: a device-to-device copy reached 4.30 of 4.8 TB/s
    "memory_efficiency": (0.3, 0.90),  # the same, per memory technology
    "format_efficiency": (0.3, 1.0),  # a format's kernels relative to the 16-bit ones
    "kernel_floor_us": (1.1, 6.7),  # 1.1 us per kernel replayed in a CUDA graph, 6.7 us per eager launch
    "host_ms_per_pass": (0.0026, 8.0),  # low: the CPU enqueue of one CUDA graph replay, 2.6 us
    "host_ms_per_draft_step": (0.0, 12.0),
    "allreduce_latency_scale": (0.5, 6.0),
    "flops_efficiency": (0.3, 0.79),  # high: a bf16 matmul reached 786 of 989 TFLOP/s
    # a batched MoE kernel's time over the mat-vec kernel's for the same experts, less 1: up to
    # 4 (5x as long); per token each expert multiplies, up to 2: Vulkan's tiled kernel of 2025
    # dequantized each K-quant tile to fp16 and multiplied it in fp16 (engines.toml
    # serving.llamacpp), so that a token could cost more than a whole read of its expert
    "moe_batched_slowdown": (0.0, 4.0),
    "moe_batched_slowdown_per_token": (0.0, 2.0),
    "moe_matvec_efficiency": (0.3, 1.0),  # a backend's MoE mat-vec kernel relative to its dense ones
}
# the start of every fit: no engine-specific knowledge, physical middle values
NEUTRAL = {"bw_efficiency": 0.8, "memory_efficiency": 0.8, "format_efficiency": 1.0, "kernel_floor_us": 1.1,
           "host_ms_per_pass": 0.5, "host_ms_per_draft_step": 0.5, "allreduce_latency_scale": 1.0,
           "flops_efficiency": 0.6, "moe_batched_slowdown": 0.0, "moe_batched_slowdown_per_token": 0.0,
           "moe_matvec_efficiency": 1.0}
# engines whose per-kernel cost is neither measured mode (a CUDA graph replay, an eager
# PyTorch launch): llama.cpp (CUDA graphs on CUDA since mid 2024, Metal command buffers),
# ExLlamaV2 (C++ launches without graphs), MLC (TVM runtime); SGLang, whose floor then holds what
# its kernels cost beyond their bytes on top of the graph launch (the H200 trace's GEMVs: 4.5 us,
# tests/test_physics.py). The others keep their profile's measured one (engines.toml).
FITTED_FLOOR = frozenset({"llamacpp", "exllamav2", "mlc", "sglang"})
# engines whose kernels reach a different share of each memory technology (hbm / gddr / lpddr)
SPLIT_MEMORY = frozenset({"llamacpp", "mlc"})
# engines with rows whose time is mostly compute-bound GEMMs (TensorRT-LLM's static-batch
# tables: hundreds of sequences per decode step, context passes over 10^5 tokens): their
# share of the datasheet tensor FLOP/s is fitted; the others keep their estimate
FITTED_FLOPS = frozenset({"trtllm"})
LINEAR = ("kernel_floor_us", "host_ms_per_pass", "host_ms_per_draft_step", "allreduce_latency_scale",
          "moe_batched_slowdown", "moe_batched_slowdown_per_token")
MOE_BATCHED = ("moe_batched_slowdown", "moe_batched_slowdown_per_token")
SIXTEEN_BIT = ("bf16", "fp16")
# efficiencies that divide a stream's bandwidth as a format's does (Linear.formats: b / (m x f))
INVERSE = ("format_efficiency", "moe_matvec_efficiency")


# fitted parameters held in a dict of the profile, one entry per key (the name's part after the dot)
DICT_GROUPS = ("memory_efficiency", "format_efficiency")


# a parameter of one backend's kernels (EngineProfile.by_backend) is named "<parameter>@<backend>":
# kernel_floor_us@hip, format_efficiency.fp8@hip; it is fitted on that backend's rows only


def _group(name: str) -> str:
    return name.split("@")[0].split(".")[0]


def _on_backend(name: str) -> bool:
    return "@" in name


def bounds(name: str) -> tuple[float, float]:
    return BOUNDS[_group(name)]


def value(profile: EngineProfile, name: str) -> float:
    if _on_backend(name):
        base, backend = name.split("@")
        return value(profile.on(Backend(backend)), base)
    if name.startswith("memory_efficiency."):
        return profile.memory_efficiency.get(name.split(".")[1], profile.bw_efficiency)
    if name.startswith("format_efficiency."):
        return profile.format_efficiency.get(name.split(".")[1], 1.0)
    return getattr(profile, name)


def with_values(profile: EngineProfile, values: dict[str, float]) -> EngineProfile:
    """A new profile with `values` set (dotted names go into their dict, name@backend into
    by_backend); `profile` stays as it was."""
    own = {k: v for k, v in values.items() if not _on_backend(k)}
    plain = {k: v for k, v in own.items() if "." not in k}
    groups = {g: {**getattr(profile, g), **{k.split(".")[1]: v for k, v in own.items() if _group(k) == g}}
              for g in DICT_GROUPS}
    by_backend = {b: {**over, **{g: dict(over.get(g, {})) for g in DICT_GROUPS}}
                  for b, over in profile.by_backend.items()}
    for k, v in values.items():
        if _on_backend(k):
            base, backend = k.split("@")
            over = by_backend.setdefault(backend, {g: {} for g in DICT_GROUPS})
            if "." in base:
                over[_group(base)][base.split(".")[1]] = v
            else:
                over[base] = v
    by_backend = {b: {k: v for k, v in over.items() if v != {}} for b, over in by_backend.items()}
    return replace(profile, **plain, **groups, by_backend=by_backend)


def format_family(name: str) -> str:
    """As EngineProfile.bw_eff groups formats: int4-gN share one efficiency."""
    return "int4" if name.startswith("int4") else name


def candidate_params(engine: str, cases: list[Case]) -> list[str]:
    """The parameters the rows of `engine` could inform (those they do not move drop out later)."""
    if engine in SPLIT_MEMORY:
        names = sorted({f"memory_efficiency.{c.deployment.gpu.memory_type}" for c in cases})
    else:
        names = ["bw_efficiency"]
    # the kernels that read each row's format on its GPU (FP8 without FP8 math: a weight-only kernel's)
    fmts = {c.deployment.profile.kernel_on(f.name, c.deployment.gpu.flops)
            for c in cases for f in (c.deployment.weights, c.deployment.draft_weights) if f}
    # a config-derived mixture of formats ("mixed (config)") has no one efficiency to fit
    names += sorted({f"format_efficiency.{format_family(f)}" for f in fmts
                     if f not in SIXTEEN_BIT and f.replace("-", "_").replace(".", "_").isidentifier()})
    names += ["kernel_floor_us"] if engine in FITTED_FLOOR else []
    names += ["flops_efficiency"] if engine in FITTED_FLOPS else []
    # engines with a batched MoE kernel: its costs (rows that never leave the mat-vec kernel drop out)
    names += list(MOE_BATCHED) if any(c.deployment.engine.moe_matvec_max_tokens for c in cases) else []
    names += ["host_ms_per_pass", "host_ms_per_draft_step", "allreduce_latency_scale"]
    return names + backend_params(engine, cases)


def backend_params(engine: str, cases: list[Case]) -> list[str]:
    """The parameters engines.toml sets apart for a backend (by_backend), each to be fitted on
    the rows that ran on it (name@backend); the loaded profile names them, with its sources."""
    out = []
    for c in cases:
        b = c.deployment.runs_on
        over = c.deployment.engine.by_backend.get(b.value, {}) if b else {}
        # the row's formats and the kernels they run (a GGUF file type such as mxfp4_moe runs mxfp4 and q8_0)
        fmts = {format_family(k) for f in (c.deployment.weights, c.deployment.draft_weights) if f
                for k in (f.name, *f.kernels)}
        out += [f"kernel_floor_us@{b.value}"] if "kernel_floor_us" in over and engine in FITTED_FLOOR else []
        out += [f"format_efficiency.{f}@{b.value}" for f in sorted(fmts & set(over.get("format_efficiency", {})))]
        memory = c.deployment.gpu.memory_type
        out += [f"memory_efficiency.{memory}@{b.value}"] if memory in over.get("memory_efficiency", {}) else []
        out += [f"{p}@{b.value}" for p in ("allreduce_latency_scale", *MOE_BATCHED, "moe_matvec_efficiency") if p in over]
    return list(dict.fromkeys(out))


def neutral(profile: EngineProfile, params: list[str]) -> EngineProfile:
    """`profile` with every fitted parameter at its neutral value (format and memory
    efficiencies and the fitted by_backend values cleared first); what is not fitted (measured floors,
    FLOP/s share, what a backend's source sets) stays."""
    read = {b: {k: v for k, v in over.items() if k not in BOUNDS and k not in DICT_GROUPS}
            for b, over in profile.by_backend.items()}
    base = replace(profile, bw_efficiency=NEUTRAL["bw_efficiency"], by_backend={b: o for b, o in read.items() if o},
                   **{g: {} for g in DICT_GROUPS})
    # a backend's parameters start at the profile's own (no by_backend entry until fitted)
    return with_values(base, {p: NEUTRAL[_group(p)] for p in params if not _on_backend(p)})


@dataclass(frozen=True)
class Linear:
    """A row's expected round (ms) as a function of the fitted parameters:
    const + inv / m + sum(b / (m * f)) + sum(slope * value) + compute / flops_efficiency,
    m the row's memory efficiency."""
    const: float
    m: str  # the parameter that sets this row's memory efficiency
    inv: float  # ms at efficiency 1 of the streams in no fitted format (16-bit weights, KV, state)
    formats: tuple[tuple[str, float], ...]  # (format parameter, ms at efficiency 1)
    slopes: tuple[tuple[str, float], ...]  # (parameter, ms per unit)
    compute: float = 0.0  # ms of the compute-bound operators at flops_efficiency 1 (where fitted)

    def round_ms(self, v: dict[str, float]) -> float:
        m = v[self.m]
        t = self.const + self.inv / m
        for name, b in self.formats:
            t += b / (m * v[name])
        for name, s in self.slopes:
            t += s * v[name]
        return t + (self.compute / v["flops_efficiency"] if self.compute else 0.0)

    @property
    def params(self) -> set[str]:
        extra = {"flops_efficiency"} if self.compute else set()
        return {self.m} | {n for n, _ in self.formats} | {n for n, _ in self.slopes} | extra


def linearise(case: Case, start: EngineProfile, params: list[str]) -> Linear:
    """The coefficients of `Linear` from model runs at `start` and one step in each parameter."""
    v0 = {p: value(start, p) for p in params}

    def ms(**step: float) -> float:
        return case.expected_round_ms(with_values(start, {**v0, **step}))

    t0 = ms()
    mem = f"memory_efficiency.{case.deployment.gpu.memory_type}"
    backend = case.deployment.runs_on
    # a backend that sets its own share of this memory (by_backend) is fitted on its rows alone
    own = f"{mem}@{backend.value}" if backend else None
    m = own if own in v0 else mem if mem in v0 else "bw_efficiency"
    m0, tiny = v0.get(m, start.bw_efficiency), 1e-9 * t0
    slopes = tuple((p, s) for p in params if _group(p) in LINEAR for s in [ms(**{p: v0[p] + 1.0}) - t0] if abs(s) > tiny)
    formats = tuple((p, b) for p in params if _group(p) in INVERSE
                    for b in [(ms(**{p: 0.8 * v0[p]}) - t0) / (1 / (m0 * 0.8 * v0[p]) - 1 / (m0 * v0[p]))]
                    if abs(b) > tiny)
    total = (ms(**{m: 0.8 * m0}) - t0) / (1 / (0.8 * m0) - 1 / m0)  # inv + sum(b / f0)
    inv = total - sum(b / v0[p] for p, b in formats)
    compute = 0.0
    if "flops_efficiency" in v0:  # the same secant in 1 / flops_efficiency
        f0 = v0["flops_efficiency"]
        compute = (ms(flops_efficiency=0.8 * f0) - t0) / (1 / (0.8 * f0) - 1 / f0)
        compute = compute if abs(compute) > tiny else 0.0
    partial = Linear(0.0, m, inv, formats, slopes, compute)
    return replace(partial, const=t0 - partial.round_ms(v0 | {m: m0}))


@dataclass(frozen=True)
class Sample:
    """What the search needs of one row."""
    id: str
    source: str
    tokens: float  # per round in the reported figure (Case.tokens)
    measured: float  # tok/s
    linear: Linear

    @classmethod
    def of(cls, case: Case, start: EngineProfile, params: list[str]) -> "Sample":
        return cls(case.id, case.source, case.tokens, case.measured, linearise(case, start, params))

    def tok_s(self, v: dict[str, float]) -> float:
        return self.tokens * 1e3 / self.linear.round_ms(v)


# the fit's loss per row: sqrt(d^2 + EPS^2) - EPS of the log error d, i.e. |d| (robust: one
# wild row cannot dominate) for errors well above 1 %, smooth below: the L1 loss's kinks at
# every row's zero stopped the simplex on ridges, at points that depended on where it started
EPS = 0.01


# a weak pull of each fitted value towards its neutral start, per (value - NEUTRAL)^2 / range^2:
# where rows leave a direction undetermined (two costs seen through one row) the fit stays
# near the neutral start instead of wherever the search stopped; a whole range costs 1e-4 of
# mean loss, a tenth of the 0.001 by which a fit's loss moves when a parameter the rows see is
# off by a few %, so the rows decide everything they see
PRIOR_WEIGHT = 1e-4


def _loss(d: float) -> float:
    return math.sqrt(d * d + EPS * EPS) - EPS


def objective(samples: list[Sample], v: dict[str, float]) -> float:
    """Mean smoothed |log(expected / measured)| (_loss)."""
    return statistics.fmean(_loss(math.log(s.tok_s(v) / s.measured)) for s in samples)


def _compiled(samples: list[Sample], free: list[str], fixed: dict[str, float]):
    """objective() plus the pull towards the neutral values (PRIOR_WEIGHT), as a function of
    the free values only, in a form cheap to call thousands of times (indices instead of
    names, logs of the measurements taken once)."""
    index = {p: i for i, p in enumerate(free)}
    rows = []
    for s in samples:
        lin, base = s.linear, s.linear.const
        for name, c in lin.slopes:
            if name not in index:
                base += c * fixed[name]
        ci = index.get("flops_efficiency", -1) if lin.compute else -1
        if lin.compute and ci < 0:
            base += lin.compute / fixed["flops_efficiency"]
        # a fixed format efficiency folds into the streams at the memory efficiency; a fixed
        # memory efficiency (index -1) is passed as its value
        inv = lin.inv + sum(b / fixed[n] for n, b in lin.formats if n not in index)
        mi = index.get(lin.m, -1)
        rows.append((math.log(s.tokens * 1e3 / s.measured), base, mi, fixed.get(lin.m, 0.0), inv,
                     tuple((index[n], b) for n, b in lin.formats if n in index),
                     tuple((index[n], c) for n, c in lin.slopes if n in index), ci, lin.compute))
    lows, highs = [bounds(p)[0] for p in free], [bounds(p)[1] for p in free]
    centre = [NEUTRAL[_group(p)] for p in free]

    def f(x: list[float]) -> float:
        x = [min(h, max(lo, xi)) for lo, h, xi in zip(lows, highs, x)]
        total = 0.0
        for logged, base, mi, m_fixed, inv, fmts, slopes, ci, compute in rows:
            m = x[mi] if mi >= 0 else m_fixed
            t = base + inv / m + (compute / x[ci] if ci >= 0 else 0.0)
            for j, b in fmts:
                t += b / (m * x[j])
            for j, c in slopes:
                t += c * x[j]
            total += _loss(logged - math.log(t)) if t > 0 else math.inf
        pull = sum(((xi - c) / (h - lo)) ** 2 for xi, c, lo, h in zip(x, centre, lows, highs))
        return total / len(rows) + PRIOR_WEIGHT * pull

    return f


def fit(samples: list[Sample], start: dict[str, float]) -> dict[str, float]:
    """The parameters the samples move, fitted within BOUNDS from `start`. Rows on a backend
    with parameters of its own (name@backend) do not pull the other backends' values: the
    other rows fit the profile's parameters first, then those rows fit their backend's
    parameters and any other that only they inform. A backend's parameter that no sample
    moves is left out: that backend keeps the profile's value, not the neutral start."""
    free = [p for p in start if any(p in s.linear.params for s in samples)]
    start = {p: v for p, v in start.items() if p in free or not _on_backend(p)}
    own = {p for p in free if _on_backend(p)}
    rest = [s for s in samples if not s.linear.params & own]
    if own and rest:
        held = start | fit(rest, {p: v for p, v in start.items() if not _on_backend(p)})
        moved = {p for s in rest for p in s.linear.params}
        return held | _search([s for s in samples if s.linear.params & own], [p for p in free if p not in moved], held)
    return start | _search(samples, free, start)


def _search(samples: list[Sample], free: list[str], start: dict[str, float]) -> dict[str, float]:
    """`free` fitted from `start` (the others held there) by a Nelder-Mead simplex, restarted
    three times from its own best point, in unbounded coordinates z with x = lo + (hi - lo) *
    (1 + sin z) / 2: every point it tries lies within BOUNDS, so no flat region of clipped
    values stalls it at a bound."""
    if not free:
        return {}
    f = _compiled(samples, free, start)
    spans = [bounds(p) for p in free]

    def to_x(z: list[float]) -> list[float]:
        return [lo + (hi - lo) * (1 + math.sin(zi)) / 2 for (lo, hi), zi in zip(spans, z)]

    z = [math.asin(min(1.0, max(-1.0, 2 * (start[p] - lo) / (hi - lo) - 1))) for p, (lo, hi) in zip(free, spans)]
    for _ in range(4):
        z = _nelder_mead(lambda z: f(to_x(z)), z, [0.3] * len(z))
    return dict(zip(free, _clip(free, to_x(z))))


def _clip(names: list[str], x: list[float]) -> list[float]:
    return [min(bounds(n)[1], max(bounds(n)[0], xi)) for n, xi in zip(names, x)]


def _nelder_mead(f, x0: list[float], steps: list[float], evals: int = 3000, tol: float = 1e-10) -> list[float]:
    """Minimise f from x0 (the textbook reflect / expand / contract / shrink rules)."""
    simplex = [list(x0)] + [[xi + (steps[i] if i == j else 0.0) for j, xi in enumerate(x0)] for i in range(len(x0))]
    scores = [f(x) for x in simplex]
    for _ in range(evals):
        order = sorted(range(len(simplex)), key=scores.__getitem__)
        simplex, scores = [simplex[i] for i in order], [scores[i] for i in order]
        if scores[-1] - scores[0] < tol:
            break
        centre = [sum(c) / (len(simplex) - 1) for c in zip(*simplex[:-1])]
        line = list(zip(centre, simplex[-1]))

        def towards(t: float, line=line) -> list[float]:  # the line from the centre (0) through the worst point (1)
            return [c + t * (w - c) for c, w in line]

        r = towards(-1.0)
        fr = f(r)
        if fr < scores[0]:
            e = towards(-2.0)
            fe = f(e)
            simplex[-1], scores[-1] = (e, fe) if fe < fr else (r, fr)
        elif fr < scores[-2]:
            simplex[-1], scores[-1] = r, fr
        else:
            c = towards(0.5)
            fc = f(c)
            if fc < scores[-1]:
                simplex[-1], scores[-1] = c, fc
            else:
                simplex = [simplex[0]] + [[b + 0.5 * (a - b) for a, b in zip(x, simplex[0])] for x in simplex[1:]]
                scores = [scores[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(len(simplex)), key=scores.__getitem__)]


def leave_one_source_out(samples: list[Sample], start: dict[str, float]) -> dict[str, dict[str, float]]:
    """Source -> the values fitted from `start` on the rows of every other source
    (empty with fewer than two sources: nothing to hold out against)."""
    sources = sorted({s.source for s in samples})
    if len(sources) < 2:
        return {}
    return {src: fit([s for s in samples if s.source != src], start) for src in sources}


def at_bounds(profile: EngineProfile, params: list[str]) -> list[str]:
    """The parameters at (within 0.5 % of the range) or outside their bounds."""
    out = []
    for p in params:
        lo, hi = bounds(p)
        x, tol = value(profile, p), 0.005 * (hi - lo)
        if x <= lo + tol or x >= hi - tol:
            out.append(f"{p} = {x:g} (bounds {lo:g}..{hi:g})")
    return out
