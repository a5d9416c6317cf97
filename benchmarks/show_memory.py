"""Peak memory and time of `decodescope show` on large run files.

Makes a real run first: `decodescope measure` against the repository's scripted
OpenAI-compatible server (tests/scripted_server.py, 256 chunks per request: 255 gaps
between chunks), then grows run files of the asked sizes from that run's own lines: its
header, its request lines over and over (start/end times moved on, each gap jittered by
up to ±20 % so the gaps spread over many distinct values, as a real server's do) and its
summary line. Each file is shown with `show --json` in a child process; peak RSS is the
child's own (os.wait4's rusage, ru_maxrss).

    python benchmarks/show_memory.py [--mb 10 100] [--keep DIR]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import SCRIPTED, free_port, start, stop  # noqa: E402


def real_run(folder: Path) -> list[dict]:
    port = free_port()
    server = start([sys.executable, str(SCRIPTED), "--port", str(port)], f"http://127.0.0.1:{port}/health",
                   folder / "server.txt", 30)
    try:
        run = folder / "real.jsonl"
        cmd = [sys.executable, "-m", "decodescope", "measure", f"http://127.0.0.1:{port}", "--model",
               "tokens=256,run=showmem", "--suite", "code", "--requests", "4", "--json", "--out", str(run)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    finally:
        stop(server)
    return [json.loads(line) for line in run.read_text().splitlines()]


def grow(lines: list[dict], path: Path, mb: float, rng: random.Random) -> int:
    """Write a run file of about mb MB from a real run's lines; returns its request count."""
    header, summary = lines[0], lines[-1]
    requests = [x for x in lines if x["type"] == "request" and x["ok"] and not x["warmup"]]
    n, t = 0, 0.0
    with path.open("w") as f:
        f.write(json.dumps(header) + "\n")
        while f.tell() < mb * 1e6:
            r = dict(requests[n % len(requests)])
            r["itl_ms"] = [g * rng.uniform(0.8, 1.2) for g in r["itl_ms"]]
            span = r["end_s"] - r["start_s"]
            r["start_s"], r["end_s"] = t, t + span
            t += span
            f.write(json.dumps(r) + "\n")
            n += 1
        f.write(json.dumps(summary) + "\n")
    return n


def show_peak(path: Path) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of `decodescope show PATH --json` in a child process."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "decodescope", "show", str(path), "--json"],
                            stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"show failed on {path}: exit {proc.returncode}")
    return usage.ru_maxrss / 1024, time.monotonic() - t0  # ru_maxrss: KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[10, 100])
    ap.add_argument("--keep", type=Path, help="write the run files here and keep them")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        lines = real_run(folder)
        print(f"{'file MB':>8} {'requests':>9} {'gaps':>10} {'peak RSS MB':>12} {'seconds':>8}")
        for mb in args.mb:
            path = folder / f"show-{mb:g}MB.jsonl"
            n = grow(lines, path, mb, random.Random(0))
            gaps = n * len(lines[1]["itl_ms"])
            peak, seconds = show_peak(path)
            print(f"{path.stat().st_size / 1e6:8.1f} {n:9d} {gaps:10d} {peak:12.0f} {seconds:8.1f}")


if __name__ == "__main__":
    main()
