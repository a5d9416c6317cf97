"""Phi-4-mini-flash (phi4flash) and Jet-Nemotron (jet_nemotron) of decodescope/arch/hybrids2.py,
each from a real config.json. transformers 5.24 has neither class (both run remote code), so each
count is derived by hand from vLLM's phi4flash.py / SGLang's jet_nemotron.py and the remote code.

Phi-4-mini-flash-reasoning (h 2560, 32 layers, 40 heads of 64, 20 KV heads, intermediate 10240,
  mb_per_layer 2, sliding_window 512, Mamba d_state 16 / d_conv 4 / expand 2 (inner 5120), dt rank
  ceil(2560 / 16) = 160, vocab 200064, tied). Layers: even i < 18 Mamba (0..16: 9), odd i < 16
  sliding attention (8), 17 full attention, even i >= 18 gated memory units (7), odd i >= 19
  cross-attention (7). Every layer: two LayerNorms with biases 4 x 2560 = 10,240 and an MLP
  fc1 2 x 10240 x 2560 + fc2 2560 x 10240 = 78,643,200.
  Mamba: in_proj 2 x 5120 x 2560 = 26,214,400; conv1d 5120 x 4 + bias 5120 = 25,600; x_proj
  (160 + 2 x 16) x 5120 = 983,040; dt_proj 5120 x 160 + bias 5120 = 824,320; A_log 5120 x 16 =
  81,920; D 5120; out_proj 2560 x 5120 = 13,107,200 -> 41,241,600; layer 119,895,040.
  Attention: Wqkv (2560 + 2 x 1280) x 2560 + bias 5120 = 13,112,320; out_proj 2560^2 + 2560 =
  6,556,160; lambda_q1/k1/q2/k2 4 x 64 = 256; subln 128 -> 19,668,864; layer 98,322,304.
  Cross-attention: Wqkv q only 2560^2 + 2560 = 6,556,160, out_proj 6,556,160, 384 -> 13,112,704;
  layer 91,766,144. GMU: in_proj 5120 x 2560 + out_proj 2560 x 5120 = 26,214,400; layer 104,867,840.
  9 x 119,895,040 + 9 x 98,322,304 + 7 x 91,766,144 + 7 x 104,867,840 = 3,340,393,984; embedding
  200064 x 2560 = 512,163,840; final LayerNorm 5,120 -> 3,852,562,944. The checkpoint's
  model.safetensors.index.json: total_size 7,706,608,640 bytes = 2 B x 3,852,562,944 + 2 B more
  for each of the float32 values, A_log (9 x 81,920) and the lambdas (16 x 256): 741,376 -> exact.
  The card says 3.8B (a truncation: +1.4 %).
  KV per token (bf16): K + V 2 x 20 x 64 x 2 B = 5,120 B in 9 layers (8 within 512 tokens); the
  cross-decoder caches nothing. State per request: 9 Mamba layers x (ssm 5120 x 16 + conv window
  5120 x 3) x 2 B (vLLM keeps both in the model's dtype) = 9 x 194,560 = 1,751,040 B.
Jet-Nemotron-2B (h 1536, 28 layers: 24 jet, 2 attn, 2 swa of 1152; 12 heads of 128, 2 KV heads,
  intermediate 8960, JetBlock 12 heads, head_k 96, expand_v 2.6666666667 -> head_v 256, key 1152,
  value 3072, conv 4, generator 3072 / 8 = 384; vocab 151936, tied). JetBlock: q, k 2 x 1152 x 1536
  = 3,538,944; v, g 2 x 3072 x 1536 = 9,437,184; a, b 2 x 12 x 1536 = 36,864; A_log, dt_bias 24;
  w1 384 x 1536 = 589,824; w2 12288 x 384 + bias 12288 = 4,730,880; o_norm 256; o_proj 1536 x 3072
  = 4,718,592 -> 23,052,568. Attention: q, o 2 x 1536^2 + k, v 2 x 256 x 1536 + biases 1536 + 512
  = 5,507,072. MLP 3 x 1536 x 8960 = 41,287,680; norms 3,072. 24 x 64,343,320 + 4 x 46,797,824
  + embedding 233,373,696 + 1,536 = 1,964,806,208 (the hub's listing: "2B", rounded: -1.8 %).
Jet-Nemotron-4B (h 2048, 36 layers: 26 jet, 3 attn, 7 swa of 2048; 16 heads of 128, 2 KV heads,
  intermediate 11008; JetBlock 16 heads, head_k 128, head_v 256, key 2048, value 4096, generator
  512). JetBlock: q, k, v, g, o 5 x 8,388,608; a, b 65,536; 32; w1 1,048,576; w2 8,388,608 +
  16,384; o_norm 256 -> 43,073,824. Attention 2 x 2048^2 + 2 x 256 x 2048 + 2,560 = 9,439,744.
  MLP 3 x 2048 x 11008 = 67,633,152; norms 4,096. 26 x 110,711,072 + 10 x 77,076,992 + embedding
  311,164,928 + 2,048 = 3,960,424,768 (the card: 4B, -0.99 %).
  KV per token: 2 x 2 x 128 x 2 B = 1,024 B a layer (swa within the window). State per request
  (SGLang's Mamba2-shaped pool, n_groups = heads): ssm heads x head_v x head_k fp32 + conv window
  (value + 2 x key) x 3 bf16: 2B 12 x 256 x 96 x 4 + 5376 x 3 x 2 = 1,211,904 B x 24 =
  29,085,696 B; 4B 16 x 256 x 128 x 4 + 8192 x 3 x 2 = 2,146,304 B x 26 = 55,803,904 B."""

