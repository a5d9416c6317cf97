"""Terminal rendering of `decodescope validate`: the numbers of Validation.to_dict(), only
formatted. Errors are of the expected tok/s against the measured tok/s."""

from rich.console import Console
from rich.table import Table

from decodescope.validate.run import EngineResult, ErrorStats, Validation


def _stats(s: ErrorStats | None) -> list[str]:
    if s is None:
        return ["", "", "", "", ""]
    return [str(s.rows), f"{s.median_abs:.1%}", f"{s.mean_abs:.1%}", f"{s.within_10:.0%} ({round(s.within_10 * s.rows)})",
            f"{s.within_25:.0%} ({round(s.within_25 * s.rows)})"]


def _summary(v: Validation) -> Table:
    t = Table(title="|error| of expected tok/s against measured, per engine", box=None, padding=(0, 1))
    for c in ("engine", "sources", "figure", "rows", "median", "mean", "≤ 10 %", "≤ 25 %"):
        t.add_column(c, justify="left" if c in ("engine", "figure") else "right")
    for e in [*v.engines, None]:
        name, n = (e.engine, str(len(e.sources))) if e else ("all", "")
        if e is not None and not e.rows:
            t.add_row(name, n, "no rows", *_stats(None))
            continue
        out, ins = (e.out_of_sample, e.in_sample) if e else (v.out_of_sample, v.in_sample)
        if e is None:
            t.add_section()
        t.add_row(name, n, "out of sample", *(_stats(out) if out else ["n/a", "", "", "", ""]))
        fitted = all(x.fitted_profile for x in v.engines if x.rows) if e is None else e.fitted_profile
        t.add_row("", "", "in sample" if fitted else "engines.toml" if e is None else "estimate", *_stats(ins))
    return t


def _notes(e: EngineResult) -> list[str]:
    out = [f"{e.engine}: {e.note}"] if e.note else []
    if e.rows and not e.fitted_profile:
        out.append(f"{e.engine}: its profile is an estimate, not fitted to these rows (engines.toml)")
    out += [f"{e.engine}: at a bound: {b}" for b in e.at_bounds]
    out += [f"{e.engine}: [bold red]{r.id} measured {r.measured:.1f} tok/s is above its ceiling "
            f"{r.ceiling:.1f} tok/s[/]" for r in e.rows if r.above_ceiling]
    return out


def _rows(e: EngineResult) -> list[str]:
    """One line per row: in sample with the loaded profile, out of sample without the row's source."""
    held = {h.id: h for h in e.held_out}
    lines = [f"{e.engine}: every row, tok/s (error = expected / measured - 1)",
             f"{'id':10s} {'source':7s} {'gpu':15s} {'model':22s} {'measured':>8s} {'in: exp':>8s} {'error':>7s} "
             f"{'out: exp':>8s} {'error':>7s} {'ceiling':>8s}  note"]
    for r in e.rows:
        h = held.get(r.id)
        ins = f"{'':>8s} {'':>7s}" if r.expected is None else f"{r.expected:8.1f} {r.error:+7.1%}"
        out = f"{'':>8s} {'':>7s}" if h is None else f"{h.expected:8.1f} {h.error:+7.1%}"
        flag = " ABOVE THE CEILING" if r.above_ceiling else ""
        lines.append(f"{r.id:10s} {r.source:7s} {r.gpu:15s} {r.model[:22]:22s} {r.measured:8.1f} {ins} {out} "
                     f"{r.ceiling:8.1f}{flag}  {r.note}")
    return lines


def _fitted(e: EngineResult) -> list[str]:
    if not e.fitted:
        return []
    s = e.fitted_in_sample
    lines = [f"[bold]{e.engine}[/]: fitted from the neutral start on all {s.rows} rows (in sample): "
             f"median |error| {s.median_abs:.1%}, mean {s.mean_abs:.1%}, within 10 % {s.within_10:.0%}, "
             f"within 25 % {s.within_25:.0%}"]
    lines += [f"  {name} = {x:.3g}" for name, x in e.fitted]
    return lines + [f"  at a bound: {b}" for b in e.fitted_at_bounds]


def print_validation(v: Validation, rows: bool) -> None:
    con = Console(highlight=False)
    con.print(_summary(v))
    for e in v.engines:
        for line in _notes(e):
            con.print(line)
    above = ", ".join(v.above_ceiling) or "none"
    con.print(f"rows whose measurement beats the ceiling: [bold]{above}[/]")
    if v.skipped:
        con.print(f"{len(v.skipped)} rows skipped (the model cannot run them yet):")
        for s in v.skipped:
            con.print(f"  {s.id}: {s.reason}")
    for e in v.engines:
        if rows and e.rows:
            for line in _rows(e):
                con.print(line, markup=False, soft_wrap=True)
        for line in _fitted(e):
            con.print(line)
