"""Llama 3.2 Vision (mllama), ERNIE-4.5-VL (ernie4_5_vl_moe) and Meta Muse Glimmer / Spark: counts
against transformers 5.24's language model on the meta device (model.language_model + lm_head),
layouts, cache bytes and bytes read worked out by hand from their modeling_*.py.

Mllama (MllamaTextModel; 11B text config = MllamaTextConfig defaults): hidden 4096, 40 layers,
32 heads / 8 KV heads of 128 (hidden / heads), MLP 14336, vocab 128256, untied head.
  self layer: q, o [4096, 4096] = 2 x 16,777,216; k, v [1024, 4096] = 2 x 4,194,304; MLP
    3 x 14336 x 4096 = 176,160,768; 2 norms 8,192                      -> 218,112,000
  cross layer (at 3, 8, ..., 38): the same + q_norm, k_norm [128] + two scalar tanh gates
                                                                       -> 218,112,258
  embed_tokens [128256 + 8, 4096] = 525,369,344; lm_head [128256, 4096] = 525,336,576; norm 4096
  total 32 x 218,112,000 + 8 x 218,112,258 + the three = 9,775,192,080.
  Published (Meta's model card): 10.6B (11B) and 88.6B (90B) with the vision tower; transformers
  counts the 11B with vision_config.image_size 560 at 10,670,220,835, of which 895,028,755 is
  the vision model and projector.
  Image tokens per request: one image, max_num_tiles 4 tiles of (560 / 14)^2 + 1 = 1601 patches
  = 6404 (modeling_mllama.py _prepare_static_cache: cross_attention_cache_len).
  Cross K/V per request: 8 layers x 6404 tokens x 8 heads x (128 + 128) x 2 B = 209,846,272 B.
  Self KV per token: 32 layers x 8 x 256 x 2 B = 131,072 B.

ERNIE-4.5-VL (Ernie4_5_VLMoeConfig defaults = ERNIE-4.5-VL-28B-A3B): hidden 2560, 28 layers, 20
heads / 4 KV of 128, dense MLP 12288 in layer 0, then 27 sparse layers; 64 text experts of 1536,
64 vision experts of 512, top-6, 2 shared (3072), tied head, vocab 103424.
  attention 15,728,640 + 2 norms 5,120; layer 0 MLP 94,371,840          -> 110,105,600
  sparse MLP: text router 163,840 + bias 64, text experts 64 x 3 x 1536 x 2560 = 754,974,720;
    vision router + bias 163,904, vision experts 64 x 3 x 512 x 2560 = 251,658,240; shared
    3 x 3072 x 2560 = 23,592,960                                      -> layer 1,046,287,488
  total 110,105,600 + 27 x 1,046,287,488 + embed 264,765,440 + norm 2,560 = 28,624,635,776.
  Active (a text token): 27 x (15,733,760 + 163,904 + 6/64 x 754,974,720 + 23,592,960)
    + 110,105,600 + 264,765,440 + 2,560 = 3,352,150,208 ("A3B"); read per token the same
    (the tied head is the embedding's size), vision experts never.

Muse Glimmer (MuseGlimmerConfig defaults): hidden 6656, 52 layers, 32 heads / 2 KV of 128, MLP
19968, vocab 202048, untied; layer: q, gate_proj, o 3 x 27,262,976, k, v 2 x 1,703,936, MLP
398,721,024, 4 norms 26,624 -> 483,944,448; total 52 x that + 2 x 1,344,831,488 + 6,656
= 27,854,780,928. Full attention where (51 - i) % 4 == 0: 13 layers, 39 sliding (window 2048).
KV at context 32768 (the cache holds the context and the token being decoded, 32769 tokens):
  2 KV heads x 256 x 2 B = 1,024 B a token a layer: 13 x 32769 x 1024 + 39 x 2048 x 1024
  = 518,009,856 B.

Muse Spark (MuseSparkConfig defaults): hidden 8192, 62 layers (16 full, 46 sliding), 128 heads /
16 KV of 64, all sparse: 256 experts of 4096 at moe_hidden_size 4096, top-8. transformers counts
819,990,536,192; its router's e_score_correction_bias [256] is a buffer (kept in the checkpoint,
read per token), which decodescope counts: + 62 x 256. Active per layer: attention 218,103,808,
5 hidden-wide vectors 40,960, router + bias 2,097,408, pre/post_expert_proj 67,108,864, expert
norms 8,192, 8 of 256 experts 402,653,184 -> 690,012,416; x 62 + embed + head 2 x 1,655,177,216
+ norm 8,192 = 46,091,132,416.
"""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.config import RawConfig
from decodescope.arch.cross_vl import build_mllama
from decodescope.arch.fields import Fields
from decodescope.arch.registry import build_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache, weights_held_per_stage

CONFIGS = Path(__file__).parent / "data" / "configs"
MLLAMA_11B = CONFIGS / "meta-llama__Llama-3.2-11B-Vision-Instruct.json"


def _arch(name):
    return load_arch(str(CONFIGS / name))


