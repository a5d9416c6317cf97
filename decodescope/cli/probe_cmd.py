"""`decodescope probe`: GPUs, PCIe links and topology of this machine or of saved outputs.

Exit status: 0 with GPUs found; 3 when this machine has no NVIDIA GPU (the CPU and
memory are still reported); 2 on bad input."""

import json
import sys

import click

NO_GPU_EXIT = 3


@click.command()
@click.option("--load", is_flag=True, help="run a short load on each GPU (torch) and read the links again")
@click.option("--from", "files", multiple=True, type=click.Path(dir_okay=False),
              help="read saved nvidia-smi -q / topo -m / --query-gpu CSV / nvidia-smi / lspci -vv text (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def probe(load, files, as_json):
    """GPUs, PCIe generation and width now vs at most, topology between GPUs and its --link ids."""
    from decodescope.hardware import probe as hw
    if files and load:
        raise click.UsageError("--load runs on this machine; it cannot be combined with --from")
    p = hw.from_files(list(files)) if files else hw.live(load=load)
    if as_json:
        click.echo(json.dumps(p.to_dict(), indent=1))
    else:
        from decodescope.report.probe_text import probe_text
        click.echo(probe_text(p))
    if not p.gpus and not files:
        sys.exit(NO_GPU_EXIT)
