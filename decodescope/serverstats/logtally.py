"""The running sums of one log segment (Tally), the clock buckets that add DP ranks up,
and how tags of a stretch scanned apart read in the whole log (Join, resolve)."""

import math
from typing import NamedTuple

from decodescope.serverstats.logsegment import PENDING
from decodescope.serverstats.logtypes import Spread


def new4():
    return [0, 0.0, math.inf, -math.inf]


def add4(t, v):
    t[0] += 1
    t[1] += v
    if v < t[2]:
        t[2] = v
    if v > t[3]:
        t[3] = v


def join4(t, u):
    t[0] += u[0]
    t[1] += u[1]
    t[2] = min(t[2], u[2])
    t[3] = max(t[3], u[3])


def spread4(t) -> Spread | None:
    return Spread(t[1] / t[0], t[2], t[3], t[0]) if t[0] else None


def lower_bounds(low: dict) -> tuple[Spread, Spread]:
    """From each series' windows that ran out of requests (Tally.low): the rate per series
    over all of them, and the server's: each series' mean added up (tok/s), its min and
    max likewise (every series at its least, at its most), n the windows behind it. Each
    series runs at least its mean here, so the server runs at least their sum; added in
    series order, so byte ranges scanned apart give the one-pass figure."""
    lows = [low[k] for k in sorted(low, key=str)]
    every = new4()
    for t in lows:
        join4(every, t)
    server = Spread(sum(t[1] / t[0] for t in lows), sum(t[2] for t in lows), sum(t[3] for t in lows), every[0])
    return spread4(every), server


class Tally:
    """The sums of one segment."""

    def __init__(self):
        self.steady = {}  # (suspect, bin) -> [n_g, sum_g, min_g, max_g, sum_gpr, min, max, n_a, sum_a, min_a, max_a]
        self.accept = new4()  # every window's accept length
        self.low = {}  # series -> 4-list of gen tok/s of its windows that ended with no request running
        self.totals = {}  # (idle, max bin, max suspect bin) -> 4-list of DP-summed rates
        self.bucket = None  # [key, [(series, gen, tag)]]: the open clock bucket
        self.head = None  # CONTINUES: the first bucket, kept until joined
        self.pending = []  # closed buckets with a PENDING tag
        self.ranks = set()
        self.windows = 0
        self.limits = None

    def join(self, u: "Tally"):
        for tag, t in u.steady.items():
            mine = self.steady.setdefault(tag, [0, 0.0, math.inf, -math.inf, 0.0, math.inf, -math.inf,
                                                0, 0.0, math.inf, -math.inf])
            for i in (0, 1, 4, 7, 8):
                mine[i] += t[i]
            for i in (2, 5, 9):
                mine[i] = min(mine[i], t[i])
            for i in (3, 6, 10):
                mine[i] = max(mine[i], t[i])
        join4(self.accept, u.accept)
        for series, t in u.low.items():
            join4(self.low.setdefault(series, new4()), t)
        for k, t in u.totals.items():
            join4(self.totals.setdefault(k, new4()), t)
        self.ranks |= u.ranks
        self.windows += u.windows
        self.limits = None


class Join(NamedTuple):
    """Where a stretch scanned apart joined the scan before it (WarmupScan.extend)."""

    i0: int  # index here of the stretch's first segment
    merged: bool  # that segment continues the one before (else it starts a new one)
    seen: frozenset  # series with a window in the segment it continues
    fresh: frozenset  # of those, series whose next window starts at idle
    last: tuple | None  # tag of the last window before the stretch (for its first spec lines)
    line_offset: int  # lines before the stretch


def resolve(tag, join: Join, deferred: list):
    """A tag of a stretch scanned apart (WindowTagger(continues=True)) as the whole log's."""
    if tag is None:
        return None
    if tag[0] != PENDING:
        return (tag[0] + join.i0,) + tag[1:]
    if tag[1] < 0:
        return join.last if join.merged else None
    series, b = deferred[tag[1]]
    # in a segment that starts with the stretch, a series' first window is its first there
    return (join.i0, not join.merged or series not in join.seen or series in join.fresh, b)


BIN0 = 1 << 21  # round-time bins are within +-745000 (logsegment: round times 1e-300..1e300 s)


def tag_code(tag) -> int:
    """A warm-up tag as one integer: (segment, suspect, bin) >= 0, (PENDING, i) < 0."""
    if tag[0] == PENDING:
        return -2 - tag[1]
    i, suspect, b = tag
    return ((2 * i + bool(suspect)) << 22) | (0 if b is None else b + BIN0)


def code_tag(code: int):
    if code < 0:
        return PENDING, -2 - code
    low = code & ((1 << 22) - 1)
    return code >> 23, bool(code >> 22 & 1), None if low == 0 else low - BIN0


def is_warm(tag, limits) -> bool:
    """The warm-up rule for a window's tag, given its segment's limits (WarmupScan.limits)."""
    if tag is None:
        return False
    _, suspect, b = tag
    if b is None:
        return True
    ref, sus, out = limits
    if ref is None:
        return False
    return b > out or (suspect and b > sus)


def new_bucket(key):
    """[clock key, {series: [sum of gen, n]}, any idle, max bin, max suspect bin, PENDING members]"""
    return [key, {}, False, None, None, None]


def into_bucket(b, series, gen, tag):
    if tag[0] == PENDING:
        if b[5] is None:
            b[5] = []
        b[5].append((series, gen, tag))
        return
    s = b[1].get(series)
    if s is None:
        b[1][series] = [gen, 1]
    else:
        s[0] += gen
        s[1] += 1
    bin_ = tag[2]
    if bin_ is None:
        b[2] = True
        return
    if b[3] is None or bin_ > b[3]:
        b[3] = bin_
    if tag[1] and (b[4] is None or bin_ > b[4]):
        b[4] = bin_


def merge_bucket(b, other):
    for series, (g, n) in other[1].items():
        s = b[1].setdefault(series, [0.0, 0])
        s[0] += g
        s[1] += n
    b[2] = b[2] or other[2]
    for i in (3, 4):
        if other[i] is not None and (b[i] is None or other[i] > b[i]):
            b[i] = other[i]
    if other[5]:
        b[5] = (b[5] or []) + other[5]


def resolved(b, real):
    """The bucket with its PENDING members tagged for good (in place)."""
    pending, b[5] = b[5], None
    for series, gen, tag in pending or ():
        into_bucket(b, series, gen, real(tag))
    return b


def median_bin(t: Tally, include_suspect: bool):
    counts = sorted(
        (b, v[0]) for (suspect, b), v in t.steady.items()
        if b is not None and v[0] and (include_suspect or not suspect)
    )
    total = sum(n for _, n in counts)
    seen = 0
    for b, n in counts:
        seen += n
        if 2 * seen >= total:
            return b
    return None


def spread(tallies, n_i, sum_i, min_i, max_i) -> Spread | None:
    n = sum(t[n_i] for t in tallies)
    if n == 0:
        return None
    return Spread(
        mean=sum(t[sum_i] for t in tallies) / n,
        min=min(t[min_i] for t in tallies if t[n_i]),
        max=max(t[max_i] for t in tallies if t[n_i]),
        n=n,
    )
