"""`decodescope bench`: time a real decode loop with random weights next to the model."""

import json

import click


@click.command()
@click.argument("model")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True)
@click.option("--batch", type=click.IntRange(1, 4096), default=1, show_default=True, help="requests decoding together")
@click.option("--context", type=click.IntRange(1, 1 << 20), default=512, show_default=True,
              help="prompt tokens prefilled before decoding")
@click.option("--steps", type=click.IntRange(1, 100000), default=32, show_default=True,
              help="decode steps timed one by one")
@click.option("--layers", type=click.IntRange(1, 10000), help="keep only the first N decoder layers (to fit)")
@click.option("--compile", "compile_", is_flag=True,
              help="CUDA: torch.compile the decode step before capturing it, as gpt-fast does (compiling takes a minute or more)")
@click.option("--calibration", type=click.Path(dir_okay=False), help="calibration file of this device")
@click.option("--trace", type=click.Path(dir_okay=False), help="write a torch.profiler trace (.json or .json.gz)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def bench(model, device, dtype, batch, context, steps, layers, compile_, calibration, trace, as_json):
    """Decode MODEL (config.json, folder, preset or hub id) with random weights and time each step."""
    from decodescope.arch import load_config
    from decodescope.hardware import bench as b
    from decodescope.hardware.calibration import load
    cal = load(calibration) if calibration else None
    cfg = b.BenchConfig(device=device, dtype=dtype, batch=batch, context=context, steps=steps, layers=layers,
                        compile=compile_)
    r = b.run(load_config(model), cfg, cal, trace=trace)
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=1))
    else:
        from decodescope.report.hardware_text import bench_text
        click.echo(bench_text(r))
