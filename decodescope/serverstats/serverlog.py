"""Read an inference server's own decode statistics from its log.

SGLang "Decode batch" / "Prefill batch" lines, vLLM periodic stats and "SpecDecoding
metrics" lines, llama.cpp timing and draft-acceptance lines, TensorRT-LLM's iteration
lines, every known version
(formats: logformats.py). Lines in any other format are counted and skipped; nothing
in a log is fatal. Warm-up windows are marked by the rule in logsummary.py; the
summary of a log too large to hold comes from logscan.py."""

import json
import math
import time

import orjson
from dataclasses import dataclass, replace
from collections.abc import Iterable, Iterator

from decodescope.serverstats import logformats
from decodescope.serverstats.logsegment import WindowTagger
from decodescope.serverstats.logsummary import WarmupScan
from decodescope.serverstats.logtypes import LogSummary, Spread

ENGINES = logformats.ENGINES

__all__ = [
    "ENGINES",
    "LogParse",
    "LogReader",
    "LogRecord",
    "LogSummary",
    "Spread",
    "detect_engine",
    "parse_line",
    "parse_log",
    "summarize",
]


@dataclass(frozen=True, slots=True)
class LogRecord:
    kind: str  # "decode" | "prefill" | "spec" | "stats"
    engine: str  # one of ENGINES: "sglang" | "vllm" | "llamacpp" | "trtllm"
    time_s: float | None  # wall-clock epoch seconds from the line's prefix; None if it has none
    rank: str | None  # "TP0", "DP1 TP0", "gpu_id=0", "Engine 000", "slot 0", "rank 0"
    fields: dict  # every field of the line under the engine's own name; numbers where numeric
    accept_len: float | None  # tokens per verify round incl. the bonus token
    gen_tok_s: float | None  # generated tokens/s over the line's window, all running requests;
    # llama.cpp: the one request the line reports on (its "eval time"); TensorRT-LLM: one iteration
    warmup: bool = False  # the window includes start-up or idle time (logsummary.RULE)
    line_no: int = 0  # 1-based line number in the log
    process: str | None = None  # server process id from the line (vLLM "pid=", llama.cpp "[pid]")

    def to_dict(self) -> dict:
        fields = {k: _json_safe(v) for k, v in self.fields.items()}
        return _record_dict(self.kind, self.engine, self.line_no, self.time_s, self.rank, self.accept_len,
                            self.gen_tok_s, self.warmup, self.process, fields)

    def to_json(self, warmup: bool | None = None, line_no: int | None = None) -> bytes:
        """to_dict() as JSON (with this warm-up flag and line number, when given), quicker."""
        return record_json(
            self.kind, self.engine, self.line_no if line_no is None else line_no, self.time_s, self.rank,
            self.accept_len, self.gen_tok_s, self.warmup if warmup is None else warmup, self.process, self.fields,
        )


def _record_dict(kind, engine, line_no, time_s, rank, accept_len, gen_tok_s, warmup, process, fields) -> dict:
    return {
        "kind": kind,
        "engine": engine,
        "line_no": line_no,
        "time_s": time_s,
        "rank": rank,
        "accept_len": _json_safe(accept_len),
        "gen_tok_s": _json_safe(gen_tok_s),
        "warmup": warmup,
        "process": process,
        "fields": fields,
    }


def record_json(kind, engine, line_no, time_s, rank, accept_len, gen_tok_s, warmup, process, fields) -> bytes:
    """One record's JSON, as LogRecord.to_dict() would serialise: orjson writes NaN / inf
    as null as to_dict does; an integer beyond 64 bits (a 400-digit count in some field)
    takes the slow path."""
    try:
        return orjson.dumps({
            "kind": kind, "engine": engine, "line_no": line_no, "time_s": time_s, "rank": rank,
            "accept_len": accept_len, "gen_tok_s": gen_tok_s, "warmup": warmup, "process": process,
            "fields": fields,
        })
    except orjson.JSONEncodeError:
        safe = {k: _json_safe(v) for k, v in fields.items()}
        return json.dumps(_record_dict(kind, engine, line_no, time_s, rank, accept_len, gen_tok_s, warmup,
                                       process, safe)).encode()


