"""One pass over a byte range of a plain log file that gives both its summary scan and
the JSON of each of its records, parsing each line once (`log --json` with records).

A record's warm-up flag depends on the whole log, known only when every range has been
scanned: a record with a warm-up tag is written with the byte 0 where its flag goes, and
its tag is kept, packed into one integer, in a file next to the records; copy_records
writes the flags in when the scans are joined. Nothing else writes a byte 0 (JSON escapes
it inside strings), and nothing is held in memory but the current block of lines.

SGLang's statistics lines take a quick path (logshapes.py): a line of a known shape is
read by its shape's pattern and its record is the shape's JSON template filled with the
matched texts. Once the log is known to be SGLang's, one pattern reads a whole block
(logshapes.block_pattern: the regex engine, not a Python loop, splits the block's lines
and their values), and the quick lines' facts are tallied per run of lines
(logcolumns.add_run). Any other line (a new key, a text value, a number out of range,
another engine) takes the path of serverlog.write_records and logscan.scan_log:
LogReader and logformats.sglang_facts. Both give the same JSON, byte for byte. With the
optional C module (logfast), block_c reads a block's quick lines in C, with the same
result as block(); any line it is not sure of comes back to line()."""

import array
import gc
from itertools import chain
from typing import NamedTuple

import orjson

from decodescope.serverstats import logfast, logformats, logio, logshapes
from decodescope.serverstats.logcolumns import add_run
from decodescope.serverstats.logshapes import NOT_THIS_FORM, SECONDS, block_pattern, shape_of
from decodescope.serverstats.logsummary import WarmupScan
from decodescope.serverstats.logtally import code_tag, is_warm, resolve, tag_code
from decodescope.serverstats.logvalues import BoundedCache, Rejected, checked
from decodescope.serverstats.serverlog import LogReader, record_json

_BANNER = logformats.STARTUP_MARKERS["sglang"][0]
_NUMBER = (int, float)
_SGLANG = (None, "sglang")  # engines whose lines may take the quick path
_FLAG = "\x00"  # where a warm-up flag goes, until the scans are joined


class RangeScan(NamedTuple):
    """What a range's pass gives: its scan and counts (logscan.LogScan's), its records."""

    engine: str | None
    skipped_lines: int
    scan: WarmupScan
    rejected_lines: int
    records: int  # records written


