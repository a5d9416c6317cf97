"""Decode steps of one rank's trace, and where each step's GPU time went.

Step windows come from, in this order of preference:
1. annotations: SGLang `step[DECODE bs=N]` / `draft step[...]`, vLLM
   `execute_context_C(T)_generation_G(T)`, `ProfilerStep#N`, else the most repeated user
   `record_function` range (a CPU-side range; a GPU event belongs to the range its launch
   call falls in, found through the launch's correlation id, so CUDA-graph kernels follow
   their `cudaGraphLaunch`);
2. CUDA-graph launches: each `cudaGraphLaunch` starts a step, eager kernels launched
   after it belong to it;
3. GPU idle gaps: a gap longer than GAP_FACTOR x the median gap (at least MIN_GAP_US)
   ends a step.

Per step (times in ms): wall = from the step's first GPU event to the next step's first
GPU event (the last step: to its own last GPU end), so host, launch and scheduler time
between steps is the step's idle; busy = the union of its GPU events over all streams;
an instant when two events overlap goes to the one that started first, so the classes
add up to busy; idle = wall - busy, of which `idle_between_ms` is the gap from the step's
last GPU event to the next step's first (the host and scheduler between steps) and the
rest lies between the step's own kernels (launches, host stalls inside the step).
"""

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from decodescope.trace.classify import KernelClass, classify
from decodescope.trace.reader import RawTrace

GAP_FACTOR = 10.0
MIN_GAP_US = 50.0

