"""Levers: the same deployment re-run with one change each, ranked by expected tok/s.
Only changes the engine can make and that gain are kept; GPUs that come out the same
are listed once."""

from dataclasses import dataclass, replace
from math import ceil

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import all_gpus, get_interconnect
from decodescope.model.deployment import Deployment, check, engine_format
from decodescope.model.engines import Backend, engines
from decodescope.model.formats import WeightFormat, parse_format
from decodescope.model.memory import memory_fit, memory_need
from decodescope.model.predict import ceiling_estimate, expected_estimate

OTHER_GPUS = 3  # how many other GPUs of the database to list (the fastest that fit)
MIN_GAIN = 0.005  # a lever must gain at least this much to be listed
WEIGHT_ONLY_ENGINES = ("llamacpp", "exllamav2")  # engines whose own formats no other engine serves


@dataclass(frozen=True)
class Lever:
    """One single change to the deployment and what it would give."""
    lever: str  # short label, e.g. "weights fp8"
    change: str  # what changes, in words
    tok_s: float  # expected tok/s per user with the change
    ceiling_tok_s: float
    gain: float  # tok_s / current expected tok/s - 1
    fits: bool  # the changed deployment fits in memory

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _formats(arch: Arch, d: Deployment) -> list[tuple[str, str, Deployment]]:
    out = []
    for name in d.engine.formats:
        f = engine_format(parse_format(name, arch), d.engine)
        if f.bits < d.weights.bits and (not name.startswith("nvfp4") or d.gpu.flops.get("fp4")):
            out.append((f"weights {name}", f"{name} weights, not {d.weights.name}", replace(d, weights=f)))
    return out


def _split(d: Deployment) -> list[tuple[str, str, Deployment]]:
    link = d.link if d.gpus > 1 else get_interconnect(d.gpu.link)
    if "tp" in d.engine.splits:
        tp = 2 * d.tp
        return [(f"tp {tp}", f"TP {d.tp} -> {tp} ({tp * d.pp} GPUs)", replace(d, tp=tp, link=link))]
    pp = 2 * d.pp
    return [(f"pp {pp}", f"layer split over {d.tp * pp} GPUs (PP {pp})", replace(d, pp=pp, link=link))]


def _gpus(d: Deployment) -> list[tuple[str, str, Deployment]]:
    """Other GPUs with more bandwidth or more BF16 FLOP/s: a part with less of both cannot gain.
    Each runs the engine's own profile: a calibration measured this device, not that one."""
    out, profile = [], engines()[d.engine.id]
    for g in all_gpus():
        if g.id == d.gpu.id or not profile.runs_on_vendor(g.vendor) or not (g.memory_bw_bytes_s > d.gpu.memory_bw_bytes_s
                                    or g.peak_flops("bf16") > d.gpu.peak_flops("bf16")):
            continue
        link = d.link if d.gpus == 1 else get_interconnect(g.link)
        out.append((f"gpu {g.id}", f"{d.gpus} x {g.id} instead of {d.gpu.id}", replace(d, gpu=g, link=link, engine=profile)))
    return out


def _serves(engine_id: str, fmt: WeightFormat) -> bool:
    """GGUF and EXL2 formats run on their own engine only, and those engines run only them."""
    kind = fmt.name.split(":")[0] + ":" if fmt.name.startswith("bpw:") else fmt.name
    if engine_id in WEIGHT_ONLY_ENGINES:
        return any(f.startswith(kind) for f in engines()[engine_id].formats)
    return not any(kind in engines()[e].formats or kind == "bpw:" for e in WEIGHT_ONLY_ENGINES)


def _engines(arch: Arch, d: Deployment, bound: str) -> list[tuple[str, str, Deployment]]:
    """When host time or kernel floors bound the round, another engine (CUDA graphs,
    less host work per pass) is the lever: one that runs on this GPU's maker and whose
    profile published rows measured there (its costs on another maker's GPUs say nothing
    of these: SGLang's ROCm build runs other kernels than its CUDA one), and that serves the model."""
    if bound not in ("host", "latency"):
        return []
    return [(f"engine {e.id}", f"{e.description}, not {d.engine.id}",
             replace(d, engine=e, weights=engine_format(d.weights, e)))
            for e in engines().values() if e.id not in (d.engine.id, "generic") and _serves(e.id, d.weights)
            and e.runs_on_vendor(d.gpu.vendor) and d.gpu.vendor in e.measured_on and e.serves(arch.model_type)]


