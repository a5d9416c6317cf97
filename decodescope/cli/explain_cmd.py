"""`decodescope explain`: what was measured, reconciled with the model of the same deployment."""

import json
import sys

import click

from decodescope.cli.model_cmd import model as model_command
from decodescope.errors import DecodescopeError

# every option of `decodescope model` that describes the deployment (one definition of each)
DEPLOYMENT_FLAGS = tuple(p.name for p in model_command.params
                         if isinstance(p, click.Option) and p.name not in ("as_json", "list_presets", "calibration", "from_log"))


def explanation(model: str, obs, target: float | None = None, calibration: str | None = None, **flags):
    """Reconcile observations with `decodescope model`'s prediction for the same flags (and
    calibration file: its measured numbers replace the engine profile's, as in `model`)."""
    from decodescope.arch import build_arch, load_config
    from decodescope.cli.model_cmd import _draft, _max_positions
    from decodescope.explain import reconcile
    from decodescope.model import make_deployment, predict
    raw = load_config(model)
    arch = build_arch(raw)
    draft = flags.pop("draft_model", None)
    most = max(p.accept_len for p in obs.points)
    if flags.get("spec", "none").strip().lower() in ("none", ""):
        if most > 1.0:
            raise DecodescopeError(f"the measured points have accept length up to {most:g}, but no --spec is given",
                                   "add the server's speculation, e.g. --spec mtp:3 (or eagle:K, draft:K, ngram:K)")
    elif flags.get("accept") is None:
        flags["accept"] = sum(p.accept_len for p in obs.points) / len(obs.points)  # the points' mean
    d = make_deployment(arch, **flags, draft=_draft(draft) if draft else None)
    from dataclasses import replace

    from decodescope.hardware.calibration import calibrate_deployment
    d, measured = calibrate_deployment(d, calibration)
    p = predict(arch, d, with_levers=True, max_positions=_max_positions(raw.data))
    p = replace(p, notes=p.notes + measured)
    return reconcile(arch, d, p, obs, target)


def render(e, as_json: bool, as_markdown: bool, html_path: str | None) -> None:
    if html_path:
        from decodescope.report.explain_html import write_html
        write_html(e, html_path)
    if as_json:
        click.echo(json.dumps(e.to_dict(), indent=1))
    elif as_markdown:
        from decodescope.report.explain_text import markdown
        click.echo(markdown(e), nl=False)
    else:
        from decodescope.report.explain_text import print_explanation
        print_explanation(e)
    if html_path and not as_json:
        sys.stdout.flush()
        click.echo(f"wrote {html_path}", err=True)


@click.command()
@click.argument("args", nargs=-1)
@click.option("--log", "log_file", help="a server log (SGLang, vLLM, llama.cpp) to read the points from")
@click.option("--segment", type=int, help="which segment of the log (default: the last)")
@click.option("--points", help="ACCEPT_LEN:TOK_S,... measured points (tok/s per user)")
@click.option("--trace", "traces", multiple=True, type=click.Path(),
              help="a torch-profiler trace of the same deployment (repeat: one per rank), or the folder "
                   "the profiler wrote them to: measured terms in the gap")
@click.option("--target", type=float, help="tok/s per user wanted: the accept length it needs, the levers that reach it")
@click.option("--markdown", "as_markdown", is_flag=True, help="print markdown (for an issue or a chat)")
@click.option("--html", "html_path", help="also write a self-contained HTML report to this file")
@click.pass_context
def explain(ctx, args, log_file, segment, points, traces, target, as_markdown, html_path, **flags):
    """Reconcile measurements ([RUN.jsonl] MODEL, --log FILE or --points) with the model of MODEL on --gpu.
    With --log, the deployment the log's start-up lines state (model, tp, pp, ep, weights, kv, spec,
    engine) stands in for flags not typed, and MODEL may be left out when the log names a preset, a
    local path or a hub id in the local cache."""
    from decodescope.cli.model_cmd import LOG_FLAGS, log_deployment
    from decodescope.explain import inputs, merge
    if len(args) not in ((0, 1, 2) if log_file else (1, 2)):
        raise click.UsageError("usage: decodescope explain [RUN.jsonl] MODEL --gpu ID [--log FILE] [--points A:T,...]")
    *run, model = args or (None,)
    if not (run or log_file or points):
        raise click.UsageError("give a run file, --log FILE or --points A:T,... to explain")
    from_log = inputs.from_log(log_file, segment) if log_file else None
    parts = ([inputs.from_run(run[0])] if run else []) + ([from_log] if from_log else [])
    parts += [inputs.from_points(points)] if points else []
    if log_file:  # after from_log, whose errors name a missing or unreadable log
        model, logged = log_deployment(ctx, log_file, model, {k: flags[k] for k in LOG_FLAGS})
        flags.update(logged)
        flags.update(_log_load(ctx, from_log.log))
    if not flags.get("gpu"):
        raise click.UsageError("--gpu is required (e.g. --gpu rtx-a6000), unless the log names the GPUs")
    if traces:
        from decodescope.explain.traced import from_trace
        parts.append(from_trace(list(traces)))
    as_json = flags.pop("as_json")
    if target is not None and not target > 0:
        raise click.BadParameter("must be > 0 tok/s", param_hint="--target")
    e = explanation(model, merge(*parts), target, flags["calibration"], **{k: flags[k] for k in DEPLOYMENT_FLAGS})
    render(e, as_json, as_markdown, html_path)


def _log_load(ctx: click.Context, facts) -> dict:
    """--batch and --context from the log's decode lines (median running requests, and tokens
    per request where the engine logs them), where not typed: the model then runs the pass the
    server ran, not one request alone."""
    from click.core import ParameterSource
    typed = {k for k in ("batch", "context") if ctx.get_parameter_source(k) not in (None, ParameterSource.DEFAULT)}
    load = {"batch": facts.running and max(1, round(facts.running)),
            "context": facts.context_tokens and max(1, round(facts.context_tokens))}
    return {k: v for k, v in load.items() if v and k not in typed}


# the deployment flags of `decodescope model`, the same options (one definition), and --json
explain.params += [p for p in model_command.params if p.name in DEPLOYMENT_FLAGS + ("as_json", "calibration")]
