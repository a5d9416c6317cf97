"""Streaming reader of torch-profiler (Kineto) Chrome traces, `.json` or `.json.gz`.

The file is never loaded whole: it is decompressed in blocks and each block is cut at an
event boundary. Kineto writes every event with the same key order
(`"ph": "X", "cat": ..., "name": ..., "pid": ..., "tid": ..., "ts": ..., "dur": ...`), so
one regular expression pulls the few fields needed out of a block in C, without building
a Python object per event. A block where that fast pattern does not account for every
wanted event (another writer's layout, an unescaped quote in a name) is parsed event by
event with orjson instead, and events that are not valid JSON are counted and skipped.
"""

import re
import zlib
from dataclasses import dataclass, field

import orjson

# decompressed bytes per block: bounds memory, amortises the regex calls (16 MB blocks: peak
# RSS 111 MB on a 300 MB trace; 4 MB: 85 MB, the same CPU time and output)
BLOCK_BYTES = 4 << 20
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
# PyTorch 1.8-1.10 (Kineto before its 2021 renaming) wrote these categories; the
# TensorBoard plugin reads them the same way (kineto/tb_plugin, EventTypeMap)
OLD_CATS = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime"}
WANTED = GPU_CATS + LAUNCH_CATS + ANNOTATION_CATS
_CATS = b"|".join(c.encode() for c in WANTED + tuple(OLD_CATS))
_OLD = {k.encode(): v.encode() for k, v in OLD_CATS.items()}

# Plain character classes only (no alternation, no lazy loops): measured 3x faster than
# an escape-aware name and a lazy scan of args. Every wanted category is matched; its
# fields are optional in the pattern, so an event whose fields do not fit (a name with a
# backslash, a ts in another form, damage in the fields read) yields a row with no `dur`
# and sends the block to the careful path. Damage elsewhere in an event, in fields not
# read, is not looked for. These categories only occur on complete ("X") events.
_FAST = re.compile(
    rb'"cat": "(' + _CATS + rb')"(?:, "name": "([^"\\]*)", "pid": ([^,]*), "tid": [^,]*,'
    rb'\s*"ts": (\d+(?:\.\d+)?), "dur": (\d+(?:\.\d+)?)'
    rb'(?:,\s*"args": \{[^}]*"correlation": (\d+))?(?=,|\s*\}))?'
)
# with record_shapes=True: GEMM ops with their args, and the launch calls' threads (for
# linking a launch to the op it ran inside); looked for only in blocks with "Input Dims"
_SHAPED = re.compile(rb'"cat": "cpu_op", "name": "aten::(mm|addmm|bmm)", "pid": [^,]*, "tid": (-?\d+),'
                     rb'\s*"ts": (\d+(?:\.\d+)?), "dur": (\d+(?:\.\d+)?),\s*"args": \{([^{}]*)\}')
_LAUNCH_TID = re.compile(rb'"cat": "cuda_runtime", "name": "[^"]*", "pid": [^,]*, "tid": (-?\d+),'
                         rb'\s*"ts": (\d+(?:\.\d+)?), "dur": [\d.]+,\s*"args": \{[^}]*"correlation": (\d+)')
EVENTS_START = re.compile(rb'"traceEvents":\s*\[')
_EVENTS_END = re.compile(rb'\}\s*\]\s*(?:,\s*"|\}\s*$)')
_ARRAY_END = re.compile(rb"\}\s*\]\s*$")
_EMPTY_END = re.compile(rb"\s*\]")
_SEP = re.compile(rb"\}\s*,\s*\{")
KINETO_SEP = b"\n  },\n  {"
_RANK = re.compile(rb'"distributedInfo":\s*"?\{[^}]*?\\?"rank\\?":\s*(\d+)')
_WORLD = re.compile(rb'"distributedInfo":\s*"?\{[^}]*?\\?"world_size\\?":\s*(\d+)')
_DEVICE = re.compile(rb'"deviceProperties":\s*\[\s*\{[^}]*?"name":\s*"([^"]*)"')
_BASE = re.compile(rb'"baseTimeNanoseconds":\s*(\d+)')
_HEADER_LIMIT = 64 << 20  # bytes read looking for "traceEvents" before calling the file not a trace