def _backends(d: Deployment) -> list[tuple[str, str, Deployment]]:
    """The engine's other builds for this GPU (llama.cpp on a Radeon: HIP or Vulkan): their
    kernels differ, e.g. for a MoE layer's experts (engines.toml serving.llamacpp)."""
    now = d.runs_on
    if now is None:
        return []
    return [(f"backend {b}", f"{d.engine.id} built for {b}, not {now.value}", replace(d, backend=Backend(b)))
            for b, vendors in d.engine.backend_vendors.items() if b != now.value and d.gpu.vendor in vendors]


def _candidates(arch: Arch, d: Deployment, bound: str) -> list[tuple[str, str, Deployment]]:
    out = _formats(arch, d)
    if d.kv_dtype != "fp8":
        out.append(("kv fp8", f"FP8 KV cache, not {d.kv_dtype}", replace(d, kv_dtype="fp8")))
    if d.spec.k:
        a = d.spec.accept_len + 1
        k = max(d.spec.k, ceil(a) - 1)
        out.append(("accept +1", f"accept_len {d.spec.accept_len:g} -> {a:g}"
                    + (f", {k} draft steps" if k != d.spec.k else ""), replace(d, spec=replace(
                        d.spec, k=k, accept_len=a, draft_tokens=max(d.spec.draft_tokens, k + 1) if d.spec.draft_tokens else 0))))
    return out + _split(d) + _gpus(d) + _backends(d) + _engines(arch, d, bound)


def levers(arch: Arch, d: Deployment, base_tok_s: float, bound: str = "memory") -> list[Lever]:
    """Every applicable single change that gains, ranked by expected tok/s; of the other
    GPUs only the OTHER_GPUS fastest that fit, one per distinct result."""
    found, gpus, need = [], [], memory_need(arch, d)
    for label, change, nd in _candidates(arch, d, bound):
        gpu = label.startswith("gpu ")
        try:  # another GPU holds the same bytes: its memory need is d's
            fits = memory_fit(arch, nd, need if gpu else None).fits
            if gpu and not fits:
                continue  # only GPUs that fit are listed
            check(arch, nd)
            expected = expected_estimate(arch, nd)
            gain = expected.tok_s / base_tok_s - 1
            if gain < MIN_GAIN:
                continue
            if gpu:
                gpus.append((label, change, nd, expected, gain))
            else:
                found.append(Lever(label, change, expected.tok_s, ceiling_estimate(arch, nd).tok_s, gain, fits))
        except DecodescopeError:  # change not possible (e.g. TP not dividing heads)
            continue
    return sorted(found + _distinct_gpus(arch, gpus), key=lambda x: -x.tok_s)


def _distinct_gpus(arch: Arch, gpus: list[tuple]) -> list[Lever]:
    """GPUs that fit, fastest first; parts with the same result (gb200 and b300 share
    bandwidth and FLOP/s) become one lever naming them all. A result is the rounded
    expected and ceiling tok/s; only the first OTHER_GPUS results are listed, so a GPU's
    ceiling is timed only while it can still be one of them."""
    groups: dict[tuple, list[Lever]] = {}
    for label, change, nd, expected, gain in sorted(gpus, key=lambda g: -g[3].tok_s):
        tok_s = round(expected.tok_s, 1)
        if len(groups) >= OTHER_GPUS and tok_s not in {k[0] for k in list(groups)[:OTHER_GPUS]}:
            break  # slower than every listed result: so is every GPU after it
        try:
            ceiling = ceiling_estimate(arch, nd).tok_s
        except DecodescopeError:
            continue
        groups.setdefault((tok_s, round(ceiling, 1)), []).append(Lever(label, change, expected.tok_s, ceiling, gain, True))
    out = []
    for same in list(groups.values())[:OTHER_GPUS]:
        ids = [x.lever.removeprefix("gpu ") for x in same]
        first = same[0]
        out.append(replace(first, lever="gpu " + " = ".join(ids),
                           change=first.change.replace(ids[0], " or ".join(ids), 1)))
    return out
