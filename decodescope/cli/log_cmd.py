"""`decodescope log FILE`: read a saved SGLang / vLLM / llama.cpp server log offline.

The file is streamed line by line and never held in memory. The summary takes one
pass. `--json` streams every record as well (turn that off with `--no-records`): the
warm-up flag of a record depends on the whole log, so the records come from a second
pass over the file (standard input is spooled to a temporary file for it)."""

import gzip
import io
import json
import os
import sys
import tempfile

import click

from decodescope.errors import DecodescopeError
from decodescope.serverstats.logformats import ENGINES


@click.command("log")
@click.argument("file")
@click.option("--engine", type=click.Choice(ENGINES), help="Log format; detected when not given.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: engine, summary, records.")
@click.option(
    "--records/--no-records",
    default=True,
    help="With --json: include every recognised line (default; a second pass) or the summary only.",
)
@click.option("--year", type=int, help="Year of vLLM timestamps, which carry none [this year].")
def log(file, engine, as_json, records, year):
    """Parse a server log FILE (plain or .gz; - for standard input): per-line records and
    the steady-state accept length, generation tok/s and round time, warm-up dropped."""
    from decodescope.serverstats.logscan import scan_file, scan_log
    from decodescope.serverstats.serverlog import LogReader

    spool = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") if file == "-" and as_json and records else None
    if _is_plain(file):
        first = _guard(scan_file, file, engine, year, path=file)
    else:
        with _open(file) as lines:
            first = _guard(scan_log, _tee(lines, spool) if spool else lines, engine, year, path=file)
    summary = first.summary()
    if not summary.records:
        raise DecodescopeError(
            f"no SGLang, vLLM or llama.cpp statistics line in {file} "
            f"({summary.skipped_lines} lines read)" + (f" for engine {engine}" if engine else ""),
            "give the server's own log: SGLang logs 'Decode batch' lines at --log-level info, "
            "vLLM its 'Avg generation throughput' lines unless --disable-log-stats, "
            "llama.cpp its 'eval time' lines per request",
        )
    if not as_json:
        _print_table(file, summary)
        return
    if not records:
        click.echo(json.dumps({"engine": summary.engine, "summary": summary.to_dict()}))
        return
    if spool:
        spool.seek(0)
    with spool or _open(file) as lines:
        _stream_json(LogReader(lines, first.engine, year), first.scan, summary, file)


def _open(path: str):
    """Lines of a log: plain text, gzip (by its magic bytes), or - for stdin. Lines end at
    a line feed only, as in the parallel scan; bytes that are not UTF-8 become U+FFFD."""
    if path == "-":
        return _NoClose(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="\n"))
    if _is_plain(path):
        return open(path, encoding="utf-8", errors="replace", newline="\n")
    return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="\n")


def _is_plain(path: str) -> bool:
    """True for a readable uncompressed file, False for stdin or gzip; else a clear error."""
    if path == "-":
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) != b"\x1f\x8b"
    except FileNotFoundError:
        raise DecodescopeError(f"no such log file: {path}", "check the path; use - to read standard input") from None
    except IsADirectoryError:
        raise DecodescopeError(f"{path} is a directory, not a log file", "give the log file itself") from None
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "check its permissions") from None


class _NoClose:
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def _tee(lines, spool):
    for line in lines:
        spool.write(line)
        yield line


def _guard(fn, *args, path, **kw):
    """fn(*args); a truncated or corrupt .gz becomes a clear error."""
    try:
        return fn(*args, **kw)
    except BrokenPipeError:
        raise
    except (EOFError, gzip.BadGzipFile, OSError) as e:
        raise DecodescopeError(f"cannot read {path}: {e}", "is the file complete? re-copy it or gunzip -t it") from e


def _stream_json(reader, scan, summary, path):
    try:
        _guard(_write_json, reader, scan, summary, path=path)
    except BrokenPipeError:  # the reader of our output (e.g. head) stopped early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _write_json(reader, scan, summary):
    from decodescope.serverstats.serverlog import warmup_flags

    out = sys.stdout
    out.write('{"engine": %s, "summary": %s, "records": [' % (json.dumps(summary.engine), json.dumps(summary.to_dict())))
    sep = "\n"
    for rec in warmup_flags(reader, scan):
        out.write(sep)
        out.write(rec.to_json())
        sep = ",\n"
    out.write("\n]}\n")


def _print_table(path: str, s):
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{path}: {s.engine} log, steady state", title_justify="left")
    for col in ("quantity", "mean", "min", "max", "windows"):
        t.add_column(col, justify="left" if col == "quantity" else "right")
    for label, spread in (
        ("accept len (tokens / verify round)", s.accept_len),
        ("gen throughput, all requests (tok/s)", s.gen_tok_s),
        ("gen throughput per request (tok/s)", s.gen_tok_s_per_req),
    ):
        if spread:
            t.add_row(label, f"{spread.mean:.2f}", f"{spread.min:.2f}", f"{spread.max:.2f}", str(spread.n))
        elif s.engine == "llamacpp" and spread is s.gen_tok_s:
            t.add_row(label + "\n  not in a llama.cpp log (one request per line): see its /metrics", "-", "-", "-", "")
        else:
            t.add_row(label, "-", "-", "-", "0")
    if s.round_ms is not None:
        t.add_row("round time = accept len / per-request tok/s (ms)", f"{s.round_ms:.1f}", "", "", "")
    c = Console()
    c.print(t)
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.records.items()))
    c.print(f"records: {kinds}; lines skipped: {s.skipped_lines}")
    c.print(f"windows: {s.windows}, warm-up dropped: {s.warmup_windows} ({s.rule})")