@dataclass
class RawTrace:
    """What one file holds that the step breakdown needs; times in µs on the file's clock."""

    path: str
    origin_us: float = 0.0  # every time below is µs after this point of the file's clock
    names: list[str] = field(default_factory=list)  # name id -> kernel / event name
    # (start µs, end µs, name id, correlation or -1) per kernel / memcpy / memset; all
    # streams and devices of the file together (one file is one rank)
    gpu: list[tuple] = field(default_factory=list)
    gpu_cat: list[str] = field(default_factory=list)  # name id -> cat ("kernel", "gpu_memcpy", ...)
    launch_ts: dict[int, float] = field(default_factory=dict)  # correlation -> start of its runtime call (µs)
    graph_launches: list[tuple[float, int]] = field(default_factory=list)  # (start µs, correlation)
    annotations: list[tuple[str, float, float, bool]] = field(default_factory=list)  # name, start, end, on GPU
    # where shapes were recorded: (thread, start, end, op, Input Dims, Input type) of each
    # aten::mm / addmm / bmm, and (thread, start, correlation) of each launch call
    shapes: list[tuple] = field(default_factory=list)
    shaped_launches: list[tuple[int, float, int]] = field(default_factory=list)
    # newer Kineto: every ts counts from a point of this host's clock, and baseTimeNanoseconds
    # (µs here) is that point in wall-clock time, so base + ts compares across hosts
    base_us: float = 0.0
    device_name: str = ""
    devices: set[str] = field(default_factory=set)  # the GPU events' "pid"s: Kineto's device index
    rank: int | None = None  # global rank from distributedInfo
    world_size: int | None = None
    bytes_read: int = 0
    truncated: bool = False  # the file ends before its event list does: the step cut there is partial
    problems: list[str] = field(default_factory=list)
    bad_events: int = 0  # events that are not valid JSON, skipped
    lone_events: int = 0  # "B" / "E" events with no partner on their thread, skipped


def bad_lines(lone: int, bad: int) -> list[str]:
    """The problem lines for skipped events (one file's counts, summed over its byte ranges)."""
    return ([f"{lone} \"B\" / \"E\" events have no partner on their thread and were skipped"] if lone else []) + \
        ([f"{bad} events are not valid JSON and were skipped"] if bad else [])


def read_trace(path: str) -> RawTrace:
    """Read one trace file in one pass; damage is recorded in `problems`, never raised past
    what was read. (decodescope.trace.ranges reads a large plain file on all cores.)"""
    t = RawTrace(path=str(path))
    try:
        st = EventStream(t)
        for block in blocks(path, t):
            st.feed(block)
        st.finish()
    except OSError as e:
        t.problems.append(f"could not read {path}: {e.strerror or e}")
    return t


def blocks(path: str, t: RawTrace):
    """Decompressed bytes in blocks; a gzip that ends early yields what it had and says so."""
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head != b"\x1f\x8b":
            while chunk := f.read(BLOCK_BYTES):
                t.bytes_read += len(chunk)
                yield chunk
            return
        d = zlib.decompressobj(wbits=31)
        while chunk := f.read(1 << 20):
            while chunk:
                try:  # at most a block out per call: traces compress ~30x, some runs of them far more
                    out = d.decompress(chunk, BLOCK_BYTES)
                except zlib.error as e:
                    t.truncated = True
                    t.problems.append(f"gzip data is corrupt after {t.bytes_read / 1e6:.1f} MB ({e}); "
                                      "the rest of the file is skipped")
                    return
                t.bytes_read += len(out)
                yield out
                chunk = d.unconsumed_tail
                if d.eof and (chunk := d.unused_data):  # a second gzip member follows
                    d = zlib.decompressobj(wbits=31)
        if not d.eof:
            t.truncated = True
            t.problems.append(f"the gzip stream ends early (truncated file?) after {t.bytes_read / 1e6:.1f} MB "
                              "of JSON; the events before that point are reported")


