"""One pass over a byte range of a plain log file that gives both its summary scan and
the JSON of each of its records, parsing each line once (`log --json` with records).

A record's warm-up flag depends on the whole log, known only when every range has been
scanned: a record with a warm-up tag is written with the byte 0 where its flag goes, and
its tag is kept, packed into one integer, in a file next to the records; copy_records
writes the flags in when the scans are joined. Nothing else writes a byte 0 (JSON escapes
it inside strings), and nothing is held in memory but the current block of lines.

SGLang's statistics lines take a quick path. The keys of a line, and the type of each
value, make its shape; a shape's pattern matches a line only where pairs() would split
it into exactly those pieces, and only values whose text is already the JSON orjson
writes for what logvalues.value reads from it (an integer, a short decimal less its
trailing zeros, True / False). So one match per line gives the values, the three the
summary needs are read from their text, and the record's JSON is the shape's template
filled with the matched texts. Any other line (a new key, a text value, a number out of
range, another engine) takes the path of serverlog.write_records and logscan.scan_log:
LogReader and logformats.sglang_facts. Both give the same JSON, byte for byte."""

import array
import re
from itertools import chain
from typing import NamedTuple

import orjson

from decodescope.serverstats import logformats, logio
from decodescope.serverstats.logsegment import PENDING
from decodescope.serverstats.logsummary import WarmupScan
from decodescope.serverstats.logtally import is_warm, resolve
from decodescope.serverstats.logvalues import BoundedCache, Rejected, checked, local_epoch
from decodescope.serverstats.serverlog import LogReader, record_json

_BANNER = logformats.STARTUP_MARKERS["sglang"][0]
_NUMBER = (int, float)
_FACTS = ("#running-req", "accept len", "gen throughput (token/s)")  # the values the summary reads
_SGLANG = (None, "sglang")  # engines whose lines may take the quick path
_FLAG = "\x00"  # where a warm-up flag goes, until the scans are joined
_MAX_SHAPES = 64  # SGLang line shapes learnt per kind (a log has a handful)
_BIN0 = 1 << 21  # round-time bins are within +-745000 (logsegment: round times 1e-300..1e300 s)


class _Shape(NamedTuple):
    rx: re.Pattern  # the pieces "key: value" after the marker, each value of its piece's type
    # (index among the groups, int or float: what reads it as logvalues.value does), index -1 when none
    running: tuple  # of the "#running-req" value
    accept: tuple  # of "accept len" (decode lines)
    gen: tuple  # of "gen throughput (token/s)"
    template: str  # the record's JSON, %-slots: line_no, time_s, rank, accept_len, gen_tok_s, warmup, values


# The values a quick line may hold, each matched in the form orjson writes for what
# logvalues.value reads from it, so that the matched text is the value's JSON: an integer
# without leading zeros of up to 18 digits (in 64 bits, and under Python's limit on digits
# read); a decimal of up to 16 characters (15 digits: it reads back to the same digits) and
# at least 0.0001, its trailing zeros left out of the match ("0.60" -> 0.6, "5.00" -> 5.0);
# True and False, matched literally (the shape holds which).
_INT = r"(0|[1-9][0-9]{0,17})"
_FLOAT = r"(?=[0-9.]{3,16}(?:,|\r?$))(?!0\.0000)((?:0|[1-9][0-9]*)\.(?:[0-9]*[1-9]|0))0*"
_BOOLS = {"True": "true", "False": "false"}


def _type(text: str) -> str | None:
    """The quick type of a value's text: _INT, _FLOAT, "True", "False", or None (any other)."""
    if text in _BOOLS:
        return text
    for rx in (_INT, _FLOAT):
        if re.fullmatch(rx, text.removesuffix("\r")):
            return rx
    return None


