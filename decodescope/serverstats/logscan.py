"""The summary pass over a server log of any size: streamed, no record kept in memory.

A stream of lines (standard input, a .gz) goes through scan_log, where SGLang lines go
through logformats.sglang_facts, which reads only the values the warm-up rule and the
summary need. A plain file goes through scan_file: cut at line starts into one byte
range per CPU when large, each range read by logfused.scan_range (which also writes its
records' JSON when asked), the ranges scanned in parallel and their scans joined in
order (WarmupScan.extend), which gives exactly the one-pass result; where a range's
join cannot (WarmupScan.joins: stamp-less lines at its start, then a stamp older than the
range before), the file is scanned again in one pass."""

import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import NamedTuple
from collections.abc import Iterable

from decodescope.serverstats import logfast, logformats, logio
from decodescope.serverstats.logfused import RangeScan, copy_records, scan_range
from decodescope.serverstats.logsummary import WarmupScan
from decodescope.serverstats.logtypes import LogSummary
from decodescope.serverstats.serverlog import LogReader, parse_line

PARALLEL_MIN_BYTES = 32_000_000  # below this, starting worker processes costs more than it saves


class LogScan(NamedTuple):
    engine: str | None  # None when no line was recognised
    skipped_lines: int
    scan: WarmupScan  # its limits() flag the records (copy_scanned_records, serverlog.write_records)
    rejected_lines: int = 0
    parts: tuple = ()  # (start, end, Join or None) of each byte range scanned in parallel
    records: tuple = ()  # (file stem, Join or None, deferred tags, records) of each range's records (scan_file)

    def summary(self) -> LogSummary:
        return self.scan.summary(self.engine, self.skipped_lines, self.rejected_lines)


def scan_log(
    lines: Iterable[str], engine: str | None = None, year: int | None = None, continues: bool = False
) -> LogScan:
    """One streaming pass; same summary as serverlog.parse_log. `continues`: the lines
    follow others scanned elsewhere (see WindowTagger)."""
    scan = WarmupScan(continues)
    reader = LogReader((), engine, year)
    facts = logformats.sglang_facts
    add = scan.add_facts
    banner = logformats.STARTUP_MARKERS["sglang"][0]
    skipped = rejected = line_no = 0
    for line_no, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if reader.engine is None or reader.engine == "sglang":
            try:
                f = facts(line)
            except logformats.Rejected:
                rejected += 1
                continue
            if f is not None:
                reader.engine = "sglang"
                add(f[0], ("sglang", f[1]), f[2], f[3], f[4], f[5], None, line_no)
                continue
            if reader.engine == "sglang" and banner not in line:
                skipped += 1
                continue
        rec = reader.record(line, line_no)
        if rec is None:
            skipped += 1
        else:
            scan.add(rec)
    scan.lines = line_no
    return LogScan(reader.engine, skipped - reader.rejected_lines, scan, rejected + reader.rejected_lines)


def scan_file(
    path: str,
    engine: str | None = None,
    year: int | None = None,
    workers: int | None = None,
    min_bytes: int = PARALLEL_MIN_BYTES,
    records: str | None = None,
) -> LogScan:
    """scan_log of a plain (uncompressed) file, in parallel when it is large; with
    `records` (a folder), every record's JSON too, in the same pass, written there for
    copy_scanned_records."""
    size = os.path.getsize(path)
    workers = workers or len(os.sched_getaffinity(0))
    if workers < 2 or size < min_bytes:
        cuts = [0, size]
    else:
        if engine is None:  # one engine for all ranges, as one pass would fix it
            with _text(path) as f:
                n_lines = 0
                for n_lines, line in enumerate(f, 1):  # noqa: B007 (the count is read after the loop)
                    rec = parse_line(line, None, year)
                    if rec is not None:
                        engine = rec.engine
                        break
            if engine is None:
                return LogScan(None, n_lines, WarmupScan())
        cuts = _line_starts(path, size, workers)
    jobs = [(path, a, b, engine, year, i > 0, records and os.path.join(records, str(i)))
            for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    if len(jobs) < 2:
        parts = [_scan_range(job) for job in jobs]
    else:
        with ProcessPoolExecutor(len(jobs)) as pool:
            parts = list(pool.map(_scan_range, jobs))
    head = parts[0]
    found, skipped, rejected = head.engine, head.skipped_lines, head.rejected_lines
    joins = [None]
    for part in parts[1:]:
        if not head.scan.joins(part.scan):  # rare (stamp formats change right at a cut): one pass instead
            return scan_file(path, engine, year, 1, min_bytes, records)
        joins.append(head.scan.extend(part.scan))
        found = found or part.engine
        skipped += part.skipped_lines
        rejected += part.rejected_lines
    ranges = tuple((job[1], job[2], join) for job, join in zip(jobs, joins)) if len(jobs) > 1 else ()
    written = tuple((job[6], join, part.scan.tagger.deferred, part.records)
                    for job, join, part in zip(jobs, joins, parts)) if records else ()
    return LogScan(found, skipped, head.scan, rejected, ranges, written)


def copy_scanned_records(result: LogScan, out) -> None:
    """The records scan_file wrote (with `records`), comma-separated, in log order, to the
    binary stream `out`, their warm-up flags from the joined scan."""
    limits = result.scan.limits()
    written = False
    for stem, join, deferred, n in result.records:
        if not n:
            continue
        if written:
            out.write(b",")  # each range's records start "\n{record}"
        with open(stem + ".json", "rb") as records, open(stem + ".tags", "rb") as tags:
            copy_records(out, records, tags, join, deferred, limits)
        written = True


@contextmanager
def _text(path: str):
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        yield logio.capped(f)


def _line_starts(path: str, size: int, n: int) -> list[int]:
    """0, the start of the line at or after each k/n of the file, and its size."""
    cuts = {0, size}
    with open(path, "rb") as f:
        for k in range(1, n):
            f.seek(size * k // n)
            part = f.readline(logio.MAX_LINE)  # finish the line the offset fell in
            while part and not part.endswith(b"\n"):
                part = f.readline(logio.MAX_LINE)
            cuts.add(f.tell())
    return sorted(cuts)


def _scan_range(job) -> RangeScan:
    path, start, end, engine, year, continues, stem = job
    with open(path, "rb") as f, _outputs(stem) as (out, tags):
        offset = _lines_before(f, start) if stem else 0
        f.seek(start)
        return scan_range(f, end - start, engine, year, continues, out, tags, offset)


@contextmanager
def _outputs(stem: str | None):
    if stem is None:
        yield None, None
        return
    with open(stem + ".json", "wb") as out, open(stem + ".tags", "wb") as tags:
        yield out, tags


def _lines_before(f, end: int) -> int:
    """Line feeds in the first `end` bytes: the line number before a range (counted at
    gigabytes a second, so each range's records carry their final line numbers)."""
    fast = logfast.FAST
    n = 0
    while end > 0:
        chunk = f.read(min(end, 1 << 24))
        if not chunk:
            break
        n += chunk.count(b"\n") if fast is None else fast.count(chunk, 10)  # memchr: several times faster
        end -= len(chunk)
    return n
