"""A large plain (not gzipped) trace in Kineto's layout, read in byte ranges by parallel
processes. Each range starts at an event boundary: the events whose separator starts
inside it are its own. `read` joins one range per core into one RawTrace; `pieces` hands
on small ranges in file order, a few at a time, for a reading whose memory does not grow
with the file."""

import os
import re
from collections import deque
from concurrent.futures import ProcessPoolExecutor

from decodescope.trace.reader import (BLOCK_BYTES, EVENTS_START, KINETO_SEP, EventStream, RawTrace, bad_lines,
                                      blocks, read_trace)

PARALLEL_BYTES = 64 << 20  # a plain .json this large is read in byte ranges
# bytes per range handed on by `pieces`: a range's events as Python tuples take ~1/8 of its
# bytes (a 16 MB range of the eager H200 trace: ~7,000 GPU events and launches)
PIECE_BYTES = 16 << 20


def read(path: str, workers: int = 1) -> RawTrace:
    """The whole trace, on `workers` processes where the file is large, plain and in Kineto's layout."""
    try:
        ranges = _ranges(path, workers)
    except OSError:
        ranges = []  # read_trace says what is wrong with the file
    if not ranges:
        return read_trace(path)
    with ProcessPoolExecutor(max_workers=len(ranges)) as pool:
        return _merge(str(path), list(pool.map(_read_range, ranges)))


def pieces(path: str, workers: int = 1):
    """The trace as RawTraces in file order, each of one small byte range (or, where the file is
    not split, of one block), read ahead on `workers` processes: at most workers + 2 ranges
    are held at once, whatever the file's size."""
    try:
        jobs = _ranges(path, workers, PIECE_BYTES)
    except OSError:
        jobs = []  # read_pieces says what is wrong with the file
    if not jobs:
        yield from read_pieces(path)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        ahead: deque = deque()
        for job in jobs:
            ahead.append(pool.submit(_read_range, job))
            if len(ahead) > workers + 1:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def read_pieces(path: str):
    """read_trace's reading handed on block by block, so that no more than a block of events is
    held: each RawTrace yielded holds one block's events (its `names` is the file's list so far);
    the last one also the file's facts (rank, device, counts, problems left)."""
    t = RawTrace(path=str(path))
    try:
        st = EventStream(t)
        for block in blocks(path, t):
            st.feed(block)
            yield _drain(t)
        st.finish(report=False)  # the skipped events are counted, their line written by the caller
    except OSError as e:
        t.problems.append(f"could not read {path}: {e.strerror or e}")
    yield t


def _drain(t: RawTrace) -> RawTrace:
    """The events and problems gathered in `t` so far, moved into a new RawTrace."""
    piece = RawTrace(path=t.path, origin_us=t.origin_us, names=t.names, gpu_cat=t.gpu_cat, gpu=t.gpu,
                     launch_ts=t.launch_ts, graph_launches=t.graph_launches, annotations=t.annotations,
                     shapes=t.shapes, shaped_launches=t.shaped_launches, problems=t.problems)
    t.gpu, t.launch_ts, t.graph_launches, t.annotations, t.shapes, t.shaped_launches, t.problems = \
        [], {}, [], [], [], [], []
    return piece


def _ranges(path: str, workers: int, piece: int | None = None) -> list[tuple]:
    """(path, start, end, ts digits above the last nine) per range, one per worker or one per
    `piece` bytes; [] to read in one pass."""
    size = os.path.getsize(path)
    if workers < 2 or size < PARALLEL_BYTES:
        return []
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    m = EVENTS_START.search(head)
    ts = re.search(rb'"ts": (\d+)', head[m.end():]) if m else None
    if head[:2] == b"\x1f\x8b" or not ts or KINETO_SEP not in head:
        return []
    hi = ts.group(1)[:-9]
    n = -(-size // piece) if piece else workers
    step = size // n
    return [(path, i * step, size if i == n - 1 else (i + 1) * step, hi) for i in range(n)]


def _read_range(job: tuple) -> RawTrace:
    """The events whose separator starts in [start, end); the first range also reads the
    header, the last one the tail."""
    path, start, end, hi = job
    t = RawTrace(path=path)
    st = EventStream(t)
    st.hi, st.cut, t.origin_us = hi, len(hi), int(hi or b"0") * 1e9
    st.in_events = start > 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for data in _range_bytes(f, start, end, size):
            t.bytes_read += len(data)
            st.feed(data)
    if end < size:
        st.flush()
    else:
        st.finish(report=False)
    return t


def _range_bytes(f, start: int, end: int, size: int):
    """From the first event that starts in the range (after a separator at >= start, or
    the file's start) to the end of the last one (before the first separator at >= end)."""
    f.seek(start)
    pos, first = start, start > 0
    while pos < end:
        data = f.read(min(BLOCK_BYTES, end - pos))
        if not data:
            return
        pos += len(data)
        if first:
            i = data.find(KINETO_SEP)
            if i < 0:
                return  # no event starts here (one event longer than a block: not a Kineto trace)
            data, first = data[i + len(KINETO_SEP) - 1:], False
        yield data
    over = b""
    while end < size:
        more = f.read(1 << 20)
        over += more
        j = over.find(KINETO_SEP)  # a separator straddling `end` starts before it: not found here
        if j >= 0 or not more:
            yield over[: j + 4] if j >= 0 else over
            return


def _merge(path: str, parts: list[RawTrace]) -> RawTrace:
    """One RawTrace from the ranges' pieces: name ids renumbered, everything else joined."""
    t = RawTrace(path=path, origin_us=parts[0].origin_us)
    ids: dict[str, int] = {}
    for p in parts:
        remap = []
        for name, cat in zip(p.names, p.gpu_cat):
            if name not in ids:
                ids[name] = len(t.names)
                t.names.append(name)
                t.gpu_cat.append(cat)
            remap.append(ids[name])
        t.gpu.extend([(s, e, remap[n], c) for s, e, n, c in p.gpu])
        t.launch_ts.update(p.launch_ts)
        t.graph_launches.extend(p.graph_launches)
        t.annotations.extend(p.annotations)
        t.shapes.extend(p.shapes)
        t.shaped_launches.extend(p.shaped_launches)
        t.problems.extend(p.problems)
        t.bytes_read += p.bytes_read
        t.device_name = t.device_name or p.device_name
        t.base_us = t.base_us or p.base_us
        t.devices |= p.devices
        t.truncated = t.truncated or p.truncated
        t.rank = t.rank if t.rank is not None else p.rank
        t.world_size = t.world_size if t.world_size is not None else p.world_size
        t.lone_events += p.lone_events
        t.bad_events += p.bad_events
    t.problems.extend(bad_lines(t.lone_events, t.bad_events))
    return t
