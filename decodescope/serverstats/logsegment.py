"""Where one server run ends and the next begins in a log, and the warm-up tags of its
windows.

A log often holds more than one run: a server restarted (with other settings), two
processes writing to one file, an excerpt pasted from two days. Numbers of different
runs are never averaged together, so the log is cut into segments; a new segment
starts at a line that
- comes from another server process (vLLM's "(APIServer pid=N)", llama.cpp's "[N]" prefix),
- is stamped more than CLOCK_SLACK_S earlier than the segment's latest line (a restart
  pasted after a later run, a clock set back),
- is a server start-up line (logformats.STARTUP_MARKERS) after other statistics lines, or
- is an SGLang decode line with an accept length where the previous one had none, or
  the other way round (speculative decoding turned on or off).

Within a segment each window gets a warm-up tag (logsummary's rule); the tagger state
is per segment, so the first window after a restart is judged as a first window."""

import math
from enum import StrEnum
from math import floor, log

from decodescope.serverstats.logformats import running_in

CLOCK_SLACK_S = 30.0  # lines of concurrent processes interleave a little out of order
_BINS_PER_E = 1000  # round-time bins per factor e: 0.1 % wide
PENDING = "pending"  # suspect-or-not of a window decided by earlier lines (see WindowTagger)


class Reason(StrEnum):
    """Why a segment starts where it does."""

    LOG_START = "log start"
    STARTUP = "server start-up"
    PROCESS = "process change"
    CLOCK = "time went back"
    SPEC_ON = "speculation on"
    SPEC_OFF = "speculation off"
    CONTINUES = "continues"  # the first segment of a stretch scanned apart, until joined


def round_s(running, accept_len, gen_tok_s) -> float | None:
    """Seconds per verify round per request implied by a window; None when idle, or when
    a value is not a finite positive number (nan, inf, 0): no round time to trust."""
    running = 1 if running is None else running
    a = 1.0 if accept_len is None else accept_len
    if not (0 < gen_tok_s < math.inf and 0 < running < 1e12 and 0 < a < math.inf):
        return None
    r = a * running / gen_tok_s
    return r if 0 < r < 1e300 else None


def running_of(rec):
    """Requests in flight on a record's line (logformats.RUNNING_KEYS)."""
    v = running_in(rec.fields)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def clock_of(rec):
    """The record's time for ordering: wall clock, else llama.cpp's time since start."""
    return rec.time_s if rec.time_s is not None else rec.fields.get("log_elapsed_s")


class Segment:
    """Tagging state of one segment: what starts the next one, and each series' history."""

    def __init__(self, reason: Reason, first_line: int | None = None):
        self.reason = reason
        self.first_line = first_line  # first recognised line, 1-based
        self.last_line = first_line
        self.records = 0  # records other than start-up lines
        self.processes = set()  # server processes (vLLM pid=, llama.cpp [pid]) whose lines are here
        self.owner = {}  # series with a rank -> the process that logged it (one API server per DP engine)
        self.last_time = None
        self.accept_on = None  # whether the last SGLang decode line had an accept length
        self.speculative = None  # what a start-up line said: True, False, None (not said)
        # (process, time, accept_on, startup, series of the process's line) of the first lines (CONTINUES)
        self.first = None
        self.own = None  # those values on the first line alone (CONTINUES)
        self.seen = set()  # series that had a window
        self.fresh = set()  # series whose next window starts at idle
        self.touched = set()  # series with any window or idle prefill here

    def boundary(self, kind, time_s, process, accept_on, series=None) -> Reason | None:
        if kind == "startup":
            return Reason.STARTUP if self.records else None
        if process is not None and self.processes and self.restarted(process, series, time_s):
            return Reason.PROCESS
        if time_s is not None and self.last_time is not None and time_s < self.last_time - CLOCK_SLACK_S:
            return Reason.CLOCK
        if accept_on is not None and self.accept_on is not None and accept_on != self.accept_on:
            return Reason.SPEC_ON if accept_on else Reason.SPEC_OFF
        return None

    def restarted(self, process, series, time_s) -> bool:
        """Whether a line of `process` begins another server run. A process new here that
        logs a rank no other process logged, while the run's clock goes on, is a sibling
        (vLLM DP with one API server per engine, all in one log); a rank another process
        logged is a restart, and so is a new process's rank-less line (a spec line follows
        its own process's window) or its line after a pause (a restart loads the model)."""
        if process in self.processes:
            return series is not None and series[1] is not None and self.owner.get(series, process) != process
        if series is None or series[1] is None or series in self.owner:
            return True
        return time_s is not None and self.last_time is not None and time_s > self.last_time + CLOCK_SLACK_S

    def note(self, kind, time_s, process, accept_on, line_no, speculative, series=None):
        if self.first_line is None:
            self.first_line = line_no
        self.last_line = line_no
        if self.reason is Reason.CONTINUES and self.first is None:
            self.first = [process, time_s, accept_on, kind == "startup", series]
            self.own = tuple(self.first)
        elif self.first is not None:  # keep the first value of each that any line had
            if self.first[0] is None and process is not None:
                self.first[4] = series
            for i, v in enumerate((process, time_s, accept_on)):
                if self.first[i] is None:
                    self.first[i] = v
        if kind == "startup":
            if not self.records and self.reason is Reason.LOG_START:
                self.reason = Reason.STARTUP
            if speculative is not None:
                self.speculative = speculative
            return
        self.records += 1
        if process is not None:
            self.processes.add(process)
            if series is not None and series[1] is not None:
                self.owner[series] = process
        if time_s is not None:
            self.last_time = time_s
        if accept_on is not None:
            self.accept_on = accept_on

    def absorb(self, later: "Segment"):
        """The tagging state after `later`'s lines (the CONTINUES head of the stretch
        that follows) joined this segment."""
        if later.first is not None and later.first[3] and not self.records and self.reason is Reason.LOG_START:
            self.reason = Reason.STARTUP  # the log's first statistics line is a start-up line
        if later.first_line is not None:
            self.first_line = self.first_line or later.first_line
            self.last_line = later.last_line
        self.records += later.records
        self.processes |= later.processes
        self.owner.update(later.owner)
        for k in ("last_time", "accept_on", "speculative"):
            if getattr(later, k) is not None:
                setattr(self, k, getattr(later, k))
        for series in later.touched:
            (self.fresh.add if series in later.fresh else self.fresh.discard)(series)
        self.seen |= later.seen
        self.touched |= later.touched

    def starts_after(self, mine: "Segment", first_line_only: bool = False) -> Reason | None:
        """Whether this CONTINUES head begins a new segment after `mine`, the segment the
        earlier stretch ended in; `first_line_only`: judged by the head's first line alone."""
        if self.first is None:
            return None
        process, time_s, accept_on, startup, series = self.own if first_line_only else self.first
        if startup:
            return Reason.STARTUP if mine.records else None
        return mine.boundary("decode", time_s, process, accept_on, series)


    def joins_as_one_pass(self, mine: "Segment") -> bool:
        """Whether starts_after gives one pass's answer. It judges the head by the first
        value of each kind any of its lines had; one pass judges each line as it comes, so
        when a value that decides (a time stamp older than `mine`'s after stamp-less lines)
        came after the first line, one pass starts the segment at that later line and keeps
        the lines before it in `mine`: the join cannot place that cut."""
        return self.starts_after(mine) == self.starts_after(mine, first_line_only=True)


