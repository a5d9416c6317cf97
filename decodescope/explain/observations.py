"""What was measured, reduced to what the reconciliation needs: points of (accept length,
tok/s per user), each with where it came from, and what the server log said about the
windows those points were read in, and what a profiler trace measured of one step."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    accept_len: float  # tokens per verify round incl. the bonus token
    tok_s: float  # decode tokens/s per user (one request's stream)
    sources: tuple[str, ...]  # where the pair was read: a file and line, a run suite, the command line

    @property
    def round_ms(self) -> float:
        return 1000 * self.accept_len / self.tok_s

    def to_dict(self) -> dict:
        return {"accept_len": self.accept_len, "tok_s": self.tok_s, "round_ms": self.round_ms,
                "sources": list(self.sources)}


@dataclass(frozen=True)
class LogFacts:
    """What a server log says about its decode windows beyond accept length and rate."""
    source: str  # the file (and segment)
    decode_windows: int  # steady decode lines the points come from
    cuda_graph_off_windows: int  # of those, lines that say `cuda graph: False` (SGLang)
    prefill_tokens: int  # new prompt tokens of prefill lines between steady decode lines
    prefill_batches: int
    # medians over those lines: requests decoding together (the batch of a pass) and tokens in
    # each one's KV cache (SGLang's #token / #running-req); None where the lines do not say
    running: float | None = None
    context_tokens: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TraceFacts:
    """A profiler trace's median decode step, ms, grouped by the gap term each part measures."""
    files: tuple[str, ...]  # one per rank
    steps: int  # decode steps per rank the medians are taken over
    step_ms: float  # median wall time of a step
    memory_ms: float  # GEMM, MoE GEMM, attention and linear-attention kernels busy
    allreduce_ms: float  # allreduce and other collectives busy
    idle_ms: float  # GPU idle inside the step: waiting on the host and between kernels
    other_ms: float  # the other kernels (norms, elementwise, copies, sampling, unknown) busy
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return dict(self.__dict__) | {"files": list(self.files), "problems": list(self.problems)}


@dataclass(frozen=True)
class Observations:
    points: tuple[Point, ...]
    log: LogFacts | None = None
    inputs: tuple[str, ...] = field(default=())  # every input read, in words, with its source
    trace: TraceFacts | None = None

    def to_dict(self) -> dict:
        return {"points": [p.to_dict() for p in self.points], "log": self.log.to_dict() if self.log else None,
                "trace": self.trace.to_dict() if self.trace else None, "inputs": list(self.inputs)}


def merge(*parts: Observations) -> Observations:
    """All points of several inputs; a pair read from two sources (a log line and the
    table typed from it) is one point naming both, so it counts once in the fit."""
    seen: dict[tuple[float, float], tuple[str, ...]] = {}
    for o in parts:
        for p in o.points:
            key = (round(p.accept_len, 6), round(p.tok_s, 6))
            seen[key] = seen.get(key, ()) + tuple(s for s in p.sources if s not in seen.get(key, ()))
    logs = [o.log for o in parts if o.log]
    traces = [o.trace for o in parts if o.trace]
    return Observations(tuple(Point(a, t, s) for (a, t), s in seen.items()), logs[-1] if logs else None,
                        tuple(i for o in parts for i in o.inputs), traces[-1] if traces else None)
