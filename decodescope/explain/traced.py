"""A torch-profiler trace as an explain input: the median decode step's GPU busy time by
kernel class and its idle time, grouped by the gap term each measures (the same class to
model component pairs as `decodescope trace --model`)."""

from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.explain.observations import Observations, TraceFacts

# model components whose ceiling-to-measured difference each trace group replaces
MEMORY = ("weights", "kv_cache", "state")
COMM = ("allreduce",)
IDLE = ("host", "kernels")


def _classes(components: tuple[str, ...]) -> tuple[str, ...]:
    from decodescope.trace.compare import TERMS
    return tuple(str(c) for _, classes, comps in TERMS if set(comps) <= set(components) for c in classes)


def from_trace(paths: list[str]) -> Observations:
    """The decode steps of one trace file per rank (or the folder the profiler wrote them to),
    as `decodescope trace` reads them."""
    from decodescope.trace.summary import analyse, trace_files
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise DecodescopeError(f"cannot read trace {', '.join(missing)}",
                               "give torch-profiler trace files (.json or .json.gz), one per rank")
    paths = trace_files(paths)
    t = analyse(paths, "decode").to_dict()
    if not t["steps"]:
        raise DecodescopeError("no decode steps in the trace " + ", ".join(paths),
                               "".join(f"{x}; " for x in t["problems"]) + "record GPU activity (ProfilerActivity.CUDA) around a few decode steps; "
                               "`decodescope trace FILE --steps all` shows what the trace holds")
    by_class = t["by_class"]
    memory, comm = _classes(MEMORY), _classes(COMM)
    files = tuple(Path(p).name for p in paths)
    names = ", ".join(files)
    facts = TraceFacts(
        files=files, steps=t["steps"], step_ms=t["step_ms"]["p50"],
        memory_ms=sum(by_class.get(c, 0.0) for c in memory), allreduce_ms=sum(by_class.get(c, 0.0) for c in comm),
        idle_ms=t["idle_ms"] or 0.0,
        other_ms=sum(v for c, v in by_class.items() if c not in memory + comm),
        problems=tuple(t["problems"]))
    return Observations((), trace=facts, inputs=(
        f"trace {names}: {facts.steps} decode steps, median step {facts.step_ms:.2f} ms "
        f"({', '.join(sorted({r['device'] for r in t['ranks']}))})", *(f"trace: {x}" for x in facts.problems)))