def _shape(kind: str, keys: tuple, types: tuple) -> _Shape:
    """The shape of lines with these keys and value types; a line its pattern matches splits
    into exactly these pieces, as pairs splits it, and each value reads as pairs reads it."""
    groups = [k for k, t in zip(keys, types) if t not in _BOOLS]
    head = orjson.dumps({"kind": kind, "engine": "sglang"}).decode()[:-1]
    slots = ',"line_no":%d,"time_s":%s,"rank":%s,"accept_len":%s,"gen_tok_s":%s,"warmup":%s,"process":null,"fields":{'
    fields = ",".join(orjson.dumps(k).decode().replace("%", "%%") + ":" + _BOOLS.get(t, "%s") for k, t in zip(keys, types))

    def at(key):
        if key not in groups or (key == "accept len" and kind != "decode"):
            return -1, None
        return groups.index(key), int if types[keys.index(key)] == _INT else float

    return _Shape(
        re.compile(", ".join(re.escape(k) + ": " + (re.escape(t) if t in _BOOLS else t) for k, t in zip(keys, types))
                   + r"\r?"),
        at("#running-req"), at("accept len"), at("gen throughput (token/s)"), head.replace("%", "%%") + slots + fields + "}}",
    )


# "[2026-05-12 00:05:35" and " TP0] ", ".123 DP1 TP4] ": logformats' SGLang prefix in its usual place
_MINUTE = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}):")
_TAIL = re.compile(r"(?:\.([0-9]{3}))?((?: [A-Z_]+\d+)*)\] ")
_SECONDS = {f"{i:02d}": i for i in range(100)}
_NOT = object()


def _minute(text: str):
    """local_epoch's sum up to the minute of '[YYYY-mm-dd HH:MM:'; None: not a date; _NOT: not this form."""
    m = _MINUTE.fullmatch(text)
    return _NOT if m is None else local_epoch(m[1] + ":00")


def _tail(text: str):
    """(ms / 1000 or 0, series, rank's JSON) of what follows the seconds, or None (not this form)."""
    m = _TAIL.fullmatch(text)
    if m is None:
        return None
    rank = m[2].strip() or None
    return int(m[1]) / 1000 if m[1] else 0, ("sglang", rank), orjson.dumps(rank).decode()


def _stamp(prefix: str) -> tuple:
    time_s, rank = logformats.sglang_stamp(prefix, len(prefix))
    return time_s, ("sglang", rank), orjson.dumps(time_s).decode(), orjson.dumps(rank).decode()


def tag_code(tag) -> int:
    """A warm-up tag as one integer: (segment, suspect, bin) >= 0, (PENDING, i) < 0."""
    if tag[0] == PENDING:
        return -2 - tag[1]
    i, suspect, b = tag
    return ((2 * i + bool(suspect)) << 22) | (0 if b is None else b + _BIN0)


def code_tag(code: int):
    if code < 0:
        return PENDING, -2 - code
    low = code & ((1 << 22) - 1)
    return code >> 23, bool(code >> 22 & 1), None if low == 0 else low - _BIN0


class RangeScan(NamedTuple):
    """What a range's pass gives: its scan and counts (logscan.LogScan's), its records."""

    engine: str | None
    skipped_lines: int
    scan: WarmupScan
    rejected_lines: int
    records: int  # records written


