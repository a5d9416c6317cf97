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
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.measure.client import RequestResult
from decodescope.measure.stats import summarize

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
        try:
            line = json.dumps(obj, allow_nan=False)
        except ValueError:  # NaN / inf from a server sample: null keeps the file strict JSON
            line = json.dumps(_finite(obj), allow_nan=False)
        self._f.write(line + "\n")
        self._f.flush()
        self.lines += 1

    def request(self, r: RequestResult) -> None:
        self.write({"type": "request", **r.to_dict()})

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


@dataclass(frozen=True)
class Run:
    header: dict
    requests: tuple[RequestResult, ...]
    samples: tuple[dict, ...]
    summary: dict  # recomputed from requests and samples
    complete: bool  # the run wrote its summary line (False: cut off)


def read_run(path: str | Path) -> Run:
    """Read a run file back, also one cut off mid-run, and recompute its summary."""
    lines = _lines(Path(path))
    if not lines or lines[0].get("type") != "header":
        raise DecodescopeError(
            f"{path} is not a decodescope run file (no header line)", "pass a file from measure --out"
        )
    if lines[0].get("schema") != SCHEMA:
        raise DecodescopeError(f"{path} has run-file schema {lines[0].get('schema')}, expected {SCHEMA}", "")
    requests = tuple(RequestResult.from_dict(x) for x in lines if x.get("type") == "request")
    samples = tuple(x for x in lines if x.get("type") in ("server_log", "metrics"))
    saved = [x for x in lines if x.get("type") == "summary"]
    interrupted = bool(saved and saved[-1].get("interrupted"))
    return Run(lines[0], requests, samples, summarize(requests, samples, interrupted, lines[0].get("slo")), bool(saved))


def _lines(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e}", "pass the path of a run file") from e
    out = []
    rows = text.splitlines()
    for n, line in enumerate(rows, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            if n == len(rows):
                break  # the process died mid-line: everything before it is whole
            raise DecodescopeError(f"{path}:{n} is not JSON ({e})", "the run file is damaged") from e
    return out
