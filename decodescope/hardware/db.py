"""Loads decodescope/hardware/gpus.toml once and looks GPUs and interconnects up by name."""

import functools
import os
import re

from decodescope.datafile import load_toml
from decodescope.errors import DecodescopeError
from decodescope.hardware.spec import GPU, Interconnect

DATA = os.path.join(os.path.dirname(__file__), "gpus.toml")

# human-unit TOML key -> (GPU field or flops dtype, factor to SI)
_SCALARS = {
    "memory_gb": ("memory_bytes", 1e9),  # GB = 1e9 bytes, as vendors print it
    "memory_bw_gb_s": ("memory_bw_bytes_s", 1e9),
    "link_bw_gb_s": ("link_bw_bytes_s", 1e9),  # per direction
    "pcie_gen": ("pcie_gen", 1),
    "pcie_lanes": ("pcie_lanes", 1),
}
_FLOPS = {  # dense tensor rates; TOP/s counts as FLOP/s for int8
    "bf16_tflops": "bf16",
    "fp16_tflops": "fp16",
    "fp8_tflops": "fp8",
    "int8_tops": "int8",
    "fp4_tflops": "fp4",
}
_TEXT = ("name", "vendor", "aliases", "link", "memory_type", "p2p", "link_peers", "sources")
MEMORY_TYPES = ("hbm", "gddr", "lpddr")
NUMERIC_KEYS = (*_SCALARS, *_FLOPS)
# vendor words people type in front of a product name ("NVIDIA GeForce RTX 4090")
_PREFIXES = ("nvidia-", "amd-", "apple-", "intel-", "geforce-", "tesla-", "instinct-")


def normalize(name: str) -> str:
    """Lower-case, and any run of spaces, underscores or punctuation becomes one '-'."""
    return re.sub(r"[^a-z0-9.+]+", "-", name.strip().lower()).strip("-")


@functools.cache
def _raw() -> dict:
    return load_toml(DATA)


@functools.cache
def _gpus() -> dict[str, GPU]:
    return {gid: _gpu(gid, table) for gid, table in _raw()["gpu"].items()}


@functools.cache
def _interconnects() -> dict[str, Interconnect]:
    return {iid: _interconnect(iid, t) for iid, t in _raw()["interconnect"].items()}


@functools.cache
def _names() -> dict[str, str]:
    """Every normalized id and alias -> GPU id."""
    names = {}
    for gid, gpu in _gpus().items():
        for name in (gid, *gpu.aliases):
            key = normalize(name)
            if names.setdefault(key, gid) != gid:
                raise _data_error(f"name '{name}' is claimed by both {names[key]} and {gid}")
    return names


def _data_error(what: str) -> DecodescopeError:
    return DecodescopeError(f"{DATA}: {what}", "fix the GPU database (every number needs a source)")


