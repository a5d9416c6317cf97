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
PENDING = "pending"  # suspect-or-not of a window decided by earlier lines (see WindowTagger)

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
    gen_tok_s: Spread | None  # server generation rate over all running requests (None: llama.cpp)
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


def round_s(running, accept_len, gen_tok_s) -> float | None:
    """Seconds per verify round per request implied by a window; None when idle, or when
    a value is not a finite positive number (nan, inf, 0): no round time to trust."""
    running = 1 if running is None else running
    a = 1.0 if accept_len is None else accept_len
    if not (0 < gen_tok_s < math.inf and running > 0 and 0 < a < math.inf):
        return None
    return a * running / gen_tok_s


def running_of(rec):
    """Requests in flight on a record's line: SGLang '#running-req', vLLM 'Running'."""
    v = rec.fields.get("#running-req", rec.fields.get("Running"))
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class WindowTagger:
    """Tags lines in log order with (suspect, round-time bin) for windows; spec lines
    get the tag of the window before them. Deterministic: two passes tag alike.

    continues=True tags a stretch of log that follows lines not seen here (a chunk of a
    file scanned in parallel): a series' first window here, with nothing before it in
    the stretch, is suspect or not depending on the earlier lines, so it gets the
    placeholder tag (PENDING, i) and deferred[i] = (series, bin) until WarmupScan.extend
    resolves it; spec lines before any window get (PENDING, -1)."""

    def __init__(self, continues: bool = False):
        self.continues = continues
        self.deferred = []  # (series, bin) of the windows tagged (PENDING, i)
        self._seen = set()  # series that had a window
        self._fresh = set()  # series whose next window starts at idle
        self._touched = set()  # series with any window or idle prefill here
        self._last = (PENDING, -1) if continues else None

    def tag(self, rec):
        return self.tag_facts(rec.kind, (rec.engine, rec.rank), running_of(rec), rec.accept_len, rec.gen_tok_s)

    def tag_facts(self, kind, series, running, accept_len, gen_tok_s):
        if kind == "prefill":
            if running == 0:
                self._fresh.add(series)
                self._touched.add(series)
            return None
        if gen_tok_s is None:
            return self._last if kind == "spec" else None
        r = round_s(running, accept_len, gen_tok_s)
        b = _IDLE if r is None else math.floor(math.log(r) * _BINS_PER_E)
        if series in self._touched:
            self._last = (series not in self._seen or series in self._fresh, b)
        elif self.continues:
            self.deferred.append((series, b))
            self._last = (PENDING, len(self.deferred) - 1)
        else:
            self._last = (True, b)  # the series' first window
        self._seen.add(series)
        self._touched.add(series)
        if r is None:
            self._fresh.add(series)
        else:
            self._fresh.discard(series)
        return self._last



class WarmupScan:
    """One pass over the records: tags them and tallies per (suspect, bin), so that the
    warm-up flags and the steady-state summary come out at the end without keeping
    the records. Scans of consecutive stretches of a log combine with extend()."""

    def __init__(self, continues: bool = False):
        self.tagger = WindowTagger(continues)
        self.kinds = Counter()
        self.windows = 0  # records with a generation rate, warm-up and unreadable ones too
        self._tally = {}  # tag -> [n, sum_g, min_g, max_g, sum_gpr, min_gpr, max_gpr, n_a, sum_a, min_a, max_a]
        self._pending = []  # (tag, running, accept_len, gen_tok_s) of lines tagged PENDING
        self._limits = None

    def add(self, rec):
        """Counts one record; returns its tag (for warmup())."""
        return self.add_facts(rec.kind, (rec.engine, rec.rank), running_of(rec), rec.accept_len, rec.gen_tok_s)

    def add_facts(self, kind, series, running, accept_len, gen_tok_s):
        """add() from the few values the rule needs, without a LogRecord."""
        self.kinds[kind] += 1
        if gen_tok_s is not None:
            self.windows += 1
        tag = self.tagger.tag_facts(kind, series, running, accept_len, gen_tok_s)
        if tag is not None:
            if tag[0] == PENDING:
                self._pending.append((tag, running, accept_len, gen_tok_s))
            else:
                self._count(tag, running, accept_len, gen_tok_s)
        return tag

    def _count(self, tag, running, accept_len, gen_tok_s):
        # written out, not looped over the three quantities: this runs once per window,
        # millions of times on a 1 GB log
        t = self._tally.get(tag)
        if t is None:
            inf = math.inf
            t = self._tally[tag] = [0, 0.0, inf, -inf, 0.0, inf, -inf, 0, 0.0, inf, -inf]
        g = gen_tok_s
        if g is not None and -math.inf < g < math.inf:  # nan/inf would poison the sums
            gpr = g / (running or 1)
            t[0] += 1
            t[1] += g
            if g < t[2]:
                t[2] = g
            if g > t[3]:
                t[3] = g
            t[4] += gpr
            if gpr < t[5]:
                t[5] = gpr
            if gpr > t[6]:
                t[6] = gpr
        a = accept_len
        if a is not None and -math.inf < a < math.inf:
            t[7] += 1
            t[8] += a
            if a < t[9]:
                t[9] = a
            if a > t[10]:
                t[10] = a

    def extend(self, later: "WarmupScan"):
        """Appends the scan (continues=True) of the lines that come right after this
        one's; the result equals one scan of both stretches in order. This scan must
        start at the top of the log (continues=False)."""
        mine, theirs = self.tagger, later.tagger
        if mine.continues:
            raise ValueError("extend() a scan that starts at the top of the log")

        def real(tag):
            if tag is None or tag[0] != PENDING:
                return tag
            if tag[1] < 0:
                return mine._last
            series, b = theirs.deferred[tag[1]]
            return (series not in mine._seen or series in mine._fresh, b)

        self.kinds.update(later.kinds)
        self.windows += later.windows
        for tag, running, accept_len, gen_tok_s in later._pending:
            tag = real(tag)
            if tag is not None:
                self._count(tag, running, accept_len, gen_tok_s)
        for tag, t in later._tally.items():
            mine_t = self._tally.get(tag)
            if mine_t is None:
                self._tally[tag] = list(t)
            else:
                for i in (0, 1, 4, 7, 8):
                    mine_t[i] += t[i]
                for i in (2, 5, 9):
                    mine_t[i] = min(mine_t[i], t[i])
                for i in (3, 6, 10):
                    mine_t[i] = max(mine_t[i], t[i])
        last = real(theirs._last)
        for series in theirs._touched:
            (mine._fresh.add if series in theirs._fresh else mine._fresh.discard)(series)
        mine._seen |= theirs._seen
        mine._touched |= theirs._touched
        mine._last = last
        self._limits = None

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
        windows = self.windows
        gpr = _spread(steady, 0, 4, 5, 6)
        # a llama.cpp "eval time" line is one request's rate: the server's total over
        # concurrent requests is not in its log (its /metrics has it)
        gen = None if engine == "llamacpp" else _spread(steady, 0, 1, 2, 3)
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
            warmup_windows=windows - (gpr.n if gpr else 0),
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
