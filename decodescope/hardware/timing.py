"""Timing torch work on a CPU or a CUDA device: CUDA events on the GPU timeline, the
wall clock on the CPU, and CUDA-graph capture. Imported only by calibrate and bench,
which import torch lazily."""

import statistics
import time

from decodescope.errors import DecodescopeError


def import_torch():
    """torch, or one clear error: calibrate and bench need it, the rest of decodescope does not."""
    try:
        import torch
    except ImportError as e:
        raise DecodescopeError(f"this command needs PyTorch, which is not installed ({e})",
                               "pip install torch (https://pytorch.org/get-started/locally/); "
                               "probe --from FILE and model work without it") from None
    return torch


def pick_device(torch, device: str):
    """The torch device for --device cuda|cpu; cuda without a GPU is refused, not faked."""
    if device == "cuda" and not torch.cuda.is_available():
        raise DecodescopeError("--device cuda: PyTorch sees no CUDA GPU "
                               f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})",
                               "run on a machine with an NVIDIA GPU and a CUDA build of torch, or use --device cpu")
    return torch.device(device)


class Clock:
    """Marks on the device timeline: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def mark(self):
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def ms(self, a, b) -> float:
        if self.cuda:
            b.synchronize()
            return a.elapsed_time(b)
        return (b - a) * 1e3


def time_reps(clock: Clock, fn, reps: int, warmup: int = 1) -> list[float]:
    """ms of each of `reps` calls of fn after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    clock.sync()
    out = []
    for _ in range(reps):
        a = clock.mark()
        fn()
        b = clock.mark()
        clock.sync()
        out.append(clock.ms(a, b))
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def capture_graph(torch, fn, warm: int = 3):
    """A CUDA graph of fn, warmed on a side stream first as torch requires."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g
