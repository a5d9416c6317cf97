"""The calibration file `decodescope calibrate` writes and `model` / `bench` read: what
one device measured (bandwidth, matmul rates, GEMV at decode shapes, launch costs,
allreduce latency), and how those measurements replace the datasheet and engine-profile
figures of a deployment. JSON, schema-versioned; a file from another device or an older
schema is refused with the reason."""

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.hardware.spec import CPU, GPU

SCHEMA = 1
# engines that launch every kernel from Python (engines.toml: "eager PyTorch, no CUDA
# graphs"): their kernel floor is the eager launch cost, the others' the in-graph one
EAGER_ENGINES = ("transformers",)


@dataclass(frozen=True)
class Gemv:
    """y = x W^T for x [batch, k], W [n, k]: the time of one call and the weight bytes it read per second."""
    k: int
    n: int
    batch: int
    dtype: str
    us: float
    weight_bytes_s: float
    count: int = 1  # times this shape runs in one forward pass of the calibrated model


@dataclass(frozen=True)
class AllreducePoint:
    bytes: int  # message size per GPU
    us: float  # one allreduce over all local GPUs


@dataclass(frozen=True)
class Calibration:
    device: str  # database id ("h200") or "cpu"
    device_name: str  # as the driver / OS names it ("NVIDIA H200", the CPU model name)
    memory_bytes: float  # device memory (host RAM for the CPU)
    versions: dict  # python, torch, cuda, driver, transformers
    copy_bw_bytes_s: float  # median large copy, read + write bytes counted
    copy_bw_best_bytes_s: float  # the fastest repetition of the same copy
    matmul_flops: dict  # dtype -> FLOP/s of a large square matmul (median)
    launch_eager_us: float  # one tiny op launched from Python, synchronised
    launch_graph_us: float | None = None  # one tiny kernel inside a CUDA graph (None on the CPU)
    gemv: tuple[Gemv, ...] = ()
    allreduce: tuple[AllreducePoint, ...] = ()  # empty with fewer than 2 GPUs
    gpus: int = 1
    created: str = ""  # ISO time, UTC
    notes: tuple[str, ...] = ()  # what was skipped and why
    schema: int = SCHEMA
    source: str = field(default="", compare=False)  # the file it was read from

    def weight_bw(self, batch: int) -> float:
        """Bytes/s of the weight stream at `batch`: the GEMVs measured at the batch nearest
        to it (log scale), all shapes of one pass together (their bytes over their time,
        each shape as often as the pass runs it); the copy
        bandwidth when no GEMV was measured."""
        if not self.gemv:
            return self.copy_bw_bytes_s
        near = min({g.batch for g in self.gemv}, key=lambda b: (abs(math.log(b / batch)), b))
        pts = [g for g in self.gemv if g.batch == near]
        nbytes = sum(g.count * g.weight_bytes_s * g.us for g in pts)
        return nbytes / sum(g.count * g.us for g in pts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("source")
        return {"schema": d.pop("schema"), **d}


def save(cal: Calibration, path: str | Path) -> None:
    Path(path).write_text(json.dumps(cal.to_dict(), indent=1) + "\n")


def load(path: str | Path, device: str | None = None) -> Calibration:
    """Read a calibration file; `device` (a database id) refuses a file measured on another device."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise DecodescopeError(f"calibration file {p} does not exist",
                               "write one with `decodescope calibrate --out FILE`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DecodescopeError(f"{p} is not a calibration file ({e})",
                               "write one with `decodescope calibrate --out FILE`") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise DecodescopeError(f"{p} is not a calibration file (no 'schema' field)",
                               "write one with `decodescope calibrate --out FILE`")
    if data["schema"] != SCHEMA:
        raise DecodescopeError(f"{p} has calibration schema {data['schema']}; this decodescope reads schema {SCHEMA}",
                               "measure again with this version: `decodescope calibrate --out FILE`")
    try:
        cal = Calibration(**{**data, "gemv": tuple(Gemv(**g) for g in data.get("gemv", ())),
                             "allreduce": tuple(AllreducePoint(**a) for a in data.get("allreduce", ())),
                             "notes": tuple(data.get("notes", ())), "source": str(p)})
    except TypeError as e:
        raise DecodescopeError(f"{p}: calibration fields do not match schema {SCHEMA} ({e})",
                               "measure again: `decodescope calibrate --out FILE`") from None
    if device is not None and cal.device != device:
        raise DecodescopeError(f"{p} was measured on '{cal.device}' ({cal.device_name}), not on '{device}'",
                               f"use a calibration of {device} (`decodescope calibrate` on that machine), "
                               f"or --gpu {cal.device}")
    return cal


def check_cpu_device(gpu: GPU, cal: Calibration | None) -> None:
    """The CPU has no datasheet numbers: it is a device only with its calibration."""
    if gpu.id == CPU and cal is None:
        raise DecodescopeError("--gpu cpu has no datasheet bandwidth or FLOP/s: its numbers come from a calibration",
                               "measure them with `decodescope calibrate --device cpu --out cpu.json`, "
                               "then add --calibration cpu.json")


def calibrated_gpu(gpu: GPU, cal: Calibration) -> GPU:
    """The CPU device takes its memory, bandwidth and FLOP/s from the calibration (its
    ceiling is the fastest stream seen: the best copy or the fastest GEMV, whichever is
    higher); a GPU keeps its datasheet numbers as the ceiling."""
    if gpu.id != CPU:
        return gpu
    flops = {dt: cal.matmul_flops[dt] for dt in ("bf16", "fp16") if cal.matmul_flops.get(dt)}
    # the model runs fp32 weights' math at the "bf16" rate key; on the CPU that rate is the fp32 one
    if cal.matmul_flops.get("fp32"):
        flops["bf16"] = cal.matmul_flops["fp32"]
    src = f"measured by calibrate ({cal.source or 'calibration'}, {cal.created})"
    return replace(gpu, name=cal.device_name or gpu.name, memory_bytes=cal.memory_bytes,
                   memory_bw_bytes_s=cpu_ceiling_bw(cal), flops=flops,
                   sources={**gpu.sources, "memory_bytes": src, "memory_bw_bytes_s": src,
                            **{f"flops.{k}": src for k in flops}})


def cpu_ceiling_bw(cal: Calibration) -> float:
    """Bytes/s. A CPU copy with ordinary stores also reads each destination line before
    writing it (write-allocate), so read + write counted understates the memory bus: on a
    2-core sandbox the best copy counted 10 GB/s while a GEMV streaming 256 MB of weights
    (past the 105 MB L3) read 18 GB/s, and bench's decode loop 15 GB/s."""
    return max([cal.copy_bw_best_bytes_s, *(g.weight_bytes_s for g in cal.gemv)])


def apply(cal: Calibration, deployment):
    """(deployment, notes): the deployment with measured numbers in place of the engine
    profile's achievable fractions, kernel floor and allreduce latency, and notes saying
    which numbers were measured. The host time per pass stays the deployment's."""
    # the profile as the deployment's backend runs it (by_backend), so that the measured numbers win
    d = replace(deployment, engine=deployment.profile)
    if d.gpu.id != cal.device:
        raise DecodescopeError(f"{cal.source}: measured on '{cal.device}' ({cal.device_name}), but --gpu is '{d.gpu.id}'",
                               f"use a calibration made on {d.gpu.id}, or --gpu {cal.device}")
    gpu = calibrated_gpu(d.gpu, cal)
    compute = "bf16" if gpu.flops.get("bf16") else next(iter(gpu.flops), "bf16")
    measured_flops = cal.matmul_flops.get("fp32" if gpu.id == CPU else compute)
    eager = gpu.id == CPU or d.engine.id in EAGER_ENGINES or cal.launch_graph_us is None
    launch_us, kernel_us = (cal.launch_eager_us if eager else cal.launch_graph_us), _kernel_cost_us(d, eager)
    floor_us = launch_us + kernel_us
    # a GEMV faster than a GPU's datasheet found its weights in cache (too small a rotation): cap it
    bw = min(cal.weight_bw(d.batch), gpu.memory_bw_bytes_s)
    engine = replace(d.engine, bw_efficiency=bw / gpu.memory_bw_bytes_s, memory_efficiency={},
                     kernel_floor_us=floor_us, source=f"calibration {cal.source}",
                     flops_efficiency=(measured_flops / gpu.peak_flops(compute)) if measured_flops else
                     d.engine.flops_efficiency)
    notes = [f"measured by calibrate on {cal.device_name} ({cal.created}): weight stream "
             f"{bw / 1e9:.1f} GB/s ({'GEMV at batch ' + str(d.batch) if cal.gemv else 'copy, read + write'})"
             + (f", {'fp32' if gpu.id == CPU else compute} matmul {measured_flops / 1e12:.3g} TFLOP/s"
                if measured_flops else "")
             + f", kernel launch {launch_us:.2f} us ({'eager' if eager else 'in a CUDA graph'})"
             + (f" + the profile's own kernel cost {kernel_us:.2f} us" if kernel_us else "")]
    link = d.link
    if d.gpus > 1 and cal.allreduce:
        alpha = min(cal.allreduce, key=lambda a: a.bytes).us * 1e-6
        # measured on the calibration's GPUs, taken as is (no NCCL hops added for another count)
        link = replace(link, allreduce_latency_s=alpha, nccl_latency_s=alpha, nccl_hop_latency_s=0.0,
                       source=f"calibration {cal.source}")
        engine = replace(engine, allreduce_latency_scale=1.0)
        notes[0] += f", allreduce latency {alpha * 1e6:.1f} us ({cal.gpus} GPUs)"
    notes.append(f"not measured: host time per pass {engine.host_ms_per_pass:g} ms (engine '{engine.id}')")
    return replace(d, gpu=gpu, engine=engine, link=link), tuple(notes)


def _kernel_cost_us(d, eager: bool) -> float:
    """The profile's kernel floor beyond a bare launch (us): a fitted floor holds the
    kernels' own fixed cost (ramp-up, tail) on top of the launch a calibration measures,
    so it stays on top of the measured launch; 0 on the CPU, which has no profile floor."""
    from decodescope.model.engines import EAGER_KERNEL_US, GRAPH_KERNEL_US
    if d.gpu.id == CPU:
        return 0.0
    return max(0.0, d.engine.kernel_floor_us - (EAGER_KERNEL_US if eager else GRAPH_KERNEL_US))


def calibrate_deployment(deployment, path: str | None):
    """(deployment, notes) for `model --calibration PATH`: unchanged without a file, except
    that the CPU, which has no datasheet numbers, needs one."""
    cal = load(path, deployment.gpu.id) if path else None
    check_cpu_device(deployment.gpu, cal)
    return apply(cal, deployment) if cal else (deployment, ())
