"""Orion and XVERSE (decodescope/arch/remote_classic2.py), each from a real config.json
(tests/data/configs/SOURCES.md). transformers 5.24 has neither class; each count is derived by hand,
tensor by tensor, as the engines build the model (vLLM's orion.py; vLLM's llama.py for the dense
XverseForCausalLM; SGLang's xverse_moe.py for XVERSE-MoE), then checked against a transformers class
of the same tensors on the meta device (LlamaForCausalLM, Qwen2MoeForCausalLM) plus or minus the
tensors that class adds or lacks.

Orion-14B-Base (h 5120, 40 layers, 40 heads of 128, 40 K/V heads, intermediate 15360, vocab 84608,
  untied): q/k/v/o 4 x 5120^2 = 104,857,600; gate/up/down 3 x 5120 x 15360 = 235,929,600; two
  LayerNorms, weight and bias, 4 x 5120 = 20,480 -> 340,807,680 x 40 = 13,632,307,200; embedding and
  lm_head 2 x 84608 x 5120 = 866,385,920; final LayerNorm 2 x 5120 = 10,240 -> 14,498,703,360 (the
  card: "14B", the Orion-14B paper: 14.5B with its 84,608-token vocabulary; LlamaForCausalLM of these
  shapes on the meta device: 14,498,288,640 + the LayerNorm biases 40 x 2 x 5120 + 5120 = 414,720 ->
  14,498,703,360).
XVERSE-MoE-A4.2B (h 2560, 28 layers, 32 heads of 80, MHA, 64 experts of 1728, top 6, 2 shared,
  vocab 100534, untied): q/k/v/o 4 x 2560^2 = 26,214,400; router 64 x 2560 = 163,840; experts
  64 x 3 x 2560 x 1728 = 849,346,560; shared MLP (1728 x 2 = 3456 wide) 3 x 2560 x 3456 =
  26,542,080; two RMSNorms 5,120 -> 902,272,000 x 28 = 25,263,616,000; embedding and lm_head
  2 x 100534 x 2560 = 514,734,080; final norm 2,560 -> 25,778,352,640 (the card: 25.8B total).
  Active: 26,214,400 + 163,840 + 6 x 13,271,040 + 26,542,080 + 5,120 = 132,551,680 x 28 =
  3,711,447,040 + 514,734,080 + 2,560 = 4,226,183,680 (the card: 4.2B activated).
  Qwen2MoeForCausalLM of these shapes (shared_expert_intermediate_size 3456) on the meta device:
  25,778,639,360, less what Qwen2-MoE adds, q/k/v biases and a shared-expert gate, 28 x 4 x 2560 =
  286,720 -> 25,778,352,640.
XVERSE-13B's shapes (XverseConfig's defaults in the remote configuration_xverse.py: h 5120, 40
  layers, 40 heads, MHA, intermediate 13824, vocab 100278, untied): 4 x 5120^2 + 3 x 5120 x 13824 +
  10,240 = 317,204,480 x 40 = 12,688,179,200 + 2 x 100278 x 5120 = 1,026,846,720 + 5,120 =
  13,715,031,040 (LlamaForCausalLM of these shapes: 13,715,031,040)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
ORION = CONFIGS / "OrionStarAI__Orion-14B-Base.json"
XVERSE_MOE = CONFIGS / "xverse__XVERSE-MoE-A4.2B.json"

# fixture -> (total, active), the hand counts above
COUNTS = {ORION.name: (14_498_703_360, 14_498_703_360), XVERSE_MOE.name: (25_778_352_640, 4_226_183_680)}
# bf16 K + V bytes per token, all layers: layers x 2 x kv_heads x head_dim x 2 bytes
KV_PER_TOKEN = {ORION.name: 40 * 2 * 40 * 128 * 2,  # 819,200
                XVERSE_MOE.name: 28 * 2 * 32 * 80 * 2}  # 286,720
MOE_FIELDS = ("num_experts", "moe_top_k", "num_shared_experts")


@pytest.mark.parametrize("name", COUNTS)
def test_counts_match_hand_derivation(name):
    arch = load_arch(str(CONFIGS / name))
    assert (arch.params_total, arch.params_active) == COUNTS[name]
    assert sum(x.mixer.kv_bytes_per_token(x.mixer.num_key_value_heads, 2) for x in arch.layers) == KV_PER_TOKEN[name]


def test_orion_request_cache_by_hand():
    """Orion-14B at context 1000: a request holds 1001 tokens (the decoded one too) of 40 K/V
    heads x 128 x 2 (K and V) x 2 bytes = 20,480 bytes per layer, 40 layers, on one GPU."""
    a = load_arch(str(ORION))
    assert per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)[0] == 40 * 1001 * 20_480


def test_orion_norms_carry_biases_projections_none():
    """orion.py: nn.LayerNorm for both pre-norms and the final norm (weight + bias); q/k/v/o and
    the MLP without biases; the final norm's bias rides on the last layer."""
    a = load_arch(str(ORION))
    first = sorted(t.name for t in a.layers[0].tensors() if t.name.endswith(".bias"))
    assert first == ["input_layernorm.bias", "post_attention_layernorm.bias"]
    assert "norm.bias" in {t.name for t in a.layers[-1].tensors()}
    assert not a.tie_word_embeddings and a.final_norm_weights