class EventStream:
    """Cuts the byte stream into header, whole-event blocks and tail."""

    def __init__(self, t: RawTrace):
        self.t = t
        self.buf = b""
        self.header = b""
        self.in_events = False
        self.array = False  # the file is a bare list of events, not an object holding "traceEvents"
        self.tail = b""
        self.name_ids: dict[bytes, int] = {}
        # Older traces hold absolute epoch µs with ns decimals (~1.7e15), beyond a double's ns
        # precision: ts is split into its digits above the last nine (`hi`, equal for all
        # events but across a rare carry) and the rest, and kept relative to hi * 1e9 µs.
        self.hi: bytes | None = None
        self.cut = 0  # len(hi)
        self.bad_events = 0
        self.compact: bool | None = None  # decided on the first block of events
        # "ph": "B" / "E" pairs (other writers than Kineto): the open ranges per (pid, tid),
        # innermost last; once one is seen every block takes the careful path, as an "E"
        # alone does not match the fast pattern
        self.open: dict[tuple, list[dict]] = {}
        self.paired = False
        self.lone_ends = 0  # "E" events with no open range on their thread
        self.shaped: bool | None = None  # the trace records shapes: decided on the first block

    def feed(self, data: bytes) -> None:
        self.buf += data
        if not self.in_events and self.buf.lstrip()[:1] == b"[":
            # Chrome's other layout, a bare list of events (other writers; its "]" may be left out)
            self.buf = self.buf.lstrip()[1:]
            self.in_events = self.array = True
        if not self.in_events:
            m = EVENTS_START.search(self.buf)
            if not m:
                if len(self.buf) > _HEADER_LIMIT:
                    raise _NotATrace()
                return
            self.header = self.buf[: m.start()]
            self.buf = self.buf[m.end():]
            self.in_events = True
        cut = self.buf.rfind(KINETO_SEP)
        cut = cut + 4 if cut >= 0 else self._generic_cut()
        if cut <= 0 and len(self.buf) > _HEADER_LIMIT:
            raise _NoEvents()  # bounded memory: no event is this long
        if cut > 0:
            self._events(self.buf[:cut])
            self.buf = self.buf[cut:]

    def flush(self) -> None:
        """End of a byte range (not of the file): the events left in the buffer, no tail; skipped
        events are counted in the RawTrace, for the file's one line."""
        self._events(self.buf)
        self.buf = b""
        self.count_bad()
        self.read_meta()

    def count_bad(self) -> None:
        self.t.lone_events = sum(map(len, self.open.values())) + self.lone_ends
        self.t.bad_events = self.bad_events

    def _generic_cut(self) -> int:
        last = None
        for m in _SEP.finditer(self.buf):
            last = m
        return last.start() + 1 if last else -1

    def finish(self, report: bool = True) -> None:
        """End of the file; `report`: say what was skipped (a byte range's reader only counts it)."""
        t = self.t
        if not self.in_events:
            t.problems.append("no \"traceEvents\" list found: not a torch-profiler Chrome trace")
            self.tail = self.buf
        else:
            m = (_ARRAY_END if self.array else _EVENTS_END).search(self.buf)
            if _EMPTY_END.match(self.buf):
                self.tail = self.buf  # "traceEvents": [] (nothing recorded)
            elif m:
                self._events(self.buf[: m.start() + 1])
                self.tail = self.buf[m.start():]
            else:
                if not self.array:  # a bare list may end without its "]"
                    t.truncated = True
                    t.problems.append("the event list is not closed (truncated file?); the events read are reported")
                self._events(self.buf)
        self.count_bad()
        if report:
            t.problems.extend(bad_lines(t.lone_events, t.bad_events))
        self.read_meta()

    def read_meta(self) -> None:
        t, meta = self.t, self.header + self.tail
        t.rank = _int(_RANK.search(meta))
        t.world_size = _int(_WORLD.search(meta))
        t.base_us = (_int(_BASE.search(meta)) or 0) / 1e3
        m = _DEVICE.search(self.header)
        t.device_name = m.group(1).decode(errors="replace") if m else ""

    def _events(self, block: bytes) -> None:
        if self.compact is None:  # another writer's compact JSON: the fast pattern never fits
            self.compact = b'"cat":"' in block
        careful = self.compact or self.paired
        rows = () if careful else _FAST.findall(block)
        if not careful and all(r[4] for r in rows):
            self._fast_rows(rows)
        else:
            self._slow(block)
        # after the rows (the first block's rows set the origin); a trace recorded with
        # shapes has them on its first ops, so the first block decides for the whole file
        if self.shaped is None:
            self.shaped = b'"Input Dims"' in block
        if self.shaped:
            self._shapes(block)

    def _shapes(self, block: bytes) -> None:
        t = self.t
        for op, tid, ts, dur, args in _SHAPED.findall(block):
            a = _parse(args)
            if a and "Input Dims" in a and "Input type" in a:
                start = float(ts) - t.origin_us
                t.shapes.append((int(tid), start, start + float(dur), op.decode(), a["Input Dims"], a["Input type"]))
        t.shaped_launches.extend((int(tid), float(ts) - t.origin_us, int(c)) for tid, ts, c in _LAUNCH_TID.findall(block))

    def _name_id(self, raw: bytes, cat: bytes | str) -> int:
        i = self.name_ids.get(raw)
        if i is None:
            i = self.name_ids[raw] = len(self.t.names)
            self.t.names.append(orjson.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode(errors="replace"))
            self.t.gpu_cat.append(OLD_CATS.get(c := cat.decode() if isinstance(cat, bytes) else cat, c))
        return i

    def _fast_rows(self, rows) -> None:
        t = self.t
        gpu, launch, graphs, name_id = t.gpu.append, t.launch_ts, t.graph_launches.append, self._name_id
        ids, pids = self.name_ids, set()  # name ids; the GPU events' pids, decoded once per block
        if rows and self.hi is None:
            self._set_origin(rows[0][3])
        h0, k, origin = self.hi, self.cut, t.origin_us
        for cat, name, pid, ts, dur, corr in rows:
            cat = _OLD.get(cat, cat)
            start = float(ts[k:]) if ts[:k] == h0 else float(ts) - origin
            if cat == b"kernel" or cat == b"gpu_memcpy" or cat == b"gpu_memset":
                i = ids.get(name)
                gpu((start, start + float(dur), name_id(name, cat) if i is None else i, int(corr) if corr else -1))
                pids.add(pid)
            elif cat == b"cuda_runtime" or cat == b"cuda_driver":
                if corr:
                    launch[int(corr)] = start
                    if b"GraphLaunch" in name:
                        graphs((start, int(corr)))
            else:
                t.annotations.append((name.decode(errors="replace"), start, start + float(dur),
                                      cat == b"gpu_user_annotation"))
        t.devices.update(p.decode() for p in pids)

    def _set_origin(self, ts: bytes) -> None:
        whole = ts.split(b".")[0]
        self.cut = max(0, len(whole) - 9)
        self.hi = whole[: self.cut]
        self.t.origin_us = int(self.hi or b"0") * 1e9

    def _slow(self, block: bytes) -> None:
        """Event by event with a real JSON parser; a piece that fails is retried joined to the next one."""
        pieces = _SEP.split(block.strip().lstrip(b",").strip())
        if pieces:
            pieces[0] = pieces[0].lstrip()[1:] if pieces[0].lstrip().startswith(b"{") else pieces[0]
            pieces[-1] = pieces[-1].rstrip()[:-1] if pieces[-1].rstrip().endswith(b"}") else pieces[-1]
        pending = b""  # a piece that failed alone: maybe a name containing "}, {" was split
        for p in pieces:
            if pending:
                e = _parse(pending + b"}, {" + p)
                pending = b""
                if e is not None:
                    self._event(e)
                    continue
                self.bad_events += 1
            e = _parse(p)
            if e is None:
                pending = p
            else:
                self._event(e)
        if pending:
            self.bad_events += 1

    def _event(self, e: dict) -> None:
        ph = e.get("ph")
        if ph == "B" or ph == "E":
            e = self._pair(e)
        elif ph != "X":
            return
        cat = e and e.get("cat")
        cat = OLD_CATS.get(cat, cat) if isinstance(cat, str) else cat
        if cat not in WANTED:
            return
        try:
            if self.hi is None:
                self._set_origin(b"%d" % int(float(e["ts"])))
            start = float(e["ts"]) - self.t.origin_us
            end = start + float(e.get("dur", 0))
        except (KeyError, TypeError, ValueError):
            self.bad_events += 1
            return
        name = str(e.get("name", "")).encode()
        args = e.get("args") or {}
        corr = args.get("correlation")
        corr = int(corr) if isinstance(corr, int | float) else -1
        if cat in GPU_CATS:
            raw = orjson.dumps(e.get("name", ""))[1:-1]
            self.t.gpu.append((start, end, self._name_id(raw, cat), corr))
            self.t.devices.add(orjson.dumps(e.get("pid")).decode())
        elif cat in LAUNCH_CATS:
            if corr >= 0:
                self.t.launch_ts[corr] = start
                if b"GraphLaunch" in name:
                    self.t.graph_launches.append((start, corr))
        else:
            self.t.annotations.append((str(e.get("name", "")), start, end, cat == "gpu_user_annotation"))

    def _pair(self, e: dict) -> dict | None:
        """A "B" opens a range on its thread; the "E" that follows closes the innermost one,
        which then counts as one complete event (None until then)."""
        stack = self.open.setdefault((e.get("pid"), e.get("tid")), [])
        if e["ph"] == "B":
            stack.append(e)
            self.paired = True
            return None
        if not stack:
            self.lone_ends += 1
            return None
        b = stack.pop()
        try:
            return {**b, "ph": "X", "dur": float(e["ts"]) - float(b["ts"])}
        except (KeyError, TypeError, ValueError):
            self.bad_events += 1
            return None


def _parse(inside: bytes) -> dict | None:
    try:
        return orjson.loads(b"{" + inside + b"}")
    except orjson.JSONDecodeError:
        return None


class _NotATrace(OSError):
    def __init__(self):
        super().__init__("no \"traceEvents\" list in the first 64 MB: not a torch-profiler Chrome trace")


class _NoEvents(OSError):
    def __init__(self):
        super().__init__("no boundary between events in 64 MB of \"traceEvents\": not a list of trace events")


def _int(m) -> int | None:
    return int(m.group(1)) if m else None
