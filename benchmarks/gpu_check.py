"""The GPU check in one call on a machine with an NVIDIA GPU and a CUDA build of torch:
probe (idle and under load), calibrate, and bench Llama-3.1-8B and Qwen3-8B in bf16 at
batch 1 and 8 next to the calibrated model, with a trace of a few decode steps, and last
the batch-1 Llama loop again with its step torch.compile'd (as gpt-fast runs it).

    python3 benchmarks/gpu_check.py [--out DIR] [--budget SECONDS]

Nothing is installed or downloaded: the models are bench's random-weight configs bundled
with decodescope. Every step runs with its own timeout, whatever the earlier ones did, and
none starts once the budget (default 480 s) is spent. It writes six files to --out
(default: $OUT, else ./gpu-check-out), rewritten after each step:
  summary.txt     the figures the check is for (also printed at the end)
  results.jsonl   one line per step: command, exit status, seconds, its --json output
  log.txt         each step's command, stderr and non-JSON stdout
  cal.json        the calibration file
  trace.json.gz   torch.profiler trace of 3 decode steps (Llama-3.1-8B, batch 1)
  smi.txt         nvidia-smi -q, topo -m, --query-gpu CSV, plain nvidia-smi and lspci -vv
                  text as captured (`decodescope probe --from smi.txt` reads it back)
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = ("llama-3.1-8b", "qwen3-8b")
BATCHES = (1, 8)
RESERVE_S = 10  # kept back from the budget for the summary
SMI = (["nvidia-smi", "-q"], ["nvidia-smi", "topo", "-m"], ["nvidia-smi"], ["lspci", "-vv", "-d", "10de:"])
# the hardware issue's goals
EXPECTED_WITHIN = 0.10  # model's expected (calibrated) vs bench's measured step
BW_GOAL_BATCH1 = 0.80  # bench's achieved bandwidth / calibrated copy bandwidth at batch 1


def steps(out: Path, device: str, dtype: str, models, batches) -> list[tuple[str, list[str], int, int]]:
    """(name, decodescope arguments, most seconds, seconds kept for it while earlier steps run),
    in the order they run."""
    cal = str(out / "cal.json")
    todo = [("probe", ["probe", "--json"], 60, 10), ("probe-load", ["probe", "--load", "--json"], 180, 30),
            ("calibrate", ["calibrate", "--device", device, "--model", models[0], "--out", cal, "--json"], 240, 60)]
    for m in models:
        for b in batches:
            args = ["bench", m, "--device", device, "--dtype", dtype, "--batch", str(b), "--calibration", cal, "--json"]
            if m == models[0] and b == batches[0]:
                args[-1:-1] = ["--trace", str(out / "trace.json.gz")]
            todo.append((f"bench-{Path(m).stem}-b{b}", args, 240, 45))
    if device == "cuda":  # last, with what the budget leaves: the same loop torch.compile'd, as gpt-fast runs it
        args = ["bench", models[0], "--device", device, "--dtype", dtype, "--compile", "--calibration", cal, "--json"]
        todo.append((f"bench-{Path(models[0]).stem}-b{batches[0]}-compiled", args, 300, 45))
    return todo


class Run:
    def __init__(self, out: Path, budget: float):
        self.out, self.deadline, self.results = out, time.monotonic() + budget, []
        for f in ("results.jsonl", "log.txt"):
            (out / f).write_text("")

    def log(self, text: str) -> None:
        with open(self.out / "log.txt", "a") as f:
            f.write(text + "\n")

    def step(self, name: str, args: list[str], most_s: int, least_s: int, later_s: int) -> None:
        """Run one step within its most seconds and what the budget leaves for the later
        steps' `later_s`, but not under its own least seconds while the budget lasts."""
        left = self.deadline - time.monotonic() - RESERVE_S
        rec = {"step": name, "command": "decodescope " + " ".join(args)}
        if "--calibration" in args and not Path(args[args.index("--calibration") + 1]).exists():
            i = args.index("--calibration")  # calibrate failed: bench still runs, next to the profile's model
            args = args[:i] + args[i + 2:]
            rec = {"step": name, "command": "decodescope " + " ".join(args), "note": "no calibration file"}
        if left < 5:
            rec |= {"rc": None, "seconds": 0.0, "error": "skipped: the budget is spent"}
        else:
            timeout = min(most_s, left, max(least_s, left - later_s))
            rec |= run([sys.executable, "-m", "decodescope", *args], timeout, self.log)
        self.results.append(rec)
        with open(self.out / "results.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"{name}: rc {rec['rc']}, {rec['seconds']:.1f} s{', ' + rec['error'] if rec.get('error') else ''}",
              flush=True)


