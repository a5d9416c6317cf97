"""Levers: the same deployment re-run with one change each, ranked by expected tok/s."""

from dataclasses import dataclass, replace
from math import ceil

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import all_gpus, get_interconnect
from decodescope.model.deployment import Deployment, Spec, engine_format
from decodescope.model.formats import parse_format
from decodescope.model.memory import memory_fit
from decodescope.model.predict import estimates

OTHER_GPUS = 3  # how many other GPUs of the database to list (the fastest that fit)


@dataclass(frozen=True)
class Lever:
    lever: str  # short label, e.g. "weights fp8"
    change: str  # what changes, in words
    tok_s: float  # expected tok/s per user with the change
    ceiling_tok_s: float
    gain: float  # tok_s / current expected tok/s - 1
    fits: bool  # the changed deployment fits in memory

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _run(arch: Arch, d: Deployment) -> tuple[float, float, bool]:
    ceiling, expected = estimates(arch, d)
    return expected.tok_s, ceiling.tok_s, memory_fit(arch, d).fits


def _candidates(arch: Arch, d: Deployment) -> list[tuple[str, str, Deployment]]:
    out = []
    bits = d.weights.bits
    for fmt, label in (("fp8", "FP8 weights"), ("int4-g128", "INT4 weights (g128)"), ("nvfp4", "NVFP4 weights")):
        f = engine_format(parse_format(fmt, arch), d.engine)
        if f.bits < bits and (fmt != "nvfp4" or d.gpu.flops.get("fp4")):
            out.append((f"weights {fmt}", f"{label}, not {d.weights.name}", replace(d, weights=f)))
    if d.kv_dtype != "fp8":
        out.append(("kv fp8", f"FP8 KV cache, not {d.kv_dtype}", replace(d, kv_dtype="fp8")))
    if d.spec.k:
        a = d.spec.accept_len + 1
        k = max(d.spec.k, ceil(a) - 1)
        out.append(("accept +1", f"accept_len {d.spec.accept_len:g} -> {a:g}"
                    + (f", {k} draft steps" if k != d.spec.k else ""), replace(d, spec=Spec(d.spec.method, k, a))))
    tp = 2 * d.tp
    out.append((f"tp {tp}", f"TP {d.tp} -> {tp} ({tp * d.pp} GPUs)",
                replace(d, tp=tp, link=d.link if d.gpus > 1 else get_interconnect(d.gpu.link))))
    for g in all_gpus():
        if g.id != d.gpu.id:
            link = d.link if d.gpus == 1 else get_interconnect(g.link)
            out.append((f"gpu {g.id}", f"{d.gpus} x {g.id} instead of {d.gpu.id}", replace(d, gpu=g, link=link)))
    return out


def levers(arch: Arch, d: Deployment, base_tok_s: float) -> list[Lever]:
    """Every applicable single change, ranked by expected tok/s; of the other GPUs only
    the OTHER_GPUS fastest that fit are kept."""
    found = []
    for label, change, nd in _candidates(arch, d):
        try:
            tok_s, ceil_tok_s, fits = _run(arch, nd)
        except (DecodescopeError, KeyError):  # change not possible (e.g. TP not dividing heads)
            continue
        found.append(Lever(label, change, tok_s, ceil_tok_s, tok_s / base_tok_s - 1, fits))
    gpus = sorted((x for x in found if x.lever.startswith("gpu ") and x.fits), key=lambda x: -x.tok_s)
    rest = [x for x in found if not x.lever.startswith("gpu ")]
    return sorted(rest + gpus[:OTHER_GPUS], key=lambda x: -x.tok_s)