_SGLANG = re.compile(r"^(draft )?step\[(\w+)")
_VLLM = re.compile(r"^execute_(?:\d+_)?context_(\d+)\(.*_generation_(\d+)\(")
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_SGLANG_MODES = {"DECODE": "decode", "IDLE": "decode", "TARGET_VERIFY": "verify", "DRAFT_EXTEND": "draft",
                 "EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "prefill"}


class Phase(StrEnum):
    DECODE = "decode"
    PREFILL = "prefill"  # prefill / extend, also vLLM steps mixing prefill and decode
    DRAFT = "draft"  # speculative decoding: the draft model's forward
    VERIFY = "verify"  # speculative decoding: the target model checking the draft
    UNKNOWN = "unknown"  # the annotation does not say


class StepSource(StrEnum):
    SGLANG = "sglang step ranges"
    VLLM = "vllm execute_model ranges"
    PROFILER_STEP = "ProfilerStep#N ranges"
    USER_RANGE = "user record_function ranges"
    CUDA_GRAPH = "cudaGraphLaunch calls"
    IDLE_GAP = "GPU idle gaps"
    NONE = "no GPU events"


@dataclass(frozen=True)
class Step:
    index: int  # position among all steps of the rank, from 0
    label: str  # the annotation's name, or the source's
    phase: Phase
    start_ms: float  # first GPU event, ms after the rank's first GPU event
    wall_ms: float
    busy_ms: float
    idle_ms: float
    idle_between_ms: float  # part of idle_ms after the step's last GPU event, before the next step
    by_class: dict[str, float]  # class -> busy ms, overlap counted once
    kernels: int  # GPU events in the step
    unknown_ms: dict[str, float]  # kernels no rule matched: name -> ms in this step

    def to_dict(self) -> dict:
        return {"index": self.index, "label": self.label, "phase": str(self.phase), "start_ms": self.start_ms,
                "wall_ms": self.wall_ms, "busy_ms": self.busy_ms, "idle_ms": self.idle_ms,
                "idle_between_ms": self.idle_between_ms, "by_class": self.by_class, "kernels": self.kernels}


@dataclass(frozen=True)
class RankSteps:
    source: StepSource
    steps: tuple[Step, ...]
    outside_ms: float  # GPU busy time of events in no step (warm-up, before the first annotation)


def find_steps(raw: RawTrace) -> RankSteps:
    if not raw.gpu:
        return RankSteps(StepSource.NONE, (), 0.0)
    source, windows = annotation_windows(raw.annotations)
    if windows:
        groups = _assign(raw, [(w[1], w[2]) for w in windows])
    elif raw.graph_launches:
        source = StepSource.CUDA_GRAPH
        launches = sorted(raw.graph_launches)
        bounds = [(ts, launches[i + 1][0] if i + 1 < len(launches) else float("inf")) for i, (ts, _) in
                  enumerate(launches)]
        windows = [("cudaGraphLaunch", ts, end, Phase.UNKNOWN) for ts, end in bounds]
        groups = _assign(raw, bounds)
    else:
        source = StepSource.IDLE_GAP
        groups = _gap_groups(raw.gpu)
        windows = [("idle gap", 0.0, 0.0, Phase.UNKNOWN)] * len(groups)
    return _breakdown(raw, source, windows, groups)


def annotation_windows(annotations: list[tuple]):
    """(source, [(label, start µs, end µs, phase)]) from the first family of step ranges found."""
    cpu = [a for a in annotations if not a[3]]
    for source, pattern, phase_of in ((StepSource.SGLANG, _SGLANG, _sglang_phase), (StepSource.VLLM, _VLLM, _vllm_phase),
                                      (StepSource.PROFILER_STEP, _PROFILER_STEP, lambda m: Phase.UNKNOWN)):
        found = [(n, s, e, phase_of(m)) for n, s, e, _ in cpu if (m := pattern.match(n))]
        if found:
            return source, sorted(found, key=lambda w: w[1])
    counts = Counter(a[0] for a in cpu)
    if counts and (top := counts.most_common(1)[0])[1] >= 2:
        name = top[0]
        low = name.lower()
        phase = Phase.DECODE if "decode" in low else Phase.PREFILL if "prefill" in low else Phase.UNKNOWN
        return StepSource.USER_RANGE, sorted(((n, s, e, phase) for n, s, e, _ in cpu if n == name), key=lambda w: w[1])
    return StepSource.NONE, []


def _sglang_phase(m) -> Phase:
    return Phase.DRAFT if m.group(1) else Phase(_SGLANG_MODES.get(m.group(2), "unknown"))


def _vllm_phase(m) -> Phase:
    return Phase.PREFILL if int(m.group(1)) else Phase.DECODE


def _assign(raw: RawTrace, bounds: list[tuple[float, float]]) -> list[list[tuple]]:
    """GPU events per window, each by the time of the call that launched it (else its own start)."""
    starts = [b[0] for b in bounds]
    groups: list[list[tuple]] = [[] for _ in bounds]
    launch = raw.launch_ts
    for ev in raw.gpu:
        t = launch.get(ev[3], ev[0])
        i = bisect_right(starts, t) - 1
        if i >= 0 and t <= bounds[i][1]:
            groups[i].append(ev)
    return groups


def _gap_groups(gpu: list[tuple]) -> list[list[tuple]]:
    evs = sorted(gpu)
    ends, gaps = evs[0][1], []
    for ev in evs[1:]:
        gaps.append(ev[0] - ends)
        ends = max(ends, ev[1])
    positive = sorted(g for g in gaps if g > 0)
    threshold = max(MIN_GAP_US, GAP_FACTOR * positive[len(positive) // 2]) if positive else float("inf")
    groups, cur = [], [evs[0]]
    for ev, gap in zip(evs[1:], gaps):
        if gap > threshold:
            groups.append(cur)
            cur = []
        cur.append(ev)
    groups.append(cur)
    return groups


@dataclass(frozen=True)
class StepPart:
    """One step's GPU events reduced to what its row needs (µs), so that a streamed reading can
    drop the events once their step is complete."""

    window: int  # index of the step's window
    first_us: float  # its first GPU event's start
    last_us: float  # its last GPU event's end
    by_class: dict  # KernelClass -> busy µs, in the order the sweep met them
    unknown: dict  # name id -> busy µs of kernels no rule matched
    kernels: int


def reduce_group(window: int, evs: list[tuple], classes: list[KernelClass]) -> StepPart:
    """The step's events (start, end, name id, ...) sorted and swept; `evs` is sorted in place."""
    first, last = min(ev[0] for ev in evs), max(ev[1] for ev in evs)
    evs.sort()
    by_class, unknown = _busy(evs, classes)
    return StepPart(window, first, last, by_class, unknown, len(evs))


def steps_from_parts(source: StepSource, windows, parts: list[StepPart], names: list[str], origin_us: float,
                     union_us: float) -> RankSteps:
    """Step rows from the parts in window order; `origin_us`: the rank's first GPU start, `union_us`:
    the union of all its GPU events (what lies outside every step is the rest)."""
    firsts = [p.first_us for p in parts]
    steps, inside = [], 0.0
    for p in parts:
        nxt = bisect_right(firsts, p.first_us)
        end = firsts[nxt] if nxt < len(firsts) else p.last_us
        busy = sum(p.by_class.values())
        inside += busy
        label, phase = windows[p.window][0], windows[p.window][3]
        steps.append(Step(len(steps), label, phase, (p.first_us - origin_us) / 1e3, (end - p.first_us) / 1e3,
                          busy / 1e3, (end - p.first_us - busy) / 1e3, max(0.0, end - p.last_us) / 1e3,
                          {str(k): v / 1e3 for k, v in p.by_class.items()}, p.kernels,
                          {names[k]: v / 1e3 for k, v in p.unknown.items()}))
    return RankSteps(source, tuple(steps), max(0.0, union_us - inside) / 1e3)


def _breakdown(raw: RawTrace, source: StepSource, windows, groups) -> RankSteps:
    classes = [classify(n, c) for n, c in zip(raw.names, raw.gpu_cat)]
    parts = [reduce_group(i, g, classes) for i, g in enumerate(groups) if g]
    return steps_from_parts(source, windows, parts, raw.names, min(ev[0] for ev in raw.gpu),
                            union_us(sorted(raw.gpu)))


def _busy(evs: list[tuple], classes: list[KernelClass]) -> tuple[dict, dict]:
    """Busy µs by class over events sorted by start, each instant to the earliest-started event."""
    by_class: dict[KernelClass, float] = {}
    unknown: dict[int, float] = {}
    cur = float("-inf")
    for start, end, name, *_ in evs:
        if end <= cur:
            continue
        d = end - (start if start > cur else cur)
        cur = end
        cls = classes[name]
        by_class[cls] = by_class.get(cls, 0.0) + d
        if cls is KernelClass.UNKNOWN:
            unknown[name] = unknown.get(name, 0.0) + d
    return by_class, unknown


def union_us(evs) -> float:
    """µs covered by at least one of the events, given sorted by start."""
    return union_fold(evs)[0]


def union_fold(evs, total: float = 0.0, cur: float = float("-inf")) -> tuple[float, float]:
    """The union of intervals (start, end, ...) given in order of start, continued from `total`
    µs covered so far with `cur` the end of the last covered stretch; returns both, updated."""
    for ev in evs:
        if (end := ev[1]) > cur:
            start = ev[0]
            total += end - (start if start > cur else cur)
            cur = end
    return total, cur
