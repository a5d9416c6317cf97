"""`decodescope explain --log`: the deployment comes from the log's start-up lines, typed
flags win. The logs join two real pieces: a start-up excerpt (tests/data/startup/) and
real vLLM MTP statistics lines (tests/data/logs/vllm_mtp_pid5020.log); sources in their
SOURCES files."""

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent.parent / "data"
# vLLM 0.24.0: "... speculative_config=SpeculativeConfig(method='mtp', ..., num_spec_tokens=3), ...
# tensor_parallel_size=4, pipeline_parallel_size=1, ... quantization=fp8, ... kv_cache_dtype=fp8"
MTP_FLAGS = ["--tp", "4", "--pp", "1", "--weights", "fp8", "--kv", "fp8", "--spec", "mtp:3", "--engine", "vllm"]


def joined(tmp_path, startup: str) -> str:
    path = tmp_path / "server.log"
    path.write_bytes((DATA / "startup" / startup).read_bytes() + (DATA / "logs" / "vllm_mtp_pid5020.log").read_bytes())
    return str(path)


def explain(*args) -> dict:
    p = subprocess.run([sys.executable, "-m", "decodescope", "explain", *args, "--gpu", "h100-sxm", "--json"],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_deployment_flags_come_from_the_log(tmp_path):
    log = joined(tmp_path, "vllm-0.24.0-mtp3-tp4-fp8.log")
    assert explain("qwen3.6-27b", "--log", log) == explain("qwen3.6-27b", "--log", log, *MTP_FLAGS)


def test_typed_tp_wins_over_the_log(tmp_path):
    log = joined(tmp_path, "vllm-0.24.0-mtp3-tp4-fp8.log")
    two = explain("qwen3.6-27b", "--log", log, "--tp", "2")
    assert two == explain("qwen3.6-27b", "--log", log, *MTP_FLAGS, "--tp", "2")
    assert two != explain("qwen3.6-27b", "--log", log)


def test_model_named_by_the_log_may_be_left_out(tmp_path):
    # vLLM 0.9.2: "non-default args: {'model_tag': 'Qwen/Qwen3-8B', ..., 'tensor_parallel_size': 8,
    # 'kv_cache_dtype': 'fp8', ...}"; the statistics speculate, the start-up excerpt does not say how
    log = joined(tmp_path, "vllm-0.9.2-apiserver-rocm-tp8.log")
    spec = ["--spec", "ngram:3"]
    assert explain("--log", log, *spec) == explain("Qwen/Qwen3-8B", "--log", log, "--tp", "8", "--kv", "fp8",
                                                    "--engine", "vllm", *spec)


def test_batch_and_context_come_from_the_logs_decode_lines():
    # sglang_dp_attention_mtp.log (real SGLang DP-attention lines): 5 steady decode lines, each
    # "#running-req: 8", #token 37217, 36267, 37565, 37357, 37787 -> per request / 8 = 4652.1,
    # 4533.4, 4695.6, 4669.6, 4723.4 tokens; median 4669.6 -> --context 4670, --batch 8
    log = str(DATA / "logs" / "sglang_dp_attention_mtp.log")
    flags = ("deepseek-v3", "--log", log, "--tp", "8", "--spec", "mtp:3")
    assert explain(*flags) == explain(*flags, "--batch", "8", "--context", "4670")
    typed = explain(*flags, "--batch", "1")  # a typed flag wins over the log
    assert typed["model"]["deployment"]["batch"] == 1 and typed["model"]["deployment"]["context"] == 4670
