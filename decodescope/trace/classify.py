"""Kernel name -> class, from the ordered rule table in kernels.toml."""

import re
import tomllib
from enum import StrEnum
from functools import cache
from importlib import resources


class KernelClass(StrEnum):
    GEMM = "gemm"
    ATTENTION = "attention"
    LINEAR_ATTENTION = "linear_attention"  # GDN / FLA / Mamba / causal conv1d
    MOE_ROUTING = "moe_routing"
    MOE_GEMM = "moe_gemm"
    ALLREDUCE = "allreduce"  # NCCL, custom and fused allreduce(+norm)
    COLLECTIVE = "collective"  # other collectives: all-gather, reduce-scatter, send/recv, all-to-all
    NORM_ACT_ROPE = "norm_act_rope"
    SAMPLING = "sampling"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    ELEMENTWISE = "elementwise"  # known generic kernels (adds, casts, reductions)
    UNKNOWN = "unknown"  # no rule matched: listed by name, never dropped


@cache
def _rules() -> tuple[tuple[re.Pattern, KernelClass], ...]:
    table = tomllib.loads(resources.files("decodescope.trace").joinpath("kernels.toml").read_text())
    return tuple((re.compile(r["pattern"], re.I), KernelClass(r["class"])) for r in table["rule"])


@cache
def classify(name: str, cat: str = "kernel") -> KernelClass:
    """The class of one GPU event; memcpy / memset events by their trace category."""
    if cat == "gpu_memcpy":
        return KernelClass.MEMCPY
    if cat == "gpu_memset":
        return KernelClass.MEMSET
    for pattern, cls in _rules():
        if pattern.search(name):
            return cls
    return KernelClass.UNKNOWN
