"""Cohere's North / Compass decoder (cohere_compass_text, and the cohere_compass wrapper of
North-Micro-Vision-Instruct) and Aria's language model (aria_text).

Expected counts are transformers 5.24's own models on the meta device (the sum of every
parameter's numel), never decodescope's; the layouts and cache bytes are derived by hand from
transformers' modeling_cohere_compass.py and modeling_aria.py.

CohereCompassDecoderLayer: one weight-only LayerNorm (input_layernorm) feeds attention and the
SwiGLU MLP in parallel (h + attn(n) + mlp(n)); q/k/v/o without biases (attention_bias false), no
q/k norms; layer_types "sliding_attention" layers attend in sliding_window. That is Cohere's
decoder tensor for tensor, so the model_type is a SAME_AS alias of cohere.

AriaTextDecoderLayer: Llama attention and two RMSNorms; its MLP is AriaTextMoELayer: a router
[experts, hidden], routed experts gate_up [experts, hidden, 2 x intermediate_size] and down
[experts, intermediate_size, hidden], and a shared SwiGLU MLP of intermediate_size x
moe_num_shared_experts that every token runs, with no gate of its own."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"


def _defaults(cls: str) -> Path:
    return CONFIGS / f"transformers__{cls}-defaults.json"


def _tensor_names(a) -> set[str]:
    return {t.name for layer in a.layers for t in layer.tensors()}


# ---- Cohere Compass ---------------------------------------------------------------------

def test_compass_text_defaults_count_as_transformers_does():
    """CohereCompassTextConfig() (rope_parameters named per layer type, as the class needs to
    build; layer_types default to all full attention): 40 layers of hidden 8192, 64 heads and as
    many KV heads (num_key_value_heads None), MLP 22528, vocab 256000, tied.
    By hand: q/k/v/o 4 x 8192^2 = 268,435,456; MLP 3 x 8192 x 22528 = 553,648,128; one norm
    8192: 822,091,776 a layer, x 40 = 32,883,671,040; + embedding 256000 x 8192 = 2,097,152,000
    + final norm 8192 = 34,980,831,232, transformers' count."""
    a = load_arch(str(_defaults("CohereCompassTextConfig")))
    assert a.params_total == 34_980_831_232  # transformers 5.24, CohereCompassForCausalLM on the meta device
    assert a.tie_word_embeddings
    assert any(n.startswith("model_type cohere_compass_text: built as cohere") for n in a.notes)
    assert {layer.kind for layer in a.layers} == {"attention"}
    # parallel block: no norm before the MLP, no q/k norms, no biases
    names = _tensor_names(a)
    assert "post_attention_layernorm" not in names
    assert not {n for n in names if n.endswith(("q_norm", "k_norm", ".bias"))}


def test_the_compass_wrapper_counts_its_language_model_with_an_untied_head():
    """CohereCompassConfig(): the same text model under text_config; the wrapper's own
    tie_word_embeddings defaults to false, so CohereCompassForConditionalGeneration keeps an
    lm_head of its own: 34,980,831,232 + 256000 x 8192 = 37,077,983,232 (transformers 5.24 on the
    meta device, its parameters outside model.visual; 37,644,932,336 with the vision tower)."""
    a = load_arch(str(_defaults("CohereCompassConfig")))
    assert a.params_total == 37_077_983_232
    assert not a.tie_word_embeddings
    assert any("vision encoder" in n for n in a.notes)


NORTH_MICRO_TEXT = {
    # North-Micro-Vision-Instruct's language model as lablup/mlxcel's report on its Cohere Compass
    # port (PR #1735) describes the checkpoint: 28 layers, hidden 2048, 16 query / 8 KV heads of
    # 128, SwiGLU 6144, vocab 262144, tied, three sliding layers (window 4096) then one full one
    "model_type": "cohere_compass_text", "vocab_size": 262144, "hidden_size": 2048, "intermediate_size": 6144,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "sliding_window": 4096,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(28)],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50000.0}, "full_attention": None},
    "logit_scale": 0.25, "tie_word_embeddings": True, "layer_norm_eps": 1e-5,
}


