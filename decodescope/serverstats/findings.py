"""Settings a log shows that are known to cost decode speed (the rules: findings.toml).

`findings(segment)` turns a segment's settings and the lines that matched a rule into
findings: the id, the line that shows it, the evidence, what it costs (from decodescope's
model where that can be said per token: layers on the CPU, host time per kernel, allreduce
latency) and the fix. The model is imported only when a cost needs it."""

import re
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.serverstats.settings import Settings, SettingsSegment


class FindingId(StrEnum):
    PARTIAL_OFFLOAD = "partial_offload"
    CUDA_GRAPHS_OFF = "cuda_graphs_off"
    CUSTOM_ALLREDUCE_OFF = "custom_allreduce_off"
    ATTENTION_FALLBACK = "attention_fallback"
    PIECEWISE_CUDA_GRAPH_OFF = "piecewise_cuda_graph_off"


@dataclass(frozen=True)
class Finding:
    id: FindingId
    line: int  # 1-based line of the log that shows it
    evidence: str
    cost: str
    fix: str
    title: str = ""
    why: str = ""  # the engines' source for why it costs decode speed
    count: int = 1  # lines that showed it (one per rank, per engine core, ...)

    def to_json(self) -> dict:
        return {"id": self.id.value, "line": self.line, "evidence": self.evidence, "cost": self.cost,
                "fix": self.fix, "title": self.title, "why": self.why, "count": self.count}


@cache
def rules() -> dict[FindingId, dict]:
    with open(Path(__file__).with_name("findings.toml"), "rb") as f:
        data = tomllib.load(f)
    unknown = set(data) - {i.value for i in FindingId}
    if unknown:
        raise DecodescopeError(f"findings.toml: unknown finding id(s) {sorted(unknown)}",
                               f"use one of: {' '.join(i.value for i in FindingId)}")
    return {FindingId(k): v for k, v in data.items()}


@cache
def line_rules() -> tuple[tuple[str, str, re.Pattern], ...]:
    """(finding id, gate substring, regex) for every line pattern of the table."""
    return tuple((rid.value, p["gate"], re.compile(p["rx"])) for rid, r in rules().items() for p in r.get("lines", ()))


def findings(segment: SettingsSegment) -> list[Finding]:
    """The findings of one run of the log, in the table's order."""
    s = segment.settings
    notes = {n.rule: n for n in segment.notes}
    out = []
    for rid, rule in rules().items():
        note = notes.get(rid.value)
        hit = (note.line, note.text, note.count) if note else _when(rule.get("when"), segment)
        if hit and not (rid is FindingId.CUSTOM_ALLREDUCE_OFF and (s.tp or 2) < 2):
            line, evidence, count = hit
            out.append(Finding(rid, line, evidence, _cost(rule, s), rule["fix"], rule["title"], rule["why"], count))
    return out


def _when(check: str | None, seg: SettingsSegment) -> tuple[int, str, int] | None:
    s = seg.settings
    if check == "partial_offload" and s.offloaded_layers is not None and s.total_layers:
        if s.offloaded_layers < s.total_layers:
            return seg.where["offloaded_layers"], f"offloaded {s.offloaded_layers}/{s.total_layers} layers to GPU", 1
    if check == "cuda_graphs_off" and s.cuda_graphs is False:
        return seg.where["cuda_graphs"], "CUDA graphs disabled at start-up", 1
    return None


def _cost(rule: dict, s: Settings) -> str:
    kind = rule["cost"]
    if kind == "offload":
        cpu = s.total_layers - s.offloaded_layers
        return (f"{cpu} of {s.total_layers} layers ({100 * cpu / s.total_layers:.0f} %) run on the CPU: "
                "every token reads their weights from host memory and waits for the CPU's matrix-vector work")
    if kind == "eager":
        return _eager_cost(s)
    if kind == "allreduce":
        return _allreduce_cost(s)
    return rule["cost_text"]


def _eager_cost(s: Settings) -> str:
    from decodescope.model.engines import EAGER_KERNEL_US, GRAPH_KERNEL_US
    return (f"~{EAGER_KERNEL_US:g} µs of host time per kernel instead of ~{GRAPH_KERNEL_US:g} µs inside a CUDA "
            f"graph (one launch each, measured on an H200): +{EAGER_KERNEL_US - GRAPH_KERNEL_US:g} µs × kernels "
            "per layer × layers, on every forward pass")


def _allreduce_cost(s: Settings) -> str:
    from decodescope.hardware.db import get_interconnect
    link = get_interconnect("pcie-switch")  # the measured pair: NCCL and the one-shot kernel, same host
    extra_us = (link.nccl_latency_s - link.allreduce_latency_s) * 1e6
    text = (f"+{extra_us:.1f} µs per allreduce (NCCL {link.nccl_latency_s * 1e6:.1f} µs against the custom "
            f"one-shot kernel {link.allreduce_latency_s * 1e6:.1f} µs, PCIe, gpus.toml), two allreduces per "
            "decoder layer per forward pass")
    if s.total_layers:
        per_pass_ms = extra_us * (2 * s.total_layers + 1) / 1000  # + the logits gather
        text += f": {per_pass_ms:.2f} ms per pass over {s.total_layers} layers"
    return text


def findings_json(segments: list[SettingsSegment]) -> dict:
    """`log --json`'s `settings` and `findings` (the last run's), and every run's own."""
    runs = [{**seg.to_json(), "findings": [f.to_json() for f in findings(seg)]} for seg in segments]
    last = runs[-1] if runs else None
    return {"settings": last["settings"] if last else None, "findings": last["findings"] if last else [],
            "settings_segments": runs}
