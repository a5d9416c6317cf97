"""A log's start-up settings next to its statistics: for `log` (terminal and --json) and for
`model --from-log` / `explain --log` (the deployment the server logged).

The settings come from their own streaming pass (settings.read_settings), which skips
statistics and request lines by four substring tests: on a log of statistics it costs
little next to the summary pass (benchmarks/log_speed.py). With the C reader (logfast),
a plain file's lines are tested in C, block by block, and only the others decoded."""

import io

from decodescope.errors import DecodescopeError
from decodescope.serverstats.settings import (DEVICE_LIST, PARSED_TEXTS, SKIPPED, SettingsSegment,
                                               read_numbered, read_settings)

# The C filter passes only the lines read_settings may take something from (settings.PARSED_TEXTS,
# a findings rule's gate, the lines after a settings.DEVICE_LIST one) and long ones; tests
# compare it with the full pass on every log in tests/data.
_BLOCK = 1 << 20  # bytes: a line as long is read as the text pass reads it (capped at logio.MAX_LINE characters)


def log_settings(path: str) -> list[SettingsSegment]:
    """Every run's settings in the log at `path` (plain or .gz)."""
    from decodescope.serverstats import logfast, logio

    try:
        if logfast.FAST is not None and logio.is_plain_file(path):
            with open(path, "rb") as f:
                return read_numbered(_lines(f, logfast.FAST.kept))
        with logio.open_lines(path) as lines:
            return read_settings(lines)
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "pass a saved server log") from None


def owner(segments: list[SettingsSegment], first_line: int, last_line: int) -> SettingsSegment | None:
    """The settings of the statistics between first_line and last_line: the last start-up
    segment that begins before them, else the first that begins inside them."""
    before = [s for s in segments if s.first_line <= first_line]
    if before:
        return before[-1]
    inside = [s for s in segments if first_line < s.first_line <= last_line]
    return inside[0] if inside else None


def json_parts(summary_dict: dict, segments: list[SettingsSegment]) -> dict:
    """`log --json`'s `settings`, `findings` (the last run's), `settings_segments` (every
    run's, with its findings) and `summary` whose segments carry their own `settings`."""
    from decodescope.serverstats.findings import findings_json

    out = findings_json(segments)
    for g in summary_dict.get("segments", []):
        seg = owner(segments, g["first_line"], g["last_line"])
        g["settings"] = seg.settings.to_json() if seg else None
    return {"summary": summary_dict, **out}


def deployment(path: str) -> dict:
    """The `decodescope model` arguments the last run's start-up lines state ({} without any)."""
    from decodescope.serverstats.model_args import model_args

    segments = log_settings(path)
    return model_args(segments[-1].settings) if segments else {}


def _lines(f, kept):
    """(line number, line) of the lines of the binary file `f` as logio.open_lines gives
    them to read_settings, less those it skips: only the others are decoded."""
    from decodescope.serverstats import logio
    from decodescope.serverstats.findings import line_rules

    skipped, follow = (tuple(x.encode() for x in texts) for texts in (SKIPPED, DEVICE_LIST))
    wanted = tuple(x.encode() for x in dict.fromkeys((*PARSED_TEXTS, *(gate for _, gate, _ in line_rules()))))
    assert logio.MAX_LINE >= _BLOCK  # a line shorter than a block is never capped
    n, after = 1, False  # the number of the block's first line; whether it follows a DEVICE_LIST line
    while True:
        start = f.tell()
        data = f.read(_BLOCK)
        if not data:
            return
        if len(data) == _BLOCK:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line as long as a block: from here on, as open_lines reads
                f.seek(start)
                yield from enumerate(logio.capped(io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline="\n")), n)
                return
            f.seek(start + cut)
            data = data[:cut]
        lines, found, after = kept(data[:-1] if data[-1:] == b"\n" else data, skipped, wanted, follow, _BLOCK, after)
        for i, line in found:
            yield n + i, line.decode("utf-8", "replace") + "\n"
        n += lines
