"""The typed results of reading server statistics: a spread of values, one log
segment's summary and the whole log's. Frozen; each serialises to JSON with to_dict()."""

from dataclasses import dataclass, fields

from decodescope.serverstats.logsegment import Reason

SUSPECT_FACTOR = 1.5  # a suspect window this much slower than the reference is warm-up
OUTLIER_FACTOR = 3.0  # any window this much slower than the reference is warm-up

RULE = (
    "warm-up = idle window (0 tok/s or 0 running), or first window of a series / after idle "
    f"slower than {SUSPECT_FACTOR}x the segment's median round time of the other windows, "
    f"or any window slower than {OUTLIER_FACTOR}x it; accept length from every window"
)


@dataclass(frozen=True)
class Spread:
    mean: float
    min: float
    max: float
    n: int

    def to_dict(self) -> dict:
        return _fields(self)


@dataclass(frozen=True)
class SegmentSummary:
    first_line: int  # first recognised line of the segment, 1-based
    last_line: int
    reason: Reason  # why the segment starts there
    accept_len: Spread | None  # tokens per verify round incl. bonus, every window
    gen_tok_s: Spread | None  # per log series (rank), all its requests; None: llama.cpp
    gen_tok_s_total: Spread | None  # the server: summed over DP ranks (= gen_tok_s with one rank)
    gen_tok_s_per_req: Spread | None  # gen_tok_s divided by the running requests
    round_ms: float | None  # 1000 * accept_len / per-request tok/s: ms per verify round
    dp_ranks: int  # log series with windows (DP ranks, vLLM engines, llama.cpp slots)
    lower_bound: bool  # rates only from windows that ran out of requests: at least these
    windows: int
    warmup_windows: int

    def to_dict(self) -> dict:
        d = _fields(self)
        d["reason"] = self.reason.value
        for k in ("accept_len", "gen_tok_s", "gen_tok_s_total", "gen_tok_s_per_req"):
            d[k] = getattr(self, k).to_dict() if getattr(self, k) else None
        return d


@dataclass(frozen=True)
class LogSummary:
    """The figures of the last segment with a window (of the last one if none has),
    then every segment in log order."""

    engine: str | None
    accept_len: Spread | None
    gen_tok_s: Spread | None
    gen_tok_s_total: Spread | None
    gen_tok_s_per_req: Spread | None
    round_ms: float | None
    dp_ranks: int
    lower_bound: bool
    windows: int  # records with a generation rate, all segments
    warmup_windows: int
    records: dict[str, int]  # recognised lines by kind
    skipped_lines: int  # lines not recognised
    rejected_lines: int  # statistics lines with a figure out of range (never summed)
    segments: tuple[SegmentSummary, ...]
    rule: str = RULE

    def to_dict(self) -> dict:
        d = _fields(self)
        d["records"] = dict(self.records)
        for k in ("accept_len", "gen_tok_s", "gen_tok_s_total", "gen_tok_s_per_req"):
            d[k] = getattr(self, k).to_dict() if getattr(self, k) else None
        d["segments"] = [s.to_dict() for s in self.segments]
        return d


def _fields(obj) -> dict:
    """The dataclass's fields, one level deep: its to_dict converts what is nested (asdict
    would deep-copy every segment first, a third of `log --json`'s time on a log of many runs)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}
