"""Which server-log windows are steady-state decode, and what they add up to, per segment
(one server run: logsegment.py).

A "window" is a record that carries a generation rate: an SGLang "Decode batch" line
(tokens since the previous decode line / time since it), a vLLM stats line (the last
~10 s) or a llama.cpp "eval time" line (one request's decode). A window is warm-up when
its time includes start-up or idle time, so its tok/s says nothing about decode speed:
the reference case's first line read 2.89 tok/s next to a steady 55.59.

The rule, applied per segment and log series (engine + rank: each DP rank logs its own):
1. Each window gets a round time, accept_len (1 when not given) x running requests /
   gen tok/s: constant in steady state whatever the acceptance.
2. A window is *suspect* when its series had no window before it in the segment, when
   the previous window was idle (0 tok/s or 0 running requests), or when a prefill
   line with `#running-req: 0` came since the previous window.
3. The reference is the median round time of the segment's windows that are not
   suspect (of all its windows if every one is suspect).
4. Warm-up = an idle window, or a suspect window more than 1.5x slower than the
   reference, or any window more than 3x slower than it. A spec line (vLLM, llama.cpp)
   takes the flag of the window just before it.
Round times are binned at 0.1 % on a log scale, so the median costs no memory on a
1 GB log and a second pass over the same lines reproduces every flag exactly.

What a segment reports:
- accept length from every window that carries one, warm-up or not: the share of
  draft tokens accepted does not depend on idle time;
- generation rates from the steady windows; when there are none but some window
  generated tokens and then ran out of requests (vLLM "Running: 0"), from those, marked
  `lower_bound` (their interval includes idle time), the server's the sum of its
  series' (each runs at least its mean);
- the server total over DP ranks: per BUCKET_S of wall clock, the sum over ranks of
  each rank's mean rate in it, over buckets whose windows are all steady;
- round_ms = accept length / per-request tok/s (steady windows), only where the
  acceptance is known or a start-up line said speculation is off."""

import math
from collections import Counter

from decodescope.serverstats.logsegment import _BINS_PER_E, PENDING, WindowTagger, clock_of, running_of
from decodescope.serverstats.logtally import (
    Join,
    Tally,
    add4,
    into_bucket,
    is_warm,
    join4,
    lower_bounds,
    median_bin,
    merge_bucket,
    new4,
    new_bucket,
    resolve,
    resolved,
    spread,
    spread4,
)
from decodescope.serverstats.logtypes import OUTLIER_FACTOR, SUSPECT_FACTOR, LogSummary, SegmentSummary



BUCKET_S = 10.0  # DP ranks log on their own schedules: their rates add up per 10 s of clock


