"""Whole-process time of `decodescope model` (target: median <= 0.15 s), and the heavy
modules it must not import.

    python benchmarks/cli_speed.py [RUNS]
"""

import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "decodescope", "model", "qwen3.6-27b", "--gpu", "rtx-a6000", "--tp", "2",
       "--spec", "mtp:3", "--accept", "3.08", "--context", "500", "--link", "pcie-sys"]
HEAVY = ("torch", "matplotlib", "transformers", "numpy", "aiohttp", "rich", "urllib.request")


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for flags in ([], ["--json"]):
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(CMD + flags, check=True, capture_output=True)
            times.append(time.perf_counter() - t)
        times.sort()
        print(f"decodescope model {' '.join(CMD[4:] + flags)}: median {statistics.median(times):.3f} s, "
              f"p90 {times[int(0.9 * len(times)) - 1]:.3f} s, min {times[0]:.3f} s over {runs} runs")
    probe = ("import sys; from decodescope.cli.main import main; sys.argv = ['decodescope'] + sys.argv[1:]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print('heavy modules imported:', [m for m in {HEAVY!r} if m in sys.modules] or 'none')")
    out = subprocess.run([sys.executable, "-c", probe, *CMD[3:], "--json"], capture_output=True, text=True).stdout
    print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
