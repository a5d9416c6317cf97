"""Settings read from real start-up excerpts (tests/data/startup/, sources in SOURCES.md).

Every expected value below was read by hand from the excerpt it belongs to; a field not
listed must come out None (the log does not state it: nothing may be invented)."""

from pathlib import Path

import pytest

from decodescope.serverstats.model_args import model_args
from decodescope.serverstats.settings import Settings, read_settings

DATA = Path(__file__).parent.parent / "data" / "startup"

# file -> the fields the excerpt states, read by hand
EXPECTED = {
    "vllm-0.6.6-pp2.log": dict(  # "Initializing an LLM engine (v0.6.6) with config: ..."
        engine="vllm", version="0.6.6", model="/workspace/models/models--Qwen--Qwen2-0.5B", tp=1, pp=2,
        dtype="bf16", spec_method="none", cuda_graphs=True, context=131072),  # enforce_eager=False, max_seq_len
    "vllm-0.6.4-v0-eager.log": dict(
        engine="vllm", version="0.6.4.post2.dev395+g02222a02.d20241217",
        model="/home/cmq/.cache/huggingface/hub/models--facebook--opt-125m/snapshots/"
              "27dcfa74d334bc871f3234de431e71c6eeba5dd6",
        tp=1, pp=1, dtype="fp16", spec_method="none", cuda_graphs=False, context=2048),  # enforce_eager=True
    "vllm-0.8.3-v1-eager-dp.log": dict(
        engine="vllm", version="0.8.3", model="/mnt/tenant-home_speed/Model/Qwen/Qwen2.5-7B-Instruct", tp=1, pp=1,
        dtype="bf16", spec_method="none", cuda_graphs=False, context=102400),
    "vllm-0.6.5-draft-gptq.log": dict(  # SpeculativeConfig(draft_model='Qwen/...-GPTQ-Int4', num_spec_tokens=5)
        engine="vllm", version="0.6.5", model="jakiAJK/DeepSeek-R1-Distill-Qwen-7B_GPTQ-int4", tp=1, pp=1,
        dtype="bf16", quantization="gptq_marlin", spec_method="draft", spec_steps=5, cuda_graphs=True,
        context=1000),
    "vllm-0.7.1-v0-tp2.log": dict(
        engine="vllm", version="0.7.1.dev43+g0405645a",
        model="/media/data1/sparks_openai_api/hf_models/Qwen2.5-VL-7B-Instruct", tp=2, pp=1, dtype="bf16",
        spec_method="none", cuda_graphs=True, context=128000),
    "vllm-0.7.3-ray-eager.log": dict(
        engine="vllm", version="0.7.3.dev242+gba811639", model="Qwen/Qwen2.5-VL-7B-Instruct", tp=1, pp=1,
        dtype="bf16", spec_method="none", cuda_graphs=False, context=40000),
    "vllm-0.7.2-bnb-tp2.log": dict(
        engine="vllm", version="0.7.2", model="Qwen/Qwen2.5-VL-7B-Instruct", tp=2, pp=1, dtype="fp16",
        quantization="bitsandbytes", spec_method="none", cuda_graphs=True, context=32768),
    "vllm-0.9.0-nondefault.log": dict(  # non-default args: {..., 'dtype': 'bfloat16', ...}; no model key
        engine="vllm", version="0.9.0.1", dtype="bf16"),
    "vllm-0.9.2-apiserver-rocm-tp8.log": dict(  # non-default args cut inside compilation_config
        engine="vllm", version="0.9.2rc2.dev1221+ga4eaba3e8", model="Qwen/Qwen3-8B", tp=8, kv_cache_dtype="fp8"),
    "vllm-0.20.2-dflash-tp2.log": dict(  # non-default args, then the V1 engine line (cut after load_format)
        engine="vllm", version="0.20.2rc1.dev9+g01d4d1ad3", model="~/.cache/huggingface/qwen3.6-27b-autoround-int4",
        tp=2, dtype="bf16", quantization="auto_round", spec_method="dflash", spec_steps=5, context=185000),
    "vllm-0.24.0-mtp3-tp4-fp8.log": dict(  # SpeculativeConfig(method='mtp', ..., num_spec_tokens=3)
        engine="vllm", version="0.24.0", model="~/.cache/huggingface/qwen3.6-27b-fp8", tp=4, pp=1, dp=1, dtype="bf16",
        quantization="fp8", kv_cache_dtype="fp8", spec_method="mtp", spec_steps=3, cuda_graphs=True, context=262144),
    "vllm-0.8.0-attention-fallback-t4.log": dict(attention_backend="XFormers"),  # "Using XFormers backend."
    "vllm-0.4.3-attention-fallback.log": dict(attention_backend="XFormers"),
    "sglang-0.2-gptq-tp2.log": dict(  # dtype='auto' and context_length=None state nothing; cut after tp_size
        engine="sglang", model="qwen/Qwen2-57B-A14B-Instruct-GPTQ-Int4", quantization="gptq", tp=2),
    "sglang-0.5.4-ngram-cut.log": dict(  # cut before tp_size and speculative_algorithm: neither is known
        engine="sglang", model="/shared/public/elr-models/Qwen/Qwen3-4B/1cfa9a7208912126459214e8b04321603b3df60c/"),
    "sglang-2026-custom-ar-8gpu.log": dict(),
    "sglang-0.4-tp2-graphs.log": dict(  # "Load weight end. ... dtype=torch.bfloat16", "Capture cuda graph end"
        engine="sglang", dtype="bf16", cuda_graphs=True),
    "sglang-2025-pp4-fp16.log": dict(  # dtype=torch.float16, "Using KV cache dtype: torch.float16"
        engine="sglang", dtype="fp16", kv_cache_dtype="fp16"),  # warnings only
    "reference-sglang-qwen3.6-27b.log": dict(),  # a warning and decode statistics only
    "llamacpp-b5000-cpu-only.log": dict(  # offloaded 0/29, n_ctx = 4096, flash_attn = 0, type_k = 'f16'
        engine="llamacpp", offloaded_layers=0, total_layers=29, context=4096, attention_backend="flash_attn=0",
        kv_cache_dtype="fp16"),
    "llamacpp-2023-llava-2x3090.log": dict(
        engine="llamacpp", gpus=["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"], gpu_count=2,
        offloaded_layers=0, total_layers=35, context=2048),
    "llamacpp-b1953-wasmedge-2gpu.log": dict(  # "Plugin version: b1953", K (f16) / V (f16)
        engine="llamacpp", version="b1953", offloaded_layers=41, total_layers=41, context=512, kv_cache_dtype="fp16"),
    "llamacpp-b3917-rtx4070.log": dict(
        engine="llamacpp", version="b3917", gpus=["NVIDIA GeForce RTX 4070"], gpu_count=1,
        model="models/Meta-Llama-3-8B.Q4_0.gguf"),
    "ik-llamacpp-a6000-full-offload.log": dict(
        engine="llamacpp", gpus=["NVIDIA RTX A6000"], gpu_count=1, offloaded_layers=62, total_layers=62,
        context=8192, attention_backend="flash_attn=0", kv_cache_dtype="fp16"),
    "llamafile-rtx4080.log": dict(
        engine="llamacpp", gpus=["NVIDIA GeForce RTX 4080"], gpu_count=1, offloaded_layers=31, total_layers=31,
        context=512, attention_backend="flash_attn=0", kv_cache_dtype="fp16"),
    "llm-llama-cpp-2023-1of35.log": dict(engine="llamacpp", offloaded_layers=1, total_layers=35),
    "llamacpp-b1971-iq2-cpu.log": dict(  # "main: build = 1971", "model ftype = IQ2_XSS - 2.0625 bpw"
        engine="llamacpp", version="b1971", quantization="IQ2_XSS - 2.0625 bpw", offloaded_layers=0, total_layers=33,
        context=512, kv_cache_dtype="fp16"),
    "ik-llamacpp-7-mixed-gpus.log": dict(
        engine="llamacpp", gpu_count=7,
        gpus=["NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090",
              "NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"]),
    "ollama-llamacpp-q4km.log": dict(engine="llamacpp", quantization="Q4_K - Medium"),
    "llamacpp-server-2025-devstral.log": dict(  # "build: 0 (unknown)" states no build number
        engine="llamacpp", model="mistralai_Devstral-Small-2507-Q2_K_L.gguf", gpus=["NVIDIA GeForce RTX 4070 SUPER"],
        gpu_count=1),
    "llama-cpp-python-4070super.log": dict(
        engine="llamacpp", gpus=["NVIDIA GeForce RTX 4070 SUPER"], gpu_count=1,
        model="E:\\.lmstudio\\models\\Qwen\\Qwen2.5-Coder-7B-Instruct-GGUF\\qwen2.5-coder-7b-instruct-q4_k_m.gguf"),
}


