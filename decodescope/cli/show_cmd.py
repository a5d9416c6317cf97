"""`decodescope show RUN.jsonl`: a run file read back, its summary recomputed from the
request and server-sample lines, so a run cut off by Ctrl-C or a crash shows too. Lines
that do not fit the run-file schema are counted, named and skipped."""

import json

import click


@click.command()
@click.argument("run_file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def show(run_file, as_json):
    """Show the per-suite results of a run file written by `decodescope measure --out`."""
    from decodescope.measure.runfile import read_run

    from decodescope.measure.redact import mapping

    run = read_run(run_file, keep=False)  # the summary only: memory flat in the file's size
    header = mapping(run.header)  # a file written before redaction existed may hold a credential
    if as_json:
        out = {**run.summary, "run_file": run_file, "complete": run.complete, "header": header}
        out |= {"skipped_lines": run.skipped, "skipped_why": list(run.problems)}
        click.echo(json.dumps(out, indent=2))
        return
    from decodescope.report.measure_table import print_summary

    h = {k: str(header.get(k))[:200] for k in ("url", "model", "api", "start_time")}
    click.echo(f"{h['url']} · model {h['model']} · {h['api']} API · started {h['start_time']}")
    print_summary(run.summary, run_file)
    if run.skipped:
        click.secho(f"{run.skipped} lines skipped, not fitting the run-file schema: {'; '.join(run.problems)}",
                    fg="yellow")
    if not run.complete:
        click.secho("the run file has no summary line: the run was cut off; shown: the requests that finished",
                    fg="yellow")
