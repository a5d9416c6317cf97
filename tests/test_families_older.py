"""GPT-Neo, Persimmon, JetMoE, DiffLlama and Doge (decodescope/arch/older.py): each class's defaults and variants
against transformers 5.24's own model (AutoModelForCausalLM.from_config on the meta device, the
sum of every parameter's numel), and their layouts and KV caches by hand from transformers'
modeling code (models/<type>/modeling_<type>.py)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.arch import active_params
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"

# transformers 5.24 on the meta device, each class's defaults
DEFAULTS = {"GPTNeoConfig": 1_315_575_808, "PersimmonConfig": 9_397_175_296, "DiffLlamaConfig": 1_204_885_504,
            "JetMoeConfig": 4_293_888_000, "DogeConfig": 403_055_872}
# transformers 5.24 on the meta device, the class built with these keyword arguments over its defaults
VARIANTS = [
    # EleutherAI/gpt-neo-125M's and gpt-neo-2.7B's shapes (their cards: "125M", "2.7B")
    ("GPTNeoConfig", {"hidden_size": 768, "num_layers": 12, "num_heads": 12,
                      "attention_types": [[["global", "local"], 6]]}, 125_198_592),
    ("GPTNeoConfig", {"hidden_size": 2560, "num_layers": 32, "num_heads": 20,
                      "attention_types": [[["global", "local"], 16]]}, 2_651_307_520),
    ("GPTNeoConfig", {"intermediate_size": 4096, "tie_word_embeddings": False}, 1_015_750_656),
    ("PersimmonConfig", {"qk_layernorm": False}, 9_397_166_080),
    ("DiffLlamaConfig", {"num_key_value_heads": 8}, 1_104_222_208),
    # 24 layers: jetmoe/jetmoe-8b's depth (its card: "8B" parameters)
    ("JetMoeConfig", {"num_hidden_layers": 24}, 8_522_237_952),
    ("JetMoeConfig", {"num_local_experts": 16, "num_experts_per_tok": 4, "num_key_value_heads": 8, "kv_channels": 64,
                      "tie_word_embeddings": False}, 7_203_555_328),
    ("DogeConfig", {"num_key_value_heads": 2, "attention_bias": True, "tie_word_embeddings": True}, 319_005_824),
]


def _defaults(cls: str) -> dict:
    return json.loads((CONFIGS / f"transformers__{cls}-defaults.json").read_text())


@pytest.mark.parametrize("cls", DEFAULTS)
def test_class_defaults_count_as_transformers_does(cls):
    a = load_arch(str(CONFIGS / f"transformers__{cls}-defaults.json"))
    assert a.params_total == pytest.approx(DEFAULTS[cls], rel=1e-5)


@pytest.mark.parametrize("cls, kw, count", VARIANTS)
def test_variants_count_as_transformers_does(cls, kw, count, write_config):
    cfg = _defaults(cls)
    cfg.update(kw)
    if "attention_types" in kw:  # to_dict wrote attention_layers, the expansion of the default types
        del cfg["attention_layers"]
    assert load_arch(write_config(cfg)).params_total == pytest.approx(count, rel=1e-5)


def test_gpt_neo_alternates_global_and_local_layers():
    """GPTNeoConfig(): attention_types [[["global", "local"], 12]], 24 layers, window_size 256.
    GPTNeoSelfAttention masks all but the last window_size keys in a local layer, so its cache
    stops at 256 tokens. 16 heads of 2048 / 16 = 128, MHA: K + V = 2 x 16 x 128 x 2 bytes (bf16)
    = 8192 bytes per token per layer. At context 1000 a request holds 1001 tokens (the one being
    decoded too) in the 12 global layers and 256 in the 12 local ones."""
    a = load_arch(str(CONFIGS / "transformers__GPTNeoConfig-defaults.json"))
    assert [layer.kind for layer in a.layers] == ["attention", "sliding_attention"] * 12
    assert a.tie_word_embeddings
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 12 * 1001 * 8192 + 12 * 256 * 8192
    # the learned position table: max_position_embeddings 2048 rows of 2048
    assert sum(t.params for t in a.input_tables) == 2048 * 2048


def test_gpt_neo_hub_config_without_tie_field_is_tied(write_config):
    """GPTNeoConfig ties the head by default: a config that leaves tie_word_embeddings out (as
    the hub's GPT-Neo files do) counts one 50257 x 2048 table, not two."""
    cfg = {k: v for k, v in _defaults("GPTNeoConfig").items() if k != "tie_word_embeddings"}
    assert load_arch(write_config(cfg)).params_total == DEFAULTS["GPTNeoConfig"]


def test_gpt_neo_bad_attention_types_is_one_clear_error(write_config):
    cfg = {k: v for k, v in _defaults("GPTNeoConfig").items() if k != "attention_layers"}
    cfg["attention_types"] = [[["global", "local"], 11]]  # 22 layers' worth for 24
    with pytest.raises(DecodescopeError, match="attention_layers"):
        load_arch(write_config(cfg))
    cfg["attention_types"] = "global"
    with pytest.raises(DecodescopeError, match="attention_layers"):
        load_arch(write_config(cfg))


def test_persimmon_layer_by_hand():
    """PersimmonConfig(): hidden 4096, 64 heads of 64, MHA, intermediate 16384. Per layer, from
    modeling_persimmon.py: query_key_value 3 x 4096 x 4096 + 3 x 4096 bias, dense 4096 x 4096 + 4096,
    q/k LayerNorms 4 x 64, dense_h_to_4h 16384 x 4096 + 16384, dense_4h_to_h 4096 x 16384 + 4096,
    two LayerNorms 4 x 4096. KV: 2 x 64 x 64 x 2 bytes = 16384 bytes per token per layer, 36 layers."""
    a = load_arch(str(CONFIGS / "transformers__PersimmonConfig-defaults.json"))
    h, i = 4096, 16384
    per_layer = 4 * h * h + 4 * h + 4 * 64 + 2 * h * i + i + h + 4 * h
    assert sum(t.params for t in a.layers[0].tensors()) == per_layer
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 36 * 1001 * 16384


def test_diffllama_adds_four_lambda_vectors_per_layer():
    """DiffLlamaConfig(): Llama's layers plus lambda_q1 / k1 / q2 / k2 of head_dim 64 each; the
    groupnorm is an RMSNorm without weights. K and V cached as Llama's: 2 x 32 x 64 x 2 bytes =
    8192 bytes per token per layer, 16 layers."""
    a = load_arch(str(CONFIGS / "transformers__DiffLlamaConfig-defaults.json"))
    lambdas = [t for t in a.layers[0].tensors() if t.name.startswith("lambda_")]
    assert [t.shape for t in lambdas] == [(64,)] * 4
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 16 * 1001 * 8192


def test_jetmoe_routes_attention_and_mlp_experts():
    """JetMoeConfig(): 12 layers, hidden 2048, top 2 of 8 experts in attention and MLP, 16 K/V heads
    of kv_channels 128, 2 x 16 = 32 query heads. Per token and layer (modeling_jetmoe.py), routed:
    2 of 8 attention experts, each q 2048 x 2048 and o 2048 x 2048; 2 of 8 MLP experts, each
    input_linear 11264 x 2048 (gate and up) and output_linear 2048 x 5632; always read: kv_proj
    4096 x 2048, two routers 8 x 2048, two output biases and two RMSNorms of 2048. KV cache:
    2 x 16 x 128 x 2 bytes = 8192 bytes per token per layer."""
    a = load_arch(str(CONFIGS / "transformers__JetMoeConfig-defaults.json"))
    h = 2048
    attn = 2 * 2 * h * h + 2 * h * h + 8 * h + 2 * h
    mlp = 2 * (11264 * h + h * 5632) + 8 * h + 2 * h
    assert active_params(a.layers[0]) == attn + mlp
    assert a.layers[0].mixer.num_attention_heads == 32 and a.tie_word_embeddings
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 12 * 1001 * 8192


def test_doge_layer_by_hand():
    """DogeConfig(): hidden 1024, 8 heads of 128, 8 K/V heads, intermediate 2048, 32 layers, is_moe
    false (num_experts 16384 stays in the config, unused). Per layer (modeling_doge.py): q, k, v, o
    4 x 1024 x 1024, q_norm / k_norm 2 x 128, A 8, dt_proj 8 x 1024, gate / up / down 3 x 2048 x 1024,
    two RMSNorms and two residual scales 4 x 1024. KV: 2 x 8 x 128 x 2 bytes = 4096 bytes per token
    per layer."""
    a = load_arch(str(CONFIGS / "transformers__DogeConfig-defaults.json"))
    h = 1024
    assert sum(t.params for t in a.layers[0].tensors()) == 4 * h * h + 2 * 128 + 8 + 8 * h + 3 * 2048 * h + 4 * h
    assert not a.is_moe
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 32 * 1001 * 4096


def test_doge_moe_is_one_clear_error(write_config):
    cfg = _defaults("DogeConfig")
    cfg["is_moe"] = True
    with pytest.raises(DecodescopeError, match="is_moe"):
        load_arch(write_config(cfg))
