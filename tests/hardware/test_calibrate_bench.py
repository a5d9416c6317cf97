"""calibrate and bench on this machine's CPU with real torch and transformers (small
sizes), their refusals, and the same on CUDA where a GPU is present."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_config
from decodescope.hardware import bench
from decodescope.hardware.calibrate import Sizes, calibrate
from decodescope.hardware.calibration import Calibration, save

torch = pytest.importorskip("torch", reason="calibrate and bench need torch")
pytest.importorskip("transformers", reason="bench needs transformers")

ROOT = Path(__file__).parents[2]
TINY = str(ROOT / "tests" / "data" / "hardware" / "llama-tiny.json")
SMALL = Sizes(copy_bytes=64 << 20, copy_reps=3, matmul_n=256, matmul_reps=3, launches=500, gemv_reps=2,
              gemv_rotation_bytes=8 << 20)
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine: GPU path not run")


def cli(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "decodescope", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_cpu_calibration_measures_every_field():
    cal = calibrate("cpu", shapes=((128, 256, 4),), sizes=SMALL, batches=(1, 4))
    assert cal.device == "cpu" and cal.schema == 1 and cal.gpus == 1
    assert 1e8 < cal.copy_bw_bytes_s <= cal.copy_bw_best_bytes_s < 1e13  # 0.1 GB/s .. 10 TB/s
    assert set(cal.matmul_flops) == {"fp32", "bf16"} and all(f > 1e6 for f in cal.matmul_flops.values())
    assert 0 < cal.launch_eager_us < 1e4 and cal.launch_graph_us is None
    assert [(g.k, g.n, g.batch, g.count) for g in cal.gemv] == [(128, 256, 1, 4), (128, 256, 4, 4)]
    # each GEMV reads its 128 x 256 fp32 weight: bytes/s x time = 131,072 bytes
    assert all(g.weight_bytes_s * g.us * 1e-6 == pytest.approx(128 * 256 * 4) for g in cal.gemv)
    assert any("CUDA graph: skipped" in n for n in cal.notes) and any("allreduce: skipped" in n for n in cal.notes)
    assert cal.versions["torch"] == torch.__version__ and cal.memory_bytes > 1e9


def test_cpu_bench_times_each_step_and_counts_bytes_by_hand():
    cfg = bench.BenchConfig(device="cpu", dtype="fp32", batch=1, context=16, steps=5)
    r = bench.run(load_config(TINY), cfg)
    assert len(r.step_ms) == 5 and r.p90 >= r.p50 > 0 and r.tok_s == pytest.approx(1e3 / r.p50)
    # weights read per step, fp32: linear per layer q 128x128 + k 64x128 + v 64x128 + o 128x128 + gate, up
    # 256x128 + down 128x256 = 147,456, x 2 layers = 294,912; norms 2 x 128 x 2 + 128 = 640; LM head
    # 1000 x 128 = 128,000; total 423,552 x 4 B = 1,694,208 B (the input embedding is not read whole)
    assert r.weight_bytes == 1_694_208
    # KV read: K and V x 2 heads x 32 x 4 B = 512 B per token per layer, x 2 layers, mean length
    # 16 + 3 warm-up + (5 + 1) / 2 = 22 tokens: 22,528 B
    assert r.kv_bytes == 22_528
    assert r.mode == "eager" and r.model_expected_tok_s is None
    assert any("needs a calibration file" in n for n in r.notes)


@pytest.mark.parametrize("compile_", [False, pytest.param(True, marks=pytest.mark.skipif(
    shutil.which("g++") is None, reason="torch.compile on the CPU needs a C++ compiler"))])
def test_the_static_cache_step_cuda_graphs_replay_decodes_as_the_eager_step_on_the_cpu(compile_):
    # the step bench captures as a CUDA graph (with --compile: compiled first, ~40 s here), run
    # here uncaptured: the same random model, the same prompt, two requests; greedy tokens of 6
    # steps must be those of the dynamic cache
    import transformers
    raw = load_config(TINY)
    cfg = bench.BenchConfig(device="cpu", dtype="fp32", batch=2, context=16, steps=6, compile=compile_)
    dev = torch.device("cpu")
    runs = []
    for stepper in (lambda m: bench.eager_stepper(torch, m, cfg, dev),
                    lambda m: bench.static_stepper(torch, transformers, m, cfg, dev)):
        model = bench._build(torch, transformers, raw, cfg, dev)  # seeded: the same weights
        torch.manual_seed(1)  # the same prompt
        step, tok = stepper(model)
        tokens = [tok.clone()]
        for _ in range(cfg.steps):
            step()
            tokens.append(tok.clone())
        runs.append(torch.cat(tokens, dim=1))
    assert runs[0].shape == (2, 7) and torch.equal(runs[0], runs[1])


def test_bench_cli_json_fields_with_a_cpu_calibration(tmp_path):
    cal = calibrate("cpu", shapes=((128, 256, 1),), sizes=SMALL, batches=(1,))
    f = tmp_path / "cpu.json"
    save(cal, f)
    r = cli("bench", TINY, "--device", "cpu", "--dtype", "fp32", "--context", "16", "--steps", "4",
            "--calibration", str(f), "--trace", str(tmp_path / "t.json"), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d["step_ms"]) >= {"p50", "p90"} and d["device"] == "cpu"
    assert d["tok_s"] == pytest.approx(1e3 / d["step_ms"]["p50"])
    assert d["model_ceiling_tok_s"] > d["model_expected_tok_s"] > 0
    assert d["achieved_bw_fraction"] == pytest.approx(d["achieved_bw_bytes_s"] / cal.copy_bw_bytes_s)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e.get("name", "").startswith("aten::") for e in trace["traceEvents"])


def test_bench_too_large_says_how_much_memory_and_layers():
    r = cli("bench", "llama-3.1-405b", "--device", "cpu", "--dtype", "bf16")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "needs" in r.stderr and "GB" in r.stderr and "is free on the device" in r.stderr
    assert "--layers" in r.stderr


def test_compile_on_the_cpu_is_refused():
    r = cli("bench", TINY, "--device", "cpu", "--compile")
    assert r.returncode == 2 and "--compile: the compiled step is captured as a CUDA graph" in r.stderr


def test_bench_layers_out_of_range():
    r = cli("bench", TINY, "--device", "cpu", "--layers", "5")
    assert r.returncode == 2 and "--layers 5: the model has 2 layers" in r.stderr


def test_bench_refuses_a_calibration_of_another_device(tmp_path):
    f = tmp_path / "h100.json"
    save(Calibration(device="h100-sxm", device_name="NVIDIA H100 80GB HBM3", memory_bytes=80e9, versions={},
                     copy_bw_bytes_s=3e12, copy_bw_best_bytes_s=3e12, matmul_flops={}, launch_eager_us=5.0), f)
    r = cli("bench", TINY, "--device", "cpu", "--calibration", str(f))
    assert r.returncode == 2 and "was measured on 'h100-sxm'" in r.stderr and "this run is on 'cpu'" in r.stderr


@no_cuda
@pytest.mark.parametrize("cmd", [["calibrate", "--device", "cuda"], ["bench", TINY, "--device", "cuda"]])
def test_cuda_without_a_gpu_is_one_clear_error(cmd):
    r = cli(*cmd)
    assert r.returncode == 2 and "PyTorch sees no CUDA GPU" in r.stderr and "--device cpu" in r.stderr


def test_without_torch_calibrate_says_what_still_works():
    code = ("import sys; sys.modules['torch'] = None; sys.argv = ['decodescope', 'calibrate', '--device', 'cpu']; "
            "from decodescope.cli.main import main; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "needs PyTorch, which is not installed" in r.stderr
    assert "probe --from FILE and model work without it" in r.stderr


def test_model_with_a_calibration_never_imports_torch(tmp_path):
    f = tmp_path / "cpu.json"
    save(Calibration(device="cpu", device_name="x", memory_bytes=8e9, versions={}, copy_bw_bytes_s=5e9,
                     copy_bw_best_bytes_s=6e9, matmul_flops={"fp32": 5e10}, launch_eager_us=5.0), f)
    code = ("import sys; sys.argv = ['decodescope', 'model', 'llama-3.1-8b', '--gpu', 'cpu', '--json', "
            f"'--calibration', {str(f)!r}]\nfrom decodescope.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.strip().endswith("NO-TORCH"), r.stderr


@gpu
def test_cuda_calibration_and_a_graph_bench():
    cal = calibrate("cuda", shapes=((4096, 4096, 1),), sizes=Sizes(copy_bytes=1 << 30, copy_reps=5, matmul_n=4096,
                    matmul_reps=5, launches=2000, gemv_reps=3, gemv_rotation_bytes=256 << 20), batches=(1, 8))
    assert cal.launch_graph_us is not None and cal.launch_graph_us < cal.launch_eager_us
    r = bench.run(load_config(TINY), bench.BenchConfig(device="cuda", dtype="bf16", context=64, steps=8), cal)
    assert r.mode == bench.Mode.GRAPH, r.notes


def test_the_model_side_of_a_gpu_loop_by_hand():
    # bench's model figures for a CUDA run, computed here without a GPU: the tiny Llama in bf16 on
    # an H200 (4.8 TB/s), one request, the static cache's 100 tokens read
    raw, cfg = load_config(TINY), bench.BenchConfig(device="cuda", dtype="bf16", context=100)
    weights = 847_104  # bf16: (294,912 linear + 128,000 LM head) x 2 B + 640 norm values x 2 B
    kv = 2 * 2 * 2 * 32 * 2 * 101  # layers x (K, V) x 2 heads x 32 dims x 2 B x (100 + 1) tokens = 51,712 B
    kernels = 2 * 12 + 4  # per layer 8 attention + 4 MLP kernels, then norm, head, sample
    # graph replay: gpt-fast's profile (bandwidth 0.799, 4.5 us per kernel), no host time (queued replays)
    step_ms = (weights + kv) / (4.8e12 * 0.799) * 1e3 + kernels * 4.5e-3
    for mode in (bench.Mode.GRAPH, bench.Mode.COMPILED_GRAPH):
        _, expected, notes = bench._model_side(raw, cfg, "h200", None, mode, 100)
        assert expected == pytest.approx(1e3 / step_ms, rel=1e-6)  # 0.126234 ms: 7,921.8 tok/s
        assert any("host time per pass 0 ms, not gpt-fast's 0.0026 ms" in n for n in notes)
    # graph capture failed: every kernel launched from Python, transformers' profile (0.75, 6.7 us, 5 ms host)
    _, expected, notes = bench._model_side(raw, cfg, "h200", None, bench.Mode.STATIC_EAGER, 100)
    step_ms = (weights + kv) / (4.8e12 * 0.75) * 1e3 + kernels * 6.7e-3 + 5.0
    assert expected == pytest.approx(1e3 / step_ms, rel=1e-6)  # 5.18785 ms: 192.76 tok/s
    assert any("engine 'transformers'" in n for n in notes)
