"""`decodescope calibrate`: measure one device with torch — a large copy (bandwidth),
square matmuls per dtype, GEMV / skinny GEMM at a model's own linear shapes for batch
1..64, launch cost eager and inside a CUDA graph, allreduce latency between local GPUs —
into a Calibration. torch is imported only here and in bench."""

import platform
import time
from dataclasses import dataclass, replace

from decodescope.errors import DecodescopeError
from decodescope.hardware.calibration import CPU, AllreducePoint, Calibration, Gemv
from decodescope.hardware.timing import Clock, capture_graph, import_torch, median, pick_device, time_reps

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
BATCHES = (1, 2, 4, 8, 16, 32, 64)
# Llama-3.1-8B's linear shapes (k, n, count per pass) when no --model is given:
# qkv, o, gate_up, down in each of 32 layers, and the LM head
DEFAULT_SHAPES = ((4096, 6144, 32), (4096, 4096, 32), (4096, 28672, 32), (14336, 4096, 32), (4096, 128256, 1))


@dataclass(frozen=True)
class Sizes:
    copy_bytes: int  # each of source and destination; far above any last-level cache
    copy_reps: int
    matmul_n: int
    matmul_reps: int
    launches: int
    gemv_reps: int
    gemv_rotation_bytes: int  # weight copies cycled so no call finds its weight in cache
    allreduce_bytes: tuple[int, ...] = (4096, 65536, 1 << 20, 16 << 20)


CUDA_SIZES = Sizes(copy_bytes=2 << 30, copy_reps=20, matmul_n=8192, matmul_reps=20, launches=20000,
                   gemv_reps=20, gemv_rotation_bytes=1 << 30)
CPU_SIZES = Sizes(copy_bytes=512 << 20, copy_reps=7, matmul_n=1024, matmul_reps=5, launches=20000,
                  gemv_reps=3, gemv_rotation_bytes=256 << 20)


def calibrate(device: str = "cuda", shapes=None, sizes: Sizes | None = None,
              dtypes: tuple[str, ...] | None = None, batches: tuple[int, ...] = BATCHES) -> Calibration:
    """Measure `device` ("cuda" | "cpu"); `shapes`: (k, n) linear shapes for the GEMV sweep."""
    torch = import_torch()
    dev = pick_device(torch, device)
    cuda = dev.type == "cuda"
    sz = sizes or (CUDA_SIZES if cuda else CPU_SIZES)
    dtypes = dtypes or (("bf16", "fp16", "fp32") if cuda else ("fp32", "bf16"))
    clock = Clock(torch, dev)
    copy, best = _copy_bw(torch, dev, clock, sz)
    eager_us, graph_us, notes = _launch(torch, dev, clock, sz)
    gemv = gemv_probe(device, shapes, sz, batches)()
    allreduce, ar_note = _allreduce(torch, sz) if cuda else ((), "allreduce: skipped, the CPU is one device")
    name, gid, mem = _identity(torch, dev)
    return Calibration(device=gid, device_name=name, memory_bytes=mem, versions=_versions(torch),
                       copy_bw_bytes_s=copy, copy_bw_best_bytes_s=best,
                       matmul_flops={dt: _matmul(torch, dev, clock, sz, dt) for dt in dtypes},
                       launch_eager_us=eager_us, launch_graph_us=graph_us, gemv=gemv, allreduce=allreduce,
                       gpus=torch.cuda.device_count() if cuda else 1,
                       created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), notes=(*notes, ar_note))


def gemv_probe(device: str = "cuda", shapes=None, sizes: Sizes | None = None,
               batches: tuple[int, ...] = BATCHES):
    """The weight-stream part of `calibrate` (bf16 on CUDA, fp32 on the CPU): allocates each
    shape's rotated weights once and returns a function that sweeps them all, so a caller
    can repeat the sweep between other measurements that must see the same load."""
    torch = import_torch()
    dev = pick_device(torch, device)
    cuda = dev.type == "cuda"
    sz = sizes or (CUDA_SIZES if cuda else CPU_SIZES)
    clock, dt = Clock(torch, dev), "bf16" if cuda else "fp32"
    sweeps = [_gemv(torch, dev, clock, sz, k, n, count, dt, batches) for k, n, count in (shapes or DEFAULT_SHAPES)]
    return lambda: tuple(g for sweep in sweeps for g in sweep())


