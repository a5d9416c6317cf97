"""How fast `decodescope trace` reads a large torch-profiler trace, against HTA.

Builds a >= 500 MB trace by replicating the real decode steps of the H200 eager trace
(tests/data/h200/trace_eager_llama8b_shape.json.gz: 5 steps of a Llama-8B-shaped decode
loop, CPU ops, launches, kernels and flows) with every timestamp shifted by one trace window
per copy and correlation / External / flow ids made unique, in Kineto's order (all CPU-side
events first, then the GPU activities, each kernel before its launch call, as in the source),
then times the whole `decodescope trace FILE --json` process and HolisticTraceAnalysis
(`TraceAnalysis` + `get_gpu_kernel_breakdown`, `pip install HolisticTraceAnalysis`, not a
dependency) on the same file: wall and CPU seconds, MB/s, peak RSS (of the largest process).

    python benchmarks/trace_speed.py [--mb 500] [--no-hta] [--gzip] [--keep]
"""

import argparse
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / "h200" / "trace_eager_llama8b_shape.json.gz"
SEP = b"\n  },\n  {"  # Kineto's separator between two events
_FIELD = re.compile(rb'("ts": |"correlation": |"External id": |"id": )(\d+(?:\.\d+)?)')
RUSAGE = ("import json, os, subprocess, sys\np = subprocess.Popen(sys.argv[1:])\n_, status, ru = os.wait4(p.pid, 0)\n"
          "print(json.dumps([os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, ru.ru_maxrss]), "
          "file=sys.stderr)\n")
HTA = ("import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
       "a = TraceAnalysis(trace_dir=sys.argv[1])\nprint(a.get_gpu_kernel_breakdown(visualize=False)[0].head(20))\n")


def build(path: Path, mb: int) -> tuple[int, int]:
    """Write the replicated trace in Kineto's own order (every copy's CPU-side events, then every
    copy's GPU activities with their launch calls); returns (bytes, copies)."""
    text = gzip.decompress(SOURCE.read_bytes())
    start = text.index(b"[", text.index(b'"traceEvents"')) + 1
    end = text.rindex(b"]")
    events = text[start:end].strip().removeprefix(b"{").removesuffix(b"}").split(SEP)
    steps, rest = [], []  # decode-step events are copied; metadata, instants and the span once
    for e in events:
        once = b'"ph": "M"' in e or b'"ph": "i"' in e or b'"cat": "Trace"' in e
        (rest if once else steps).append(e)
    window, id_span = _window(steps), _max_id(steps) + 1
    gpu_at = next(i for i, e in enumerate(steps) if b'"cat": "kernel"' in e)
    cpu, gpu = _pieces(SEP.join(steps[:gpu_at])), _pieces(SEP.join(steps[gpu_at:]))
    size = sum(len(_copy(*p, 0.0, 0)) for p in (cpu, gpu))
    copies = max(1, -(-int(mb * 1e6) // size))
    with open(path, "wb") as f:
        f.write(text[:start] + b"\n  {")
        f.write(SEP.join(rest))
        for parts in (cpu, gpu):
            for i in range(copies):
                f.write(SEP + _copy(*parts, i * window, i * id_span))
        f.write(b"\n  }\n" + text[end:])
    return path.stat().st_size, copies


def _pieces(body: bytes) -> tuple[list, bytes]:
    """The literal text and the numbers to shift, once: (parts, text after the last number)."""
    parts, last = [], 0
    for m in _FIELD.finditer(body):
        parts.append(body[last:m.end(1)])
        parts.append((m.group(1) == b'"ts": ', m.group(2)))
        last = m.end()
    return parts, body[last:]


def _copy(parts, tail, dt: float, did: int) -> bytes:
    out = []
    for p in parts:
        if type(p) is bytes:
            out.append(p)
        elif p[0]:
            out.append(b"%.3f" % (float(p[1]) + dt))
        else:
            out.append(b"%d" % (int(p[1]) + did))
    out.append(tail)
    return b"".join(out)


def _window(events: list[bytes]) -> float:
    ts = [float(m.group(2)) for e in events for m in _FIELD.finditer(e) if m.group(1) == b'"ts": ']
    return max(ts) - min(ts) + 1000.0  # µs: one trace window plus a millisecond between copies


def _max_id(events: list[bytes]) -> int:
    return max(int(m.group(2)) for e in events for m in _FIELD.finditer(e) if m.group(1) != b'"ts": ')


def measure(cmd: list[str], timeout: float) -> dict:
    """One command's output and wall seconds, and from its rusage (the process and the workers
    it waited for) user + system CPU seconds and peak RSS (MB, of the largest process). A small
    Python process starts it and reads the rusage: a child forked from this process would count
    this process's memory (the trace built in it) in its peak."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RUSAGE, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"timed_out": timeout}
    wall = time.perf_counter() - t0
    err_text, _, last = err.decode(errors="replace").rstrip().rpartition("\n")
    rc, cpu, rss_kb = json.loads(last)
    return {"rc": rc, "wall_s": wall, "cpu_s": cpu, "rss_mb": rss_kb / 1024, "stdout": out.decode(errors="replace"),
            "stderr": err_text[-2000:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500, help="size of the trace to build (MB of JSON)")
    ap.add_argument("--no-hta", action="store_true", help="time decodescope only")
    ap.add_argument("--gzip", action="store_true", help="also time decodescope on a gzipped copy")
    ap.add_argument("--hta-timeout", type=float, default=1800, help="seconds before HTA is given up")
    ap.add_argument("--keep", action="store_true", help="keep the built trace (path printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trace_speed_"))
    path = tmp / "rank0.json"
    t0 = time.perf_counter()
    size, copies = build(path, args.mb)
    print(f"built {path}: {size / 1e6:.0f} MB, {copies} copies x 5 decode steps, in {time.perf_counter() - t0:.0f} s")
    runs = {"decodescope": measure([sys.executable, "-m", "decodescope", "trace", str(path), "--json"], 600)}
    if args.gzip:
        gz = tmp / "rank0.json.gz"
        with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            while b := src.read(1 << 24):
                dst.write(b)
        runs["decodescope (.json.gz)"] = measure([sys.executable, "-m", "decodescope", "trace", str(gz), "--json"], 600)
        gz.rename(tmp / "rank0.json.gz.kept")  # HTA would read both files as two ranks
    if not args.no_hta:
        runs["HTA"] = measure([sys.executable, "-c", HTA, str(tmp)], args.hta_timeout)
    d = json.loads(runs["decodescope"]["stdout"]) if runs["decodescope"].get("rc") == 0 else {}
    print(f"decodescope found {d.get('steps')} steps, step p50 {d.get('step_ms', {}).get('p50')} ms")
    for name, r in runs.items():
        if "timed_out" in r:
            print(f"{name:24s} gave up after {r['timed_out']:.0f} s")
        elif r.get("rc") != 0:
            print(f"{name:24s} failed (rc {r.get('rc')}): {r['stderr'][-400:]}")
        else:
            print(f"{name:24s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  peak RSS {r['rss_mb']:7.0f} MB  "
                  f"({size / 1e6 / r['wall_s']:.0f} MB/s)")
    if "HTA" in runs and "wall_s" in runs["HTA"] and runs["HTA"].get("rc") == 0:
        a, b = runs["decodescope"], runs["HTA"]
        print(f"HTA / decodescope: wall {b['wall_s'] / a['wall_s']:.1f}x, cpu {b['cpu_s'] / a['cpu_s']:.1f}x, "
              f"peak RSS {b['rss_mb'] / a['rss_mb']:.1f}x")
    if args.keep:
        print(f"kept in {tmp}")
    else:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
