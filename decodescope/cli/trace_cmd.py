"""`decodescope trace`: where each decode step's GPU time went, from torch-profiler traces."""

import json

import click

from decodescope.errors import DecodescopeError


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--steps", "step_filter", type=click.Choice(["decode", "all"]), default="decode", show_default=True,
              help="decode steps only (where the step markers say), or every step")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, writable=True), help="write one row per step here")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--model", "model_id", help="put the median step next to this model's expected round (as `model`)")
@click.option("--gpu", help="GPU id or alias, with --model")
@click.option("--tp", type=int, default=1, show_default=True, help="tensor-parallel size, with --model")
@click.option("--batch", type=int, default=1, show_default=True, help="requests decoding together, with --model")
@click.option("--context", type=int, default=1024, show_default=True, help="tokens per request's KV cache, with --model")
@click.option("--weights", help="weight format, with --model [default: as the config]")
@click.option("--engine", default="generic", show_default=True, help="engine profile, with --model")
def trace(files, step_filter, csv_path, as_json, model_id, gpu, tp, batch, context, weights, engine):
    """Break each decode step of FILES (torch-profiler .json / .json.gz, one per rank, or the folder the
    engine's profiler wrote them to) into kernel classes and idle."""
    from decodescope.trace.summary import analyse, trace_files

    if model_id and not gpu:
        raise click.UsageError("--model needs --gpu (e.g. --model llama-3.1-8b --gpu h200)")

    files = trace_files(files)
    missing = [f for f in files if not _readable(f)]
    if missing:
        raise DecodescopeError(f"cannot read {', '.join(missing)}", "give torch-profiler trace files (.json or .json.gz)")
    report = analyse(list(files), step_filter)
    d = report.to_dict()
    if model_id:
        d["model"] = _against_model(d, model_id, gpu, tp, batch, context, weights, engine)
    if csv_path:
        from decodescope.report.trace_table import write_csv
        write_csv(report, csv_path)
    if as_json:
        click.echo(json.dumps(d, indent=1))
    else:
        from decodescope.report.trace_table import print_trace
        print_trace(d)
    if not d["steps"]:
        raise _no_steps(d, files)


def _no_steps(d: dict, files) -> DecodescopeError:
    """The error when no file gave a step: unreadable files say why, the others ask for GPU activity."""
    unread = [r["problems"][-1] for r in d["ranks"]
              if any(w in p for p in r["problems"] for w in ("traceEvents", "could not read", "boundary"))]
    if len(unread) == len(d["ranks"]):
        return DecodescopeError(f"nothing to read in {', '.join(files)}: {unread[0]}",
                                "give the .json or .json.gz file torch.profiler wrote (export_chrome_trace or "
                                "tensorboard_trace_handler), one per rank, or the folder holding them")
    return DecodescopeError("no steps to break down in " + ", ".join(files),
                            "record GPU activity (ProfilerActivity.CUDA) around a few decode steps; "
                            "--steps all shows prefill steps too")


def _against_model(d, model_id, gpu, tp, batch, context, weights, engine) -> dict:
    from decodescope.arch import load_arch
    from decodescope.model import make_deployment, predict
    from decodescope.trace.compare import against_model

    arch = load_arch(model_id)
    dep = make_deployment(arch, gpu, tp=tp, batch=batch, context=context, weights=weights, engine=engine)
    return against_model(d, predict(arch, dep).to_dict())


def _readable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
