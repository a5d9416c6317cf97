"""`decodescope model --from-log`: the deployment from real start-up excerpts
(tests/data/startup/, sources in SOURCES.md) gives the same prediction as the flags typed
by hand from the same lines; a typed flag wins over the log."""

import json
import subprocess
import sys
from pathlib import Path

STARTUP = Path(__file__).parent / "data" / "startup"
# vLLM 0.9.2 API server: "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B',
# ..., 'tensor_parallel_size': 8, 'kv_cache_dtype': 'fp8', ...}" -> a bundled preset's hub id
ROCM = str(STARTUP / "vllm-0.9.2-apiserver-rocm-tp8.log")
ROCM_FLAGS = ["Qwen/Qwen3-8B", "--tp", "8", "--kv", "fp8", "--engine", "vllm"]
# vLLM 0.24.0: "model='~/.cache/huggingface/qwen3.6-27b-fp8', speculative_config=SpeculativeConfig(
# method='mtp', ..., num_spec_tokens=3), ... tensor_parallel_size=4, pipeline_parallel_size=1, ...
# quantization=fp8, ... kv_cache_dtype=fp8" -> a local path that is not on this machine
MTP = str(STARTUP / "vllm-0.24.0-mtp3-tp4-fp8.log")
MTP_FLAGS = ["--tp", "4", "--pp", "1", "--weights", "fp8", "--kv", "fp8", "--spec", "mtp:3", "--engine", "vllm"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "decodescope", "model", *args, "--json"],
                          capture_output=True, timeout=120)


def prediction(*args) -> dict:
    p = run(*args)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_model_named_by_the_log_needs_no_model_argument():
    assert prediction("--from-log", ROCM, "--gpu", "h100-sxm") == prediction(*ROCM_FLAGS, "--gpu", "h100-sxm")


def test_typed_flag_overrides_the_log():
    from_log = prediction("--from-log", ROCM, "--gpu", "h100-sxm", "--tp", "2")
    assert from_log == prediction("Qwen/Qwen3-8B", "--tp", "2", "--kv", "fp8", "--engine", "vllm", "--gpu", "h100-sxm")
    assert from_log != prediction(*ROCM_FLAGS, "--gpu", "h100-sxm")


def test_speculation_from_the_log_with_model_and_accept_typed():
    got = prediction("qwen3.6-27b", "--from-log", MTP, "--gpu", "h100-sxm", "--accept", "3.2")
    assert got == prediction("qwen3.6-27b", *MTP_FLAGS, "--gpu", "h100-sxm", "--accept", "3.2")


def test_unknown_model_asks_for_model():
    p = run("--from-log", MTP, "--gpu", "h100-sxm")
    err = p.stderr.decode()
    assert p.returncode == 2 and "~/.cache/huggingface/qwen3.6-27b-fp8" in err and "give MODEL" in err
    assert "Traceback" not in err


def test_speculating_log_without_accept_length_says_so():
    p = run("qwen3.6-27b", "--from-log", MTP, "--gpu", "h100-sxm")
    err = p.stderr.decode()
    assert p.returncode == 2 and "logs no accept length" in err and "--accept" in err and "Traceback" not in err


def test_accept_length_from_the_log_statistics(tmp_path):
    # the start-up excerpt above, then real vLLM MTP statistics (tests/data/logs/vllm_mtp_pid5020.log,
    # another process: its own run) with "Mean acceptance length: 2.53" and "... 2.77":
    # the run's accept length (2.53 + 2.77) / 2 = 2.65 tokens per round
    log = tmp_path / "server.log"
    log.write_bytes(Path(MTP).read_bytes() + (STARTUP.parent / "logs" / "vllm_mtp_pid5020.log").read_bytes())
    got = prediction("qwen3.6-27b", "--from-log", str(log), "--gpu", "h100-sxm")
    assert got == prediction("qwen3.6-27b", *MTP_FLAGS, "--accept", "2.65", "--gpu", "h100-sxm")