def test_north_micro_text_counts_lays_out_and_caches_by_hand(write_config):
    """By hand: q 2048^2 + k, v 2048 x 1024 each + o 2048^2 = 12,582,912; MLP 3 x 2048 x 6144 =
    37,748,736; norm 2048: 50,333,696 a layer, x 28 = 1,409,343,488; + embedding 262144 x 2048 =
    536,870,912 + final norm 2048 = 1,946,216,448 (transformers 5.24's CohereCompassForCausalLM
    of this config on the meta device: the same). The card's 2.5B adds the vision tower.
    Layers 3, 7, ..., 27 (7) attend in full, the other 21 within 4096 tokens. KV per token per
    layer in bf16: K and V, 8 heads x 128 x 2 bytes each = 4,096 bytes; 28 layers: 114,688."""
    a = load_arch(write_config(NORTH_MICRO_TEXT))
    assert a.params_total == 1_946_216_448
    full = [i for i, layer in enumerate(a.layers) if layer.kind == "attention"]
    assert full == [3, 7, 11, 15, 19, 23, 27]
    assert {layer.mixer.sliding_window for layer in a.layers if layer.kind == "sliding_attention"} == {4096}
    assert sum(1 for layer in a.layers if layer.kind == "sliding_attention") == 21
    per_layer = {layer.mixer.kv_bytes_per_token(8, 2) for layer in a.layers}
    assert per_layer == {2 * 8 * 128 * 2}
    assert sum(layer.mixer.kv_bytes_per_token(8, 2) for layer in a.layers) == 114_688


def test_the_wrapper_reads_north_micro_under_text_config(write_config):
    cfg = {"model_type": "cohere_compass", "architectures": ["CohereCompassForConditionalGeneration"],
           "tie_word_embeddings": True, "text_config": NORTH_MICRO_TEXT,
           "vision_config": {"model_type": "cohere_compass_vision", "depth": 27, "hidden_size": 1152}}
    a = load_arch(write_config(cfg))
    assert a.params_total == 1_946_216_448
    assert a.layers[3].kind == "attention" and a.layers[0].kind == "sliding_attention"


# ---- Aria -------------------------------------------------------------------------------

def test_aria_text_defaults_count_as_transformers_does():
    """AriaTextConfig(): 32 layers, hidden 4096, 32 heads (MHA), intermediate 4096, 8 experts,
    top-2, 2 shared, vocab 32000, untied. By hand: attention 4 x 4096^2 = 67,108,864; router
    8 x 4096 = 32,768; experts 8 x (4096 x 8192 + 4096 x 4096) = 402,653,184; shared
    3 x 4096 x 8192 = 100,663,296; two norms 8,192: 570,466,304 a layer, x 32 = 18,254,921,728;
    + embedding and head 2 x 32000 x 4096 = 262,144,000 + final norm 4096 = 18,517,069,824.
    Active: 2 of 8 experts, 301,989,888 fewer a layer: 8,853,393,408."""
    a = load_arch(str(_defaults("AriaTextConfig")))
    assert a.params_total == 18_517_069_824  # transformers 5.24, AriaTextForCausalLM on the meta device
    assert a.params_active == 18_517_069_824 - 32 * 6 * (4096 * 8192 + 4096 * 4096) == 8_853_393_408
    assert not a.tie_word_embeddings
    moe = a.layers[0].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.moe_intermediate_size) == (8, 2, 4096)
    assert moe.shared_expert_intermediate_size == 2 * 4096 and not moe.shared_expert_gate
    # MHA: K and V of 32 heads x 128 x 2 bytes = 16,384 bytes a token a layer
    assert a.layers[0].mixer.kv_bytes_per_token(32, 2) == 16_384


