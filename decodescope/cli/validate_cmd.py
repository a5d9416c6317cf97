"""`decodescope validate`: the model against the published measurements it ships with."""

import json

import click


@click.command()
@click.option("--engine", help="only this engine profile (its rows listed one by one)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--fit", "refit", is_flag=True,
              help="also fit each profile on all its rows from the neutral start (the values for engines.toml)")
def validate(engine, as_json, refit):
    """Error of the model's expected tok/s against published measurements, per engine:
    out of sample (leave one source out) and in sample."""
    from decodescope.validate.run import validate as run

    v = run(engine.strip().lower() if engine else None, refit)
    if as_json:
        click.echo(json.dumps(v.to_dict(), indent=1))
    else:
        from decodescope.report.validation import print_validation
        print_validation(v, rows=engine is not None)