class WarmupScan:
    """One pass over the records: tags them and tallies per segment and (suspect, bin),
    so that warm-up flags and summaries come out at the end without keeping the
    records. Scans of consecutive stretches of a log combine with extend()."""

    def __init__(self, continues: bool = False):
        self.tagger = WindowTagger(continues)
        self.tallies = [Tally()]
        self.kinds = Counter()
        self.windows = 0
        self.lines = 0  # lines scanned (set by the caller): line numbers of a later stretch add it
        self._pending = []  # (tag, running, accept_len, gen_tok_s) of windows tagged PENDING

    def add(self, rec):
        """Counts one record; returns its tag (for warmup())."""
        return self.add_facts(
            rec.kind, (rec.engine, rec.rank), running_of(rec), rec.accept_len, rec.gen_tok_s,
            clock_of(rec), rec.process, rec.line_no, rec.fields.get("speculative"),
        )

    def add_facts(self, kind, series, running, accept_len, gen_tok_s, time_s=None, process=None,
                  line_no=0, speculative=None):
        """add() from the few values the rule needs, without a LogRecord."""
        self.kinds[kind] += 1
        tag = self.tagger.tag_facts(kind, series, running, accept_len, gen_tok_s, time_s, process,
                                    line_no, speculative)
        tallies = self.tallies
        while len(tallies) < len(self.tagger.segments):
            self.close_bucket(tallies[-1])
            tallies.append(Tally())
        t = tallies[-1]
        if accept_len is not None and kind != "prefill":
            add4(t.accept, accept_len)
        if gen_tok_s is None or kind == "prefill":  # a prefill line's rate is no decode window
            if tag is not None and accept_len is not None:  # a spec line: steady with its window
                self._count(tag, None, accept_len, None)
            return tag
        self.windows += 1
        t.windows += 1
        if series not in t.ranks:
            t.ranks.add(series)
        if running == 0 and gen_tok_s > 0:
            low = t.low.get(series)
            add4(low if low is not None else t.low.setdefault(series, new4()), gen_tok_s)
        self._count(tag, running, accept_len, gen_tok_s)
        key = None if time_s is None else int(time_s // BUCKET_S)
        b = t.bucket
        if b is None or b[0] != key:
            b = self.open_bucket(t, key)
        into_bucket(b, series, gen_tok_s, tag)
        return tag

    def _count(self, tag, running, accept_len, gen_tok_s):
        # written out, not looped over the three quantities: this runs once per window,
        # millions of times on a 1 GB log
        if tag[0] == PENDING:
            self._pending.append((tag, running, accept_len, gen_tok_s))
            return
        steady = self.tallies[tag[0]].steady
        key = tag[1:]
        t = steady.get(key)
        if t is None:
            inf = math.inf
            t = steady[key] = [0, 0.0, inf, -inf, 0.0, inf, -inf, 0, 0.0, inf, -inf]
        g = gen_tok_s
        if g is not None:
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
        if a is not None:
            t[7] += 1
            t[8] += a
            if a < t[9]:
                t[9] = a
            if a > t[10]:
                t[10] = a

    def open_bucket(self, t: Tally, key):
        if t.bucket is not None:
            self.close_bucket(t)
        b = t.bucket = new_bucket(key)
        if self.tagger.continues and len(self.tallies) == 1 and t.head is None:
            t.head = b
        return b

    def close_bucket(self, t: Tally):
        b, t.bucket = t.bucket, None
        if b is None or b is t.head:
            return
        self._tally_bucket(t, b)

    def _tally_bucket(self, t: Tally, b):
        if b[5]:
            t.pending.append(b)
            return
        key, per, idle, max_b, max_sb, _ = b
        total = sum(v[0] / v[1] for v in per.values())
        add4(t.totals.setdefault((idle, max_b, max_sb, len(per)), new4()), total)

    def joins(self, later: "WarmupScan") -> bool:
        """Whether extend(later) gives one pass's result (Segment.joins_as_one_pass)."""
        return later.tagger.segments[0].joins_as_one_pass(self.tagger.segments[-1])

    def extend(self, later: "WarmupScan"):
        """Appends the scan (continues=True) of the lines that come right after this
        one's; the result equals one scan of both stretches in order. This scan must
        start at the top, and joins(later) hold. Returns the Join: how the later
        stretch's tags read here."""
        mine, theirs = self.tagger, later.tagger
        if mine.continues:
            raise ValueError("extend() a scan that starts at the top of the log")
        if not self.joins(later):
            raise ValueError("extend() a scan whose first segment one pass would cut after its first line")
        head, last = theirs.segments[0], mine.segments[-1]
        reason = head.starts_after(last)
        offset = self.lines
        for seg in theirs.segments:
            seg.first_line = None if seg.first_line is None else seg.first_line + offset
            seg.last_line = None if seg.last_line is None else seg.last_line + offset
        i0 = len(mine.segments) - 1 if reason is None else len(mine.segments)
        join = Join(i0, reason is None, frozenset(last.seen), frozenset(last.fresh), mine._last, offset)

        def real(tag):
            return resolve(tag, join, theirs.deferred)

        if reason is None:
            last.absorb(head)
        else:
            head.reason = reason
            mine.segments.append(head)
        mine.segments += theirs.segments[1:]
        self._join_tallies(later, reason is None, real)
        mine._last = real(theirs._last)
        self.kinds.update(later.kinds)
        self.windows += later.windows
        self.lines += later.lines
        return join

    def _join_tallies(self, later, merge: bool, real):
        head = later.tallies[0]
        if merge:
            into = self.tallies[-1]
            into.join(head)
        else:
            self.close_bucket(self.tallies[-1])
            into = head
            self.tallies.append(head)
        self._join_head(into, head, merge, real)
        for b in head.pending:
            self._tally_bucket(into, resolved(b, real))
        head.pending = []
        if len(later.tallies) > 1:  # later segments follow: the joined one has ended
            self.close_bucket(into)
        self.tallies += later.tallies[1:]
        for tag, running, accept_len, gen_tok_s in later._pending:
            tag = real(tag)
            if tag is not None:
                self._count(tag, running, accept_len, gen_tok_s)

    def _join_head(self, into, head, merge, real):
        """The head's first clock bucket joins the open bucket it continues."""
        first, head.head = head.head, None
        if head.bucket is not None and head.bucket is not first:  # its PENDING tags resolve now
            head.bucket = resolved(head.bucket, real)
        if first is None:
            return
        was_open = head.bucket is first
        first = resolved(first, real)
        if merge and into.bucket is not None and into.bucket is not head.bucket and into.bucket[0] == first[0]:
            merge_bucket(into.bucket, first)
            if was_open:
                return  # still open: it goes on in into.bucket
            first, into.bucket = into.bucket, head.bucket
            self._tally_bucket(into, first)
            return
        if merge and into.bucket is not None and into.bucket is not head.bucket:
            self._tally_bucket(into, into.bucket)
        if was_open:
            into.bucket = first
        else:
            self._tally_bucket(into, first)
            into.bucket = head.bucket

    def warmup(self, tag) -> bool:
        """Whether a record with this tag (from add() or a WindowTagger) is warm-up."""
        return is_warm(tag, None if tag is None else self._thresholds(self.tallies[tag[0]]))

    def limits(self) -> list:
        """Each segment's (reference, suspect limit, outlier limit) round-time bins."""
        return [self._thresholds(t) for t in self.tallies]

    def _thresholds(self, t: Tally):
        if t.limits is None:
            ref = median_bin(t, False)
            if ref is None:
                ref = median_bin(t, True)
            if ref is None:
                t.limits = (None, None, None)
            else:
                t.limits = (ref, ref + round(math.log(SUSPECT_FACTOR) * _BINS_PER_E),
                            ref + round(math.log(OUTLIER_FACTOR) * _BINS_PER_E))
        return t.limits

    def _bucket_warm(self, t: Tally, key) -> bool:
        idle, max_b, max_sb, _ = key
        if idle:
            return True
        ref, sus, out = self._thresholds(t)
        return ref is not None and (max_b > out or (max_sb is not None and max_sb > sus))

    def summary(self, engine: str | None, skipped_lines: int, rejected_lines: int = 0) -> LogSummary:
        segs = []
        for i, (seg, t) in enumerate(zip(self.tagger.segments, self.tallies)):
            if seg.first_line is not None:
                segs.append(self._segment(engine, i, seg, t))
        top = next((s for s in reversed(segs) if s.windows), segs[-1] if segs else None)
        figures = {k: getattr(top, k) if top else None
                   for k in ("accept_len", "gen_tok_s", "gen_tok_s_total", "gen_tok_s_per_req", "round_ms")}
        return LogSummary(
            engine=engine, **figures, dp_ranks=top.dp_ranks if top else 0,
            lower_bound=top.lower_bound if top else False, windows=self.windows,
            warmup_windows=sum(s.warmup_windows for s in segs), records=dict(self.kinds),
            skipped_lines=skipped_lines, rejected_lines=rejected_lines, segments=tuple(segs),
        )

    def _segment(self, engine, i, seg, t: Tally) -> SegmentSummary:
        steady = [v for tag, v in t.steady.items() if not self.warmup((i,) + tag)]
        gpr = spread(steady, 0, 4, 5, 6)
        gen = spread(steady, 0, 1, 2, 3)
        steady_accept = spread(steady, 7, 8, 9, 10)
        buckets = dict(t.totals)
        if t.bucket is not None and t.bucket is not t.head:  # the open bucket counts too
            probe = Tally()
            self._tally_bucket(probe, t.bucket)
            for k, v in probe.totals.items():
                join4(buckets.setdefault(k, new4()), v)
        size = max((k[3] for k in buckets), default=0)
        total = new4()
        for k, v in buckets.items():
            if k[3] == size and not self._bucket_warm(t, k):
                join4(total, v)
        if len(t.ranks) == 1 and gen is not None:  # one series: its windows are the server's
            total = [gen.n, gen.mean * gen.n, gen.min, gen.max]
        server = spread4(total)
        lower = gen is None and bool(t.low)
        if lower:
            gen, server = lower_bounds(t.low)
        if engine == "llamacpp":  # one request per line: the server's total is in its /metrics
            gen, server = None, None
        accept = steady_accept or spread4(t.accept)
        round_ms = None
        if gpr and gpr.mean > 0 and (accept is not None or seg.speculative is False):
            round_ms = 1000.0 * (accept.mean if accept else 1.0) / gpr.mean
        return SegmentSummary(
            first_line=seg.first_line, last_line=seg.last_line, reason=seg.reason,
            accept_len=spread4(t.accept), gen_tok_s=gen, gen_tok_s_total=server,
            gen_tok_s_per_req=gpr, round_ms=round_ms, dp_ranks=len(t.ranks), lower_bound=lower,
            windows=t.windows, warmup_windows=t.windows - (gpr.n if gpr else 0),
        )


