"""A log's start-up settings next to its statistics: for `log` (terminal and --json) and for
`model --from-log` / `explain --log` (the deployment the server logged).

The settings come from their own streaming pass (settings.read_settings), which skips
statistics and request lines by four substring tests: on a log of statistics it costs
little next to the summary pass (benchmarks/log_speed.py)."""

from decodescope.errors import DecodescopeError
from decodescope.serverstats.settings import SettingsSegment, read_settings


def log_settings(path: str) -> list[SettingsSegment]:
    """Every run's settings in the log at `path` (plain or .gz)."""
    from decodescope.serverstats import logio

    try:
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
