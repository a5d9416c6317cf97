"""The `decodescope` command. Subcommands are imported only when run, so that
`decodescope model` never pays for the measure / trace / report imports."""

import importlib
import sys

import click

from decodescope.errors import DecodescopeError

# command name -> "module:attribute"; each module holds one click command
COMMANDS = {
    "model": "decodescope.cli.model_cmd:model",
    "gpus": "decodescope.cli.gpus_cmd:gpus",
    "measure": "decodescope.cli.measure_cmd:measure",
    "log": "decodescope.cli.log_cmd:log",
    "show": "decodescope.cli.show_cmd:show",
    "validate": "decodescope.cli.validate_cmd:validate",
    "explain": "decodescope.cli.explain_cmd:explain",
    "demo": "decodescope.cli.demo_cmd:demo",
    "probe": "decodescope.cli.probe_cmd:probe",
    "calibrate": "decodescope.cli.calibrate_cmd:calibrate",
    "bench": "decodescope.cli.bench_cmd:bench",
    "trace": "decodescope.cli.trace_cmd:trace",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup)
@click.version_option(package_name="decodescope")
def cli():
    """Why does decode run this fast, and what would move it?"""


def main():
    try:
        cli.main(standalone_mode=False)
    except DecodescopeError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