@pytest.mark.parametrize("name, transformers_count", [
    # transformers 5.24 on the meta device: model.language_model + lm_head (tied: counted once)
    ("meta-llama__Llama-3.2-11B-Vision-Instruct.json", 9_775_192_080),
    ("transformers__MllamaConfig-defaults.json", 9_775_192_080),
    ("transformers__Ernie4_5_VLMoeConfig-defaults.json", 28_624_635_776),
    ("transformers__MuseGlimmerConfig-defaults.json", 27_854_780_928),
    ("transformers__MuseSparkConfig-defaults.json", 819_990_536_192 + 62 * 256),
])
def test_count_matches_transformers(name, transformers_count):
    assert _arch(name).params_total == pytest.approx(transformers_count, rel=1e-5)
    assert _arch(name).params_total == transformers_count


def test_mllama_layout_and_published_count():
    a = load_arch(str(MLLAMA_11B))
    cross = [i for i, layer in enumerate(a.layers) if layer.kind == "cross_attention"]
    assert cross == [3, 8, 13, 18, 23, 28, 33, 38]
    # with the vision tower and projector (895,028,755 in transformers): Meta's 10.6B
    assert (a.params_total + 895_028_755) / 1e9 == pytest.approx(10.6, abs=0.1)
    names = {t.name for t in a.layers[3].tensors()}
    assert {"cross_attn_attn_gate", "cross_attn_mlp_gate", "q_norm"} <= names
    # k_proj, v_proj and k_norm made the request's cross K/V once: held and counted, not read in
    # decode: 8 cross layers x (2 x 1024 x 4096 + 128) = 67,109,888 parameters not active, besides
    # the embedding's 8 extra rows (an input table, 8 x 4096)
    assert {t.name for t in a.layers[3].idle} == {"k_proj", "v_proj", "k_norm"}
    assert a.params_total - a.params_active == 8 * (2 * 1024 * 4096 + 128) + 8 * 4096


def test_mllama_cross_kv_held_per_request_and_read_per_pass():
    a = load_arch(str(MLLAMA_11B))
    d = make_deployment(a, "h100-sxm", context=1024)
    kv = per_request_cache(a, d, a.layers)[0]
    # self KV over the context and the token being decoded (1025 tokens) + the cross K/V
    assert kv == 1025 * 131_072 + 209_846_272
    longer = per_request_cache(a, make_deployment(a, "h100-sxm", context=4096), a.layers)[0]
    assert longer - kv == 3072 * 131_072  # the cross part does not grow with the context
    # at TP 2 each GPU holds 4 of the 8 KV heads of both caches: half of each
    assert per_request_cache(a, make_deployment(a, "h100-sxm", tp=2, context=1024), a.layers)[0] == kv / 2
    cross = a.layers[3].mixer
    # one pass reads every image token's K and V: 6404 x 4 heads (TP 2) x 256 x 2 B
    assert cross.kv_read_bytes(1024, 4, 2) == 6404 * 4 * 256 * 2
    assert cross.attention_flops_per_token(16, 1024) == 4 * 16 * 128 * 6404


def test_mllama_image_tokens_from_a_vision_config():
    # MllamaVisionConfig's class defaults: 448-pixel tiles -> 4 x ((448 / 14)^2 + 1) = 4100 tokens
    data = {"model_type": "mllama_text_model", "num_hidden_layers": 40, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "cross_attention_layers": [3], "vision_config": {"image_size": 448, "patch_size": 14, "max_num_tiles": 4}}
    layers, _, notes, _ = build_mllama(Fields(data, "test"))
    assert layers[3].mixer.image_tokens == 4100
    assert "its vision_config" in notes[0]
    bad = {**data, "vision_config": {"image_size": 448, "patch_size": 896, "max_num_tiles": 4}}
    with pytest.raises(DecodescopeError, match="vision_config"):
        build_mllama(Fields(bad, "test"))


def test_mllama_bad_cross_layers_refused():
    raw = RawConfig({"model_type": "mllama_text_model", "hidden_size": 64, "num_hidden_layers": 4,
                     "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                     "cross_attention_layers": [7]}, "bad.json", "bad")
    with pytest.raises(DecodescopeError, match="cross_attention_layers"):
        build_arch(raw)


def test_ernie_vl_reads_text_experts_only():
    a = _arch("transformers__Ernie4_5_VLMoeConfig-defaults.json")
    assert a.params_active == 3_352_150_208
    assert a.params_read_per_token == 3_352_150_208
    assert sum(t.params for layer in a.layers for t in layer.idle) == 27 * (251_658_240 + 163_904)
    assert a.input_tables == ()
    # held all the same: one bf16 GPU holds 2 B of every parameter (the tied head once)
    assert weights_held_per_stage(a, make_deployment(a, "h200")) == [2 * 28_624_635_776]
    assert not any("vision" in t.name for layer in a.layers for t in layer.tensors())
    assert any("vision experts" in n for n in a.notes)


def test_ernie_vl_bad_expert_widths_refused():
    raw = RawConfig({"model_type": "ernie4_5_vl_moe_text", "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                     "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32}, "bad.json", "bad")
    with pytest.raises(DecodescopeError, match="moe_intermediate_size"):
        build_arch(raw)


def test_muse_layouts_and_kv():
    g = _arch("transformers__MuseGlimmerConfig-defaults.json")
    full = [i for i, layer in enumerate(g.layers) if layer.kind == "attention"]
    assert full == list(range(3, 52, 4))
    d = make_deployment(g, "h100-sxm", context=32768)
    assert per_request_cache(g, d, g.layers)[0] == 518_009_856
    s = _arch("transformers__MuseSparkConfig-defaults.json")
    assert s.layer_counts() == {"sliding_attention": 46, "attention": 16}
    assert s.params_active == 46_091_132_416
