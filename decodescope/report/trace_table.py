"""Rendering of a trace report: the rich table, and the per-step CSV."""

import csv

from rich.console import Console
from rich.table import Table

from decodescope.trace.classify import KernelClass

MAX_RANK_COLUMNS = 8
UNKNOWN_SHOWN = 8


def print_trace(d: dict, console: Console | None = None) -> None:
    """`d` is TraceReport.to_dict(): the terminal shows exactly the JSON's figures."""
    console = console or Console()
    s = d["step_ms"]
    head = (f"{d['steps']} {d['step_filter'] if d['step_filter'] != 'all' else ''} steps per rank, "
            f"{len(d['ranks'])} rank(s); step wall p50 {_ms(s['p50'])} ms, p90 {_ms(s['p90'])} ms, "
            f"min {_ms(s['min'])}, max {_ms(s['max'])} ms")
    console.print(head.replace("  ", " "), highlight=False)
    for r in d["ranks"]:
        console.print(f"  rank {_rank(r)}: {r['file']} — {r['device'] or 'device ?'}, steps from {r['step_source']}",
                      highlight=False)
    if d["steps"]:
        console.print(_table(d))
    if d.get("model") and d["steps"]:
        console.print(_model_table(d["model"]))
    for r in d["ranks"]:
        if r["gemm_bandwidth"]:
            console.print(_bandwidth_table(r))
    _footer(d, console)


def _bandwidth_table(r: dict) -> Table:
    t = Table(title=f"rank {_rank(r)}: GEMMs with recorded shapes, whole trace (bytes: inputs read + output "
                    "written once)", title_justify="left")
    for c in ("op", "Input Dims", "dtype", "calls", "ms", "MB per call", "achieved GB/s"):
        t.add_column(c, justify="right" if c in ("calls", "ms", "MB per call", "achieved GB/s") else "left")
    for g in r["gemm_bandwidth"]:
        t.add_row(g["op"], g["dims"], g["dtype"], str(g["calls"]), _ms(g["ms"]), f"{g['bytes'] / 1e6:.1f}",
                  f"{g['gb_s']:.0f}")
    return t


def _model_table(m: dict) -> Table:
    t = Table(title=f"median step against the model's expected round: {m['model']}", title_justify="left")
    for c in ("trace <-> model term", "measured (ms)", "model (ms)"):
        t.add_column(c, justify="left" if c.startswith("trace") else "right")
    for r in m["rows"]:
        t.add_row(r["term"], _ms(r["measured_ms"]), _ms(r["model_ms"]))
    return t


def _table(d: dict) -> Table:
    t = Table(title="median per step (ms; classes: GPU busy time, overlap counted once)", title_justify="left")
    t.add_column("class")
    t.add_column("all ranks", justify="right")
    t.add_column("% of step", justify="right")
    ranks = d["ranks"] if 1 < len(d["ranks"]) <= MAX_RANK_COLUMNS else []
    for r in ranks:
        t.add_column(f"rank {_rank(r)}", justify="right")
    wall = d["step_ms"]["p50"]
    rows = [(c, c) for c in (k.value for k in KernelClass) if c in d["by_class"]]
    for label, key in rows:
        t.add_row(label, _ms(d["by_class"][key]), _pct(d["by_class"][key], wall),
                  *(_ms(r["by_class"].get(key, 0.0)) for r in ranks))
    t.add_section()
    t.add_row("GPU busy", _ms(d["busy_ms"]), _pct(d["busy_ms"], wall), *(_ms(r["busy_ms"]) for r in ranks))
    t.add_row("GPU idle (launch, host, scheduler)", _ms(d["idle_ms"]), _pct(d["idle_ms"], wall),
              *(_ms(r["idle_ms"]) for r in ranks))
    t.add_row("  of which between steps", _ms(d["idle_between_ms"]), _pct(d["idle_between_ms"], wall),
              *(_ms(r["idle_between_ms"]) for r in ranks))
    t.add_row("step wall", _ms(wall), "100", *(_ms(r["step_ms"]["p50"]) for r in ranks))
    return t


def _footer(d: dict, console: Console) -> None:
    unknown = list(d["unknown_kernels"].items())
    if unknown:
        console.print(f"unknown kernels (ms over all steps shown; {len(unknown)} names):", highlight=False)
        for name, ms in unknown[:UNKNOWN_SHOWN]:
            console.print(f"  {ms:10.3f}  {name[:110]}", highlight=False, markup=False)
    for s in d["stragglers"]:
        console.print(f"[yellow]straggler: rank {s['rank']} ({s['file']}) computes {s['compute_ms']:.3f} ms per step, "
                      f"{s['excess_pct']:.0f} % above the ranks' median[/yellow]", highlight=False)
    for p in d["problems"]:
        console.print(f"[yellow]{p}[/yellow]", highlight=False)


def write_csv(report, path: str) -> None:
    """One row per step and rank; class columns in ms (0 where the class did not run)."""
    classes = [k.value for k in KernelClass]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "rank", "tp_rank", "step", "label", "phase", "start_ms", "wall_ms", "busy_ms", "idle_ms",
                    "idle_between_ms", "kernels", *(f"{c}_ms" for c in classes)])
        for r in report.ranks:
            for s in r.steps:
                w.writerow([r.file, _blank(r.rank), _blank(r.tp_rank), s.index, s.label, s.phase.value,
                            f"{s.start_ms:.6f}", f"{s.wall_ms:.6f}", f"{s.busy_ms:.6f}", f"{s.idle_ms:.6f}",
                            f"{s.idle_between_ms:.6f}", s.kernels,
                            *(f"{s.by_class.get(c, 0.0):.6f}" for c in classes)])


def _rank(r: dict) -> str:
    if r["rank"] is None and r["tp_rank"] is None:
        return "?"
    return f"{r['rank'] if r['rank'] is not None else '?'}" + (f" (TP {r['tp_rank']})" if r["tp_rank"] is not None else "")


def _ms(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _pct(v, wall) -> str:
    return "-" if v is None or not wall else f"{100 * v / wall:.1f}"


def _blank(v) -> str:
    return "" if v is None else str(v)