def run(cmd: list[str], timeout: float, log) -> dict:
    """Exit status, seconds, parsed --json output (or the reason there is none) of one command."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    log(f"\n$ {' '.join(cmd)}   (timeout {timeout:.0f} s)")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
        rc, stdout, stderr, error = p.returncode, p.stdout, p.stderr, None
    except subprocess.TimeoutExpired as e:
        rc, error = None, f"killed after {timeout:.0f} s"
        stdout, stderr = (x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in (e.stdout, e.stderr))
    except OSError as e:
        rc, stdout, stderr, error = None, "", "", f"could not start: {e}"
    rec = {"rc": rc, "seconds": round(time.monotonic() - t0, 1)}
    try:
        rec["json"] = json.loads(stdout)
    except json.JSONDecodeError:
        log(stdout)
        error = error or f"no JSON output (exit status {rc})"
    log(stderr[-4000:] + f"[exit {rc}, {rec['seconds']} s]")
    if error:  # decodescope's errors end with two lines: the error and its fix
        rec["error"] = error + (": " + " / ".join(x.strip() for x in stderr.strip().splitlines()[-2:])[:400]
                                if stderr.strip() else "")
    return rec


def capture_smi(out: Path) -> None:
    """The driver's own text, as a user would paste it, for tests/data/."""
    from decodescope.hardware.probe import QUERY
    parts = []
    for cmd in (*SMI[:2], ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"], *SMI[2:]):
        try:
            parts.append(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout)
        except (OSError, subprocess.SubprocessError) as e:
            parts.append(f"# {' '.join(cmd)}: {e}\n")
    (out / "smi.txt").write_text("\n".join(parts))


def torch_state() -> tuple[bool, str]:
    """(torch importable, what it says), asked in a child so that a broken install cannot stop the check."""
    code = "import torch; print(torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())"
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return False, str(e)
    return p.returncode == 0, p.stdout.strip() or (p.stderr.strip().splitlines() or ["?"])[-1]


def summary(results: list[dict], torch_says: str, out: Path) -> str:
    by = {r["step"]: r for r in results}
    lines = [f"python {sys.version.split()[0]} ({sys.executable}); torch {torch_says}"]
    lines += [f"FAILED {r['step']}: {r['error']}" for r in results if r.get("error")]
    lines += _probe_lines(by.get("probe", {}).get("json"), by.get("probe-load", {}).get("json"))
    cal = by.get("calibrate", {})
    lines += _calibration_lines(cal.get("json"), cal.get("seconds"))
    benches = [r for r in results if r["step"].startswith("bench-") and r.get("json")]
    if benches:
        lines.append("bench (random weights; measured / expected step within "
                     f"{EXPECTED_WITHIN:.0%} is the goal; achieved / calibrated copy >= {BW_GOAL_BATCH1:.0%} at batch 1)")
    for r in benches:
        lines.append(_bench_line(r["json"]))
    trace = out / "trace.json.gz"
    if trace.exists():
        lines.append(f"trace.json.gz {trace.stat().st_size / 1e6:.2f} MB (tests/data/ takes it under 5 MB)")
    return "\n".join(lines) + "\n"


def _probe_lines(idle: dict | None, load: dict | None) -> list[str]:
    out = []
    loaded = {g["index"]: g for g in (load or {}).get("gpus", [])}
    for g in (idle or {}).get("gpus", []):
        p, q = g["pcie"], loaded.get(g["index"], {}).get("pcie", {})
        out.append(f"GPU {g['index']} {g['name']}, {(g['memory_bytes'] or 0) / 1e9:.1f} GB, driver {g['driver']}, "
                   f"NUMA {g['numa_node']}, CPUs {g['cpu_affinity']}: PCIe Gen{p['gen_current']} x{p['width_current']} "
                   f"of Gen{p['gen_max']} x{p['width_max']} idle"
                   + (f", Gen{q.get('gen_current')} x{q.get('width_current')} under load ({q.get('under_load')})"
                      if q else ", not read under load"))
    out += [f"link GPU{x['a']}-GPU{x['b']}: {x['kind']} -> --link {x['link']}" for x in (idle or {}).get("links", [])]
    return out


def _calibration_lines(c: dict | None, seconds) -> list[str]:
    if not c:
        return []
    from decodescope.hardware.calibration import AllreducePoint, Calibration, Gemv
    cal = Calibration(**{**c, "gemv": tuple(Gemv(**g) for g in c["gemv"]),
                         "allreduce": tuple(AllreducePoint(**a) for a in c["allreduce"]), "notes": tuple(c["notes"])})
    mm = ", ".join(f"{dt} {f / 1e12:.3g}" for dt, f in cal.matmul_flops.items())
    graph = f"{cal.launch_graph_us:.2f}" if cal.launch_graph_us is not None else "-"
    out = [f"calibrate {cal.device} in {seconds} s (goal < 120 s): copy {cal.copy_bw_bytes_s / 1e9:.1f} GB/s median, "
           f"{cal.copy_bw_best_bytes_s / 1e9:.1f} best (read + write); matmul TFLOP/s {mm}; launch "
           f"{cal.launch_eager_us:.2f} us eager, {graph} us in a CUDA graph"]
    if cal.gemv:
        out.append("  weight stream (GEMV at the calibrated model's shapes) " + ", ".join(
            f"batch {b} {cal.weight_bw(b) / 1e9:.1f} GB/s" for b in sorted({g.batch for g in cal.gemv})))
    out += [f"  allreduce {a.bytes} B: {a.us:.1f} us" for a in cal.allreduce]
    return out


def _bench_line(d: dict) -> str:
    p50, exp = d["step_ms"]["p50"], d["model_expected_tok_s"]
    ratio = f"{p50 * exp / 1e3:.2f}" if exp else "-"
    frac = f"{d['achieved_bw_fraction']:.0%}" if d["achieved_bw_fraction"] is not None else "-"
    expected = f"{1e3 / exp:.2f} ms" if exp else "none"
    return (f"  {d['model']} batch {d['batch']} ({d['mode']}, {d['layers']} layers, context {d['context']}): "
            f"step p50 {p50:.2f} ms, p90 {d['step_ms']['p90']:.2f} ms, {d['tok_s']:.1f} tok/s per request; model "
            f"expected {expected}, measured / expected {ratio}; achieved {d['achieved_bw_bytes_s'] / 1e9:.1f} GB/s "
            f"= {frac} of the calibrated copy")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out", help="folder for the six files")
    ap.add_argument("--budget", type=float, default=480, help="seconds for all steps together")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: try the script itself")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--models", nargs="+", default=MODELS, help="presets or config.json paths to bench")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    has_torch, torch_says = torch_state()
    if not has_torch:
        text = (f"{sys.executable} has no usable torch ({torch_says}): calibrate and bench need a CUDA build of "
                "torch, which this script does not install. Run it with the python that has torch.\n")
        (out / "summary.txt").write_text(text)
        print(text, end="")
        return 2
    capture_smi(out)
    run_ = Run(out, args.budget)
    todo = steps(out, args.device, args.dtype, args.models, BATCHES)
    for i, (name, dargs, most, least) in enumerate(todo):
        run_.step(name, dargs, most, least, sum(later for *_, later in todo[i + 1:]))
        (out / "summary.txt").write_text(summary(run_.results, torch_says, out))
    text = (out / "summary.txt").read_text()
    print("\n" + text, end="")
    return 0 if all(r.get("error") is None for r in run_.results) else 1


if __name__ == "__main__":
    sys.exit(main())