class _Pass:
    """The state of one range's pass: the scan, the reader for lines off the quick path,
    the quick lines not yet tallied (rows), and where the records go."""

    def __init__(self, engine, year, continues, out, tags, line_offset):
        self.scan = WarmupScan(continues)
        self.reader = LogReader((), engine, year)
        self.out, self.tags, self.line_offset = out, tags, line_offset
        self.codes = array.array("q") if out is not None else None
        self.skipped = self.rejected = self.records = 0
        self.rows = []  # (kind, series, running, accept, gen, time_s, line_no) of quick lines, for add_run
        self.shapes = {"decode": {}, "prefill": {}}  # (keys, types) -> shape
        self.last = {"decode": None, "prefill": None}  # the shape that matched last
        self.blocks = {}  # (decode shape, prefill shape) -> BlockPattern
        self.stamps = BoundedCache(logshapes.stamp, 1000)  # prefixes of other forms
        self.minutes = BoundedCache(logshapes.minute, 1000)
        self.tails = BoundedCache(logshapes.tail, 1000)
        self.fast = (self.minutes, self.tails, orjson.dumps, _BANNER.encode())  # what the C reader looks up
        self.extra = 0  # records batched beyond one per item of the batch (the C reader joins a run's)

    def stamp(self, line: str, at: int) -> tuple:
        """(time_s, series, time_s's JSON, rank's JSON) of an SGLang line whose message starts at `at`."""
        base = self.minutes[line[:18]]
        sec = SECONDS.get(line[18:20])
        tail = self.tails[line[20:at]] if sec is not None and base is not NOT_THIS_FORM else None
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
            shape = shape_of(kind, line[body:], self.shapes[kind])
            if shape is not None:  # the shape its kind's lines try first from now on
                self.last[kind] = shape
            m = None if shape is None else shape.rx.fullmatch(line, body)
        return None if m is None else (kind, at, shape, m)

    def block_pattern(self):
        """The pattern for a whole block, or None while no shape is known."""
        key = (self.last["decode"], self.last["prefill"])
        if key == (None, None):
            return None
        bp = self.blocks.get(key)
        if bp is None:
            if len(self.blocks) >= logshapes.MAX_SHAPES:
                self.blocks.clear()
            bp = self.blocks[key] = block_pattern(*key)._replace(fast=logfast.specs(*key))
        return bp

    def tally(self):
        """The quick lines read so far, into the scan (before any line that goes there directly)."""
        if self.rows:
            add_run(self.scan, self.rows, self.codes)
            self.rows.clear()  # in place: block() holds the list

    def line(self, line: str, line_no: int, batch: list, nl: str):
        """One line read on its own: the quick path, the slow path, or skipped as scan_log skips it."""
        engine = self.reader.engine
        found = self.match(line) if engine in _SGLANG else None
        if found is not None:
            kind, at, shape, m = found
            got = m.groups()
            values = self.values(shape, got)
            if values is not None:
                time_s, series, time_j, rank_j = self.stamp(line, at)
                self.rows.append((kind, series, *values, time_s, line_no))
                if self.codes is not None:
                    batch.append(_json(kind, shape, got, values, line_no + self.line_offset, time_j, rank_j))
        elif engine is None or engine != "sglang" or _BANNER in line or "Decode batch" in line or "Prefill batch" in line:
            self.tally()
            self.slow(line + nl, line_no, batch)
        else:
            self.skipped += 1

    def values(self, shape, got: tuple):
        """(running, accept, gen) of a quick line as the summary reads them; None: rejected."""
        i, read = shape.running
        running = None if i < 0 else read(got[i])
        i, read = shape.accept
        accept = None if i < 0 else read(got[i])
        i, read = shape.gen
        gen = None if i < 0 else read(got[i])
        try:
            checked(running, accept, gen)
        except Rejected:
            self.rejected += 1
            return None
        self.reader.engine = "sglang"
        return running, accept, gen

    def block(self, bp, text: str, line_no: int, batch: list) -> int:
        """Every line of `text` (lines that each ended in a line feed) read by one pattern
        (an SGLang log); returns the last line's number. line()'s work, written out: this
        loop runs once per line of a large log."""
        p_at, minutes, tails, rows = bp.prefill_at, self.minutes, self.tails, self.rows
        write, offset, seconds, dumps = self.codes is not None, self.line_offset, SECONDS, orjson.dumps
        decode, prefill = _reading(bp.decode, "decode", _FLAG), _reading(bp.prefill, "prefill", "false")
        for tup in bp.rx.findall(text):
            line_no += 1
            if not tup[0]:  # any other line: without a marker or the banner, one line() skips
                line = tup[-1]
                if "batch" in line or _BANNER in line:
                    self.line(line, line_no, batch, "\n")
                else:
                    self.skipped += 1
                continue
            if tup[3]:
                kind, flag, template, ri, rread, ai, aread, gi, gread = decode
                got = tup[4:p_at]
            else:
                kind, flag, template, ri, rread, ai, aread, gi, gread = prefill
                got = tup[p_at:-1]
            running = None if ri < 0 else rread(got[ri])
            accept = None if ai < 0 else aread(got[ai])
            gen = None if gi < 0 else gread(got[gi])
            try:
                checked(running, accept, gen)
            except Rejected:
                self.rejected += 1
                continue
            base = minutes[tup[0]]  # as stamp() reads it: local_epoch's sum
            ms, series, rank_j = tails[tup[2]]
            time_s = None if base is None else base + seconds[tup[1]]
            if ms and time_s is not None:
                time_s += ms
            rows.append((kind, series, running, accept, gen, time_s, line_no))
            if write:
                batch.append(template % (line_no + offset, dumps(time_s).decode(), rank_j,
                                         "null" if ai < 0 else got[ai], "null" if gi < 0 else got[gi], flag, *got))
        return line_no

    def block_c(self, specs: tuple, data: bytes, line_no: int, batch: list) -> int:
        """block() of the block's bytes by the C reader (logfast); a line it hands back is
        read by line(), as block() reads any other line holding "batch" or the banner."""
        scan, rows, ctx, offset = logfast.FAST.scan, self.rows, self.fast, self.line_offset
        out = batch if self.codes is not None else None
        pos, end = 0, len(data)
        while pos <= end:
            pos, line_no, skipped, n, line = scan(data, pos, line_no, specs, ctx, rows, out, offset)
            self.skipped += skipped
            if n:
                self.extra += n - 1
            if line is None:
                break
            self.line(line, line_no, batch, "\n")
        return line_no

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
            self.records += len(batch) + self.extra
            self.extra = 0
        if self.codes:
            self.codes.tofile(self.tags)
            del self.codes[:]

    def result(self, line_no: int) -> RangeScan:
        self.scan.lines = line_no
        reader = self.reader
        return RangeScan(reader.engine, self.skipped - reader.rejected_lines, self.scan,
                         self.rejected + reader.rejected_lines, self.records)


