"""OLMo Hybrid (olmo_hybrid) and LFM3 (lfm3): counts against transformers 5.24's own models on
the meta device, layouts and per-request caches worked out by hand from its
modeling_olmo_hybrid.py and modeling_lfm3.py.

OLMo Hybrid, OlmoHybridConfig() (the class defaults, "similar to allenai/Olmo-Hybrid-7B"): hidden
3840, 32 layers, 30 heads of 128 (MHA), MLP 11008, vocab 100352, untied head. Every 4th layer
(i % 4 == 3) is full attention; the rest are Gated DeltaNet with 30 key and 30 value heads, a key
head of 0.75 x 3840 / 30 = 96 and a value head of 2 x 96 = 192 (its __post_init__), a 4-tap conv.
  linear layer: q_proj, k_proj [2880, 3840], v_proj, g_proj [5760, 3840], a_proj, b_proj
    [30, 3840], o_proj [3840, 5760], conv1d [2880 + 2880 + 5760 = 11520, 4], A_log, dt_bias [30],
    o_norm [192] (one value head), input_layernorm and post_attention_layernorm [3840]
  attention layer: q, k, v, o [3840, 3840], q_norm and k_norm over all heads [3840],
    post_attention_layernorm and post_feedforward_layernorm [3840] (no input norm)
  both: gate_proj, up_proj [11008, 3840], down_proj [3840, 11008]
  per request (GatedDeltaNetDynamicCache-style state, as Qwen3-Next's): recurrent state
    30 x 96 x 192 in fp32 = 2,211,840 B and the conv window 11520 x (4 - 1) in bf16 = 69,120 B
    per linear layer; K and V of 30 heads x 128 x 2 B = 15,360 B per token per attention layer.

LFM3, Lfm3Config() (the class defaults, its docstring's LiquidAI/LFM3-1.7B): hidden 2048, 24
layers, 16 heads / 4 KV heads of 128, MLP 7680 (w1, w3, w2 as given: no LFM2-style 2/3
adjustment), vocab 128000, tied. layer_types default: i % 4 == 2 full attention (2, 6, .., 22),
i % 4 == 0 and i > 0 sliding attention within 256 tokens (4, 8, .., 20), the other 13 conv.
  every layer: operator_norm, ffn_norm, post_operator_norm, post_ffn_norm [2048] (sandwich)
  conv layer: in_proj [6144, 2048], conv [2048, 7] (depthwise), out_proj [2048, 2048]
  attention layer: q [2048, 2048], k, v [512, 2048], o [2048, 2048], q_norm, k_norm [128],
    g_proj [16, 2048] (a sigmoid gate per head)
  per request: the conv keeps L_cache - 1 = 6 inputs of 2048 channels in bf16 = 24,576 B per
    conv layer; K and V of 4 heads x 128 x 2 B = 2048 B per token per attention layer, a sliding
    layer at most 256 tokens of them.
"""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
OLMO = CONFIGS / "transformers__OlmoHybridConfig-defaults.json"
LFM3 = CONFIGS / "transformers__Lfm3Config-defaults.json"


def _olmo_hybrid_params(h, v, inter, layers, k_heads, v_heads, k_dim, v_dim, heads, kv, head_dim, conv=4, bias=False):
    """OLMo Hybrid's parameters, tensor by tensor from modeling_olmo_hybrid.py; `layers`: the
    layer_types list."""
    key, value = k_heads * k_dim, v_heads * v_dim
    gdn = (2 * key * h + 2 * value * h + 2 * v_heads * h + h * value  # q, k; v, g; a, b; o
           + (2 * key + value) * conv + 2 * v_heads + v_dim + 2 * h)  # conv1d, A_log + dt_bias, o_norm, 2 norms
    q, kvo = heads * head_dim, kv * head_dim
    attn = (2 * q * h + 2 * kvo * h + (2 * q + 2 * kvo if bias else 0)  # q, o; k, v; biases
            + q + kvo + 2 * h)  # q_norm, k_norm over all heads; post-attention and post-feedforward norms
    mlp = 3 * inter * h
    return sum(gdn if t == "linear_attention" else attn for t in layers) + len(layers) * mlp + 2 * v * h + h


