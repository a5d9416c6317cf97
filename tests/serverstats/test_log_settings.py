"""`decodescope log` on real start-up excerpts (tests/data/startup/, sources in SOURCES.md):
settings and findings above the statistics, and in --json. Expected values are read by
hand from the excerpt lines quoted in the comments."""

import json
import os
import subprocess
import sys
from pathlib import Path

STARTUP = Path(__file__).parent.parent / "data" / "startup"


def run(*args, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "decodescope", "log", *args], input=stdin,
                          capture_output=True, timeout=120, env={**os.environ, "COLUMNS": "250"})


def log_json(*args, stdin: bytes | None = None) -> dict:
    p = run(*args, "--json", "--no-records", stdin=stdin)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_vllm_settings_in_json():
    # "Initializing a V1 LLM engine (v0.24.0) with config: model='~/.cache/huggingface/qwen3.6-27b-fp8',
    # speculative_config=SpeculativeConfig(method='mtp', ..., num_spec_tokens=3), ... dtype=torch.bfloat16,
    # ... tensor_parallel_size=4, pipeline_parallel_size=1, ... quantization=fp8, enforce_eager=False,
    # kv_cache_dtype=fp8"
    out = log_json(str(STARTUP / "vllm-0.24.0-mtp3-tp4-fp8.log"))
    s = out["settings"]
    assert (s["engine"], s["version"], s["model"]) == ("vllm", "0.24.0", "~/.cache/huggingface/qwen3.6-27b-fp8")
    assert (s["tp"], s["pp"], s["dtype"], s["quantization"], s["kv_cache_dtype"]) == (4, 1, "bf16", "fp8", "fp8")
    assert (s["spec_method"], s["spec_steps"], s["cuda_graphs"]) == ("mtp", 3, True)
    assert s["gpus"] is None and s["offloaded_layers"] is None  # the line names neither
    # the one summary segment (line 1) carries the same settings
    assert [g["settings"] for g in out["summary"]["segments"]] == [s]


def test_llamacpp_settings_in_json():
    # "  Device 0: NVIDIA RTX A6000, ...", "offloaded 62/62 layers to GPU", "n_ctx      = 8192",
    # "K (f16): 976.00 MiB, V (f16): 976.00 MiB"; no statistics line in the excerpt
    out = log_json(str(STARTUP / "ik-llamacpp-a6000-full-offload.log"))
    s = out["settings"]
    assert s["engine"] == "llamacpp" and s["gpus"] == ["NVIDIA RTX A6000"] and s["gpu_count"] == 1
    assert (s["offloaded_layers"], s["total_layers"], s["context"], s["kv_cache_dtype"]) == (62, 62, 8192, "fp16")
    assert s["tp"] is None and s["model"] is None  # not stated in the excerpt
    assert out["findings"] == []  # every layer on the GPU: nothing to say
    assert out["summary"]["windows"] == 0


def test_finding_shown_above_the_statistics_line():
    # line 4: "llm_load_tensors: offloaded 1/35 layers to GPU" -> 34 of 35 layers (97 %) on the CPU
    p = run(str(STARTUP / "llm-llama-cpp-2023-1of35.log"))
    assert p.returncode == 0, p.stderr.decode()
    text = p.stdout.decode()
    assert "partial_offload" in text and "34 of 35 layers" in text and "(97 %)" in text
    assert text.index("partial_offload") < text.index("no statistics line")


def test_each_run_keeps_its_settings_and_standard_input_works():
    # line 1: vLLM 0.6.4 V0 engine with enforce_eager=True; line 2: the vLLM 0.24.0 start-up above
    text = (STARTUP / "vllm-0.6.4-v0-eager.log").read_bytes() + (STARTUP / "vllm-0.24.0-mtp3-tp4-fp8.log").read_bytes()
    out = log_json("-", stdin=text)
    runs = out["settings_segments"]
    assert [(r["first_line"], r["settings"]["cuda_graphs"]) for r in runs] == [(1, False), (2, True)]
    assert [f["id"] for f in runs[0]["findings"]] == ["cuda_graphs_off"]
    assert out["settings"]["version"] == "0.24.0"  # top level: the last run
    # the statistics segment starting at line 2 belongs to the second run, not the first
    assert [(g["first_line"], g["settings"]["version"]) for g in out["summary"]["segments"]] == [(2, "0.24.0")]