@dataclass(frozen=True)
class LogParse:
    engine: str | None  # None when no line was recognised
    records: tuple[LogRecord, ...]
    skipped_lines: int  # lines not recognised (noise, other log lines, garbage)
    summary: LogSummary
    rejected_lines: int = 0  # statistics lines with a figure out of range

    def to_dict(self) -> dict:
        return {
            "engine": self.engine,
            "records": [r.to_dict() for r in self.records],
            "summary": self.summary.to_dict(),
        }


def parse_line(line: str, engine: str | None = None, year: int | None = None) -> LogRecord | None:
    """One log line -> a LogRecord, or None when it is not a statistics line.
    `engine` limits the formats tried; `year` dates vLLM lines, whose stamp has none
    (default: this year)."""
    return LogReader((), engine, year).record(line)


def _parse(engine: str, line: str, year: int | None):
    if engine == "sglang":
        return logformats.parse_sglang(line)
    if engine == "vllm":
        return logformats.parse_vllm(line, year or time.localtime().tm_year)
    if engine == "llamacpp":
        return logformats.parse_llamacpp(line)
    if engine == "trtllm":
        return logformats.parse_trtllm(line)
    raise ValueError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")


class LogReader:
    """Streams the records of a log; `skipped_lines`, `rejected_lines` and `engine` are
    final once the iteration ends. With no engine given, the first recognised line
    fixes it. A line whose figures are out of range (logformats.checked) is rejected:
    counted, never a record.

    llama.cpp's draft line without a mean ("118 accepted / 144 generated") gets its
    accept length from the request's eval line just before it: a request of n tokens
    with a accepted draft tokens took n - a verify rounds, n / (n - a) tokens each. A
    "statistics" line's mean counts only when no draft line of the request gave one."""

    def __init__(self, lines: Iterable[str], engine: str | None = None, year: int | None = None):
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
        self.lines = lines
        self.engine = engine
        self.year = year or time.localtime().tm_year
        self.skipped_lines = 0
        self.rejected_lines = 0
        self._eval_tokens = None  # llama.cpp: tokens of the last eval line
        self._request_accept = False  # llama.cpp: a draft line gave the last request's accept length

    def __iter__(self) -> Iterator[LogRecord]:
        skipped = 0
        try:
            for line_no, line in enumerate(self.lines, 1):
                rec = self.record(line, line_no)
                if rec is None:
                    skipped += 1
                else:
                    yield rec
        finally:
            self.skipped_lines = skipped - self.rejected_lines

    def record(self, line: str, line_no: int = 0) -> LogRecord | None:
        """One line -> its record or None; fixes the engine at the first recognised line."""
        pa = self.parsed(line)
        if pa is None:
            return None
        p, accept = pa
        return LogRecord(
            p.kind, self.engine, p.time_s, p.rank, p.fields, accept, p.gen_tok_s, False, line_no, p.process
        )

    def parsed(self, line: str):
        """record() without the record: (Parsed, accept length) or None."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        try:
            p = self._parsed(line)
        except logformats.Rejected:
            self.rejected_lines += 1
            return None
        if p is None:
            return None
        return p, self._llamacpp_accept(p) if self.engine == "llamacpp" else p.accept_len

    def _parsed(self, line: str):
        if self.engine == "sglang":  # the common case, straight to its parser
            p = logformats.parse_sglang(line)
            return p if p is not None else logformats.parse_startup(line, "sglang")
        engines = ENGINES if self.engine is None else (self.engine,)
        for name in engines:
            p = _parse(name, line, self.year)
            if p is not None:
                self.engine = name
                return p
        for name in engines:
            p = logformats.parse_startup(line, name)
            if p is not None:
                self.engine = name
                return p
        return None

    def _llamacpp_accept(self, p) -> float | None:
        if p.kind == "decode":
            self._eval_tokens = p.fields.get("tokens")
            self._request_accept = False
            return None
        if p.kind != "spec":
            return p.accept_len
        if "method" in p.fields:  # a statistics line: lifetime counters of one method
            return None if self._request_accept else p.accept_len
        accept = p.accept_len
        n, a = self._eval_tokens, p.fields["accepted"]
        if accept is None and n is not None and n > a:
            accept = n / (n - a)
        self._request_accept = accept is not None
        return accept


def detect_engine(lines: Iterable[str]) -> str | None:
    """The engine of the first recognised statistics line, or None."""
    for line in lines:
        rec = parse_line(line)
        if rec is not None:
            return rec.engine
    return None


def parse_log(lines: Iterable[str], engine: str | None = None, year: int | None = None) -> LogParse:
    """All records of a log, warm-up marked, with the steady-state summary. Keeps every
    record in memory: for a large log, logscan.scan_log / scan_file give the summary in
    one streaming pass and write_records() the records in a second."""
    reader = LogReader(lines, engine, year)
    scan = WarmupScan()
    tagged = [(rec, scan.add(rec)) for rec in reader]
    records = tuple(replace(rec, warmup=scan.warmup(tag)) for rec, tag in tagged)
    summary = scan.summary(reader.engine, reader.skipped_lines, reader.rejected_lines)
    return LogParse(reader.engine, records, reader.skipped_lines, summary, reader.rejected_lines)


def summarize(records: Iterable[LogRecord], skipped_lines: int = 0, rejected_lines: int = 0) -> LogSummary:
    """Steady-state accept_len and gen tok/s (mean, min, max) and the round time they
    imply, over records in log order; warm-up is judged afresh by logsummary's rule."""
    scan = WarmupScan()
    engine = None
    for rec in records:
        engine = engine or rec.engine
        scan.add(rec)
    return scan.summary(engine, skipped_lines, rejected_lines)


