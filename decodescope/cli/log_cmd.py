"""`decodescope log FILE`: read a saved SGLang / vLLM / llama.cpp server log offline.

The file is streamed line by line and never held in memory. The summary takes one
pass, the start-up settings another, run at the same time (settings.read_settings skips
statistics lines by substring tests, so it costs a fraction of the first). `--json`
writes every record as well (turn that off with `--no-records`). The warm-up flag of a
record depends on the whole log: a plain file's records come from the summary pass,
kept in a temporary folder until the flags are known (logfused.py); a .gz or standard
input is read a second time for them (an input that cannot be read twice, such as a
pipe, is spooled to a temporary file)."""

import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import click

from decodescope.errors import DecodescopeError
from decodescope.serverstats.logformats import ENGINES


@click.command("log")
@click.argument("file")
@click.option("--engine", type=click.Choice(ENGINES), help="Log format; detected when not given.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: engine, summary, settings, findings, records.")
@click.option(
    "--records/--no-records",
    default=True,
    help="With --json: include every recognised line (default) or the summary only.",
)
@click.option("--year", type=int, help="Year of vLLM timestamps, which carry none [this year].")
def log(file, engine, as_json, records, year):
    """Parse a server log FILE (plain or .gz; - for standard input): the settings the server
    logged at start-up and the ones known to cost decode speed (findings), per-line records
    and the steady-state accept length, generation tok/s and round time per server run,
    warm-up dropped."""
    from decodescope.serverstats import logio
    from decodescope.serverstats.logscan import scan_file, scan_log

    plain = logio.is_plain_file(file)
    again = plain or (file != "-" and os.path.isfile(file))  # a file can be read a second time
    # an input read once (standard input, a pipe) is spooled for the settings pass (and the records)
    spool = None if again else tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")
    # a plain file's records come from the summary pass, kept here until the summary is known
    folder = tempfile.TemporaryDirectory(prefix="decodescope-records-") if plain and as_json and records else None
    if plain:
        with ThreadPoolExecutor(1) as pool:  # the settings pass reads the file while scan_file's workers do
            scanning = pool.submit(_guard, scan_file, file, engine, year, records=folder and folder.name, path=file)
            try:
                runs = _guard(_settings, file, spool, path=file)
            finally:
                first = scanning.result()  # its error, if any, first
    else:
        with logio.open_lines(file) as lines:
            first = _guard(scan_log, _tee(lines, spool) if spool else lines, engine, year, path=file)
        runs = _guard(_settings, file, spool, path=file)
    summary = first.summary()
    if not summary.records and not runs:
        raise _no_statistics(file, summary, engine)
    if not as_json:
        _print_tables(file, summary, runs)
        return
    from decodescope.serverstats.logsettings import json_parts

    extra = json_parts(summary.to_dict(), runs)
    if not records:
        click.echo(json.dumps({"engine": summary.engine, **extra}))
        return
    if folder:
        _stream_json(None, first, summary, year, file, extra)
        folder.cleanup()
    elif spool:
        spool.seek(0)
        _stream_json(logio.capped(spool), first, summary, year, file, extra)
    else:
        with logio.open_lines(file) as lines:
            _stream_json(lines, first, summary, year, file, extra)



def _no_statistics(file: str, summary, engine: str | None) -> DecodescopeError:
    """The error for a log with neither a statistics line nor a start-up line."""
    return DecodescopeError(
        f"no SGLang, vLLM, llama.cpp or TensorRT-LLM statistics or start-up line in {file} "
        f"({summary.skipped_lines} lines read, {summary.rejected_lines} rejected)"
        + (f" for engine {engine}" if engine else ""),
        "give the server's own log: SGLang logs 'Decode batch' lines at --log-level info, "
        "vLLM its 'Avg generation throughput' lines unless --disable-log-stats, "
        "llama.cpp its 'eval time' lines per request, "
        "TensorRT-LLM its 'iter = ' lines with print_iter_log: true (its /metrics JSON: one object "
        "a line, jq -c '.[]')",
    )


def _print_tables(file: str, summary, runs) -> None:
    """The terminal output: settings and findings per server run, then the statistics."""
    from decodescope.report.log_table import print_log_summary, print_no_statistics
    from decodescope.report.settings_table import print_settings
    from decodescope.serverstats.findings import findings

    print_settings([(seg, findings(seg)) for seg in runs])
    if summary.records:
        print_log_summary(file, summary)
    else:
        print_no_statistics(file, summary)

def _settings(file, spool):
    """Every run's start-up settings: a second streaming pass over the file or the spool."""
    from decodescope.serverstats import logio
    from decodescope.serverstats.logsettings import log_settings
    from decodescope.serverstats.settings import read_settings

    if spool is None:
        return log_settings(file)
    spool.seek(0)
    return read_settings(logio.capped(spool))


def _tee(lines, spool):
    for line in lines:
        spool.write(line)
        yield line


def _guard(fn, *args, path, **kw):
    """fn(*args); a truncated or corrupt .gz becomes a clear error."""
    from decodescope.serverstats.logio import READ_ERRORS

    try:
        return fn(*args, **kw)
    except BrokenPipeError:
        raise
    except READ_ERRORS as e:
        raise DecodescopeError(f"cannot read {path}: {e}", "is the file complete? re-copy it or gunzip -t it") from e


def _stream_json(lines, first, summary, year, path, extra):
    """--json to stdout; `lines` None: the records scan_file wrote."""
    from decodescope.serverstats.logscan import copy_scanned_records
    from decodescope.serverstats.serverlog import JSON_TAIL, json_head, write_json

    out = sys.stdout.buffer
    try:
        if lines is None:
            out.write(json_head(first.engine, summary, extra))
            copy_scanned_records(first, out)
            out.write(JSON_TAIL)
            out.flush()
        else:
            _guard(write_json, out, lines, first.engine, year, first.scan, summary, extra, path=path)
    except BrokenPipeError:  # the reader of our output (e.g. head) stopped early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
