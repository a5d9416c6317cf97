"""Real quantized checkpoints' config.json (tests/data/configs, sources in SOURCES.md): the
weight bytes `decodescope model` holds match the bytes derived by hand from the config."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.model.formats import config_format

CONFIGS = Path(__file__).parent / "data" / "configs"


def weights_bytes(name: str) -> float:
    """memory.weights_bytes of `decodescope model CONFIG --gpu b200 --json` (TP 1: every weight)."""
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / name), "--gpu", "b200", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memory"]["weights_bytes"]


def test_minimax_m3_nvfp4_mxfp8_attention_and_nvfp4_experts():
    # nvidia/MiniMax-M3-NVFP4, modelopt MIXED_PRECISION: quantized_layers names every routed expert
    # (block_sparse_moe.experts.N.w1/w2/w3) NVFP4 and attention, the indexer, the shared experts and
    # the 3 dense MLPs MXFP8; exclude_modules keeps lm_head, embeddings and routers in bf16.
    # MXFP8 = e4m3 + one e8m0 scale per 32 (OCP MX spec v1.0): 8 + 8/32 = 8.25 bits = 1.03125 bytes;
    # NVFP4 = e2m1 + one e4m3 scale per 16: 4 + 8/16 = 4.5 bits = 0.5625 bytes.
    attn = 60 * (8192 * 6144 + 512 * 6144 * 2 + 6144 * 8192)  # q, k, v, o: 6,417,285,120
    indexer = 57 * (512 + 128) * 6144  # index_q_proj, index_k_proj in the 57 MoE layers: 224,133,120
    dense = 3 * 3 * 12288 * 6144  # gate, up, down of layers 0-2: 679,477,248
    shared = 57 * 3 * 3072 * 6144  # one shared expert per MoE layer: 3,227,516,928
    experts = 57 * 128 * 3 * 3072 * 6144  # 413,122,166,784
    bf16 = 57 * 128 * 6144 + 2 * 200064 * 6144  # routers, embedding, lm_head: 2,503,213,056
    norms = 60 * (2 * 6144 + 128 + 128) + 57 * (128 + 128 + 128) + 6144  # 780,672 (q/k/index norms, router bias)
    expected = (attn + indexer + dense + shared) * 1.03125 + experts * 0.5625 + (bf16 + norms) * 2
    assert expected == 248_267_256_576
    assert weights_bytes("nvidia__MiniMax-M3-NVFP4.json") == expected


def test_minimax_m3_nvfp4_kernel_and_compute_per_tensor():
    a = load_arch(str(CONFIGS / "nvidia__MiniMax-M3-NVFP4.json"))
    f = config_format(a)
    t = {x.name: x for x in a.layers[5].tensors()}
    assert f.tensor_format(t["q_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["index_k_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["shared_expert.gate_up_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["experts.down_proj"]) == (4.5, "nvfp4", "fp4")  # NVFP4 = W4A4
    assert f.tensor_format(a.lm_head).bits == 16
    assert len(f.per_tensor) == 15  # one pattern per module, not 21,888 (a per-tensor lookup stays cheap)


@pytest.mark.parametrize("spec, bits", [("mxfp8", 8.25)])
def test_mxfp8_flag(spec, bits):
    from decodescope.model.formats import parse_format
    f = parse_format(spec)
    assert f.bits == bits and f.compute == "fp8"
