"""One rank's steps from a trace read piece by piece, in memory that does not grow with the file.

The one-pass reading (steps.find_steps over a whole RawTrace) holds every GPU event and
launch call. Here each GPU event is held only until its step is complete:
- the step windows are the annotation ranges, fixed at the first GPU event: Kineto writes
  all CPU-side events (annotations among them) before the GPU activities;
- a kernel waits for its launch call, which Kineto writes after the kernels it launched
  (a CUDA graph replay: ~1,000 kernels, then its cudaGraphLaunch), then joins its step;
- a step is swept and dropped once events of a step LAG windows later arrive;
- the union of all GPU events (for the time outside every step) is summed in order of
  start, the last REORDER events held back in case the next piece has earlier ones.
Where a trace breaks one of these orders the result could differ from the one-pass
reading, so `Fallback` is raised instead and the caller reads the file whole: the output
is the same either way. What is kept is bounded by steps, not events: one StepPart
(class and unknown-kernel sums) per step, the open steps' events, one bit per launch
correlation id seen.
"""

from bisect import bisect_right
from dataclasses import dataclass

from decodescope.trace.bandwidth import GemmShape, gemm_bandwidth
from decodescope.trace.classify import classify
from decodescope.trace.ranges import pieces, read
from decodescope.trace.reader import RawTrace, bad_lines
from decodescope.trace.steps import (RankSteps, StepSource, annotation_windows, find_steps, reduce_group,
                                     steps_from_parts, union_fold)

LAG = 2  # a step is complete once an event of a step this many windows later arrives
REORDER = 1 << 14  # GPU events held back to put them in order of start (Kineto writes them nearly so)


class Fallback(Exception):
    """The trace's order does not allow a streamed reading equal to the one-pass one."""


