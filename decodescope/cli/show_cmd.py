"""`decodescope show RUN.jsonl`: a run file read back, its summary recomputed from the
request and server-sample lines, so a run cut off by Ctrl-C or a crash shows too."""

import json

import click


@click.command()
@click.argument("run_file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def show(run_file, as_json):
    """Show the per-suite results of a run file written by `decodescope measure --out`."""
    from decodescope.measure.runfile import read_run

    run = read_run(run_file)
    if as_json:
        out = {**run.summary, "run_file": run_file, "complete": run.complete, "header": run.header}
        click.echo(json.dumps(out, indent=2))
        return
    from decodescope.report.measure_table import print_summary

    h = run.header
    click.echo(f"{h.get('url')} · model {h.get('model')} · {h.get('api')} API · started {h.get('start_time')}")
    print_summary(run.summary, run_file)
    if not run.complete:
        click.secho("the run file has no summary line: the run was cut off; shown: the requests that finished",
                    fg="yellow")
