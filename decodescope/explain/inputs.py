"""Adapters from what decodescope reads (points typed on the command line, a run file from
`measure`, a server log) to Observations. Kept thin: the run file and log summary carry
the figures; these pick the ones the reconciliation uses."""

import math
import re
from pathlib import Path
from statistics import median

from decodescope.errors import DecodescopeError
from decodescope.explain.observations import LogFacts, Observations, Point

_PAIR = re.compile(r"\s*([0-9.]+)\s*:\s*([0-9.]+)\s*")
# SGLang logs one "Decode batch" line every decode_log_interval forward steps (rounds),
# default 40: https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py
SGLANG_ROUNDS_PER_LINE = 40


def from_points(text: str, source: str = "--points") -> Observations:
    """`A:T,A:T,...`: accept length and tok/s per user."""
    points = []
    for part in text.split(","):
        m = _PAIR.fullmatch(part)
        a, t = (float(m[1]), float(m[2])) if m else (math.nan, math.nan)
        if not (m and 1.0 <= a < 64 and 0 < t < math.inf):
            raise DecodescopeError(f"--points: '{part.strip()}' is not ACCEPT_LEN:TOK_S",
                                   "give pairs like 3.08:55.59,3.98:72 (accept length >= 1, tok/s per user > 0)")
        points.append(Point(a, t, (source,)))
    return Observations(tuple(points), inputs=(f"{len(points)} points from {source}",))


def from_run(path: str) -> Observations:
    """One point per suite of a `measure` run file: the server's accept length over the
    client's median decode tok/s per request."""
    from decodescope.measure.runfile import read_run
    run = read_run(path, keep=False)
    points = []
    for s in run.summary.get("suites", []):
        accept, decode = s.get("accept_len"), (s.get("decode_tok_s") or {}).get("p50")
        if accept and decode and (s.get("concurrency") in (None, 1)):
            points.append(Point(accept["mean"], decode, (f"{Path(path).name} suite {s['name']}",)))
    if not points:
        raise DecodescopeError(f"{path}: no suite at concurrency 1 with both the server's accept length and "
                               "the client's decode rate", "measure with --concurrency 1 and --server-log "
                               "or --metrics-url, so that the run file holds both")
    return Observations(tuple(points), inputs=(f"run file {Path(path).name}: {len(points)} suites",))


def from_log(path: str, segment: int | None = None) -> Observations:
    """The steady decode windows of one segment of a server log (the last unless
    `segment`; the whole log when the summary has no segments)."""
    from decodescope.serverstats.serverlog import parse_log
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            parsed = parse_log(f)
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror}", "pass a saved server log") from None
    summary, name = parsed.summary, Path(path).name
    segments = getattr(summary, "segments", None)
    if segments:
        if segment is not None and not 1 <= segment <= len(segments):
            raise DecodescopeError(f"--segment {segment}: {name} has {len(segments)} segments",
                                   f"use 1..{len(segments)}")
        summary = segments[(segment or len(segments)) - 1]
        name += f" segment {segment or len(segments)}"
    elif segment not in (None, 1):
        raise DecodescopeError(f"--segment {segment}: {name} has one segment", "leave --segment out")
    # a segment may carry plain numbers or spreads, and the total rate where it has no per-request one
    rate = _mean(getattr(summary, "gen_tok_s_per_req", None) or getattr(summary, "gen_tok_s", None))
    # the steady windows' accept length: the one the round pairs with the rate (round = accept / rate);
    # the summary's accept_len also counts warm-up windows, whose acceptance is valid but whose rate is not
    round_ms = getattr(summary, "round_ms", None)
    accept = round_ms * rate / 1000.0 if round_ms and rate else _mean(getattr(summary, "accept_len", None))
    if accept is None or rate is None:
        raise DecodescopeError(f"{name}: no steady decode window with accept length and generation rate",
                               "pass the log of a server decoding with speculation (SGLang 'accept len', "
                               "vLLM 'Mean acceptance length')")
    facts = _facts(parsed.records, name)
    windows = f"{facts.decode_windows} steady decode window" + ("s" if facts.decode_windows != 1 else "")
    load = (f", median {facts.running:g} running requests" if facts.running else "") + (
        f" of {facts.context_tokens:.0f} tokens each" if facts.context_tokens else "")
    return Observations((Point(accept, rate, (f"{name} ({windows})",)),), facts, (f"server log {name}: {windows}{load}",))


def _mean(x) -> float | None:
    return getattr(x, "mean", x)


def _facts(records, source: str) -> LogFacts:
    from decodescope.serverstats.logformats import running_in
    steady = [r for r in records if r.kind == "decode" and not r.warmup and r.gen_tok_s]
    first, last = (steady[0].line_no, steady[-1].line_no) if steady else (0, 0)
    prefill = [r for r in records if r.kind == "prefill" and first < r.line_no < last]
    running = [n for n in (running_in(r.fields) for r in steady) if _count(n)]
    context = [r.fields["#token"] / n for r in steady if _count(n := running_in(r.fields))
               and _count(r.fields.get("#token"))]
    return LogFacts(source, len(steady), sum(r.fields.get("cuda graph") is False for r in steady),
                    sum(int(r.fields.get("#new-token", 0) or 0) for r in prefill), len(prefill),
                    median(running) if running else None, median(context) if context else None)


def _count(x) -> bool:
    return type(x) in (int, float) and 1 <= x < math.inf
