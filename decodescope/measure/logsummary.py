"""Which server-log windows are steady-state decode, and what they add up to.

A "window" is a record that carries a generation rate: an SGLang "Decode batch" line
(tokens since the previous decode line / time since it), a vLLM stats line (the last
~10 s) or a llama.cpp "eval time" line (one request's decode). A window is warm-up when
its time includes start-up or idle time, so its tok/s says nothing about decode speed:
the seeds' first line read 2.89 tok/s next to a steady 55.59.

The rule, applied per log series (engine + rank, since each DP rank logs its own lines):
1. Each window gets a round time, the seconds one verify round took per request:
   accept_len (1 without speculation) x running requests / gen tok/s. It is constant in
   steady state whatever the acceptance (the seeds' four points all give ~55.4 ms).
2. A window is *suspect* when its series had no window before it (the server or the
   log excerpt starts here), when the previous window was idle (0 tok/s or 0 running
   requests: vLLM's stats line after a quiet interval), or when a prefill line with
   `#running-req: 0` came since the previous window (SGLang: a request arrived at an
   idle server, so the window spans the idle gap and the prefill).
3. The reference is the median round time of the windows that are not suspect (of
   all windows if every one is suspect).
4. Warm-up = an idle window (0 tok/s or 0 running requests), or a suspect window more
   than 1.5x slower than the reference, or any window more than 3x slower than it
   (an idle gap that left no prefill line, e.g. in a `grep Decode` excerpt).
   Suspect windows that run at the reference speed are kept: a back-to-back request
   or a log that starts mid-run loses nothing. Prefill and total-time lines are never
   warm-up; a spec-decoding line (vLLM, llama.cpp) takes the flag of the window just
   before it, which is the one it was logged with.
Round times are binned at 0.1 % on a log scale, so the median costs no memory on a
1 GB log and a second pass over the same lines reproduces every flag exactly."""

import math
from collections import Counter
from dataclasses import asdict, dataclass

SUSPECT_FACTOR = 1.5  # a suspect window this much slower than the reference is warm-up
OUTLIER_FACTOR = 3.0  # any window this much slower than the reference is warm-up
_BINS_PER_E = 1000  # round-time bins per factor e: 0.1 % wide
_IDLE = None  # bin of a window with no decode in it

RULE = (
    "warm-up = idle window (0 tok/s or 0 running), or first window of a series / after idle "
    f"slower than {SUSPECT_FACTOR}x the median round time of the other windows, "
    f"or any window slower than {OUTLIER_FACTOR}x it"
)


@dataclass(frozen=True)
class Spread:
    mean: float
    min: float
    max: float
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LogSummary:
    engine: str | None
    accept_len: Spread | None  # tokens per verify round incl. bonus, steady windows
    gen_tok_s: Spread | None  # server generation rate over all running requests
    gen_tok_s_per_req: Spread | None  # the same divided by the running requests
    round_ms: float | None  # 1000 * accept_len / per-request tok/s: ms per verify round
    windows: int  # records with a generation rate
    warmup_windows: int
    records: dict[str, int]  # recognised lines by kind
    skipped_lines: int  # lines not recognised
    rule: str = RULE

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("accept_len", "gen_tok_s", "gen_tok_s_per_req"):
            d[k] = getattr(self, k).to_dict() if getattr(self, k) else None
        return d


def round_s(rec) -> float | None:
    """Seconds per verify round per request implied by a window; None when idle."""
    running = rec.fields.get("#running-req", rec.fields.get("Running", 1))
    if not rec.gen_tok_s or rec.gen_tok_s <= 0 or not running or running <= 0:
        return None
    return (rec.accept_len or 1.0) * running / rec.gen_tok_s


class WindowTagger:
    """Tags records in log order with (suspect, round-time bin) for windows; spec lines
    get the tag of the window before them. Deterministic: two passes tag alike."""

    def __init__(self):
        self._seen = set()  # series that had a window
        self._fresh = set()  # series whose next window starts at idle
        self._last = None

    def tag(self, rec):
        series = (rec.engine, rec.rank)
        if rec.kind == "prefill":
            if rec.fields.get("#running-req") == 0:
                self._fresh.add(series)
            return None
        if rec.gen_tok_s is None:
            return self._last if rec.kind == "spec" else None
        suspect = series not in self._seen or series in self._fresh
        self._seen.add(series)
        self._fresh.discard(series)
        r = round_s(rec)
        if r is None:
            self._fresh.add(series)
            self._last = (suspect, _IDLE)
        else:
            self._last = (suspect, math.floor(math.log(r) * _BINS_PER_E))
        return self._last


