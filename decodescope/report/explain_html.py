"""The explain report as one self-contained HTML file: the strings of explain_common,
the plots of explain_plots inlined as SVG, rendered by jinja2 with autoescape on (every
name, path and log text is escaped; only the SVG made here is marked safe)."""

from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.explain import Explanation
from decodescope.explain.reconcile import CARRY_OVER
from decodescope.report import explain_plots
from decodescope.report.explain_common import deployment_line, gap_rows, headline, inputs, lever_rows, verdict


def html(e: Explanation) -> str:
    import jinja2
    from markupsafe import Markup
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    lever_svg = explain_plots.levers(e)
    return env.get_template("explain.html.j2").render(
        name=e.prediction.arch.summary()["name"], deployment=deployment_line(e), verdict=verdict(e),
        headline=headline(e), gap=gap_rows(e), levers=lever_rows(e), inputs=inputs(e),
        plot_round=Markup(explain_plots.round_breakdown(e)), plot_accept=Markup(explain_plots.tok_s_vs_accept(e)),
        plot_levers=Markup(lever_svg) if lever_svg else None, projection=CARRY_OVER)


def write_html(e: Explanation, path: str) -> None:
    text = html(e)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as err:
        raise DecodescopeError(f"cannot write {path}: {err.strerror}", "pass --html a writable file path") from None
