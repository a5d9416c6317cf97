"""A distribution (n, mean, p50/p90/p99, min, max) over any number of values, fed as they
come, in bounded memory: a run file of millions of inter-chunk gaps is summarised
without holding them.

Up to EXACT_MAX values are kept as they are, so a small run's percentiles
are exact. Past that the values go into a histogram of BIN-wide bins (count per bin), so
memory follows the number of distinct bins, not of values: for gaps in ms a bin is 1 µs,
and a percentile is then off by at most half a bin (0.5 µs). Counts (tokens) are whole
numbers and stay exact. n, mean, min and max are always exact.

Percentiles: linear interpolation between the closest ranks (numpy's default), the
histogram's ranks taking their bin's centre (the lowest and highest rank: min and max).
"""

import math
from bisect import bisect_right
from collections import Counter

PERCENTILES = (50, 90, 99)
EXACT_MAX = 20_000  # values kept exactly: at most ~640 KB (a list of floats)
BINS_PER_UNIT = 1000  # histogram resolution: 1/1000 of the value's unit (1 µs for ms, 0.001 tok/s)
BIN = 1 / BINS_PER_UNIT


class Spread:
    __slots__ = ("n", "_sum", "_min", "_max", "_exact", "_bins")

    def __init__(self):
        self.n = 0
        self._sum = 0.0  # of the values past EXACT_MAX's switch, in arrival order
        self._min = self._max = None
        self._exact: list | None = []  # a list, not array("d"): counts stay ints, as given
        self._bins: Counter | None = None

    def add(self, x) -> None:
        self.extend((x,))

    def extend(self, values) -> None:
        v = values if isinstance(values, list | tuple) else list(values)
        total = None if None in v else sum(v)
        if total is None or not math.isfinite(total):  # else every value is finite: C-level passes
            v = [x for x in v if x is not None and math.isfinite(x)]
            total = sum(v)
        if not v:
            return
        self.n += len(v)
        if self._exact is not None:
            self._exact.extend(v)
            if len(self._exact) > EXACT_MAX:
                self._to_bins()
            return
        self._sum += total
        self._min, self._max = min(self._min, *v), max(self._max, *v)
        self._bins.update(_bins(v))

    def _to_bins(self) -> None:
        v = sorted(self._exact)
        self._sum, self._min, self._max = sum(v), v[0], v[-1]
        self._bins = Counter(_bins(v))
        self._exact = None

    def result(self) -> dict:
        if self._exact is not None:
            v = sorted(self._exact)
            out = {"n": len(v), "mean": sum(v) / len(v) if v else None}
            for q in PERCENTILES:
                out[f"p{q}"] = _interpolate(v.__getitem__, len(v), q) if v else None
            out["min"], out["max"] = (v[0], v[-1]) if v else (None, None)
            return out
        ranked = self._ranked()
        out = {"n": self.n, "mean": self._sum / self.n}
        for q in PERCENTILES:
            out[f"p{q}"] = _interpolate(ranked, self.n, q)
        out["min"], out["max"] = self._min, self._max
        return out

    def _ranked(self):
        """The value at a rank (0-based) of the sorted values, from the histogram."""
        keys = sorted(self._bins)
        ends, total = [], 0  # ends[i]: ranks below the end of bin keys[i]
        for k in keys:
            total += self._bins[k]
            ends.append(total)

        def at(rank: int) -> float:
            if rank == 0:
                return self._min
            if rank == self.n - 1:
                return self._max
            return keys[bisect_right(ends, rank)] / BINS_PER_UNIT  # the first bin whose end passes rank

        return at


def _bins(values):
    # bin k holds [k - 0.5, k + 0.5) / BINS_PER_UNIT; maps, not a loop: C-level, millions of gaps
    return map(math.floor, map((0.5).__add__, map(float(BINS_PER_UNIT).__mul__, values)))


def _interpolate(at, n: int, q: float) -> float:
    # linear interpolation between closest ranks (numpy's default); at(i): the i-th smallest
    pos = (n - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return at(lo) + (at(hi) - at(lo)) * (pos - lo)


def distribution(values) -> dict:
    s = Spread()
    s.extend(values)
    return s.result()