def test_olmo_hybrid_defaults_count_matches_transformers():
    a = load_arch(str(OLMO))
    types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(32)]
    by_hand = _olmo_hybrid_params(3840, 100352, 11008, types, 30, 30, 96, 192, 30, 30, 128)
    # transformers 5.24 on the meta device: OlmoHybridForCausalLM(OlmoHybridConfig()) holds
    # 7,430,870,688 parameters. Ai2 calls the released model 7B
    # (https://labindex.ai/outputs/ai2/olmo-hybrid: "7B parameters"); no exact figure is published
    assert by_hand == 7_430_870_688
    assert a.params_total == by_hand and not a.tie_word_embeddings


def test_olmo_hybrid_layers_match_transformers_tensor_by_tensor():
    a = load_arch(str(OLMO))
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == list(range(3, 32, 4))
    assert a.layer_counts() == {"linear_attention": 24, "attention": 8}
    gdn = {t.name: t.shape for t in a.layers[0].mixer.tensors()}
    # q + k + v (2880 + 2880 + 5760) through one conv; g_proj is Qwen3-Next's z; a, b one row per value head
    assert gdn["in_proj_qkv"] == (11520, 3840) and gdn["in_proj_z"] == (5760, 3840)
    assert gdn["in_proj_a"] == gdn["in_proj_b"] == (30, 3840) and gdn["conv1d"] == (11520, 4)
    assert gdn["norm"] == (192,) and gdn["out_proj"] == (3840, 5760)  # o_norm over one value head
    attn = {t.name: t.shape for t in a.layers[3].mixer.tensors()}
    assert attn["q_norm"] == attn["k_norm"] == (3840,)  # over all 30 heads at once (OLMo 2/3)
    for layer in (a.layers[0], a.layers[3]):  # two hidden-wide norms in each kind, nothing more
        norms = [t for t in layer.tensors() if t.shape == (3840,) and t.name.endswith("layernorm")]
        assert len(norms) == 2


def test_olmo_hybrid_request_holds_attention_kv_and_deltanet_state():
    a = load_arch(str(OLMO))
    state = 30 * 96 * 192 * 4 + 11520 * 3 * 2  # 2,211,840 + 69,120 B per linear layer
    d = make_deployment(a, "h100-sxm", context=1000)
    kv, st = per_request_cache(a, d, a.layers)
    # 8 attention layers x 1001 tokens (context + the decoded one) x 15,360 B; 24 states
    assert kv == 8 * 1001 * 15_360 and st == 24 * state
    kv2, st2 = per_request_cache(a, make_deployment(a, "h100-sxm", tp=2, context=1000), a.layers)
    assert kv2 == kv / 2 and st2 == st / 2  # 15 KV heads and 15 value heads per GPU


def test_olmo_hybrid_fills_linear_fields_and_layer_types_as_its_config_class(write_config):
    cfg = {"model_type": "olmo_hybrid", "vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 2816,
           "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2, "attention_bias": True}
    a = load_arch(write_config(cfg))
    # no linear_* fields: 8 key / value heads, key head 0.75 x 1024 / 8 = 96, value head 192;
    # layer 3 the only full-attention layer (i % 4 == 3)
    types = ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 2
    assert [x.kind for x in a.layers] == [t.replace("full_", "") for t in types]
    gdn = a.layers[0].mixer
    assert (gdn.linear_key_head_dim, gdn.linear_value_head_dim, gdn.linear_num_value_heads) == (96, 192, 8)
    by_hand = _olmo_hybrid_params(1024, 32000, 2816, types, 8, 8, 96, 192, 8, 2, 128, bias=True)
    # transformers 5.24 on the meta device, the same config: 151,680,784 parameters
    assert by_hand == 151_680_784 and a.params_total == by_hand
    # fewer than 4 layers: the last one is the full-attention layer
    b = load_arch(write_config({**cfg, "num_hidden_layers": 3}))
    assert [x.kind for x in b.layers] == ["linear_attention", "linear_attention", "attention"]


def test_olmo_hybrid_rejects_a_layer_types_list_of_the_wrong_length(write_config):
    cfg = {**json.loads(OLMO.read_text()), "layer_types": ["linear_attention", "full_attention"]}
    with pytest.raises(DecodescopeError, match="layer_types must hold"):
        load_arch(write_config(cfg))


def _lfm3_params(h, v, inter, types, heads, kv, head_dim, conv=7, conv_bias=False, sandwich=True, gate=True, tied=True):
    """LFM3's parameters, tensor by tensor from modeling_lfm3.py."""
    short = 3 * h * h + h * conv + h * h + ((3 * h + h + h) if conv_bias else 0)  # in_proj, conv, out_proj
    attn = 2 * heads * head_dim * h + 2 * kv * head_dim * h + 2 * head_dim + (heads * h if gate else 0)
    per_layer = 3 * inter * h + (4 if sandwich else 2) * h
    mixers = sum(short if t == "conv" else attn for t in types)
    return mixers + len(types) * per_layer + (1 if tied else 2) * v * h + h


def test_lfm3_defaults_count_matches_transformers():
    a = load_arch(str(LFM3))
    types = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
             for i in range(24)]
    by_hand = _lfm3_params(2048, 128000, 7680, types, 16, 4, 128)
    # transformers 5.24 on the meta device: Lfm3ForCausalLM(Lfm3Config()) holds 1,728,801,536
    # parameters (the tied head counted once)
    assert by_hand == 1_728_801_536
    assert a.params_total == by_hand and a.tie_word_embeddings