def _copy_bw(torch, dev, clock, sz: Sizes) -> tuple[float, float]:
    """(median, best) bytes/s of dst.copy_(src): each byte is read once and written once."""
    src = torch.ones(sz.copy_bytes // 4, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = time_reps(clock, lambda: dst.copy_(src), sz.copy_reps, warmup=1)
    moved = 2 * sz.copy_bytes
    return moved / (median(ms) / 1e3), moved / (min(ms) / 1e3)


def _matmul(torch, dev, clock, sz: Sizes, dtype: str) -> float:
    """FLOP/s of an n x n x n matmul: 2 n^3 FLOPs (fp32 on CUDA without TF32, torch's default)."""
    n, dt = sz.matmul_n, getattr(torch, DTYPES[dtype])
    a, b = torch.randn(n, n, device=dev, dtype=dt), torch.randn(n, n, device=dev, dtype=dt)
    c = torch.empty(n, n, device=dev, dtype=dt)
    ms = time_reps(clock, lambda: torch.mm(a, b, out=c), sz.matmul_reps, warmup=1)
    return 2.0 * n ** 3 / (median(ms) / 1e3)


def _launch(torch, dev, clock, sz: Sizes) -> tuple[float, float | None, tuple[str, ...]]:
    """us per tiny op launched from Python (the device's time between marks around 20,000
    launches: an idle GPU waits on each), and per kernel replayed inside one CUDA graph of
    100 kernels."""
    x = torch.zeros(1, device=dev)

    def eager():
        for _ in range(sz.launches):
            x.add_(1.0)

    ms = time_reps(clock, eager, 3, warmup=1)
    eager_us = median(ms) * 1e3 / sz.launches
    if dev.type != "cuda":
        return eager_us, None, ("launch in a CUDA graph: skipped, no CUDA device",)
    nodes = 100

    def body():
        for _ in range(nodes):
            x.add_(1.0)

    g = capture_graph(torch, body, warm=1)
    replays = max(1, sz.launches // nodes)

    def replay():
        for _ in range(replays):
            g.replay()

    ms = time_reps(clock, replay, 3, warmup=1)
    return eager_us, median(ms) * 1e3 / (replays * nodes), ()


def _gemv(torch, dev, clock, sz: Sizes, k: int, n: int, count: int, dtype: str, batches):
    """A function timing F.linear(x[batch, k], W[n, k]) for each batch, cycling through
    weight copies so no call hits in cache. On CUDA the cycle is replayed as one CUDA graph:
    a GEMV of a few MB takes less GPU time than a launch from Python, and the model counts
    launches apart (its kernel floor)."""
    dt = getattr(torch, DTYPES[dtype])
    wbytes = k * n * torch.empty((), dtype=dt).element_size()
    copies = max(2, -(-sz.gemv_rotation_bytes // wbytes))
    ws = [torch.randn(n, k, device=dev, dtype=dt) for _ in range(copies)]
    xs = {b: torch.randn(b, k, device=dev, dtype=dt) for b in batches}

    def cycle(x):
        def run():
            for w in ws:
                torch.nn.functional.linear(x, w)
        return capture_graph(torch, run).replay if dev.type == "cuda" else run

    def sweep() -> list[Gemv]:
        out = []
        for b, x in xs.items():
            per_s = median(time_reps(clock, cycle(x), sz.gemv_reps, warmup=1)) / 1e3 / copies
            out.append(Gemv(k, n, b, dtype, per_s * 1e6, wbytes / per_s, count))
        return out

    return sweep


def _allreduce(torch, sz: Sizes) -> tuple[tuple[AllreducePoint, ...], str]:
    """NCCL allreduce over every local GPU from one process (torch.cuda.nccl: one NCCL
    communicator per GPU, no torch.distributed process group to set up)."""
    n = torch.cuda.device_count()
    if n < 2:
        return (), f"allreduce: skipped, {n} CUDA GPU (needs 2 or more)"
    reps, points = 50, []

    def sync():
        for i in range(n):
            torch.cuda.synchronize(i)

    try:
        for nbytes in sz.allreduce_bytes:
            ts = [torch.ones(nbytes // 2, device=f"cuda:{i}", dtype=torch.bfloat16) for i in range(n)]
            for _ in range(5):  # communicators are set up on the first call
                torch.cuda.nccl.all_reduce(ts)
            sync()
            t0 = time.perf_counter()
            for _ in range(reps):  # queued back to back, as an engine's layers issue them
                torch.cuda.nccl.all_reduce(ts)
            sync()
            points.append(AllreducePoint(nbytes, (time.perf_counter() - t0) / reps * 1e6))
    except RuntimeError as e:  # NCCL missing from this torch build, or a GPU it cannot reach
        return tuple(points), f"allreduce: failed after {len(points)} sizes ({str(e)[:200]})"
    return tuple(points), (f"allreduce: NCCL from one process over {n} GPUs, wall time of {reps} back-to-back "
                           "calls over their count")


def _identity(torch, dev) -> tuple[str, str, float]:
    """(name, database id, memory bytes)."""
    if dev.type == "cuda":
        from decodescope.hardware import get_gpu
        p = torch.cuda.get_device_properties(dev)
        try:
            gid = get_gpu(p.name).id
        except DecodescopeError:
            gid = p.name  # not in the database: the file still records what it measured
        return p.name, gid, float(p.total_memory)
    from decodescope.hardware.probe import cpu_name, host_memory_bytes
    return cpu_name(), CPU, float(host_memory_bytes())


def _versions(torch) -> dict:
    v = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
         "threads": torch.get_num_threads()}
    try:
        import transformers
        v["transformers"] = transformers.__version__
    except ImportError:
        v["transformers"] = None
    from decodescope.hardware.nvml import driver_version
    v["driver"] = driver_version()
    return v


def model_shapes(arch) -> tuple[tuple[int, int, int], ...]:
    """(k, n, count): each distinct dense linear weight of the model's layers and LM head,
    and how many times one forward pass runs it."""
    from collections import Counter

    from decodescope.model.ops import unique_layers
    counts = Counter()
    for layer, n_layers in unique_layers(arch.layers):
        for t in layer.tensors():
            if t.linear and t.experts == 1 and len(t.shape) == 2:
                counts[(t.shape[1], t.shape[0])] += n_layers
    counts[(arch.hidden_size, arch.vocab_size)] += 1  # the LM head
    return tuple((k, n, c) for (k, n), c in counts.items())


def small(sizes: Sizes) -> Sizes:
    """A quick run (tests): a quarter of the repetitions, same buffer sizes."""
    return replace(sizes, copy_reps=max(3, sizes.copy_reps // 4), matmul_reps=3, launches=2000, gemv_reps=2)
