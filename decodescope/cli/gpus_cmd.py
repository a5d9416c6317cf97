"""`decodescope gpus`: the GPU and interconnect database, as a table or as JSON."""

import dataclasses
import json

import click

from decodescope.hardware import all_gpus, all_interconnects, get_gpu

# (label, SI field or "flops.<dtype>", divisor to the unit shown, unit)
_ROWS = [
    ("memory", "memory_bytes", 1e9, "GB"),
    ("memory bandwidth", "memory_bw_bytes_s", 1e9, "GB/s"),
    ("memory type", "memory_type", None, ""),
    ("bf16 tensor (dense)", "flops.bf16", 1e12, "TFLOP/s"),
    ("fp16 tensor (dense)", "flops.fp16", 1e12, "TFLOP/s"),
    ("fp8 tensor (dense)", "flops.fp8", 1e12, "TFLOP/s"),
    ("int8 tensor (dense)", "flops.int8", 1e12, "TOP/s"),
    ("fp4 tensor (dense)", "flops.fp4", 1e12, "TFLOP/s"),
    ("link", "link", None, ""),
    ("link bandwidth / direction", "link_bw_bytes_s", 1e9, "GB/s"),
    ("peers with a link of their own", "link_peers", 1, ""),
    ("PCIe generation", "pcie_gen", 1, ""),
    ("PCIe lanes", "pcie_lanes", 1, ""),
]


@click.command()
@click.argument("gpu_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON in SI units (bytes, bytes/s, FLOP/s) with sources.")
@click.option("--links", is_flag=True, help="List the interconnect classes (allreduce latency, efficiency, source).")
def gpus(gpu_id, as_json, links):
    """List the GPUs decodescope knows, or show GPU_ID with every number and its source."""
    if links:
        items = [dataclasses.asdict(ic) for ic in all_interconnects()]
        return _echo_json(items) if as_json else _print_links()
    if gpu_id:
        gpu = get_gpu(gpu_id)
        return _echo_json(dataclasses.asdict(gpu)) if as_json else _print_one(gpu)
    if as_json:
        return _echo_json([dataclasses.asdict(g) for g in all_gpus()])
    _print_all()


def _echo_json(value):
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _value(gpu, field):
    if field.startswith("flops."):
        return gpu.flops.get(field.removeprefix("flops."))
    if field == "link_peers" and field not in gpu.sources:  # the default, one link: nothing to show
        return None
    return getattr(gpu, field)


def _fmt(value, divisor):
    if value is None:
        return "—"
    if divisor is None:
        return str(value)
    return f"{value / divisor:,.6g}"


def _print_all():
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title="GPUs: memory GB, bandwidth GB/s, dense tensor TFLOP/s",
        caption="`decodescope gpus ID`: every number with its source",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("id", no_wrap=True, min_width=14)
    # the other columns take ~76 characters with padding; the name gets what is left, cut with an ellipsis
    table.add_column("name", overflow="ellipsis", no_wrap=True, max_width=max(8, console.width - 76))
    for col, width in (("GB", 3), ("GB/s", 5), ("bf16", 7), ("fp8", 5), ("fp4", 6)):
        table.add_column(col, justify="right", no_wrap=True, min_width=width)
    table.add_column("link", no_wrap=True, min_width=11)
    for g in all_gpus():
        table.add_row(
            g.id,
            g.name,
            _fmt(g.memory_bytes, 1e9),
            _fmt(g.memory_bw_bytes_s, 1e9),
            _fmt(g.peak_flops("bf16"), 1e12),  # falls back to fp16 where the part has no bf16
            _fmt(g.flops.get("fp8"), 1e12),
            _fmt(g.flops.get("fp4"), 1e12),
            g.link,
        )
    console.print(table)


def _print_one(gpu):
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{gpu.id}: {gpu.name}", show_lines=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("unit")
    table.add_column("source", overflow="fold")
    for label, field, divisor, unit in _ROWS:
        value = _value(gpu, field)
        if value is not None:
            table.add_row(label, _fmt(value, divisor), unit, gpu.sources.get(field, "—"))
    console = Console()
    console.print(table)
    console.print(f"aliases: {', '.join(gpu.aliases) or '—'}")


def _print_links():
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Interconnects: one small allreduce between 2 GPUs")
    table.add_column("id", no_wrap=True)
    table.add_column("alpha µs", justify="right")
    table.add_column("bw efficiency", justify="right")
    table.add_column("description")
    for ic in all_interconnects():
        table.add_row(ic.id, f"{ic.allreduce_latency_s * 1e6:g}", f"{ic.bw_efficiency:g}", ic.description)
    console = Console()
    console.print(table)
    for ic in all_interconnects():
        console.print(f"[bold]{ic.id}[/bold]: {ic.source}", highlight=False)