class _Pass:
    """The state of one range's pass: the scan, the reader for lines off the quick path,
    and where the records go."""

    def __init__(self, engine, year, continues, out, tags, line_offset):
        self.scan = WarmupScan(continues)
        self.reader = LogReader((), engine, year)
        self.out, self.tags, self.line_offset = out, tags, line_offset
        self.codes = array.array("q")
        self.skipped = self.rejected = self.records = 0
        self.shapes = {"decode": {}, "prefill": {}}  # keys -> shape
        self.last = {"decode": None, "prefill": None}  # the shape that matched last
        self.stamps = BoundedCache(_stamp, 1000)  # prefixes of other forms
        self.minutes = BoundedCache(_minute, 1000)
        self.tails = BoundedCache(_tail, 1000)

    def learn(self, kind: str, text: str) -> _Shape | None:
        """The shape of this line, and the shape its kind's lines try first from now on; None
        when a piece has no ': ' or a key repeats (pairs drops the one, keeps the last of the
        other: the slow path's business), or a value is of no quick type."""
        pieces = [p.partition(": ") for p in text.split(", ")]
        keys = tuple(k for k, _, _ in pieces)
        if any(not sep for _, sep, _ in pieces) or len(set(keys)) < len(keys):
            return None
        types = tuple(_type(v) for _, _, v in pieces)
        if (None in types or any(types[keys.index(k)] in _BOOLS for k in _FACTS if k in keys)
                or (kind == "decode" and _FACTS[2] not in keys)):  # a decode line without a rate is no record
            return None
        shapes = self.shapes[kind]
        shape = shapes.get((keys, types))
        if shape is None and len(shapes) < _MAX_SHAPES:
            shape = shapes[keys, types] = _shape(kind, keys, types)
        if shape is not None:
            self.last[kind] = shape
        return shape

    def stamp(self, line: str, at: int) -> tuple:
        """(time_s, series, time_s's JSON, rank's JSON) of an SGLang line whose message starts at `at`."""
        base = self.minutes[line[:18]]
        sec = _SECONDS.get(line[18:20])
        tail = self.tails[line[20:at]] if sec is not None and base is not _NOT else None
        if tail is None:
            return self.stamps[line[:at]]
        ms, series, rank_j = tail  # local_epoch's sum, as parse_sglang reads the stamp
        time_s = None if base is None else base + sec
        if ms and time_s is not None:
            time_s += ms
        return time_s, series, orjson.dumps(time_s).decode(), rank_j

    def match(self, line: str):
        """(kind, where the message starts, shape, match) of an SGLang statistics line on
        the quick path; None for any other line."""
        at = line.find("Decode batch")
        if at >= 0:
            kind, body = "decode", at + 14
        else:
            at = line.find("Prefill batch")
            if at < 0:
                return None
            kind, body = "prefill", at + 15
        sep = line[body - 2 : body]
        if sep != ", " and sep != ". ":
            return None
        shape = self.last[kind]
        m = None if shape is None else shape.rx.fullmatch(line, body)
        if m is None:
            shape = self.learn(kind, line[body:])
            m = None if shape is None else shape.rx.fullmatch(line, body)
        return None if m is None else (kind, at, shape, m)

    def slow(self, line: str, line_no: int, batch: list):
        """One line the way scan_log counts it and write_records writes it."""
        reader = self.reader
        if reader.engine is None or reader.engine == "sglang":
            try:
                facts = logformats.sglang_facts(line)
            except Rejected:
                self.rejected += 1
                return
            if facts is not None:
                reader.engine = "sglang"
                kind, rank, running, accept, gen, time_s = facts
                tag = self.scan.add_facts(kind, ("sglang", rank), running, accept, gen, time_s, None, line_no)
                p = logformats.parse_sglang(line)
                self.write(batch, tag, p, p.accept_len, line_no)
                return
            if reader.engine == "sglang" and _BANNER not in line:
                self.skipped += 1
                return
        pa = reader.parsed(line)
        if pa is None:
            self.skipped += 1
            return
        p, accept = pa
        fields = p.fields
        running = logformats.running_in(fields)
        clock = p.time_s if p.time_s is not None else fields.get("log_elapsed_s")
        tag = self.scan.add_facts(p.kind, (reader.engine, p.rank), running if type(running) in _NUMBER else None,
                                  accept, p.gen_tok_s, clock, p.process, line_no, fields.get("speculative"))
        self.write(batch, tag, p, accept, line_no)

    def write(self, batch: list, tag, p, accept, line_no: int):
        if self.out is None:
            return
        j = record_json(p.kind, self.reader.engine, line_no + self.line_offset, p.time_s, p.rank, accept,
                        p.gen_tok_s, None if tag is not None else False, p.process, p.fields)
        if tag is not None:  # orjson's form, else json's (an integer beyond 64 bits)
            old = b'"warmup":null,' if b'"warmup":null,' in j else b'"warmup": null,'
            j = j.replace(old, old.replace(b"null", b"\x00"), 1)
            self.codes.append(tag_code(tag))
        batch.append(j.decode())

    def flush(self, batch: list):
        if batch:
            self.out.write((",\n" if self.records else "\n").encode() + ",\n".join(batch).encode())
            self.records += len(batch)
        if self.codes:
            self.codes.tofile(self.tags)
            del self.codes[:]

    def result(self, line_no: int) -> RangeScan:
        self.scan.lines = line_no
        reader = self.reader
        return RangeScan(reader.engine, self.skipped - reader.rejected_lines, self.scan,
                         self.rejected + reader.rejected_lines, self.records)


