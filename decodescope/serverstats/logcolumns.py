"""The summary tally of a run of SGLang quick lines (logfused), column by column.

WarmupScan.add_facts takes one line at a time, in Python. Most lines of a log are windows
in steady state (same segment, clock going forward, speculation unchanged, none idle, no
idle prefill between them, each series with a window before): for a run of those, the
tags and sums come out
of calls that loop in C (map, sorted, groupby, reduce) over the run's columns. They give
exactly what add_facts gives line by line: each sum is added up in the same order, each
key is inserted in the same order. Any other run takes add_facts line by line. With the
C module (logfast), _fastlog.tally does _windows' and _tally's work in one call."""

import math
from functools import reduce
from itertools import compress, groupby, repeat
from operator import add, eq, floordiv, itemgetter, lt, mul, not_, sub, truediv

from decodescope.serverstats import logfast
from decodescope.serverstats.logsegment import _BINS_PER_E, CLOCK_SLACK_S
from decodescope.serverstats.logsummary import BUCKET_S
from decodescope.serverstats.logtally import BIN0, add4, new4, tag_code

_FIRST = itemgetter(0)
_C_CONSTANTS = (float(_BINS_PER_E), BUCKET_S, BIN0, sum)  # what _fastlog.tally computes with


def add_run(scan, rows: list, codes) -> None:
    """scan.add_facts of each row (kind, series, running, accept, gen, time_s, line_no) in
    order; the codes (tag_code) of the windows' tags appended to `codes` (None: not kept)."""
    add_facts = scan.add_facts
    k = 0
    for kind, series, running, accept, gen, time_s, line_no in rows:  # to the first window, one by one:
        k += 1  # a line may start a segment, a window be its series' first or follow an idle one
        tag = add_facts(kind, series, running, accept, gen, time_s, None, line_no)
        if tag is not None:
            if codes is not None:
                codes.append(tag_code(tag))
            break
    if k == len(rows) or _steady_run(scan, rows[k:], codes):
        return
    for kind, series, running, accept, gen, time_s, line_no in rows[k:]:
        tag = add_facts(kind, series, running, accept, gen, time_s, None, line_no)
        if tag is not None and codes is not None:
            codes.append(tag_code(tag))


def _steady_run(scan, rows: list, codes) -> bool:
    """add_run of rows that each follow a window of their series, when they are all of the
    steady kind (see the module's docstring): True; else False, and nothing changed."""
    seg = scan.tagger.segments[-1]
    kinds, series, runs, accepts, gens, times, lines = zip(*rows)
    names = {series[0]} if series.count(series[0]) == len(series) else set(series)  # count: no hashing
    first = seg.first  # a stretch's head still learning its first values takes the one-by-one path
    if (seg.first_line is None or (first is not None and (first[1] is None or first[2] is None))
            or not names <= seg.seen or not names.isdisjoint(seg.fresh) or None in times):
        return False
    last = -math.inf if seg.last_time is None else seg.last_time
    if any(map(lt, times, map(sub, (last, *times[:-1]), repeat(CLOCK_SLACK_S)))):  # time went back
        return False
    window = list(map(eq, kinds, repeat("decode")))
    if 0 in compress(runs, map(not_, window)):  # a prefill with no request running: idle
        return False
    if logfast.FAST is not None:
        nd = logfast.FAST.tally(scan, scan.tallies[-1], len(scan.tagger.segments) - 1, seg.accept_on, window, series,
                                runs, accepts, gens, times, codes, _C_CONSTANTS)
        if nd < 0:
            return False
        columns = None
    else:
        columns = _windows(seg.accept_on, window, series, runs, accepts, gens, times)
        if columns is None:
            return False
        nd = len(columns[0])
    if nd:
        scan.kinds["decode"] += nd
    if len(rows) > nd:
        scan.kinds["prefill"] += len(rows) - nd
    seg.last_line = lines[-1]
    seg.records += len(rows)
    seg.last_time = times[-1]
    if nd and columns is not None:
        _tally(scan, *columns, codes)
    return True


def _windows(accept_on, window, series, runs, accepts, gens, times):
    """(series, gens, running, accepts or None, times, bins) of the windows among the rows, or None
    when one of them is not steady: idle or no round time (logsegment.round_s), or its
    accept length turns speculation on or off (logsegment.Segment.boundary)."""
    gens = list(compress(gens, window))
    nd = len(gens)
    if not nd:
        return gens, [], [], None, [], []
    runs = list(compress(runs, window))
    accepts = list(compress(accepts, window))
    if accept_on is None or nd - accepts.count(None) != (nd if accept_on else 0) or None in runs:
        return None
    a = accepts if accept_on else [1.0] * nd
    if not (min(gens) > 0 and max(gens) < math.inf and min(runs) > 0 and max(runs) < 1e12
            and min(a) > 0 and max(a) < math.inf):
        return None
    rounds = list(map(truediv, map(mul, a, runs), gens))  # round_s: a * running / gen
    if not (min(rounds) > 0 and max(rounds) < 1e300):
        return None
    bins = list(map(math.floor, map(mul, map(math.log, rounds), repeat(_BINS_PER_E))))
    return list(compress(series, window)), gens, runs, accepts if accept_on else None, list(compress(times, window)), bins


