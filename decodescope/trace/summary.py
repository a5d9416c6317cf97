"""One or many trace files (one per rank) -> per-step breakdown and its summary.

Files are read in parallel processes, one per file. Ranks are compared step by step
(medians), never by absolute time, so clock skew between hosts does not change a figure;
it is only reported.
"""

import os
import re
import statistics
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.measure.stats import distribution
from decodescope.trace.bandwidth import GemmShape
from decodescope.trace.classify import KernelClass
from decodescope.trace.steps import Phase, Step
from decodescope.trace.stream import RankRead, read_rank

STRAGGLER_EXCESS = 0.05  # a rank whose median compute time per step is > 5 % above the ranks' median
SKEW_WARN_S = 10.0  # first GPU events of two ranks this far apart: different clocks or different runs
COMM = (KernelClass.ALLREDUCE.value, KernelClass.COLLECTIVE.value)

_SGLANG_TP = re.compile(r"-TP-(\d+)")
_VLLM_TP = re.compile(r"(?:^|_)tp(\d+)(?:_|\.)")
_VLLM_RANK = re.compile(r"(?:^|_|-)rank-?(\d+)")


@dataclass(frozen=True)
class RankResult:
    file: str
    rank: int | None  # global rank: distributedInfo, else the file name (vLLM "rankN")
    tp_rank: int | None  # from the file name (SGLang "-TP-N", vLLM "_tpN_")
    device: str
    step_source: str
    steps: tuple[Step, ...]  # the steps kept by the filter
    steps_found: int  # all steps, before the filter
    outside_ms: float
    first_gpu_us: float | None  # first GPU event, µs of wall-clock time where the file gives its base
    bytes_read: int
    gemm_bandwidth: tuple[GemmShape, ...]  # over the whole trace, where shapes were recorded
    problems: tuple[str, ...]


@dataclass(frozen=True)
class TraceReport:
    step_filter: str
    ranks: tuple[RankResult, ...]
    problems: tuple[str, ...]

    @property
    def steps(self) -> list[Step]:
        return [s for r in self.ranks for s in r.steps]

    def to_dict(self) -> dict:
        steps = self.steps
        return {
            "step_filter": self.step_filter,
            # steps per rank (ranks run the same steps); a rank without GPU events does not count
            "steps": min((len(r.steps) for r in self.ranks if r.steps), default=0),
            **_figures(steps),
            "unknown_kernels": _unknown(steps),
            "ranks": [_rank_dict(r) for r in self.ranks],
            "stragglers": stragglers(self.ranks),
            "problems": list(self.problems),
        }


def trace_files(paths) -> list[str]:
    """Each folder (as VLLM_TORCH_PROFILER_DIR or SGLANG_TORCH_PROFILER_DIR) replaced by its traces."""
    out = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(str(p))
            continue
        # vLLM's front end writes a CPU-only trace there too (worker name "async_llm"): not a rank
        found = sorted(str(f) for f in p.iterdir() if f.name.endswith((".json", ".json.gz")) and f.is_file()
                       and "async_llm" not in f.name)
        if not found:
            raise DecodescopeError(f"no .json or .json.gz files in the folder {p}",
                                   "give the folder the profiler wrote its traces to, or the trace files")
        out += found
    return out


def analyse(paths: list[str], step_filter: str = "decode") -> TraceReport:
    # one file: its byte ranges on all cores; many: one process per file
    jobs = [(str(p), step_filter, 1 if len(paths) > 1 else os.cpu_count() or 1) for p in paths]
    if len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            ranks = list(pool.map(_analyse_one, jobs))
    else:
        ranks = [_analyse_one(jobs[0])]
    problems = [f"{Path(r.file).name}: {p}" for r in ranks for p in r.problems]
    firsts = [r.first_gpu_us for r in ranks if r.first_gpu_us is not None]
    if len(firsts) > 1 and (max(firsts) - min(firsts)) / 1e6 > SKEW_WARN_S:
        problems.append(f"the ranks' first GPU events are {(max(firsts) - min(firsts)) / 1e6:.0f} s apart: host clocks "
                        "differ or the files come from different runs; ranks are compared step by step, not by time")
    seen = Counter((r.rank, r.tp_rank) for r in ranks if r.rank is not None or r.tp_rank is not None)
    if twice := sorted((k for k, n in seen.items() if n > 1), key=str):
        problems.append(f"several files for the same rank (rank, TP rank) {twice}: several profiling runs, or "
                        "SGLang's -DECODE and -EXTEND files, in one folder? give the files of one run and stage")
    counts = {len(r.steps) for r in ranks if r.steps_found}
    if len(counts) > 1:
        problems.append(f"ranks have different numbers of steps ({sorted(counts)}); summaries use each rank's own")
    return TraceReport(step_filter, tuple(ranks), tuple(problems))