def scan_range(f, budget: int, engine, year, continues: bool, out=None, tags=None, line_offset: int = 0) -> RangeScan:
    """logscan.scan_log of `budget` bytes of the binary file `f` from its position, and
    (with `out`, `tags`: binary files) the JSON of their records, comma-separated, as
    serverlog.write_records writes them, flags left to copy_records."""
    ps = _Pass(engine, year, continues, out, tags, line_offset)
    write = out is not None
    match, stamp, scan_add, codes, code_of = ps.match, ps.stamp, ps.scan.add_facts, ps.codes, BoundedCache(tag_code, 4000)
    reader, line_no = ps.reader, 0
    for lines, ended in logio.line_blocks(f, budget):
        batch = []
        nl = "\n" if ended else ""
        for line in lines:
            line_no += 1
            if reader.engine not in _SGLANG:
                ps.slow(line + nl, line_no, batch)
                continue
            found = match(line)
            if found is None:  # any line but a quick one: the slow path, or skipped as scan_log skips it
                if reader.engine is None or _BANNER in line or "Decode batch" in line or "Prefill batch" in line:
                    ps.slow(line + nl, line_no, batch)
                else:
                    ps.skipped += 1
                continue
            kind, at, shape, m = found
            got = m.groups()
            i, read = shape.gen
            gen = None if i < 0 else read(got[i])
            i, read = shape.running
            running = None if i < 0 else read(got[i])
            i, read = shape.accept
            accept = None if i < 0 else read(got[i])
            try:
                checked(running, accept, gen)
            except Rejected:
                ps.rejected += 1
                continue
            reader.engine = "sglang"
            time_s, series, time_j, rank_j = stamp(line, at)
            tag = scan_add(kind, series, running, accept, gen, time_s, None, line_no)
            if write and tag is not None:
                codes.append(code_of[tag])
            if write:
                batch.append(shape.template % (
                    line_no + line_offset, time_j, rank_j, "null" if accept is None else got[shape.accept[0]],
                    "null" if gen is None else got[shape.gen[0]], "false" if tag is None else _FLAG, *got))
        if write:
            ps.flush(batch)
    return ps.result(line_no)


def copy_records(out, records, tags, join, deferred: list, limits: list) -> None:
    """A range's records (binary file, from scan_range) to `out` with their warm-up flags:
    the tags read through `join` (WarmupScan.extend's; None for the first range)."""

    def flag(code: int) -> bytes:
        tag = code_tag(code)
        if join is not None:
            tag = resolve(tag, join, deferred)
        return b"true" if tag is not None and is_warm(tag, limits[tag[0]]) else b"false"

    flags = BoundedCache(flag)
    while chunk := records.read(1 << 22):
        codes = array.array("q")
        codes.fromfile(tags, chunk.count(b"\x00"))
        marks = list(map(flags.__getitem__, codes))
        if b"true" not in marks or b"false" not in marks:  # most often: one flag for the whole chunk
            out.write(chunk.replace(b"\x00", marks[0] if marks else b""))
        else:
            pieces = chunk.split(b"\x00")
            out.write(b"".join(chain.from_iterable(zip(pieces, marks))) + pieces[-1])