def _tally(scan, series, gens, runs, accepts, times, bins, codes):
    """The windows of a steady run, none suspect, into the segment's tally."""
    i = len(scan.tagger.segments) - 1
    t = scan.tallies[-1]
    scan.tagger._last = (i, False, bins[-1])
    if accepts is not None:
        _fold(t.accept, 0, accepts)
    scan.windows += len(gens)
    t.windows += len(gens)
    one = series[0] if series.count(series[0]) == len(series) else None  # the common case: one series
    t.ranks.update((one,) if one else series)
    _steady(t.steady, bins, gens, list(map(truediv, gens, runs)), accepts)
    keys = map(int, map(floordiv, times, repeat(BUCKET_S)))
    buckets = [(key, *zip(*group)) for key, group in groupby(zip(keys, series, gens, bins), _FIRST)]
    _into_bucket(scan, t, one, *buckets[0])
    if len(buckets) > 1:
        if scan.tagger.continues and len(scan.tallies) == 1 and t.head is None:  # open_bucket keeps a head
            for bucket in buckets[1:]:
                _into_bucket(scan, t, one, *bucket)
        else:
            scan.close_bucket(t)
            for _, _, ss, g, b in buckets[1:-1]:  # opened and closed here: close_bucket's sum over series
                per = [(one, g)] if one else _by_series(ss, g)
                add4(t.totals.setdefault((False, max(b), None, len(per)), new4()), _total(per))
            _into_bucket(scan, t, one, *buckets[-1])
    if codes is not None:  # tag_code((i, False, b))
        codes.extend(map(add, bins, repeat((2 * i << 22) + BIN0)))


def _into_bucket(scan, t, one, key, _, ss: tuple, g: tuple, b: tuple):
    """logtally.into_bucket of windows (series ss, all `one` when not None; gen g, bin b) with
    clock key `key`, none suspect."""
    bucket = t.bucket
    if bucket is None or bucket[0] != key:
        bucket = scan.open_bucket(t, key)
    for s, gs in [(one, g)] if one else _by_series(ss, g):
        per = bucket[1].get(s)
        if per is None:  # [sum of gen, n], the first gen as it is
            bucket[1][s] = [reduce(add, gs[1:], gs[0]), len(gs)]
        else:
            per[0] = reduce(add, gs, per[0])
            per[1] += len(gs)
    top = max(b)
    if bucket[3] is None or top > bucket[3]:
        bucket[3] = top


def _total(per: list) -> float:
    """WarmupScan._tally_bucket's total, the sum over series of each one's mean gen."""
    if len(per) == 1:  # sum() would add the one mean to 0, which changes nothing
        g = per[0][1]
        return reduce(add, g[1:], g[0]) / len(g)
    return sum(reduce(add, g[1:], g[0]) / len(g) for _, g in per)


def _by_series(ss: tuple, g: tuple) -> list:
    """[(series, its gens in order)], the series in the order they come (a bucket's order)."""
    if ss.count(ss[0]) == len(ss):
        return [(ss[0], g)]
    per = {}
    for s, x in zip(ss, g):
        per.setdefault(s, []).append(x)
    return list(per.items())


def _steady(steady: dict, bins, gens, per_req, accepts):
    """WarmupScan._count of windows tagged (i, False, bin): each (False, bin) key inserted
    where its first window comes, each sum added up in the windows' order (a stable sort)."""
    inf = math.inf
    for b in dict.fromkeys(bins):
        if (False, b) not in steady:
            steady[False, b] = [0, 0.0, inf, -inf, 0.0, inf, -inf, 0, 0.0, inf, -inf]
    columns = (bins, gens, per_req) if accepts is None else (bins, gens, per_req, accepts)
    for b, group in groupby(sorted(zip(*columns), key=_FIRST), _FIRST):
        t = steady[False, b]
        _, g, p, *a = zip(*group)
        _fold(t, 0, g)
        t[4] = reduce(add, p, t[4])
        lo, hi = min(p), max(p)
        if lo < t[5]:
            t[5] = lo
        if hi > t[6]:
            t[6] = hi
        if a:
            _fold(t, 7, a[0])


def _fold(t: list, at: int, values):
    """logtally.add4 of each value in order into t[at:at + 4] (n, sum, min, max)."""
    t[at] += len(values)
    t[at + 1] = reduce(add, values, t[at + 1])
    lo, hi = min(values), max(values)
    if lo < t[at + 2]:
        t[at + 2] = lo
    if hi > t[at + 3]:
        t[at + 3] = hi