# rhymes-ai/Aria's language model as a public transformers audit of its config.json lists it:
# 28 layers, hidden 2560, 20 heads and 20 KV heads, intermediate_size 1664 (the experts' width),
# 64 experts, top-6, moe_num_shared_experts left out (2), vocab 100352, bf16
ARIA_TEXT = {"model_type": "aria_text", "hidden_size": 2560, "intermediate_size": 1664, "num_hidden_layers": 28,
             "num_attention_heads": 20, "num_key_value_heads": 20, "vocab_size": 100352, "moe_num_experts": 64,
             "moe_topk": 6, "max_position_embeddings": 65536, "torch_dtype": "bfloat16"}


def test_aria_language_model_against_transformers_and_the_card(write_config):
    """transformers 5.24 on the meta device: AriaTextForCausalLM of this config 24,869,091,840;
    AriaForConditionalGeneration with its Idefics3 vision tower (27 layers, 1152 wide, 4304 MLP,
    980 px in patches of 14) and projector 25,307,311,216, the card's 25.3B in all
    (https://huggingface.co/rhymes-ai/Aria). Active by hand: attention 4 x 2560^2 = 26,214,400,
    router 64 x 2560 = 163,840, 6 experts x 3 x 2560 x 1664 = 76,677,120, shared 3 x 2560 x 3328 =
    25,559,040, norms 5,120: 128,619,520 a layer, x 28 = 3,601,346,560; the card's 3.5B per text
    token (3.9B per visual token, which also runs the 0.44B tower) within 3%."""
    cfg = {"model_type": "aria", "architectures": ["AriaForConditionalGeneration"], "tie_word_embeddings": False,
           "text_config": ARIA_TEXT, "vision_config": {"model_type": "idefics3_vision", "num_hidden_layers": 27}}
    a = load_arch(write_config(cfg))
    assert a.params_total == 24_869_091_840
    assert a.params_layers_active == 28 * 128_619_520 == 3_601_346_560
    assert a.params_layers_active == pytest.approx(3.5e9, rel=0.03)
    assert a.params_total + 438_219_376 == pytest.approx(25.3e9, rel=1e-3)
    assert a.layers[0].mixer.kv_bytes_per_token(20, 2) == 2 * 20 * 128 * 2  # 10,240 bytes a token a layer


def test_aria_shared_expert_biases_where_mlp_bias(write_config):
    """mlp_bias gives the shared MLP's three projections biases (the routed experts have none):
    transformers 5.24 counts 119,571,456 for this small config on the meta device. By hand:
    attention 2 x 1024^2 + 2 x 1024 x 256 = 2,621,440; router 16,384; experts 16 x 3 x 1024 x 512
    = 25,165,824; shared 3 x 1024 x 512 + biases 512 + 512 + 1024 = 1,574,912; norms 2,048:
    29,380,608 a layer, x 4 = 117,522,432; + 2 x 1000 x 1024 + 1024 = 119,571,456."""
    cfg = {"model_type": "aria_text", "hidden_size": 1024, "intermediate_size": 512, "num_hidden_layers": 4,
           "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 1000, "moe_num_experts": 16,
           "moe_topk": 4, "moe_num_shared_experts": 1, "mlp_bias": True}
    assert load_arch(write_config(cfg)).params_total == 119_571_456


@pytest.mark.parametrize("bad, word", [({"moe_num_experts": 0}, "moe_num_experts"),
                                       ({"moe_num_shared_experts": -1}, "moe_num_shared_experts"),
                                       ({"moe_topk": 9}, "experts per token"),
                                       ({"moe_num_experts": "64"}, "moe_num_experts")])
def test_bad_aria_moe_fields_are_one_clear_error(write_config, bad, word):
    with pytest.raises(DecodescopeError, match=word):
        load_arch(write_config({**ARIA_TEXT, "moe_num_experts": 8, **bad}))


def test_a_layer_types_list_shorter_than_the_layers_is_one_clear_error(write_config):
    """Cohere's builder indexed layer_types by layer: a short list ended in an IndexError."""
    cfg = json.loads((CONFIGS / "transformers__CohereCompassTextConfig-defaults.json").read_text())
    path = write_config({**cfg, "layer_types": ["full_attention"] * 3})
    with pytest.raises(DecodescopeError, match="layer_types"):
        load_arch(path)