class WindowTagger:
    """Cuts the lines into segments and tags them in log order with (segment, suspect,
    round-time bin) for windows; spec lines get the tag of the window before them in
    their segment. Deterministic: two passes tag alike.

    continues=True tags a stretch of log that follows lines not seen here (a chunk of a
    file scanned in parallel): its first segment is CONTINUES, and a series' first
    window there gets the placeholder tag (PENDING, i), deferred[i] = (series, bin),
    until WarmupScan.extend resolves it; spec lines before any window get (PENDING, -1)."""

    def __init__(self, continues: bool = False):
        self.continues = continues
        self.segments = [Segment(Reason.CONTINUES if continues else Reason.LOG_START)]
        self.deferred = []  # (series, bin) of the windows tagged (PENDING, i)
        self._last = (PENDING, -1) if continues else None

    def _note(self, seg, kind, time_s, process, accept_on, line_no, speculative, series=None):
        reason = seg.boundary(kind, time_s, process, accept_on, series)
        if reason is not None:
            seg = Segment(reason)
            self.segments.append(seg)
            self._last = None
        seg.note(kind, time_s, process, accept_on, line_no, speculative, series)
        return seg

    def tag(self, rec):
        return self.tag_facts(
            rec.kind, (rec.engine, rec.rank), running_of(rec), rec.accept_len, rec.gen_tok_s,
            clock_of(rec), rec.process, rec.line_no, rec.fields.get("speculative"),
        )

    def tag_facts(self, kind, series, running, accept_len, gen_tok_s, time_s=None, process=None,
                  line_no=0, speculative=None):
        seg = self.segments[-1]
        accept_on = (accept_len is not None) if kind == "decode" and series[0] == "sglang" else None
        first = seg.first  # CONTINUES: note() while a first value is still to be learnt
        if (kind == "startup" or seg.first_line is None
                or (first is not None and ((first[0] is None and process is not None)
                                           or (first[1] is None and time_s is not None)
                                           or (first[2] is None and accept_on is not None)))
                or (process is not None and (process not in seg.processes
                                             or (series[1] is not None and seg.owner.get(series) != process)))
                or (time_s is not None and seg.last_time is not None and time_s < seg.last_time - CLOCK_SLACK_S)
                or (accept_on is not None and accept_on is not seg.accept_on)):
            seg = self._note(seg, kind, time_s, process, accept_on, line_no, speculative, series)
        else:  # the common line: same process, clock and settings as the one before
            seg.last_line = line_no
            seg.records += 1
            if time_s is not None:
                seg.last_time = time_s
        if kind == "prefill":
            if running == 0:
                seg.fresh.add(series)
                seg.touched.add(series)
            return None
        if gen_tok_s is None:
            return self._last if kind == "spec" else None
        r = round_s(running, accept_len, gen_tok_s)
        b = None if r is None else floor(log(r) * _BINS_PER_E)
        i = len(self.segments) - 1
        touched = seg.touched
        if series in touched:
            self._last = (i, series in seg.fresh or series not in seg.seen, b)
        else:
            if self.continues and i == 0:
                self.deferred.append((series, b))
                self._last = (PENDING, len(self.deferred) - 1)
            else:
                self._last = (i, True, b)  # the series' first window in this segment
            touched.add(series)
        seg.seen.add(series)
        if r is None:
            seg.fresh.add(series)
        else:
            seg.fresh.discard(series)
        return self._last