def write_json(out, lines: Iterable[str], engine, year, scan: WarmupScan, summary: LogSummary,
               extra: dict | None = None) -> None:
    """`decodescope log --json` to the binary stream `out`: engine, summary (and `extra`'s
    keys, see json_head), then every record of `lines` (the log again, after the scan that
    gave `summary`), streamed."""
    out.write(json_head(engine, summary, extra))
    write_records(out, lines, engine, year, scan.limits())
    out.write(JSON_TAIL)
    out.flush()


JSON_TAIL = b"\n]}\n"


def json_head(engine, summary: LogSummary, extra: dict | None = None) -> bytes:
    """`{"engine": ..., "summary": {...}, "records": [`: what precedes the records; `extra`
    (logsettings.json_parts: the summary with its segments' settings, the settings and
    findings) replaces or adds top-level keys."""
    head = {"engine": engine, "summary": summary.to_dict(), **(extra or {})}
    return orjson.dumps(head)[:-1] + b', "records": ['



def write_records(out, lines: Iterable[str], engine, year, limits: list, join=None) -> int:
    """The JSON records of `lines`, comma-separated, to `out`, warm-up flagged by a
    finished scan's limits; `join`: the lines are a stretch of the log scanned apart
    (its tags and line numbers read through it). Returns how many were written."""
    from decodescope.serverstats.logtally import is_warm, resolve

    tagger = WindowTagger(join is not None)
    offset = join.line_offset if join is not None else 0
    deferred, write, n = tagger.deferred, out.write, 0
    reader = LogReader((), engine, year)
    parsed, tag_facts = reader.parsed, tagger.tag_facts
    for line_no, line in enumerate(lines, 1):
        pa = parsed(line)
        if pa is None:
            continue
        # what tagger.tag(record) reads (running_of, clock_of), without building the record
        p, accept = pa
        fields = p.fields
        running = logformats.running_in(fields)
        clock = p.time_s if p.time_s is not None else fields.get("log_elapsed_s")
        tag = tag_facts(p.kind, (reader.engine, p.rank), running if type(running) in _NUMBER else None, accept,
                        p.gen_tok_s, clock, p.process, line_no, fields.get("speculative"))
        if join is not None:
            tag = resolve(tag, join, deferred)
        warm = tag is not None and is_warm(tag, limits[tag[0]])
        write(b",\n" if n else b"\n")
        write(record_json(p.kind, reader.engine, line_no + offset, p.time_s, p.rank, accept, p.gen_tok_s, warm,
                          p.process, fields))
        n += 1
    return n


_NUMBER = (int, float)  # type() in it: logsegment.running_of's test for what pairs() returns


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):  # TensorRT-LLM's IterationStats keep kvCacheStats, specDecodingStats nested
        return {k: _json_safe(x) for k, x in v.items()}
    return v
