"""The project's own check of the model on real hardware: a Llama-shaped model of 0.31 B
parameters in fp32 on this machine's CPU. `calibrate` measures the CPU (GEMV at the
model's own shapes, launch cost), `bench` times a real transformers decode loop with
random weights, and `decodescope model --gpu cpu --calibration` must expect a step time
within 25 % of the measured one.

A shared CPU's load changes from one second to the next, and the expected step is the
calibration's GEMV weight stream while the measured one is bench's decode loop: timed
minutes apart they saw different loads (the ratio swung 0.43-1.13 on a busy machine). So
the two alternate in one process (A B, B A, A B, ...), each turn a fraction of a second:
one GEMV sweep over the model's shapes (~2.5 GB read), then two decode steps (1.1 GB each)
of bench's own loop. Each pair's sweep goes into its own calibration file, `decodescope
model` reads it as a user runs it. Load only ever slows a turn, and a busy machine slows
single turns 1.5-2.8x (a CI run beside other processes timed steps of 61 to 171 ms, pairs'
ratios 0.44-1.68): the check is the least-disturbed expected (the fastest sweep's) over the
least-disturbed measured step, each the minimum over all turns.

Both run on one torch thread. With two, a thread the OS preempts stalls its partner at the
end of every parallel op, and a decode step (~1,000 small ops) stalls far more often than
the sweep (~400 large ones): on this machine under other processes' load two threads put
the pairs' ratios anywhere in 0.45-1.03 and one thread in 0.63-0.88 (linear time over step).
One thread is slowed by the share of the core it gets, whatever the op sizes."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from decodescope.arch import load_arch, load_config
from decodescope.hardware import bench
from decodescope.hardware.calibrate import CPU_SIZES, calibrate, gemv_probe, model_shapes, small
from decodescope.hardware.calibration import save

pytest.importorskip("torch", reason="calibrate and bench need torch")
pytest.importorskip("transformers", reason="bench needs transformers")

ROOT = Path(__file__).parents[2]
LLAMA = str(ROOT / "tests" / "data" / "hardware" / "llama-334m.json")
CONTEXT = 64
PAIRS, STEPS = 15, 2  # 15 x (one GEMV sweep + 2 decode steps): ~0.1 s a step on one thread


def _expected_ms(cal_file: Path, context: int) -> float:
    """`decodescope model` as a user runs it, for bench's deployment: one request, fp32
    weights, the cache at `context` tokens."""
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", LLAMA, "--gpu", "cpu", "--weights", "fp32",
                        "--engine", bench.ENGINE, "--context", str(context), "--calibration", str(cal_file), "--json"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["expected"]["round_ms"]


@pytest.fixture
def one_thread():
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_model_expected_step_within_25_percent_of_bench_on_this_cpu(tmp_path, one_thread):
    arch = load_arch(LLAMA)
    assert arch.params_total >= 300e6  # 308.8 M: 16 layers x 15.2 M + embedding and head 2 x 32.8 M
    shapes, sizes = model_shapes(arch), small(CPU_SIZES)
    sweep = gemv_probe("cpu", shapes, replace(sizes, gemv_reps=1), (1,))  # 256 MB of weights per shape, once
    loop = bench.prepare(load_config(LLAMA), bench.BenchConfig(device="cpu", dtype="fp32", context=CONTEXT))
    bench.time_steps(loop, 0)  # bench's untimed warm-up steps
    # copy, matmul and launch once (the launch floor is its only other figure a batch-1 step uses)
    cal = calibrate("cpu", shapes=shapes, sizes=sizes, batches=(1,))
    gemvs, steps = [], []
    for i in range(PAIRS):
        turns = [lambda: gemvs.append(sweep()), lambda: steps.append(bench.time_steps(loop, STEPS, warmup=0))]
        for turn in turns[::-1] if i % 2 else turns:
            turn()
    expected = []
    for i, (gemv, step_ms) in enumerate(zip(gemvs, steps)):
        f = tmp_path / f"cpu-{i}.json"
        save(replace(cal, gemv=gemv), f)
        # the cache at its mean length over this pair's steps: prefill + warm-up + the steps before
        expected.append(_expected_ms(f, CONTEXT + bench.WARMUP + i * STEPS + STEPS // 2))
        print(f"pair {i}: expected {expected[-1]:.1f} ms, measured {[round(ms, 1) for ms in step_ms]} ms; "
              f"weight stream {replace(cal, gemv=gemv).weight_bw(1) / 1e9:.2f} GB/s")
    ratio = min(expected) / min(ms for pair in steps for ms in pair)
    print(f"ratio {ratio:.3f} of the fastest turns (threads {cal.versions['threads']}, "
          f"copy {cal.copy_bw_bytes_s / 1e9:.2f} GB/s)")
    assert 0.75 <= ratio <= 1.25