def _read(name: str):
    with open(DATA / name, encoding="utf-8") as f:
        return read_settings(f)


def test_every_excerpt_has_a_source_and_an_expectation():
    files = {p.name for p in DATA.glob("*.log")}
    sources = (DATA / "SOURCES.md").read_text()
    assert files == set(EXPECTED)
    assert all(name in sources for name in files)
    assert len(files) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_settings_read_by_hand(name):
    segs = _read(name)
    assert len(segs) == 1
    blank = Settings().to_json()
    assert segs[0].settings.to_json() == blank | EXPECTED[name]


def test_settings_accuracy_over_all_excerpts():
    """Fields stated / read right / invented, summed over the excerpts (the figure reported)."""
    stated = right = invented = 0
    for name, want in EXPECTED.items():
        got = _read(name)[0].settings.to_json()
        stated += len(want)
        right += sum(got[k] == v for k, v in want.items())
        invented += sum(v is not None and k not in want for k, v in got.items())
    assert (stated, right, invented) == (stated, stated, 0)
    assert stated == 172  # the sum of the field counts above


def test_a_restart_with_other_settings_opens_a_segment():
    # two real engine lines of two different runs, one after the other, then the first repeated
    a = (DATA / "vllm-0.6.6-pp2.log").read_text().splitlines()
    b = (DATA / "vllm-0.7.1-v0-tp2.log").read_text().splitlines()
    segs = read_settings(a + b + a)
    assert [s.settings.tp for s in segs] == [1, 2, 1]
    assert [(s.first_line, s.last_line) for s in segs] == [(1, 1), (2, 2), (3, 3)]