def test_xverse_moe_layout():
    """xverse_moe.py: 64 experts of 1728, 6 a token, a bias-free router, one shared MLP of
    1728 x 2 = 3456 without a gate; MHA with head_dim 2560 / 32 = 80."""
    a = load_arch(str(XVERSE_MOE))
    moe, attn = a.layers[0].mlp, a.layers[0].mixer
    assert (moe.num_experts, moe.num_experts_per_tok, moe.moe_intermediate_size) == (64, 6, 1728)
    assert (moe.shared_expert_intermediate_size, moe.shared_expert_gate, moe.router_bias) == (3456, False, False)
    assert (attn.num_key_value_heads, attn.head_dim, attn.attention_bias) == (32, 80, False)
    assert all(x.mlp == moe for x in a.layers)


def test_xverse_moe_without_shared_experts(write_config):
    """No num_shared_experts: no shared MLP, 28 x 3 x 2560 x 3456 = 743,178,240 fewer parameters,
    as many fewer active."""
    cfg = {k: v for k, v in json.loads(XVERSE_MOE.read_text()).items() if k != "num_shared_experts"}
    a = load_arch(write_config(cfg))
    total, active = COUNTS[XVERSE_MOE.name]
    assert (a.params_total, a.params_active) == (total - 743_178_240, active - 743_178_240)


def test_dense_xverse_is_llama(write_config):
    """Without the expert fields a config is the dense XVERSE: Llama's tensors at XVERSE-13B's
    shapes count 13,715,031,040 (the docstring)."""
    cfg = {k: v for k, v in json.loads(XVERSE_MOE.read_text()).items() if k not in MOE_FIELDS}
    cfg.update(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40, num_attention_heads=40,
               vocab_size=100278)
    a = load_arch(write_config(cfg))
    assert a.params_total == a.params_active == 13_715_031_040
    assert {t.name for t in a.layers[0].tensors()} == {
        "input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj", "post_attention_layernorm",
        "gate_proj", "up_proj", "down_proj"}


@pytest.mark.parametrize("changes, match", [
    ({"moe_top_k": 65}, "experts per token"),
    ({"moe_top_k": "six"}, "moe_top_k"),
    ({"num_shared_experts": -1}, "num_shared_experts"),
    ({"num_experts": 1.5}, "num_experts"),
])
def test_xverse_bad_fields_are_one_clear_error(config_variant, changes, match):
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(XVERSE_MOE, **changes))


@pytest.mark.parametrize("changes, match", [
    ({"hidden_size": 0}, "hidden_size"),
    ({"num_key_value_heads": "forty"}, "num_key_value_heads"),
    ({"intermediate_size": None}, "intermediate_size"),
])
def test_orion_bad_fields_are_one_clear_error(config_variant, changes, match):
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(ORION, **changes))
