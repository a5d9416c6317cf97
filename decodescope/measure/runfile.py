"""The run file: JSONL, written as the run goes so that a crash or Ctrl-C keeps every
finished request.

  {"type": "header", "schema": 1, "command": [...], "url": ..., "model": ..., ...}
  {"type": "request", ...RequestResult fields}          one per finished request
  {"type": "server_log" | "metrics", "time_s": ..., "window_s": ..., "accept_len": ...,
   "gen_tok_s": ..., "warmup": ..., "data": {...}}      one per server sample (llama.cpp
                                                         lines: + "per_request", "written_s")
  {"type": "summary", ...}                               last, when the run ended cleanly

Every line is flushed as it is written. Times (start_s, end_s, time_s) are seconds since
the run started, on the client's monotonic clock.

Reading back streams the file (plain or gzip, also a pipe) line by line and checks each
line against the schema below, the one the writer writes: a line that is not JSON, not
an object, of an unknown type or with a field of the wrong type or out of range is
counted and skipped, never fatal (a cut-off last line is the run's end, not a fault).
"""

import gzip
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.measure import redact
from decodescope.measure.client import RequestResult
from decodescope.measure.stats import MAX_GROUPS, Summary

SCHEMA = 1


class RunWriter:
    def __init__(self, path: str | Path, header: dict):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = self.path.open("x", encoding="utf-8")
        except FileExistsError as e:
            raise DecodescopeError(f"{self.path} exists", "pass another --out, or remove the old run file") from e
        except OSError as e:
            raise DecodescopeError(f"cannot write the run file {self.path}: {e}", "pass a writable --out") from e
        self.lines = 0
        self.write({"type": "header", "schema": SCHEMA, **header})

    def write(self, obj: dict) -> None:
        obj = redact.mapping(obj)  # the last net: no credential reaches the file
        try:
            line = json.dumps(obj, allow_nan=False)
        except ValueError:  # NaN / inf from a server sample: null keeps the file strict JSON
            line = json.dumps(_finite(obj), allow_nan=False)
        self._f.write(line + "\n")
        self._f.flush()
        self.lines += 1

    def request(self, r: RequestResult) -> None:
        d = r.to_dict()
        self.write({"type": "request", **{k: d[k] for k in REQUEST_FIELDS}})

    def close(self) -> None:
        self._f.close()

    def discard_if_empty(self) -> None:
        """Remove a run file that got no further than its header (the run failed to start)."""
        self.close()
        if self.lines <= 1:
            self.path.unlink(missing_ok=True)


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


MAX_LINE_BYTES = 16 * 2**20  # a request line with 100k gaps is ~2 MB
MAX_COUNT = 10**9  # tokens, chars, indices: larger is no count
PROBLEMS_KEPT = 5
MAX_ERROR_CHARS = 1000  # of a request's error kept in memory; the client writes ~500


