"""Quantization configs whose KV scheme or ModelOpt algorithm decodescope reads beside the weights:
a "static" kv_cache_scheme (scales carried, cache in the model dtype) and ModelOpt's INT4 AWQ,
with bytes derived by hand."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model.quant_config import config_format

CONFIGS = Path(__file__).parent / "data" / "configs"


def test_a_static_kv_scheme_keeps_the_cache_in_the_model_dtype(config_variant):
    """tencent/Hy3-FP8's quantization_config (https://huggingface.co/tencent/Hy3-FP8/raw/main/config.json,
    as quoted in public tests) and AMD's *-FP8-KV checkpoints write kv_cache_scheme "static": the
    checkpoint carries K/V scales, which vLLM applies only with --kv-cache-dtype fp8 (ROCm's vLLM
    guide). It was refused as "not a JSON object"; now the cache stays bf16 unless --kv fp8, with a note."""
    from decodescope.model import make_deployment
    quant = {"activation_scheme": "static", "ignored_layers": ["lm_head", "model.embed_tokens"],
             "quant_method": "fp8", "kv_cache_scheme": "static"}
    path = config_variant(CONFIGS / "tencent__Hy3.trimmed.json", quantization_config=quant)
    arch = load_arch(path)
    assert any('kv_cache_scheme "static"' in n for n in arch.notes)
    assert make_deployment(arch, "h100-sxm").kv_dtype == "bf16"
    assert make_deployment(arch, "h100-sxm", kv="fp8").kv_dtype == "fp8"
    assert config_format(arch) == config_format(load_arch(config_variant(
        CONFIGS / "tencent__Hy3.trimmed.json", quantization_config={**quant, "kv_cache_scheme": None})))


def _weights_bytes(path: str) -> float:
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", path, "--gpu", "b200", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memory"]["weights_bytes"]


PRESETS = Path(__file__).parents[1] / "decodescope" / "arch" / "presets"


@pytest.mark.parametrize("algo, compute", [("W4A16_AWQ", "bf16"), ("W4A8_AWQ", "fp8")])
def test_modelopt_int4_awq(config_variant, algo, compute):
    """ModelOpt's INT4 AWQ (quant_algo W4A16_AWQ, as modelopt 0.45 writes it: group_size 128, no
    zero point, lm_head excluded): 4 bits + one 16-bit scale per 128 = 4.125 bits a weight. On
    Llama-3.1-8B: q, o 2 x 4096^2 + k, v 2 x 1024 x 4096 + gate, up, down 3 x 14336 x 4096 =
    218,103,808 a layer x 32 = 6,979,321,856 x 4.125 / 8 = 3,598,712,832 B; embedding and head
    2 x 128256 x 4096 and the norms 32 x 8192 + 4096 stay bf16: 2,101,878,784 B -> 5,700,591,616 B.
    W4A8_AWQ stores the same and runs its matmuls in FP8 (TensorRT-LLM's QuantAlgo)."""
    quant = {"quant_method": "modelopt", "quant_algo": algo, "group_size": 128, "has_zero_point": False,
             "pre_quant_scale": True, "exclude_modules": ["lm_head"]}
    path = config_variant(PRESETS / "meta-llama__Llama-3.1-8B.json", quantization_config=quant)
    assert _weights_bytes(path) == 5_700_591_616
    f = config_format(load_arch(path))
    assert (f.bits, f.kernel, f.compute) == (4.125, "int4", compute)


def test_modelopt_mixed_precision_reads_each_layers_group_size(config_variant):
    """A MIXED_PRECISION entry {"quant_algo": "W4A16_AWQ", "group_size": 64} (TensorRT-LLM's own
    test of load_modelopt_quant_config) is 4 + 16 / 64 = 4.25 bits; an unknown algo or a
    group_size that is not a count is one clear error."""
    layers = {f"model.layers.{i}.{m}": ({"quant_algo": "FP8"} if m.startswith("self_attn") else
                                         {"quant_algo": "W4A16_AWQ", "group_size": 64})
              for i in range(32) for m in ("self_attn.q_proj", "mlp.up_proj")}
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    f = config_format(load_arch(config_variant(PRESETS / "meta-llama__Llama-3.1-8B.json", quantization_config=quant)))
    per = dict(f.per_tensor)
    assert per["model.layers.0.mlp.up_proj"].bits == 4.25 and per["model.layers.0.self_attn.q_proj"].bits == 8.0
    for bad in ({"quant_algo": "W4A16_AWQ", "group_size": [64]}, {"quant_algo": "INT3_MAGIC"}):
        layers["model.layers.0.mlp.up_proj"] = bad
        with pytest.raises(DecodescopeError, match="quant_algo of model.layers.0.mlp.up_proj"):
            config_format(load_arch(config_variant(PRESETS / "meta-llama__Llama-3.1-8B.json",
                                                   quantization_config=quant)))