def _analyse_one(job: tuple[str, str, int]) -> RankResult:
    path, step_filter, workers = job
    r = read_rank(path, workers)
    raw, found = r.facts, r.steps
    problems = list(raw.problems)
    if not r.gpu_events and not any("not a torch-profiler" in p for p in problems):
        problems.append("no GPU events (kernels, memcpy, memset) in this trace: was it recorded with "
                        "ProfilerActivity.CUDA, on a GPU?")
    if len(raw.devices) > 1:  # one process driving several GPUs (e.g. a model split with device_map="auto")
        problems.append(f"GPU events on {len(raw.devices)} devices (pid {', '.join(sorted(raw.devices))}) in this one "
                        "file: they are read as one GPU, and time when two devices are busy at once counts once")
    kept = _filter(_whole(r, found.steps, problems), step_filter, problems)
    name = Path(path).name
    tp = _SGLANG_TP.search(name) or _VLLM_TP.search(name)
    by_name = _VLLM_RANK.search(name)
    return RankResult(
        file=path, rank=raw.rank if raw.rank is not None else int(by_name.group(1)) if by_name else None,
        tp_rank=int(tp.group(1)) if tp else None, device=raw.device_name, step_source=str(found.source),
        steps=kept, steps_found=len(found.steps), outside_ms=found.outside_ms,
        first_gpu_us=raw.base_us + raw.origin_us + r.first_us if r.first_us is not None else None,
        bytes_read=raw.bytes_read, gemm_bandwidth=r.gemm, problems=tuple(problems))


def _whole(r: RankRead, steps: tuple[Step, ...], problems: list[str]) -> tuple[Step, ...]:
    """Without the step a truncated file ends in. Kineto writes the GPU events last, in time
    order, so the last one read lies in the step the end of the file cut short."""
    if not r.facts.truncated or not steps:
        return steps
    last = (r.last_read_us - r.first_us) / 1e3  # ms after the first GPU event, as start_ms
    cut = max((s for s in steps if s.start_ms <= last), key=lambda s: s.start_ms, default=steps[-1])
    problems.append(f"step {cut.index} ({cut.label}) is cut short by the end of the file and is left out")
    return tuple(s for s in steps if s is not cut)


def _filter(steps: tuple[Step, ...], step_filter: str, problems: list[str]) -> tuple[Step, ...]:
    if step_filter == "all" or not steps:
        return steps
    if all(s.phase is Phase.UNKNOWN for s in steps):
        problems.append(f"the step markers do not say decode or prefill; all {len(steps)} steps are shown")
        return steps
    kept = tuple(s for s in steps if s.phase is Phase.DECODE)
    if not kept:
        problems.append(f"none of the {len(steps)} steps is a decode step; use --steps all to see them")
    return kept


def _figures(steps: list[Step]) -> dict:
    """Median (p50) per step of each quantity, ms; a class absent from a step counts 0 there."""
    classes = sorted({c for s in steps for c in s.by_class}, key=list(KernelClass).index)
    return {
        "step_ms": _dist([s.wall_ms for s in steps]),
        "busy_ms": _median([s.busy_ms for s in steps]),
        "idle_ms": _median([s.idle_ms for s in steps]),
        "idle_between_ms": _median([s.idle_between_ms for s in steps]),
        "by_class": {c: _median([s.by_class.get(c, 0.0) for s in steps]) for c in classes},
    }


def _dist(values: list[float]) -> dict:
    d = distribution(values)
    return {k: d[k] for k in ("p50", "p90", "min", "max", "n")}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _unknown(steps: list[Step]) -> dict[str, float]:
    """Unknown kernel name -> ms, summed over the steps shown, largest first."""
    out: dict[str, float] = {}
    for s in steps:
        for name, ms in s.unknown_ms.items():
            out[name] = out.get(name, 0.0) + ms
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _rank_dict(r: RankResult) -> dict:
    return {"file": r.file, "rank": r.rank, "tp_rank": r.tp_rank, "device": r.device, "step_source": r.step_source,
            "steps": len(r.steps), "steps_found": r.steps_found, **_figures(list(r.steps)),
            "outside_steps_ms": r.outside_ms, "gemm_bandwidth": [g.to_dict() for g in r.gemm_bandwidth],
            "problems": list(r.problems)}


def stragglers(ranks: tuple[RankResult, ...]) -> list[dict]:
    """Ranks whose median non-communication busy time per step is well above the others'.

    In tensor parallelism every rank waits in the allreduce for the slowest one, so step
    walls agree; the slow rank shows as more compute and less allreduce wait."""
    compute = {i: _median([s.busy_ms - sum(s.by_class.get(c, 0.0) for c in COMM) for s in r.steps])
               for i, r in enumerate(ranks) if r.steps}
    if len(compute) < 2:
        return []
    mid = statistics.median(compute.values())
    return [{"file": ranks[i].file, "rank": ranks[i].rank, "compute_ms": v, "ranks_median_ms": mid,
             "excess_pct": 100 * (v / mid - 1)}
            for i, v in compute.items() if mid > 0 and v > mid * (1 + STRAGGLER_EXCESS)]
