"""`decodescope demo`: the reference case explained end to end from bundled data."""

import tomllib
from pathlib import Path

import click

DATA = Path(__file__).resolve().parent.parent / "explain" / "data"


@click.command()
@click.option("--html", "html_path", help="also write the HTML report to this file")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--markdown", "as_markdown", is_flag=True, help="print markdown")
def demo(html_path, as_json, as_markdown):
    """Qwen3.6-27B on 2 x RTX A6000 (SGLang, TP 2, MTP): measured 55 tok/s, why not 70? No GPU, server or network."""
    from decodescope.cli.explain_cmd import explanation, render
    from decodescope.explain import inputs, merge
    with open(DATA / "reference.toml", "rb") as f:
        ref = tomllib.load(f)
    flags = dict(ref["deployment"])
    model = flags.pop("model")
    obs = merge(inputs.from_points(ref["points"]["values"], ref["points"]["source"]),
                inputs.from_log(str(DATA / ref["log"]["file"])))
    obs = type(obs)(obs.points, obs.log, obs.inputs + (f"{ref['log']['file']}: {ref['log']['source']}",))
    render(explanation(model, obs, float(ref["target"]["tok_s"]), **flags), as_json, as_markdown, html_path)
