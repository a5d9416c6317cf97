"""Model types new in transformers 5.25, on their config classes' defaults (saved in
tests/data/configs; SOURCES.md says how): counts by hand, against transformers' own model
on the meta device (quoted: CI installs whatever transformers is current), and the
hub-style field names their released configs use."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import MoE
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"


def _config(cls: str) -> dict:
    return json.loads((CONFIGS / f"transformers__{cls}-defaults.json").read_text())


def test_minicpm5_moe_by_hand():
    """MiniCPM5MoeConfig: h 2048, 28 layers, 32 heads of 128, 2 KV heads, vocab 130560, untied.
    Attention: q_gate_proj 2048 x 2 x 4096 (query and its sigmoid gate) = 16,777,216, k and v
    2 x 2048 x 256, o 4096 x 2048 -> 26,214,400, + 2 norms 4096. Layer 0 a dense SwiGLU MLP
    3 x 2048 x 8192 = 50,331,648; layers 1-27 160 experts x 3 x 2048 x 512 = 503,316,480, one
    shared expert 3 x 2048 x 512 = 3,145,728, a router 160 x 2048 (its correction bias is a
    buffer). Embedding and head 2 x 130560 x 2048; final norm 2048. = 15,002,552,320, transformers'
    MiniCPM5MoeForCausalLM on the meta device. Active: 16 of 160 experts."""
    path = CONFIGS / "transformers__MiniCPM5MoeConfig-defaults.json"
    a = load_arch(str(path))
    attn = 2048 * 8192 + 2 * 2048 * 256 + 4096 * 2048 + 2 * 2048
    moe = 160 * 3 * 2048 * 512 + 3 * 2048 * 512 + 160 * 2048
    total = 28 * attn + 3 * 2048 * 8192 + 27 * moe + 2 * 130560 * 2048 + 2048
    assert a.params_total == total == 15_002_552_320
    assert a.params_active == total - 27 * (160 - 16) * 3 * 2048 * 512
    assert [isinstance(layer.mlp, MoE) for layer in a.layers[:2]] == [False, True]
    assert a.layers[0].mixer.attn_output_gate and not a.layers[0].mixer.qk_norm
    # KV: 2 heads x 128 x (K + V) x 2 B = 1024 B a token and layer; context 1000 (1001 cached)
    kv, _ = per_request_cache(a, make_deployment(a, "h200", context=1000), a.layers)
    assert kv == 28 * 1001 * 1024


def test_minicpm5_moe_as_its_released_configs_name_the_dense_layers(write_config):
    """The released MiniCPM 5 configs say first_k_dense_replace: 1 where the class writes
    mlp_layer_types (its __post_init__ turns one into the other, 1 when neither is given)."""
    cfg = _config("MiniCPM5MoeConfig")
    del cfg["mlp_layer_types"]
    assert load_arch(write_config(cfg, "m.json")).params_total == 15_002_552_320
    cfg["first_k_dense_replace"] = 3  # two more dense layers, two fewer MoE layers
    dense, moe = 3 * 2048 * 8192, 160 * 3 * 2048 * 512 + 3 * 2048 * 512 + 160 * 2048
    assert load_arch(write_config(cfg, "m3.json")).params_total == 15_002_552_320 + 2 * (dense - moe)


def test_param2moe_by_hand_and_under_its_original_names(write_config):
    """Param2MoeConfig ('Param2-17B-A2.4B'; transformers runs it as GLM-4.5, Glm4MoeForCausalLM):
    h 2048, 21 layers, 32 heads of 64, 8 KV heads, q/k norms, vocab 128000, tied. Attention
    q 2048 x 2048, k and v 2 x 2048 x 512, o 2048 x 2048 = 10,485,760, + q/k norms 2 x 64, + 2
    norms 4096. Layer 0 dense 3 x 2048 x 9216; layers 1-20: 64 experts x 3 x 2048 x 2048 +
    2 shared (one MLP of 4096) 3 x 2048 x 4096 + a router 64 x 2048 and its 64 correction
    biases. Embedding 128000 x 2048 (the head is tied); final norm. = 17,151,125,376;
    transformers counts 1,280 fewer (20 x 64: the correction bias is a buffer there, a
    tensor of the checkpoint here), 17,151,124,096. Its bharatgenai configs name the experts
    num_experts / num_shared_experts and the biases use_qkv_bias (the class's attribute_map)."""
    attn = 2 * 2048 * 2048 + 2 * 2048 * 512 + 2 * 64 + 2 * 2048
    moe = 64 * 3 * 2048 * 2048 + 3 * 2048 * 4096 + 64 * 2048 + 64
    total = 21 * attn + 3 * 2048 * 9216 + 20 * moe + 128000 * 2048 + 2048
    assert total == 17_151_125_376 == 17_151_124_096 + 20 * 64
    cfg = _config("Param2MoeConfig")
    assert load_arch(write_config(cfg, "p.json")).params_total == total
    original = {k: v for k, v in cfg.items() if k not in ("n_routed_experts", "n_shared_experts", "attention_bias")}
    original.update(num_experts=64, num_shared_experts=2, use_qkv_bias=True)
    a = load_arch(write_config(original, "p_orig.json"))
    # q, k and v biases (GLM-4.5's attention_bias: not o_proj): 2048 + 2 x 512 a layer
    assert a.params_total == total + 21 * (2048 + 2 * 512)
    assert a.params_active == total + 21 * (2048 + 2 * 512) - 20 * (64 - 6) * 3 * 2048 * 2048


def test_a_robot_action_policy_is_refused_as_one(write_config):
    """PI05Config (transformers 5.25; PI0Config before): a PaliGemma backbone (vlm_config) and an
    action expert (dit_config) that denoises action chunks over num_inference_steps passes."""
    cfg = {"model_type": "pi05", "num_inference_steps": 10, "chunk_size": 50,
           "vlm_config": {"model_type": "paligemma"}, "dit_config": {"model_type": "gemma"}}
    with pytest.raises(DecodescopeError, match="robot action policy"):
        load_arch(write_config(cfg, "pi05.json"))