def test_the_same_line_per_rank_stays_one_segment():
    a = (DATA / "vllm-0.8.3-v1-eager-dp.log").read_text().splitlines()
    segs = read_settings(a * 8)  # one engine core per data-parallel rank prints the same config
    assert len(segs) == 1 and segs[0].settings.pp == 1


def test_model_args_from_a_log():
    # by hand: the excerpts state TP, PP, dtype/quant and speculation; group sizes unknown stay out
    assert model_args(_read("vllm-0.6.5-draft-gptq.log")[0].settings) == {
        "model": "jakiAJK/DeepSeek-R1-Distill-Qwen-7B_GPTQ-int4", "tp": 1, "pp": 1, "spec": "draft:5",
        "engine": "vllm"}
    assert model_args(_read("vllm-0.7.1-v0-tp2.log")[0].settings) == {
        "model": "/media/data1/sparks_openai_api/hf_models/Qwen2.5-VL-7B-Instruct", "tp": 2, "pp": 1,
        "weights": "bf16", "spec": "none", "engine": "vllm"}
    assert model_args(_read("vllm-0.24.0-mtp3-tp4-fp8.log")[0].settings) == {
        "model": "~/.cache/huggingface/qwen3.6-27b-fp8", "tp": 4, "pp": 1, "weights": "fp8", "kv": "fp8",
        "spec": "mtp:3", "engine": "vllm"}
    # DFlash has no `model --spec` form: left out, the rest stays
    assert "spec" not in model_args(_read("vllm-0.20.2-dflash-tp2.log")[0].settings)
    assert model_args(_read("ollama-llamacpp-q4km.log")[0].settings) == {"weights": "q4_k_m", "engine": "llamacpp"}
    # Device 0: NVIDIA GeForce RTX 4080, one card the GPU database knows
    assert model_args(_read("llamafile-rtx4080.log")[0].settings) == {"kv": "fp16", "engine": "llamacpp",
                                                                       "gpu": "rtx-4080"}