class WarmupScan:
    """One pass over the records: tags them and tallies per (suspect, bin), so that the
    warm-up flags and the steady-state summary come out at the end without keeping
    the records."""

    def __init__(self):
        self.tagger = WindowTagger()
        self.kinds = Counter()
        self._tally = {}  # tag -> [n, sum_g, min_g, max_g, sum_gpr, min_gpr, max_gpr, n_a, sum_a, min_a, max_a]
        self._limits = None

    def add(self, rec):
        self.kinds[rec.kind] += 1
        tag = self.tagger.tag(rec)
        if tag is None:
            return None
        t = self._tally.get(tag)
        if t is None:
            inf = math.inf
            t = self._tally[tag] = [0, 0.0, inf, -inf, 0.0, inf, -inf, 0, 0.0, inf, -inf]
        if rec.gen_tok_s is not None:
            g = rec.gen_tok_s
            gpr = g / (rec.fields.get("#running-req", rec.fields.get("Running", 1)) or 1)
            t[0] += 1
            t[1] += g
            t[2] = min(t[2], g)
            t[3] = max(t[3], g)
            t[4] += gpr
            t[5] = min(t[5], gpr)
            t[6] = max(t[6], gpr)
        a = rec.accept_len
        if a is not None:
            t[7] += 1
            t[8] += a
            t[9] = min(t[9], a)
            t[10] = max(t[10], a)
        return tag

    def warmup(self, tag) -> bool:
        """Whether a record with this tag (from add() or a WindowTagger) is warm-up."""
        if tag is None:
            return False
        suspect, b = tag
        if b is _IDLE:
            return True
        ref, sus, out = self._thresholds()
        if ref is None:
            return False
        return b > out or (suspect and b > sus)

    def _thresholds(self):
        if self._limits is None:
            ref = self._median_bin(False)
            if ref is None:
                ref = self._median_bin(True)
            if ref is None:
                self._limits = (None, None, None)
            else:
                sus = ref + round(math.log(SUSPECT_FACTOR) * _BINS_PER_E)
                out = ref + round(math.log(OUTLIER_FACTOR) * _BINS_PER_E)
                self._limits = (ref, sus, out)
        return self._limits

    def _median_bin(self, include_suspect: bool):
        counts = sorted(
            (b, t[0])
            for (suspect, b), t in self._tally.items()
            if b is not _IDLE and t[0] and (include_suspect or not suspect)
        )
        total = sum(n for _, n in counts)
        seen = 0
        for b, n in counts:
            seen += n
            if 2 * seen >= total:
                return b
        return None

    def summary(self, engine: str | None, skipped_lines: int) -> LogSummary:
        steady = [t for tag, t in self._tally.items() if not self.warmup(tag)]
        windows = sum(t[0] for t in self._tally.values())
        gen = _spread(steady, 0, 1, 2, 3)
        gpr = _spread(steady, 0, 4, 5, 6)
        accept = _spread(steady, 7, 8, 9, 10)
        round_ms = None
        if gpr and gpr.mean > 0:
            round_ms = 1000.0 * (accept.mean if accept else 1.0) / gpr.mean
        return LogSummary(
            engine=engine,
            accept_len=accept,
            gen_tok_s=gen,
            gen_tok_s_per_req=gpr,
            round_ms=round_ms,
            windows=windows,
            warmup_windows=windows - (gen.n if gen else 0),
            records=dict(self.kinds),
            skipped_lines=skipped_lines,
        )


def _spread(tallies, n_i, sum_i, min_i, max_i) -> Spread | None:
    n = sum(t[n_i] for t in tallies)
    if n == 0:
        return None
    return Spread(
        mean=sum(t[sum_i] for t in tallies) / n,
        min=min(t[min_i] for t in tallies if t[n_i]),
        max=max(t[max_i] for t in tallies if t[n_i]),
        n=n,
    )
