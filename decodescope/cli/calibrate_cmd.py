"""`decodescope calibrate`: measure this machine's device into a calibration file."""

import json

import click


@click.command()
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True,
              help="the device to measure")
@click.option("--model", "model_name", help="time GEMVs at this model's linear shapes [default: Llama-3.1-8B's]")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="write the calibration file here")
@click.option("--json", "as_json", is_flag=True, help="print the calibration as one JSON object")
def calibrate(device, model_name, out, as_json):
    """Measure bandwidth, matmul rates, GEMV at decode shapes, launch costs and allreduce latency."""
    from decodescope.hardware.calibrate import calibrate as measure
    from decodescope.hardware.calibrate import model_shapes
    from decodescope.hardware.calibration import save
    shapes = None
    if model_name:
        from decodescope.arch import load_arch
        shapes = model_shapes(load_arch(model_name))
    cal = measure(device, shapes=shapes)
    if out:
        save(cal, out)
    if as_json:
        click.echo(json.dumps(cal.to_dict(), indent=1))
    else:
        from decodescope.report.hardware_text import calibration_text
        click.echo(calibration_text(cal, out))