from pathlib import Path

import pytest

from decodescope.arch import Attention, StateMixer, load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
PHI = CONFIGS / "microsoft__Phi-4-mini-flash-reasoning.json"
JET2 = CONFIGS / "jet-ai__Jet-Nemotron-2B.json"
JET4 = CONFIGS / "jet-ai__Jet-Nemotron-4B.json"

# fixture -> (hand count above, published count, tolerance against it)
COUNTS = {
    PHI: (3_852_562_944, 3.8e9, 0.015),  # the card's 3.8B truncates 3.85B; the shards' bytes match exactly
    JET2: (1_964_806_208, 2e9, 0.02),  # the hub lists "2B", rounded
    JET4: (3_960_424_768, 4e9, 0.01),
}
# (KV bytes per token of each caching layer, [window or None per caching layer], state bytes per request)
CACHES = {
    PHI: (5120, [512] * 8 + [None], 9 * 194_560),
    JET2: (1024, [None, None, 1152, 1152], 24 * 1_211_904),
    JET4: (1024, [2048] * 7 + [None] * 3, 26 * 2_146_304),
}


def _state_bytes(arch, tp: int = 1) -> float:
    return sum(x.mixer.state_bytes(tp) for x in arch.layers if isinstance(x.mixer, StateMixer))


@pytest.mark.parametrize("path", COUNTS)
def test_counts_match_hand_derivation_and_card(path):
    a = load_arch(str(path))
    total, card, tol = COUNTS[path]
    assert (a.params_total, a.params_active) == (total, total) and a.tie_word_embeddings
    assert abs(total / card - 1) < tol


def test_phi4flash_count_matches_the_checkpoint_bytes():
    # bf16 shards, A_log (9 Mamba layers x 5120 x 16) and the lambdas (16 layers x 4 x 64) in float32
    fp32 = 9 * 5120 * 16 + 16 * 4 * 64
    assert 2 * load_arch(str(PHI)).params_total + 2 * fp32 == 7_706_608_640


@pytest.mark.parametrize("path", CACHES)
def test_kv_and_state_per_request(path):
    a = load_arch(str(path))
    per_token, windows, state = CACHES[path]
    caching = [x.mixer for x in a.layers if isinstance(x.mixer, Attention) and not x.mixer.kv_shared]
    assert sorted(m.sliding_window or 1 << 40 for m in caching) == sorted(w or 1 << 40 for w in windows)
    assert {m.kv_bytes_per_token(m.num_key_value_heads, 2) for m in caching} == {per_token}
    assert _state_bytes(a) == state
    for context in (1000, 40000):
        tokens = context + 1  # the token being decoded
        kv = sum(per_token * (min(tokens, w) if w else tokens) for w in windows)
        assert per_request_cache(a, make_deployment(a, "h100-sxm", context=context), a.layers) == (kv, state)


