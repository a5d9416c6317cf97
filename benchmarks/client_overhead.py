"""How much does the streaming client itself distort inter-token latency?

Starts tests/scripted_server.py in its own process, emitting one token chunk every
--interval-ms on every stream (each stream on its own timer; with --lockstep all streams
send together each step, as a batched server does); streams --streams concurrent
requests through the real client (send_request on the loop `decodescope measure` uses)
and compares each measured gap with the true one. True gap = the difference of the
server's own perf_counter_ns stamps taken just before each write (the same
CLOCK_MONOTONIC the client reads), so server jitter cancels out and what is left is
the client and the machine: event-loop passes, parsing, syscalls, CPU scheduling. Also
reports the error against the nominal interval (server jitter included) and the
client's CPU time per streamed token.

On Linux the client times a read by the kernel's receive stamp (arrival.py); with
--no-kernel-stamps it falls back to the loop's wake-up time, as on other systems, to
show what the stamp buys.

    python benchmarks/client_overhead.py [--streams 32] [--interval-ms 20] [--tokens 250] [--lockstep]
        [--no-kernel-stamps] [--json]

Target: p99 |error| < 0.5 ms at 32 concurrent streams. Other load on the machine shows
up as client error, so the 1-minute load average before the run is reported with it.
"""

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from decodescope.measure import arrival
from decodescope.measure.arrival import new_event_loop
from decodescope.measure.client import Endpoint, Job, Sampling, open_session, send_request
from decodescope.measure.stats import distribution
from decodescope.measure.suites import Prompt

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, args, send_log: Path, output: Path) -> subprocess.Popen:
    server = ROOT / "tests/scripted_server.py"
    cmd = [sys.executable, str(server), "--port", str(port), "--tokens", str(args.tokens)]
    cmd += ["--interval-ms", str(args.interval_ms), "--send-log", str(send_log)]
    cmd += ["--lockstep"] if args.lockstep else []
    with open(output, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"scripted server did not start: {output.read_text()}")


async def stream_all(url: str, streams: int):
    endpoint = Endpoint(url, "chat", "bench")
    sampling = Sampling(max_tokens=10_000, temperature=0.0, timeout_s=30.0)
    async with open_session(streams, sampling.timeout_s) as session:
        t0 = time.perf_counter_ns()
        jobs = [Job("bench", i, Prompt("count")) for i in range(streams)]
        cpu0 = time.process_time()
        results = await asyncio.gather(*(send_request(session, endpoint, j, sampling, t0) for j in jobs))
        cpu_s = time.process_time() - cpu0
    return results, cpu_s, asyncio.get_running_loop().decodescope_read_stamps.kernel_reads


def errors(results, send_log: Path, interval_ms: float):
    sent = {}
    for line in send_log.read_text().splitlines():
        rec = json.loads(line)
        sent[rec["id"]] = rec["t_ns"]
    true_err, nominal_err = [], []
    for r in results:
        t = sent[r.response_id]
        true_gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:])]
        assert len(true_gaps) == len(r.itl_ms), "every chunk must be matched to its send"
        true_err += [m - g for m, g in zip(r.itl_ms, true_gaps)]
        nominal_err += [m - interval_ms for m in r.itl_ms]
    return true_err, nominal_err


def summary(errs: list[float]) -> dict:
    a = distribution(abs(e) for e in errs)
    return {
        "n": a["n"],
        "signed_mean_ms": sum(errs) / len(errs),
        "abs_p50_ms": a["p50"],
        "abs_p99_ms": a["p99"],
        "abs_max_ms": a["max"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=250, help="token chunks per stream")
    ap.add_argument(
        "--lockstep",
        action="store_true",
        help="all streams send together each step, as a batched server does (default: each on its own timer)",
    )
    ap.add_argument("--no-kernel-stamps", action="store_true", help="time reads at the loop's wake-up instead")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.no_kernel_stamps:
        arrival.KERNEL_STAMPS = False
    load_before = os.getloadavg()[0]  # other work on the box shows up as client error: say how much there was
    with tempfile.TemporaryDirectory() as tmp:
        send_log = Path(tmp) / "sends.jsonl"
        port = free_port()
        server = start_server(port, args, send_log, Path(tmp) / "server.txt")
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:  # as `decodescope measure` runs
                results, cpu_s, kernel_reads = runner.run(stream_all(f"http://127.0.0.1:{port}", args.streams))
        finally:
            server.terminate()
            server.wait(10)
        bad = [r.error for r in results if not r.ok]
        if bad:
            raise SystemExit(f"{len(bad)} streams failed: {bad[0]}")
        true_err, nominal_err = errors(results, send_log, args.interval_ms)
    tokens = sum(r.output_tokens for r in results)
    report = {
        "streams": args.streams,
        "interval_ms": args.interval_ms,
        "server_steps": "lockstep" if args.lockstep else "independent",
        "read_stamps": "kernel receive (SO_TIMESTAMPNS)" if kernel_reads else "loop wake-up",
        "kernel_stamped_reads": kernel_reads,
        "tokens": tokens,
        "itl_error_vs_server_send_ms": summary(true_err),
        "itl_error_vs_nominal_interval_ms": summary(nominal_err),
        "client_cpu_s": cpu_s,
        "client_cpu_us_per_token": cpu_s / tokens * 1e6,
        "cpus": os.cpu_count(),
        "loadavg_1m_before": load_before,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    t, n = report["itl_error_vs_server_send_ms"], report["itl_error_vs_nominal_interval_ms"]
    print(
        f"{args.streams} streams x {args.tokens} chunks every {args.interval_ms:g} ms ({tokens} tokens); "
        f"{report['cpus']} CPUs, load average {load_before:.2f} before the run; reads timed by {report['read_stamps']}"
    )
    print(
        f"ITL error vs server send stamps: p50 {t['abs_p50_ms']:.3f} ms, p99 {t['abs_p99_ms']:.3f} ms, "
        f"max {t['abs_max_ms']:.3f} ms (signed mean {t['signed_mean_ms']:+.4f} ms)"
    )
    print(
        f"ITL error vs nominal interval:   p50 {n['abs_p50_ms']:.3f} ms, p99 {n['abs_p99_ms']:.3f} ms, "
        f"max {n['abs_max_ms']:.3f} ms"
    )
    print(f"client CPU: {cpu_s:.3f} s, {report['client_cpu_us_per_token']:.1f} us per streamed token")


if __name__ == "__main__":
    main()