def test_lfm3_layout_sandwich_norms_and_head_gates():
    a = load_arch(str(LFM3))
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == list(range(2, 24, 4))
    assert [i for i, x in enumerate(a.layers) if x.kind == "sliding_attention"] == list(range(4, 24, 4))
    assert a.layer_counts()["conv"] == 13 and a.layers[4].mixer.sliding_window == 256
    assert a.layers[2].mixer.sliding_window is None
    conv, attn = (dict((t.name, t.shape) for t in a.layers[i].tensors()) for i in (0, 2))
    for names in (conv, attn):  # post_operator_norm and post_ffn_norm after the mixer and the MLP
        assert names["post_operator_norm"] == names["post_ffn_norm"] == (2048,)
    assert attn["g_proj"] == (16, 2048) and "g_proj" not in conv
    assert attn["q_norm"] == attn["k_norm"] == (128,)  # per head, not over all heads
    assert a.layers[0].mlp.intermediate_size == 7680  # intermediate_size itself, no 2/3


def test_lfm3_sliding_layers_hold_only_their_window():
    a = load_arch(str(LFM3))
    d = make_deployment(a, "h100-sxm", context=1000)
    kv, state = per_request_cache(a, d, a.layers)
    # 6 full layers x 1001 tokens x 2048 B, 5 sliding layers x 256 tokens x 2048 B; 13 conv windows
    assert kv == 6 * 1001 * 2048 + 5 * 256 * 2048 and state == 13 * 6 * 2048 * 2


def test_lfm3_without_sandwich_norms_or_gates(write_config):
    types = ["conv", "sliding_attention", "conv", "full_attention", "conv", "sliding_attention"]
    cfg = {"model_type": "lfm3", "vocab_size": 65536, "hidden_size": 1024, "intermediate_size": 4096,
           "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
           "use_sandwich_norm": False, "use_attention_gate": False, "conv_bias": True,
           "tie_word_embeddings": False, "layer_types": types}
    a = load_arch(write_config(cfg))
    by_hand = _lfm3_params(1024, 65536, 4096, types, 8, 2, 64, conv_bias=True, sandwich=False, gate=False, tied=False)
    # transformers 5.24 on the meta device, the same config: 226,280,832 parameters
    assert by_hand == 226_280_832 and a.params_total == by_hand
    names = {t.name for x in a.layers for t in x.tensors()}
    assert not names & {"g_proj", "post_operator_norm", "post_ffn_norm"}


def test_lfm3_ties_its_head_by_default(write_config):
    cfg = json.loads(LFM3.read_text())
    del cfg["tie_word_embeddings"]  # Lfm3Config's default: tied
    assert load_arch(write_config(cfg)).tie_word_embeddings


@pytest.mark.parametrize("change, message", [({"layer_types": ["conv", "mamba"] * 12}, "layer_types must hold"),
                                             ({"sliding_window": None}, "'sliding_window' is missing")])
def test_lfm3_bad_layer_types_or_no_window_for_sliding_layers(write_config, change, message):
    # transformers' sliding-window mask raises without a window, as decodescope does
    cfg = {**json.loads(LFM3.read_text()), **change}
    with pytest.raises(DecodescopeError, match=message):
        load_arch(write_config(cfg))
