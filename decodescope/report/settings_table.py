"""Terminal rendering of a log's settings and findings (one block per run of the log)."""

from rich.console import Console
from rich.table import Table

from decodescope.serverstats.findings import Finding
from decodescope.serverstats.settings import SettingsSegment

ROWS = (  # Settings field, label with its unit
    ("engine", "engine"), ("version", "version"), ("model", "model"),
    ("tp", "tensor parallel"), ("pp", "pipeline parallel"), ("dp", "data parallel"), ("ep", "expert parallel"),
    ("dtype", "dtype"), ("quantization", "quantization"), ("kv_cache_dtype", "KV cache dtype"),
    ("spec_method", "speculative method"), ("spec_steps", "speculative steps (tokens/round)"),
    ("cuda_graphs", "CUDA graphs"), ("attention_backend", "attention backend"),
    ("gpus", "GPUs"), ("gpu_count", "GPU count"), ("offloaded_layers", "layers on GPU"),
    ("total_layers", "layers"), ("context", "context (tokens)"),
)


def settings_table(seg: SettingsSegment) -> Table:
    t = Table(title=f"settings — log lines {seg.first_line}–{seg.last_line}", title_justify="left")
    t.add_column("setting")
    t.add_column("value")
    t.add_column("line", justify="right")
    values = seg.settings.to_json()
    for key, label in ROWS:
        v = values[key]
        if v is None:
            continue
        shown = ", ".join(v) if isinstance(v, list) else ("on" if v is True else "off" if v is False else str(v))
        t.add_row(label, shown, str(seg.where.get(key, "")))
    return t


def findings_table(found: list[Finding]) -> Table:
    t = Table(title="findings", title_justify="left", show_lines=True)
    for col in ("finding", "line", "evidence", "cost", "fix"):
        t.add_column(col, overflow="fold", justify="right" if col == "line" else "left")
    for f in found:
        times = f" (×{f.count})" if f.count > 1 else ""
        t.add_row(f"{f.id.value}\n{f.title}", str(f.line), f.evidence + times, f.cost, f.fix)
    return t


def print_settings(runs: list[tuple[SettingsSegment, list[Finding]]], console: Console | None = None) -> None:
    """Each run's settings, then its findings (or a line saying there are none)."""
    console = console or Console()
    for seg, found in runs:
        if any(v is not None for v in seg.settings.to_json().values()):
            console.print(settings_table(seg))
        if found:
            console.print(findings_table(found))
        else:
            console.print("no slow-path findings in these start-up lines", highlight=False)