def test_phi4flash_layer_layout():
    """vLLM phi4flash.py: Mamba on even layers; below layer 16 the odd layers attend within 512
    tokens, layer 17 over the whole context; from layer 18 on the Mamba layers turn into gated
    memory units and the attention layers into cross-attention with no k / v of their own."""
    a = load_arch(str(PHI))
    kinds = [x.kind for x in a.layers]
    assert kinds[:18] == ["mamba", "sliding_attention"] * 8 + ["mamba", "attention"]
    assert kinds[18:] == ["gmu", "cross_attention"] * 7
    cross = a.layers[19].mixer
    assert cross.kv_shared and cross.sliding_window is None
    assert [t.name for t in cross.tensors()] == ["input_layernorm", "q_proj", "q_proj.bias", "o_proj", "o_proj.bias"]
    assert sum(t.params for t in a.layers[18].tensors()) == 104_867_840
    assert sum(t.params for t in a.layers[31].tensors()) == 91_766_144 + 2560  # with the final LayerNorm's bias
    # TP 2 halves the KV heads and the Mamba channels
    d = make_deployment(a, "h100-sxm", tp=2, context=1000)
    assert per_request_cache(a, d, a.layers) == ((8 * 512 + 1001) * 2560, 9 * 194_560 / 2)


def test_phi4flash_without_mamba_attends_in_every_layer(config_variant):
    """mb_per_layer 0: no Mamba, no gated memory units; layers 18..31 still read layer 17's cache."""
    a = load_arch(config_variant(PHI, mb_per_layer=0))
    kinds = [x.kind for x in a.layers]
    assert kinds[:16] == ["attention", "sliding_attention"] * 8
    assert kinds[16:18] == ["attention", "attention"] and kinds[18:] == ["cross_attention"] * 14
    assert _state_bytes(a) == 0


@pytest.mark.parametrize("change, match", [
    ({"mb_per_layer": -1}, "mb_per_layer"), ({"mb_per_layer": "2"}, "mb_per_layer"),
    ({"mb_per_layer": 1}, "layer 17 is a Mamba layer"),  # the cross-decoder would have no cache to read
    ({"num_hidden_layers": 30}, "layer 16 is a Mamba layer"),
    ({"num_key_value_heads": 5, "num_attention_heads": 40}, "must be even"),
    ({"num_attention_heads": 30}, "not a multiple"), ({"mamba_dt_rank": 0}, "mamba_dt_rank"),
    ({"sliding_window": None}, "sliding_window"),
])
def test_phi4flash_bad_fields(config_variant, change, match):
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(PHI, **change))


def test_jet_block_tensors():
    a = load_arch(str(JET2))
    jet = a.layers[0].mixer
    assert a.layers[0].kind == "linear_attention" and isinstance(jet, StateMixer)
    assert (jet.key_dim, jet.value_dim, jet.generator_hidden) == (1152, 3072, 384)
    assert sum(t.params for t in jet.tensors()) == 23_052_568 + 1536  # and input_layernorm
    assert [x.kind for x in a.layers[14:22]] == ["attention"] + ["linear_attention"] * 4 + [
        "attention", "sliding_attention", "sliding_attention"]
    assert _state_bytes(a, tp=2) == 24 * 1_211_904 / 2


@pytest.mark.parametrize("jet, match", [
    ({"expand_v": 2.3}, "whole value head"), ({"expand_v": "2"}, "whole value head"),
    ({"conv_size": 0}, "conv_size"), ({"dconv_generator_reduction": 1.5}, "dconv_generator_reduction"),
    ({"num_heads": 0}, "num_heads"),
])
def test_jet_nemotron_bad_block_fields(config_variant, jet, match):
    base = {"conv_size": 4, "dconv_generator_reduction": 8, "expand_v": 2, "head_dim": 128, "num_heads": 16}
    eac = {"jet": {**base, **jet}, "swa": {"window_size": 2048}}
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(JET4, efficient_attention_config=eac))


@pytest.mark.parametrize("change, match", [
    ({"layer_types": ["jet"] * 35 + ["gdn"]}, "layer_types"), ({"layer_types": ["jet"] * 30}, "layer_types"),
    ({"efficient_attention_config": {"swa": {"window_size": 2048}}}, "no jet entry"),
    ({"efficient_attention_config": {"jet": [], "swa": {}}}, "object of objects"),
    ({"efficient_attention_config": {"jet": {}, "swa": {"window_size": 0}}}, "window_size"),
])
def test_jet_nemotron_bad_fields(config_variant, change, match):
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(JET4, **change))
