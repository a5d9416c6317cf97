"""How fast `decodescope log` reads a large SGLang server log.

Writes a ~1 GB log in the real SGLang format to a temporary folder: per request an
HTTP access line and a "Prefill batch" line, "Decode batch" lines (V4 hybrid-model form,
as in the reference case) for most of the volume, other INFO lines, and now and then a line of
binary garbage. Then times the whole `decodescope log FILE` process on it (table mode)
and, with --json, also `--json --no-records` and `--json` (every record, written to
/dev/null). Each line gives the wall clock, the CPU seconds of the process and its
workers, and the load average just before the run: on a shared machine the CPU seconds
compare runs where the wall clock does not. It says whether the C reader of SGLang lines
(decodescope/serverstats/_fastlog.c, built at install when a C compiler is there) is used:
DECODESCOPE_PURE_PYTHON=1 times the Python path. The figures in the README come from

    python benchmarks/log_speed.py --mb 100 --json

    python benchmarks/log_speed.py [--mb 1000] [--json] [--keep] [--log PATH]
"""

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

T0 = 1_778_544_000  # 2026-05-12, epoch seconds


def block(rng: random.Random, t: float, n_requests: int) -> tuple[str, float]:
    """Log text for n_requests requests at batch ~8 starting at t; returns (text, end time)."""
    out = []
    for _ in range(n_requests):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        running = rng.randint(4, 12)
        out.append(
            f'[{stamp}] INFO:     10.0.0.{rng.randint(2, 250)}:{rng.randint(30000, 60000)} - '
            f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        )
        out.append(
            f"[{stamp} TP0] Prefill batch, #new-seq: 1, #new-token: {rng.randint(20, 4000)}, "
            f"#cached-token: {rng.randint(0, 2000)}, #full token: {rng.randint(1000, 90000)}, "
            f"full token usage: 0.{rng.randint(0, 99):02d}, mamba num: {running}, mamba usage: 0.12, "
            f"#running-req: {running - 1}, #queue-req: 0, input throughput (token/s): {rng.uniform(0, 9000):.2f}, "
            "cuda graph: False\n"
        )
        for _ in range(6):
            t += 2.2
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
            accept = rng.uniform(2.5, 4.0)
            out.append(
                f"[{stamp} TP0] Decode batch, #running-req: {running}, #full token: {rng.randint(1000, 90000)}, "
                f"full token usage: 0.{rng.randint(0, 99):02d}, mamba num: {running}, mamba usage: 0.12, "
                f"accept len: {accept:.2f}, accept rate: {(accept - 1) / 3:.2f}, cuda graph: True, "
                f"gen throughput (token/s): {running * accept / 0.0554 * rng.uniform(0.95, 1.05):.2f}, "
                "#queue-req: 0\n"
            )
        out.append(f"[{stamp} TP0] Cache flushed successfully!\n" if rng.random() < 0.5 else
                   f"[{stamp}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - \"GET /health HTTP/1.1\" 200 OK\n")
        if rng.random() < 0.01:
            out.append(bytes(rng.randrange(14, 256) for _ in range(120)).decode("latin-1") + "\n")
    return "".join(out), t


def write_log(path: str, mb: float) -> int:
    rng = random.Random(0)
    target = int(mb * 1e6)
    size, t = 0, float(T0)
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            text, t = block(rng, t, 200)
            f.write(text)
            size += len(text.encode("utf-8"))
    return os.path.getsize(path)


def timed(args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the process and its workers): on a shared machine the CPU
    seconds compare runs where the wall clock does not."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "decodescope", "log", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"decodescope log failed: {p.stderr.decode()}")
    return elapsed, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=1000, help="log size in MB (1e6 bytes)")
    ap.add_argument("--json", action="store_true", help="also time --json --no-records and --json")
    ap.add_argument("--keep", action="store_true", help="keep the log and print its path")
    ap.add_argument("--log", help="time this log (written by an earlier --keep run) instead of writing one")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="decodescope-logspeed-")
    path = args.log or os.path.join(folder, "sglang.log")
    start = time.perf_counter()
    size = os.path.getsize(path) if args.log else write_log(path, args.mb)
    with open(path, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    print(f"log: {size / 1e6:.0f} MB, {lines} lines, written in {time.perf_counter() - start:.1f} s ({path})")
    from decodescope.serverstats import logfast

    print("C reader:", "on" if logfast.FAST else "off (not built, or DECODESCOPE_PURE_PYTHON=1): the Python path")
    runs = [("decodescope log FILE", [path])]
    if args.json:
        runs += [("decodescope log FILE --json --no-records", [path, "--json", "--no-records"]),
                 ("decodescope log FILE --json (records to /dev/null)", [path, "--json"])]
    try:
        for label, argv in runs:
            load = os.getloadavg()[0]
            s, cpu = timed(argv)
            print(f"{label}: {s:.1f} s, {size / 1e6 / s:.0f} MB/s, {lines / s / 1e6:.2f} M lines/s; "
                  f"CPU {cpu:.1f} s ({size / 1e6 / cpu:.0f} MB per CPU-second); load average {load:.1f} "
                  f"on {os.cpu_count()} CPUs")
    finally:
        if not args.keep and not args.log:
            os.remove(path)
        os.rmdir(folder) if not os.listdir(folder) else None


if __name__ == "__main__":
    main()