def _num(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _time(v) -> bool:
    return _num(v) and abs(v) < 1e9


def _nonneg(v) -> bool:
    return _num(v) and 0 <= v < 1e12


def _pos(v) -> bool:
    return _num(v) and 0 < v < 1e12


def _count(v) -> bool:
    return type(v) is int and 0 <= v <= MAX_COUNT


def _level(v) -> bool:
    return type(v) is int and 1 <= v <= MAX_COUNT


def _bool(v) -> bool:
    return type(v) is bool


def _str(v) -> bool:
    return isinstance(v, str)


def _opt(check):
    def optional(v) -> bool:
        return v is None or check(v)

    return optional


def _list_of(check):
    def every(v) -> bool:
        return isinstance(v, list) and all(check(x) for x in v)

    return every


def _times(v) -> bool:
    # C-level passes: a run file holds millions of gaps, a call per value would double show's time
    return (
        isinstance(v, list)
        and set(map(type, v)) <= {int, float}
        and all(map(math.isfinite, v))
        and (not v or (-1e9 < min(v) and max(v) < 1e9))
    )


def _accept(v) -> bool:
    return _num(v) and 1 <= v <= 1000  # tokens per round: at least the one the target model makes


# field -> check, for every field of a request line (RequestResult) and of a server sample
REQUEST_FIELDS = {
    "suite": _str,
    "prompt_index": _count,
    "warmup": _bool,
    "concurrency": _opt(_level),
    "rate": _opt(_pos),
    "ok": _bool,
    "error_kind": _opt(_str),
    "error": _opt(_str),
    "http_status": _opt(_count),
    "start_s": _time,
    "end_s": _time,
    "ttft_ms": _opt(_nonneg),
    "itl_ms": _times,  # not >= 0: the client's stamps can misorder two reads by < 1 ms
    "latency_ms": _opt(_nonneg),
    "output_tokens": _count,
    "token_count_source": _str,
    "chunk_tokens": _opt(_list_of(_count)),
    "decode_tok_s": _opt(_pos),
    "output_chars": _count,
    "finish_reason": _opt(_str),
    "response_id": _opt(_str),
    "resent": _bool,
    "chunk_source": _opt(_str),
    "timings_tok_s": _opt(_pos),
}
# absent from files written before they existed
OPTIONAL_REQUEST_FIELDS = {"resent": False, "chunk_source": None, "timings_tok_s": None}
SAMPLE_FIELDS = {
    "time_s": _time,
    "window_s": _opt(_nonneg),
    "accept_len": _opt(_accept),
    "gen_tok_s": _opt(_nonneg),
    "warmup": _bool,
    "per_request": _opt(_bool),
    "written_s": _opt(_time),
}
OPTIONAL_SAMPLE_FIELDS = {"per_request": None, "written_s": None}


def check_fields(obj: dict, schema: dict, optional: dict) -> str | None:
    """Why obj does not fit the schema (the first field that does not), or None."""
    for name, check in schema.items():
        if name not in obj and name in optional:
            continue
        if name not in obj:
            return f"no {name}"
        if not check(obj[name]):
            return f"{name} is {json.dumps(obj[name])[:40]}"
    return None


@dataclass(frozen=True)
class Run:
    header: dict
    requests: tuple[RequestResult, ...]  # empty unless read with keep=True
    samples: tuple[dict, ...]  # the same
    summary: dict  # recomputed from the request and sample lines
    complete: bool  # the run wrote its summary line (False: cut off)
    skipped: int = 0  # lines counted and left out: not JSON, not an object, a field wrong
    problems: tuple[str, ...] = ()  # the first few of them, "line N: why"


def read_run(path: str | Path, keep: bool = True) -> Run:
    """Read a run file back, also one cut off mid-run, and recompute its summary as the
    lines stream in. keep: also hold every request (memory grows with the file); without
    it memory stays bounded whatever the file's size (`show`): the server samples, which
    count for a group only once every group's window is known, are read a second time
    rather than held (from a pipe, which cannot be read twice, they are held, in short)."""
    lines = _Lines(Path(path))
    header = next(lines.objects(), None)
    if not isinstance(header, dict) or header.get("type") != "header":
        raise DecodescopeError(
            f"{path} is not a decodescope run file (no header line)", "pass a file from measure --out"
        )
    if header.get("schema") != SCHEMA:
        raise DecodescopeError(f"{path} has run-file schema {json.dumps(header.get('schema'))[:40]}, expected {SCHEMA}", "")
    acc, requests, samples, saved = Summary(header.get("slo")), [], [], None
    again = not keep and Path(path).is_file()  # a pipe or FIFO cannot be read twice
    for obj in lines.objects():
        kind = obj.get("type") if isinstance(obj, dict) else None
        why = _line_problem(obj, kind)
        if why:
            lines.bad(why)
        elif kind == "request":
            if obj["error"]:
                obj["error"] = obj["error"][:MAX_ERROR_CHARS]  # memory: the summary needs only the kind
            r = RequestResult.from_dict(obj)
            if not acc.add(r):
                lines.bad(f"more than {MAX_GROUPS} suites and load levels")
            elif keep:
                requests.append(r)
        elif kind == "summary":
            saved = obj
        elif not again:
            samples.append(obj if keep else {k: obj.get(k) for k in ("type", *SAMPLE_FIELDS)})
    interrupted = bool(saved and saved.get("interrupted"))
    summary = acc.result(_samples_again(Path(path), lines.n) if again else samples, interrupted)
    kept = tuple(samples) if keep else ()
    return Run(header, tuple(requests), kept, summary, saved is not None, lines.skipped, tuple(lines.problems))


def _samples_again(path: Path, lines: int):
    """The file's valid server-sample lines, read a second time up to the line the first
    reading ended at (a live run's file grows meanwhile); request lines are not parsed."""
    second = _Lines(path, skip=b'{"type": "request"')
    for obj in second.objects():
        if second.n > lines:
            return
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind in ("server_log", "metrics") and _line_problem(obj, kind) is None:
            yield obj


def _line_problem(obj, kind) -> str | None:
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, not an object"
    if kind == "request":
        why = check_fields(obj, REQUEST_FIELDS, OPTIONAL_REQUEST_FIELDS)
        if why is None and obj["ok"] and obj["error_kind"] is not None:
            why = "ok with an error_kind"
        return why
    if kind in ("server_log", "metrics"):
        return check_fields(obj, SAMPLE_FIELDS, OPTIONAL_SAMPLE_FIELDS)
    if kind == "summary":
        return None if _bool(obj.get("interrupted", False)) else "interrupted is not true or false"
    return f"unknown line type {json.dumps(kind)[:40]}"


class _Lines:
    """The file's lines as JSON values, streamed; bad ones counted."""

    def __init__(self, path: Path, skip: bytes = b""):
        self.path = path
        self._skip = skip  # lines starting so are not parsed
        self.skipped = 0
        self.problems: list[str] = []
        self.n = 0
        try:
            raw = path.open("rb")
            gz = raw.peek(2)[:2] == b"\x1f\x8b"  # peek: a pipe keeps its bytes
        except OSError as e:
            raise DecodescopeError(f"cannot read {path}: {e}", "pass the path of a run file") from e
        self._f = gzip.GzipFile(fileobj=raw) if gz else raw
        self._gen = self._read()

    def objects(self):
        return self._gen

    def bad(self, why: str) -> None:
        self.skipped += 1
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(f"line {self.n}: {why}")

    def _read(self):
        with self._f:
            while (line := self._readline()) is not None:
                self.n += 1
                if line is False:
                    self.bad(f"longer than {MAX_LINE_BYTES // 2**20} MiB")
                    continue
                if not line.strip() or (self._skip and line.startswith(self._skip)):
                    continue
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested too deep
                    if line.endswith(b"\n"):
                        self.bad("not JSON")
                    continue  # else the process died mid-line: everything before it is whole
                yield obj

    def _readline(self):
        """The next line (bytes), False for one over MAX_LINE_BYTES (read past), None at the end."""
        try:
            line = self._f.readline(MAX_LINE_BYTES + 1)
            if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
                return line or None
            while (rest := self._f.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            return False
        except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            self.n += 1
            self.bad(f"the file cannot be read on: {e}")
            return None
