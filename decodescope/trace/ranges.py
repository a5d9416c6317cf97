"""A large plain (not gzipped) trace in Kineto's layout, read in byte ranges by parallel
processes, one per core. Each range starts at an event boundary: the events whose
separator starts inside it are its own."""

import os
import re
from concurrent.futures import ProcessPoolExecutor

from decodescope.trace.reader import BLOCK_BYTES, EVENTS_START, KINETO_SEP, EventStream, RawTrace, read_trace

PARALLEL_BYTES = 64 << 20  # a plain .json this large is read in byte ranges


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


def _ranges(path: str, workers: int) -> list[tuple]:
    """(path, start, end, ts digits above the last nine) per worker; [] to read in one pass."""
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
    step = size // workers
    return [(path, i * step, size if i == workers - 1 else (i + 1) * step, hi) for i in range(workers)]


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
        st.finish()
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
    return t
