"""Whole-process time of `decodescope model` (target: median <= 0.15 s), and the heavy
modules it must not import.

    python benchmarks/cli_speed.py [RUNS] [--exe PATH/TO/decodescope]

Prints the median wall time and the median CPU time (user + sys of the child process, from
getrusage) per run. On a loaded machine wall time mostly measures the queue for a core;
CPU time is what the run itself costs. Without --exe it runs `python -m decodescope` with
this interpreter; it says whether that decodescope is an editable install, whose import
hook costs tens of ms that a normal `pip install .` does not have. One untimed run comes
first: the first run after an install parses the data tables and compiles the dataclass
methods into the user's cache folder, every later run reads them.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ARGS = ["model", "qwen3.6-27b", "--gpu", "rtx-a6000", "--tp", "2", "--spec", "mtp:3", "--accept", "3.08",
        "--context", "500", "--link", "pcie-sys"]
HEAVY = ("torch", "matplotlib", "transformers", "numpy", "aiohttp", "rich", "urllib.request")
# which decodescope the command runs, and whether an editable install's import hook is loaded
WHICH = ("import sys, decodescope; "
         "ed = any(m.startswith('__editable__') for m in sys.modules); "
         "print(decodescope.__file__, '(the import hook of an editable install loads too: slower than after `pip install .`)' "
         "if ed else '(no editable-install hook: as after `pip install .`)')")


def _python(exe: str) -> str:
    """The interpreter of a console script (its #! line)."""
    with open(exe) as f:
        return f.readline()[2:].strip()


def _time(cmd: list[str], runs: int, env, cwd) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="?", type=int, default=20)
    ap.add_argument("--exe", help="a `decodescope` console script (e.g. from a venv with `pip install .`)")
    a = ap.parse_args()
    python = _python(a.exe) if a.exe else sys.executable
    base = [a.exe] if a.exe else [python, "-m", "decodescope"]
    # a console script must find its own install, not this tree (python -c puts the cwd first)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} if a.exe else None
    cwd = tempfile.gettempdir() if a.exe else None
    print("runs:", subprocess.run([python, "-c", WHICH], capture_output=True, text=True, env=env, cwd=cwd).stdout.strip())
    subprocess.run(base + ARGS, check=True, capture_output=True, env=env, cwd=cwd)  # fills the cache, untimed
    for flags in ([], ["--json"]):
        walls, cpus = _time(base + ARGS + flags, a.runs, env, cwd)
        print(f"decodescope {' '.join(ARGS + flags)}: median wall {statistics.median(walls):.3f} s "
              f"(min {min(walls):.3f}), median CPU user+sys {statistics.median(cpus):.3f} s "
              f"(min {min(cpus):.3f}) over {a.runs} runs")
    probe = ("import sys; from decodescope.cli.main import main; sys.argv = ['decodescope'] + sys.argv[1:]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print('heavy modules imported:', [m for m in {HEAVY!r} if m in sys.modules] or 'none')")
    out = subprocess.run([python, "-c", probe, *ARGS, "--json"], capture_output=True, text=True, env=env, cwd=cwd).stdout
    print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