class StepStream:
    """Feed RawTrace pieces in file order, then `finish`."""

    def __init__(self):
        self.names: list[str] = []
        self.classes: list = []
        self.ids: dict[str, int] = {}
        self.annotations: list[tuple] = []  # CPU annotations, until the windows are fixed
        self.source, self.windows, self.starts = None, [], []
        self.pending: dict[int, list[tuple]] = {}  # correlation -> GPU events waiting for their launch call
        self.launched = Bits()  # correlation ids of the launch calls already read
        self.open: dict[int, list[tuple]] = {}  # window -> its GPU events, while the step may grow
        self.parts: list = []  # StepParts of the complete steps, in window order
        self.done_below = 0  # steps of windows below this one are complete
        self.last = (1.0, 0.0, 0.0, [])  # (start, end, next start µs, events) of the window assigned last
        self.held: list[tuple] = []  # GPU events not yet in the union, sorted
        self.folded = (float("-inf"), float("-inf"))  # the last one folded in
        self.union = (0.0, float("-inf"))  # (µs covered, end of the last covered stretch)
        self.count, self.first_us, self.last_start = 0, float("inf"), 0.0
        self.facts = RawTrace(path="")  # everything but the events: meta, devices, counts, problems

    def feed(self, piece: RawTrace) -> None:
        if piece.shapes:
            raise Fallback("GEMM shapes are joined to their kernels over the whole trace")
        self._facts(piece)
        cpu = [a for a in piece.annotations if not a[3]]
        if cpu and self.source is not None:
            raise Fallback("an annotation after the first GPU event")
        self.annotations += cpu
        if piece.gpu:
            if self.source is None:
                self._fix_windows()
            remap = [self._id(n, c) for n, c in zip(piece.names, piece.gpu_cat)]
            gpu = sorted([(s, e, remap[n], c) for s, e, n, c in piece.gpu])  # Kineto's order: sorted already
            self.last_start = piece.gpu[-1][0]  # in the file's order: where a truncated file stops
            self._union(gpu)
            self._pend(gpu)
        self._launches(piece.launch_ts)

    def _facts(self, piece: RawTrace) -> None:
        f = self.facts
        f.path = piece.path
        f.origin_us = piece.origin_us
        f.problems += piece.problems
        f.devices |= piece.devices
        f.bytes_read += piece.bytes_read
        f.truncated = f.truncated or piece.truncated
        f.lone_events += piece.lone_events
        f.bad_events += piece.bad_events
        f.device_name = f.device_name or piece.device_name
        f.base_us = f.base_us or piece.base_us
        f.rank = f.rank if f.rank is not None else piece.rank
        f.world_size = f.world_size if f.world_size is not None else piece.world_size

    def _fix_windows(self) -> None:
        self.source, self.windows = annotation_windows(self.annotations)
        if not self.windows:  # CUDA-graph launches or idle gaps: need every event first
            raise Fallback("no step annotations before the GPU events")
        self.starts = [w[1] for w in self.windows]
        self.annotations = []

    def _id(self, name: str, cat: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
            self.classes.append(classify(name, cat))
        return i

    def _union(self, gpu: list[tuple]) -> None:
        """Fold the events into the union in order of start, all but the last REORDER of them,
        which wait for the next piece's events that may start before them."""
        self.count += len(gpu)
        self.first_us = min(self.first_us, gpu[0][0])
        if gpu[0][:2] < self.folded:
            raise Fallback("GPU events far out of order")
        keys = self.held + gpu  # both sorted: one merge
        keys.sort()
        cut = max(0, len(keys) - REORDER)
        if cut:
            self.union = union_fold(keys[:cut], *self.union)
            self.folded = keys[cut - 1][:2]
        self.held = keys[cut:]

    def _pend(self, gpu: list[tuple]) -> None:
        """Each event waits for its launch call, which Kineto writes after the kernels it launched;
        events join their steps in the order of those calls, so that the steps fill in time order
        (an event without a call joins now, at its own start)."""
        pending, bits, base = self.pending, self.launched.bits, self.launched.base
        top = len(bits) << 3
        for ev in gpu:
            corr = ev[3]
            if corr < 0:
                self._assign([ev], ev[0])
            elif 0 <= (j := corr - base) < top and bits[j >> 3] >> (j & 7) & 1:  # Bits, inlined: once per event
                raise Fallback("a kernel written after its launch call")
            elif (evs := pending.get(corr)) is None:
                pending[corr] = [ev]
            else:
                evs.append(ev)

    def _launches(self, launch_ts: dict[int, float]) -> None:
        if not launch_ts:
            return
        self.launched.cover(min(launch_ts), max(launch_ts))
        pending, bits, base = self.pending, self.launched.bits, self.launched.base
        for corr, ts in launch_ts.items():
            j = corr - base  # the launch's bit (Bits, inlined: this runs once per launch call)
            byte, bit = bits[j >> 3], 1 << (j & 7)
            if byte & bit:
                raise Fallback("a correlation id launched twice")
            bits[j >> 3] = byte | bit
            if (evs := pending.pop(corr, None)) is not None:
                self._assign(evs, ts)

    def _assign(self, evs: list[tuple], t: float) -> None:
        """Into the window their launch call (else their own start) falls in, as steps._assign."""
        low, end, nxt, held = self.last  # most events fall in the window the last ones did
        if low <= t <= end and t < nxt:
            held.extend(evs)
            return
        i = bisect_right(self.starts, t) - 1
        if i < 0 or t > self.windows[i][2]:
            return
        if i < self.done_below:
            raise Fallback("an event of a step already complete")
        if (held := self.open.get(i)) is None:
            held = self.open[i] = evs
        else:
            held.extend(evs)
        # t finds window i again where starts[i] <= t <= its end and t < the next window's start
        self.last = (self.starts[i], self.windows[i][2],
                     self.starts[i + 1] if i + 1 < len(self.starts) else float("inf"), held)
        if i - LAG > self.done_below:
            self._close(i - LAG)

    def _close(self, below: int) -> None:
        for w in sorted(k for k in self.open if k < below):
            self.parts.append(reduce_group(w, self.open.pop(w), self.classes))
        self.done_below = below

    def finish(self) -> tuple[RawTrace, RankSteps]:
        """The file's facts (a RawTrace without events) and its steps."""
        f = self.facts
        f.problems += bad_lines(f.lone_events, f.bad_events)
        if not self.count:
            return f, RankSteps(StepSource.NONE, (), 0.0)
        for evs in self.pending.values():  # no launch call read: the event's own start, as steps._assign
            for ev in evs:
                self._assign([ev], ev[0])
        total, _ = union_fold(self.held, *self.union)
        self._close(len(self.windows) + 1)
        return f, steps_from_parts(self.source, self.windows, self.parts, self.names, self.first_us, total)


class Bits:
    """A set of integers close to each other, one bit each: CUPTI's correlation ids count up in
    the profiled process, so a trace's ids span about twice its launch calls (~0.25 byte each).
    `cover` the ids first; the set is then read and written through `bits` and `base`."""

    SPAN = 1 << 33  # ids further apart than this are not one counter's: give up rather than allocate

    def __init__(self):
        self.base = 0  # the id of bit 0, a multiple of 8
        self.bits = bytearray()

    def cover(self, low: int, high: int) -> None:
        if not self.bits:
            self.base = low & ~7
        if low < self.base:  # ids below the first ones seen (rare): move bit 0 down
            self.bits[:0] = bytes((self.base - (low & ~7)) >> 3)
            self.base = low & ~7
        need = ((high - self.base) >> 3) + 1
        if need > self.SPAN >> 3:
            raise Fallback("correlation ids too far apart")
        if need > len(self.bits):  # at least double: amortised growth
            self.bits.extend(bytes(max(need - len(self.bits), len(self.bits))))

    def __contains__(self, i: int) -> bool:
        j = i - self.base
        return 0 <= j < len(self.bits) << 3 and bool(self.bits[j >> 3] >> (j & 7) & 1)


@dataclass(frozen=True)
class RankRead:
    """One rank's file read: its facts and its steps."""

    facts: RawTrace  # meta, devices, problems (the events too where the file was read whole)
    steps: RankSteps
    gpu_events: int
    first_us: float | None  # the first GPU event's start, µs after facts.origin_us
    last_read_us: float | None  # start of the GPU event read last: where a truncated file stops
    gemm: tuple[GemmShape, ...]  # where shapes were recorded
    read_whole: str = ""  # why the file was read whole, not streamed ("" when streamed)


def read_rank(path: str, workers: int = 1) -> RankRead:
    """Streamed where the trace's order allows, else read whole (the same result, more memory)."""
    s = StepStream()
    try:
        for piece in pieces(path, workers):
            s.feed(piece)
        facts, steps = s.finish()
        first = s.first_us if s.count else None
        return RankRead(facts, steps, s.count, first, s.last_start if s.count else None, ())
    except Fallback as e:
        why = str(e)
        del s
    raw = read(path, workers)
    classes = [classify(n, c) for n, c in zip(raw.names, raw.gpu_cat)]
    return RankRead(raw, find_steps(raw), len(raw.gpu), min((ev[0] for ev in raw.gpu), default=None),
                    raw.gpu[-1][0] if raw.gpu else None, gemm_bandwidth(raw, classes), why)
