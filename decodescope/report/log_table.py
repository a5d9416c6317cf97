"""Terminal rendering of a server-log summary: the last run's steady state, then one row
per segment (server run) when the log holds more than one."""

from rich.console import Console
from rich.table import Table

from decodescope.serverstats.logtypes import LogSummary, SegmentSummary

ROWS = (  # summary field, label with its unit
    ("accept_len", "accept len, every window (tokens / verify round)"),
    ("gen_tok_s", "gen throughput per log series, all requests (tok/s)"),
    ("gen_tok_s_total", "gen throughput, server total over DP ranks (tok/s)"),
    ("gen_tok_s_per_req", "gen throughput per request (tok/s)"),
)

WINDOW_LINES = ("SGLang 'Decode batch', vLLM 'Avg generation throughput', llama.cpp 'eval time', "
                "TensorRT-LLM 'iter = ' with print_iter_log, or its /metrics JSON one object a line")
# a generation iteration's tokens are known only from its scheduled requests (a field since
# April 2025) when it verified no draft tokens (trtllm_log.py)
_TRTLLM_NO_RATE = (" (TensorRT-LLM's iteration lines give one only with num_scheduled_requests, "
                   "from April 2025, and no draft tokens)")


def print_log_summary(path: str, s: LogSummary, console: Console | None = None) -> None:
    c = console or Console()
    if not s.windows:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.records.items()))
        # decode lines without a rate: llama.cpp's 0 ms eval prints "inf tokens per second"
        what = "whose decode lines give no rate" if s.records.get("decode") else "without a decode line"
        why = _TRTLLM_NO_RATE if s.engine == "trtllm" and s.records.get("decode") else ""
        c.print(f"{path}: {s.engine} log {what} ({kinds}): no decode rate to report{why}; "
                f"the server logs one per decode window ({WINDOW_LINES})", highlight=False)
    else:
        last = s.segments[-1] if s.segments else None
        where = f", lines {last.first_line}-{last.last_line}" if last and len(s.segments) > 1 else ""
        c.print(_table(f"{path}: {s.engine} log, steady state{where}", s))
        c.print(_footer(s), highlight=False)
    if len(s.segments) > 1:
        c.print(_segments(s.segments))
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.records.items()))
    c.print(f"records: {kinds}; lines skipped: {s.skipped_lines}; rejected (a figure out of range): "
            f"{s.rejected_lines}", highlight=False)
    c.print(f"windows: {s.windows}, warm-up dropped: {s.warmup_windows} ({s.rule})", highlight=False)


def print_no_statistics(path: str, s: LogSummary, console: Console | None = None) -> None:
    """A log of start-up lines only: its settings were shown, it has no rate to summarise."""
    (console or Console()).print(
        f"{path}: no statistics line ({s.skipped_lines} lines read): no decode rate to report; the server "
        f"logs one per decode window ({WINDOW_LINES})", highlight=False)


def _table(title: str, s: LogSummary) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("quantity", "mean", "min", "max", "windows"):
        t.add_column(col, justify="left" if col == "quantity" else "right")
    for key, label in ROWS:
        spread = getattr(s, key)
        if spread:
            t.add_row(label, f"{spread.mean:.2f}", f"{spread.min:.2f}", f"{spread.max:.2f}", str(spread.n))
        elif s.engine == "llamacpp" and key in ("gen_tok_s", "gen_tok_s_total"):
            t.add_row(label + "\n  not in a llama.cpp log (one request per line): see its /metrics", "-", "-", "-", "")
        elif key == "accept_len":
            t.add_row(label + "\n  not in this log: unknown, not 1", "-", "-", "-", "0")
        else:
            t.add_row(label, "-", "-", "-", "0")
    if s.round_ms is not None:
        t.add_row("round time = accept len (steady windows) / per-request tok/s (ms)", f"{s.round_ms:.1f}", "", "", "")
    return t


def _footer(s: LogSummary) -> str:
    notes = []
    if s.lower_bound:
        notes.append("rates from windows that ran out of requests (idle time inside): lower bounds")
    if s.round_ms is None and s.gen_tok_s_per_req:
        notes.append("no round time: the log gives no accept length and does not say speculation is off")
    if s.dp_ranks > 1:
        notes.append(f"{s.dp_ranks} log series (DP ranks / engines / slots) in this run")
    return "; ".join(notes)


def _segments(segments: tuple[SegmentSummary, ...]) -> Table:
    t = Table(title="server runs in this log (never averaged together)", title_justify="left")
    for col in ("lines", "starts at", "accept len", "tok/s total", "tok/s per req", "round (ms)", "ranks"):
        t.add_column(col, justify="left" if col in ("lines", "starts at") else "right")
    for g in segments:
        lb = " ≥" if g.lower_bound else ""
        t.add_row(
            f"{g.first_line}-{g.last_line}", g.reason.value, _mean(g.accept_len),
            lb + _mean(g.gen_tok_s_total), _mean(g.gen_tok_s_per_req),
            "-" if g.round_ms is None else f"{g.round_ms:.1f}", str(g.dp_ranks),
        )
    return t


def _mean(spread) -> str:
    return "-" if spread is None else f"{spread.mean:.2f}"