def _reading(shape, kind: str, flag: str) -> tuple:
    """What block() reads a shape's lines with, in one tuple: kind, the record's flag, the
    template, and (index, int or float) of running, accept, gen (Shape's)."""
    if shape is None:
        return kind, flag, "", -1, None, -1, None, -1, None
    return kind, flag, shape.template, *shape.running, *shape.accept, *shape.gen


def _json(kind: str, shape, got: tuple, values: tuple, line_no: int, time_j: str, rank_j: str) -> str:
    """A quick line's record: its shape's template filled with the matched texts. A decode
    line's record is a window (its flag is written in later), a prefill line's never is."""
    _, accept, gen = values
    return shape.template % (line_no, time_j, rank_j, "null" if accept is None else got[shape.accept[0]],
                             "null" if gen is None else got[shape.gen[0]], "false" if kind == "prefill" else _FLAG, *got)


def scan_range(f, budget: int, engine, year, continues: bool, out=None, tags=None, line_offset: int = 0) -> RangeScan:
    """logscan.scan_log of `budget` bytes of the binary file `f` from its position, and
    (with `out`, `tags`: binary files) the JSON of their records, comma-separated, as
    serverlog.write_records writes them, flags left to copy_records."""
    ps = _Pass(engine, year, continues, out, tags, line_offset)
    enabled = gc.isenabled()
    # the pass makes a few tuples per line and no reference cycles: without the cycle
    # collector, which runs every 700 new tuples, it executes 2-3 % fewer instructions
    gc.disable()
    try:
        line_no = _scan(ps, f, budget)
    finally:
        if enabled:
            gc.enable()
    return ps.result(line_no)


def _scan(ps: _Pass, f, budget: int) -> int:
    line_no = 0
    for data, ended in logio.line_blocks(f, budget, raw=True):
        batch = []
        line_no = _block(ps, data, ended, line_no, batch)
        ps.tally()
        if ps.out is not None:
            ps.flush(batch)
    return line_no


def _block(ps: _Pass, data: bytes, ended: bool, line_no: int, batch: list) -> int:
    """The lines of one block (bytes), by the C reader, the block pattern or line by line;
    returns the last line's number."""
    bp = ps.block_pattern() if ended and ps.reader.engine == "sglang" else None
    if bp is not None and bp.fast is not None:
        return ps.block_c(bp.fast, data, line_no, batch)
    text = data.decode("utf-8", "replace")
    if bp is not None:
        return ps.block(bp, text, line_no, batch)
    nl = "\n" if ended else ""
    for line in text.split("\n"):
        line_no += 1
        ps.line(line, line_no, batch, nl)
    return line_no


def copy_records(out, records, tags, join, deferred: list, limits: list) -> None:
    """A range's records (binary file, from scan_range) to `out` with their warm-up flags:
    the tags read through `join` (WarmupScan.extend's; None for the first range)."""

    def flag(code: int) -> bytes:
        tag = code_tag(code)
        if join is not None:
            tag = resolve(tag, join, deferred)
        return b"true" if tag is not None and is_warm(tag, limits[tag[0]]) else b"false"

    flags = BoundedCache(flag)
    fast = logfast.FAST
    while chunk := records.read(1 << 22):
        codes = array.array("q")
        codes.fromfile(tags, chunk.count(b"\x00") if fast is None else fast.count(chunk, 0))
        marks = list(map(flags.__getitem__, codes))
        if fast is not None:  # the same bytes in one pass (bytes.count reads a byte at a time)
            out.write(fast.fill(chunk, marks))
        elif b"true" not in marks or b"false" not in marks:  # most often: one flag for the whole chunk
            out.write(chunk.replace(b"\x00", marks[0] if marks else b""))
        else:
            pieces = chunk.split(b"\x00")
            out.write(b"".join(chain.from_iterable(zip(pieces, marks))) + pieces[-1])