def _gpu(gid: str, t: dict) -> GPU:
    unknown = set(t) - set(_TEXT) - set(NUMERIC_KEYS)
    missing = {"name", "vendor", "link", "memory_type", *_SCALARS} - set(t)
    if unknown or missing:
        raise _data_error(f"gpu.{gid}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    sources = t.get("sources", {})
    unsourced = [k for k in (*NUMERIC_KEYS, "link", "memory_type", "p2p", "link_peers") if k in t and not sources.get(k)]
    if unsourced:
        raise _data_error(f"gpu.{gid} has numbers without a source: {unsourced}")
    if t["link"] not in _raw()["interconnect"]:
        raise _data_error(f"gpu.{gid} link '{t['link']}' is not an [interconnect.*] table")
    if t["memory_type"] not in MEMORY_TYPES:
        raise _data_error(f"gpu.{gid} memory_type '{t['memory_type']}' is not one of {MEMORY_TYPES}")
    peers = t.get("link_peers", 1)
    if type(peers) is not int or peers < 1:
        raise _data_error(f"gpu.{gid} link_peers {peers!r} is not a whole number >= 1")
    scalars = {field: t[k] * f for k, (field, f) in _SCALARS.items()}
    return GPU(
        id=gid,
        name=t["name"],
        vendor=t["vendor"],
        aliases=tuple(normalize(a) for a in t.get("aliases", ())),
        flops={dtype: t[k] * 1e12 for k, dtype in _FLOPS.items() if k in t},
        link=t["link"],
        memory_type=t["memory_type"],
        p2p=t.get("p2p", True),
        link_peers=peers,
        sources={_si_key(k): v for k, v in sources.items()},
        **scalars,
    )


def _si_key(key: str) -> str:
    # sources are keyed by the SI field they document: "memory_bytes", "flops.bf16"
    if key in _FLOPS:
        return f"flops.{_FLOPS[key]}"
    return _SCALARS.get(key, (key,))[0]


def _interconnect(iid: str, t: dict) -> Interconnect:
    if not t.get("source"):
        raise _data_error(f"interconnect.{iid} has no source")
    return Interconnect(
        id=iid,
        description=t["description"],
        allreduce_latency_s=t["allreduce_latency_us"] / 1e6,
        nccl_latency_s=t["nccl_latency_us"] / 1e6,
        bw_efficiency=t["bw_efficiency"],
        source=t["source"],
        nccl_hop_latency_s=t.get("nccl_hop_latency_us", 0.0) / 1e6,
        nccl_latency_gpus=t.get("nccl_latency_gpus", 2),
    )


def _candidates(name: str):
    key = normalize(name)
    yield key
    # strip stacked vendor words one at a time: "nvidia-geforce-rtx-4090" -> "rtx-4090"
    while prefix := next((p for p in _PREFIXES if key.startswith(p)), None):
        key = key[len(prefix) :]
        yield key


@functools.cache
def cpu_device() -> GPU:
    """The host CPU ([device.cpu]): no datasheet numbers; a calibration file gives them
    (decodescope.hardware.calibration.calibrated_gpu)."""
    t = _raw()["device"]["cpu"]
    return GPU(id="cpu", name=t["name"], vendor=t["vendor"], aliases=(), memory_bytes=0.0, memory_bw_bytes_s=0.0,
               flops={}, link=t["link"], link_bw_bytes_s=0.0, pcie_gen=0, pcie_lanes=0,
               memory_type=t["memory_type"], p2p=False,
               sources=dict.fromkeys(("memory_bytes", "memory_bw_bytes_s"),
                                     "none: measured per machine by `decodescope calibrate --device cpu`"))


def get_gpu(name: str) -> GPU:
    """Look a GPU up by id, alias or marketing name ("RTX A6000", "nvidia_h100_80gb_hbm3"),
    or "cpu" for the host CPU.

    Case-insensitive; spaces, underscores and '-' are the same. Raises DecodescopeError
    naming the closest ids when nothing matches."""
    if normalize(name) == "cpu":
        return cpu_device()
    names = _names()
    for key in _candidates(name):
        if key in names:
            return _gpus()[names[key]]
    import difflib  # only for the error's hint

    close = difflib.get_close_matches(normalize(name), list(names), n=5, cutoff=0.5)
    ids = list(dict.fromkeys(names[c] for c in close))[:3]
    hint = f"closest: {', '.join(ids)}; " if ids else ""
    raise DecodescopeError(f"unknown GPU '{name}'", f"{hint}list every GPU with `decodescope gpus`")


def all_gpus() -> list[GPU]:
    """Every GPU in the database, in file order."""
    return list(_gpus().values())


def get_interconnect(name: str) -> Interconnect:
    """Look an interconnect class up by id ("nvlink", "pcie-sys", ...)."""
    ics = _interconnects()
    key = normalize(name)
    if key in ics:
        return ics[key]
    raise DecodescopeError(
        f"unknown interconnect '{name}'", f"use one of: {', '.join(ics)} (see `decodescope gpus --links`)"
    )


def all_interconnects() -> list[Interconnect]:
    """Every interconnect class in the database."""
    return list(_interconnects().values())
