"""The explain report for a terminal (rich) and as markdown: the strings of explain_common."""

from decodescope.explain import Explanation
from decodescope.explain.reconcile import CARRY_OVER
from decodescope.report.explain_common import deployment_line, gap_rows, headline, inputs, lever_rows, verdict


def print_explanation(e: Explanation, file=None) -> None:
    from rich.console import Console
    from rich.table import Table
    c = Console(file=file, highlight=False, soft_wrap=False)
    c.print(f"[bold]{_esc(e.prediction.arch.summary()['name'])}[/bold]: {_esc(deployment_line(e))}")
    t = Table(title="measured against the model", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    for k, v in headline(e):
        t.add_row(_esc(k), _esc(v))
    c.print(t)
    g = Table(title="where the round goes: ceiling -> measured, per round")
    for name, just in (("term", "left"), ("ms", "right"), ("source", "left"), ("why", "left")):
        g.add_column(name, justify=just, overflow="fold", no_wrap=name in ("ms", "source"))
    for i, row in enumerate(gap_rows(e)):
        g.add_row(*map(_esc, row), end_section=i in (0, len(e.gap)))
    c.print(g)
    if e.levers:
        lv = Table(title="levers, one change each; projected: " + CARRY_OVER)
        for name in ("lever", "change", "model", "projected", "reaches target", "assumption"):
            lv.add_column(name, overflow="fold", no_wrap=name in ("model", "projected"),
                          justify="right" if name in ("model", "projected") else "left")
        for row in lever_rows(e):
            lv.add_row(*map(_esc, row))
        c.print(lv)
    for line in verdict(e):
        c.print(_esc(line))
    c.print("inputs:", style="bold")
    for x in inputs(e):
        c.print("  " + _esc(x), style="dim")


def _esc(s: str) -> str:
    from rich.markup import escape
    return escape(s)


def markdown(e: Explanation) -> str:
    lines = [f"**{_md(e.prediction.arch.summary()['name'])}**: {_md(deployment_line(e))}", "",
             *[_md(v) + "  " for v in verdict(e)], "", "| quantity | value |", "|---|---|"]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in headline(e)]
    lines += ["", "| term | ms per round | source | why |", "|---|---:|---|---|"]
    lines += ["| " + " | ".join(map(_md, r)) + " |" for r in gap_rows(e)]
    if e.levers:
        lines += ["", "| lever | change | model | projected | reaches target | assumption |", "|---|---|---:|---:|---|---|"]
        lines += ["| " + " | ".join(map(_md, r)) + " |" for r in lever_rows(e)]
    lines += ["", f"Projected: {_md(CARRY_OVER)}."] if e.levers else []
    lines += ["", "Inputs:", *[f"- {_md(x)}" for x in inputs(e)]]
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    """Table-safe markdown text: pipes and HTML-significant characters escaped."""
    return (s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))
