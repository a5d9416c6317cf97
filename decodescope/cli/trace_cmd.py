"""`decodescope trace`: where each decode step's GPU time went, from torch-profiler traces."""

import json

import click

from decodescope.errors import DecodescopeError


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--steps", "step_filter", type=click.Choice(["decode", "all"]), default="decode", show_default=True,
              help="decode steps only (where the step markers say), or every step")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, writable=True), help="write one row per step here")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def trace(files, step_filter, csv_path, as_json):
    """Break each decode step of FILES (torch-profiler .json / .json.gz, one per rank) into kernel classes and idle."""
    from decodescope.trace.summary import analyse

    missing = [f for f in files if not _readable(f)]
    if missing:
        raise DecodescopeError(f"cannot read {', '.join(missing)}", "give torch-profiler trace files (.json or .json.gz)")
    report = analyse(list(files), step_filter)
    d = report.to_dict()
    if csv_path:
        from decodescope.report.trace_table import write_csv
        write_csv(report, csv_path)
    if as_json:
        click.echo(json.dumps(d, indent=1))
    else:
        from decodescope.report.trace_table import print_trace
        print_trace(d)
    if not d["steps"]:
        raise DecodescopeError("no steps to break down in " + ", ".join(files),
                               "record GPU activity (ProfilerActivity.CUDA) around a few decode steps; "
                               "--steps all shows prefill steps too")


def _readable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
