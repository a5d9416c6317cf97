"""Achieved memory bandwidth of GEMMs whose shapes the trace recorded.

With `record_shapes=True` each aten::mm / addmm / bmm op carries its `Input Dims` and
`Input type`. Its kernels are those launched by calls made on the op's thread while the
op ran (time containment: this works for old traces, whose kernels carry no link to
their op, and new ones alike). Bytes moved = each input read once plus the output
written once, in the inputs' dtype: the least traffic the GEMM can have, so the achieved
GB/s = bytes / the kernels' summed time. Kernels replayed from a CUDA graph have no op,
so graph traces get no figure.
"""

from bisect import bisect_left
from dataclasses import dataclass

from decodescope.trace.classify import KernelClass
from decodescope.trace.reader import RawTrace

DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "c10::Float8_e4m3fn": 1,
               "c10::Float8_e5m2": 1, "signed char": 1, "int": 4, "long int": 8}
SHOWN = 8  # shapes reported, most GEMM time first


@dataclass(frozen=True)
class GemmShape:
    op: str  # mm / addmm / bmm
    dims: str  # the op's Input Dims, as recorded
    dtype: str
    calls: int
    bytes: float  # per call
    ms: float  # all calls' GEMM kernels together
    gb_s: float  # bytes x calls / ms

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def gemm_bandwidth(raw: RawTrace, classes: list[KernelClass]) -> tuple[GemmShape, ...]:
    if not raw.shapes:
        return ()
    gemm_us: dict[int, float] = {}  # correlation -> GEMM kernel µs
    for start, end, name, corr in raw.gpu:
        if corr >= 0 and classes[name] is KernelClass.GEMM:
            gemm_us[corr] = gemm_us.get(corr, 0.0) + end - start
    launches: dict[int, list[tuple[float, int]]] = {}
    for tid, ts, corr in raw.shaped_launches:
        launches.setdefault(tid, []).append((ts, corr))
    for v in launches.values():
        v.sort()
    groups: dict[tuple, list] = {}
    for tid, start, end, op, dims, types in raw.shapes:
        calls = launches.get(tid, [])
        i, us = bisect_left(calls, (start, -1)), 0.0
        while i < len(calls) and calls[i][0] <= end:
            us += gemm_us.get(calls[i][1], 0.0)
            i += 1
        size = _bytes(op, dims, types) if us else None
        if size:
            g = groups.setdefault((op, str(dims), types[1] if op == "addmm" else types[0]), [0, size, 0.0])
            g[0] += 1
            g[2] += us
    shapes = [GemmShape(op, dims, dtype, n, size, us / 1e3, size * n / (us * 1e3))
              for (op, dims, dtype), (n, size, us) in groups.items()]
    return tuple(sorted(shapes, key=lambda s: -s.ms)[:SHOWN])


def _bytes(op: str, dims: list, types: list) -> float | None:
    """Inputs read once + output written once, in bytes; None where the shapes do not fit the op."""
    tensors = [(d, t) for d, t in zip(dims, types) if d and t in DTYPE_BYTES]
    rank = 3 if op == "bmm" else 2
    mats = [(d, t) for d, t in tensors if len(d) == rank][-2:]  # addmm: (bias, a, b)
    if len(mats) != 2 or mats[0][0][-1] != mats[1][0][-2]:
        return None
    (a, dtype), (b, _) = mats
    out = _prod(a[:-1]) * b[-1]
    return sum(_prod(d) * DTYPE_BYTES[t] for d, t in tensors) + out * DTYPE_BYTES[dtype]


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p
