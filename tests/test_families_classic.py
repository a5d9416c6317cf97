"""GPT-2, StarCoder (gpt_bigcode), OPT, GPT-NeoX / Pythia, Falcon, Phi-1 / 1.5 / 2, StableLM, OLMo v1, Nemotron-4 / Minitron and
Jais-2 (decodescope/arch/classic.py): each class's defaults and variants against transformers
5.24's own model (AutoModelForCausalLM.from_config on the meta device, the sum of every
parameter's numel), real configs against published counts, and their layouts by hand from
transformers' modeling code (models/<type>/modeling_<type>.py)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, predict
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"

# transformers 5.24 on the meta device, each class's defaults. NemotronConfig() leaves
# num_key_value_heads None, which NemotronAttention cannot divide by; its docstring's default
# (num_attention_heads, MHA) builds, and decodescope reads the None the same way
DEFAULTS = {"Jais2Config": 8_090_401_280, "GPTNeoXConfig": 20_554_567_680, "FalconConfig": 6_921_720_704,
            "PhiConfig": 1_418_270_720, "StableLmConfig": 2_795_443_200, "NemotronConfig": 17_642_041_344,
            "GPT2Config": 124_439_808, "GPTBigCodeConfig": 111_446_784, "OPTConfig": 125_239_296,
            # GPTJConfig() is GPT-J-6B's shape (its card: 6,053,381,344, counted on the original
            # JAX checkpoint; transformers' model of it holds 0.04 % fewer)
            "GPTJConfig": 6_050_882_784, "CodeGenConfig": 6_050_882_784, "BloomConfig": 16_156_544,
            "MptConfig": 1_311_213_568}
# transformers 5.24 on the meta device, the class built with these keyword arguments over its defaults
VARIANTS = [
    ("FalconConfig", {"new_decoder_architecture": True, "num_kv_heads": 8}, 7_052_297_088),
    ("FalconConfig", {"new_decoder_architecture": True, "num_kv_heads": 8, "num_ln_in_parallel_attn": 1},
     7_052_006_272),
    ("FalconConfig", {"parallel_attn": False, "bias": True}, 6_923_033_472),
    ("FalconConfig", {"multi_query": False}, 8_224_576_384),
    ("GPTNeoXConfig", {"use_parallel_residual": False, "attention_bias": False}, 20_553_486_336),
    ("PhiConfig", {"qk_layernorm": True, "num_key_value_heads": 8, "tie_word_embeddings": True}, 1_162_350_592),
    ("StableLmConfig", {"qk_layernorm": True, "use_parallel_residual": True, "use_qkv_bias": True,
                        "num_key_value_heads": 8}, 2_480_931_840),
    ("NemotronConfig", {"attention_bias": True, "mlp_bias": True, "num_key_value_heads": 8, "head_dim": 256},
     18_449_051_648),
    ("GPTBigCodeConfig", {"multi_query": False}, 124_439_808),  # = GPT-2's: the same layers, MHA
    ("GPT2Config", {"n_inner": 2048, "tie_word_embeddings": False}, 144_150_528),
    # bigscience/bloom-560m's shape: its card's 559,214,592; mosaicml/mpt-7b's: its card's "6.7B"
    ("BloomConfig", {"hidden_size": 1024, "n_layer": 24, "n_head": 16}, 559_214_592),
    ("MptConfig", {"d_model": 4096, "n_heads": 32, "n_layers": 32, "vocab_size": 50432}, 6_649_286_656),
    ("CodeGenConfig", {"n_inner": 8192, "tie_word_embeddings": False}, 4_171_605_216),
    ("OPTConfig", {"_remove_final_layer_norm": True, "do_layer_norm_before": False}, 125_237_760),
    ("Jais2Config", {"attention_bias": False, "mlp_bias": False, "num_key_value_heads": 2,
                     "tie_word_embeddings": True}, 6_934_600_192),
]


def _defaults(cls: str) -> dict:
    return json.loads((CONFIGS / f"transformers__{cls}-defaults.json").read_text())


def _names(layer) -> dict:
    return {t.name: t.shape for t in layer.tensors()}


@pytest.mark.parametrize("cls", sorted(DEFAULTS))
def test_class_defaults_count_as_transformers_does(cls):
    assert load_arch(str(CONFIGS / f"transformers__{cls}-defaults.json")).params_total == DEFAULTS[cls]


@pytest.mark.parametrize(("cls", "overrides", "expected"), VARIANTS)
def test_variants_count_as_transformers_does(cls, overrides, expected, write_config):
    assert load_arch(write_config({**_defaults(cls), **overrides})).params_total == expected


def test_olmo_norms_hold_no_weights(write_config):
    # OlmoLayerNorm: "LayerNorm but with no learnable weight or bias"; transformers 5.24 on the
    # meta device: OlmoConfig() 6,888,095,744, OlmoConfig(attention_bias=True,
    # num_key_value_heads=8) 6,083,117,056; the final norm holds no weights either
    a = load_arch(str(CONFIGS / "transformers__OlmoConfig-defaults.json"))
    assert a.params_total == 6_888_095_744
    assert not [n for n in _names(a.layers[0]) if "norm" in n] and a.final_norm.params == 0
    biased = load_arch(write_config({**_defaults("OlmoConfig"), "attention_bias": True, "num_key_value_heads": 8}))
    assert biased.params_total == 6_083_117_056 and "o_proj.bias" in _names(biased.layers[0])


def test_olmo_1b_by_hand():
    a = load_arch(str(CONFIGS / "allenai__OLMo-1B-hf.json"))
    # per layer q, k, v, o 4 x 2048^2 and a SwiGLU MLP 3 x 2048 x 8192, no norm weights; the
    # tied 50,304 x 2048 table once: 1,176,764,416, transformers 5.24 on the meta device
    layer = 4 * 2048 * 2048 + 3 * 2048 * 8192
    assert a.params_total == 16 * layer + 50304 * 2048 == 1_176_764_416
    assert a.tie_word_embeddings


def test_gpt_neox_20b_matches_its_card():
    a = load_arch(str(CONFIGS / "EleutherAI__gpt-neox-20b.json"))
    # by hand, per layer: fused query_key_value 3 x 6144 x 6144 + bias, dense 6144^2 + bias,
    # dense_h_to_4h / dense_4h_to_h 2 x 6144 x 24576 + their biases, two LayerNorms (weight + bias)
    h, i = 6144, 24576
    layer = 3 * h * h + 3 * h + h * h + h + 2 * h * i + i + h + 4 * h
    # untied embed_in and embed_out, the final LayerNorm's weight and bias: 20,554,567,680, the
    # card's "nparameters 20554567680" (https://huggingface.co/EleutherAI/gpt-neox-20b)
    assert a.params_total == 44 * layer + 2 * 50432 * h + 2 * h == 20_554_567_680
    # 64 MHA heads of 96: K and V per token and layer 2 x 64 x 96 x 2 B
    assert a.layers[0].mixer.kv_bytes_per_token(64, 2) == 24_576


def test_falcon_7b_is_multi_query_with_one_norm():
    # the RefinedWebModel config as released: n_head / n_layer, multi_query, parallel_attn
    a = load_arch(str(CONFIGS / "tiiuae__falcon-7b-instruct.json"))
    attn, names = a.layers[0].mixer, _names(a.layers[0])
    assert (attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim) == (71, 1, 64)
    assert "post_attention_layernorm" not in names and "input_layernorm.bias" in names
    assert "ln_f.bias" in _names(a.layers[-1]) and a.tie_word_embeddings
    # query_key_value (4544 + 2 x 64) x 4544, dense 4544^2, MLP 2 x 4544 x 18176, one LayerNorm;
    # the tied table once and ln_f: FalconConfig()'s count (tiiuae/falcon-7b's shape), the card's "7B"
    h = 4544
    layer = (h + 2 * 64) * h + h * h + 2 * h * 4 * h + 2 * h
    assert a.params_total == 32 * layer + 65024 * h + 2 * h == 6_921_720_704
    # one K/V head: 2 x 64 x 2 B a token and layer; 1001 tokens (context + the decoded one)
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 32 * 1001 * 256


def test_falcon_40b_has_8_kv_heads_and_two_norms():
    # the RefinedWeb config: n_head 128, n_head_kv 8, n_layer 60, the new decoder layout
    a = load_arch(str(CONFIGS / "tiiuae__falcon-40b-instruct.trimmed.json"))
    attn, names = a.layers[0].mixer, _names(a.layers[0])
    assert (attn.num_attention_heads, attn.num_key_value_heads) == (128, 8)
    assert {"post_attention_layernorm", "post_attention_layernorm.bias", "input_layernorm.bias"} <= set(names)
    h = 8192
    layer = (128 + 2 * 8) * 64 * h + h * h + 2 * h * 4 * h + 4 * h
    # transformers 5.24's FalconConfig with these sizes (num_kv_heads 8, new_decoder_architecture)
    # on the meta device: 41,303,293,952; the card's "40B" (https://huggingface.co/tiiuae/falcon-40b)
    assert a.params_total == 60 * layer + 65024 * h + 2 * h == 41_303_293_952
    assert attn.kv_bytes_per_token(8, 2) == 2048


def test_old_and_new_falcon_key_names_read_alike(write_config):
    cfg = json.loads((CONFIGS / "tiiuae__falcon-40b-instruct.trimmed.json").read_text())
    new = {k: v for k, v in cfg.items() if k not in ("n_head", "n_head_kv", "n_layer", "num_kv_heads")}
    new.update(model_type="falcon", num_attention_heads=128, num_kv_heads=8, num_hidden_layers=60)
    assert load_arch(write_config(new)).params_total == 41_303_293_952
    # the first RefinedWeb configs name no new_decoder_architecture and no num_kv_heads: the
    # model type says the 40B layout (NeMo's Falcon converter reads it so)
    old = {k: v for k, v in cfg.items() if k not in ("new_decoder_architecture", "num_kv_heads")}
    assert load_arch(write_config(old)).params_total == 41_303_293_952


def test_phi_2_by_hand():
    a = load_arch(str(CONFIGS / "microsoft__phi-2.json"))
    h, i, v = 2560, 10240, 51200
    # q, k, v, dense with biases; fc1 / fc2 with biases; one LayerNorm (weight + bias) for both
    layer = 4 * (h * h + h) + 2 * h * i + i + h + 2 * h
    # untied embedding and head, the head's bias, final_layernorm's weight and bias:
    # 2,779,683,840, transformers 5.24 on the meta device; the card's "2.7 billion parameters"
    # (https://huggingface.co/microsoft/phi-2)
    assert a.params_total == 32 * layer + 2 * v * h + v + 2 * h == 2_779_683_840
    head_bias = next(t for t in a.layers[-1].tensors() if t.name == "lm_head.bias")
    assert head_bias.shape == (v,) and head_bias.shard == "vocab" and not head_bias.linear
    assert "post_attention_layernorm" not in _names(a.layers[0]) and "gate_proj" not in _names(a.layers[0])


def test_stablelm_per_head_qk_norms_and_parallel_block(write_config):
    cfg = {**_defaults("StableLmConfig"), "qk_layernorm": True, "use_parallel_residual": True,
           "num_key_value_heads": 8}
    names = _names(load_arch(write_config(cfg)).layers[0])
    # StableLmLayerNormPerHead: one bias-free LayerNorm of head_dim 2560 / 32 = 80 per head,
    # 32 for q and 8 for k
    assert names["q_norm"] == (32 * 80,) and names["k_norm"] == (8 * 80,)
    assert "q_norm.bias" not in names and "post_attention_layernorm" not in names
    assert names["input_layernorm.bias"] == (2560,) and "o_proj.bias" not in names


def test_nemotron_and_jais2_mlps_are_ungated():
    n = _names(load_arch(str(CONFIGS / "transformers__NemotronConfig-defaults.json")).layers[0])
    assert "gate_proj" not in n and n["up_proj"] == (24576, 6144)
    assert n["input_layernorm.bias"] == (6144,) and "q_proj.bias" not in n  # attention_bias false
    j = _names(load_arch(str(CONFIGS / "transformers__Jais2Config-defaults.json")).layers[0])
    assert "gate_proj" not in j and j["up_proj.bias"] == (26624,) and j["o_proj.bias"] == (3328,)


def test_hidden_size_must_split_over_the_heads(write_config):
    with pytest.raises(DecodescopeError, match="not a multiple of num_attention_heads"):
        load_arch(write_config({**_defaults("FalconConfig"), "num_attention_heads": 70}))


def test_gpt2_and_opt_125m_real_configs_by_hand():
    """openai-community/gpt2 ("124M"): a tied 50,257 x 768 table, 1024 learned positions, 12
    layers of c_attn 768 x 2304 + 2304 bias, c_proj 768^2 + 768, c_fc 768 x 3072 + 3072,
    c_proj 3072 x 768 + 768, two LayerNorms (2 x 2 x 768), the final LayerNorm 2 x 768: 124,439,808
    (transformers' GPT2Config() is this shape). facebook/opt-125m: a tied 50,272 x 768 table,
    2048 + 2 positions (OPT offsets position ids by 2), the same layer with a ReLU MLP of
    ffn_dim 3072: 125,239,296. Neither config names tie_word_embeddings: both tie by default."""
    layer = 768 * 2304 + 2304 + 768 * 768 + 768 + 2 * (768 * 3072) + 3072 + 768 + 4 * 768
    gpt2 = load_arch(str(CONFIGS / "openai-community__gpt2.json"))
    assert gpt2.params_total == 50257 * 768 + 1024 * 768 + 12 * layer + 2 * 768 == 124_439_808
    opt = load_arch(str(CONFIGS / "facebook__opt-125m.json"))
    assert opt.params_total == 50272 * 768 + 2050 * 768 + 12 * layer + 2 * 768 == 125_239_296
    # the position table is gathered a row per token, not streamed: not among the weights read
    assert opt.params_read_per_token == 12 * layer + 2 * 768 + 50272 * 768


def test_starcoder_is_multi_query():
    """GPTBigCodeConfig (multi_query true): one K/V head of 64: c_attn 768 x (768 + 2 x 64), and
    a KV cache of 64 x (K + V) x 2 B = 256 B a token per layer."""
    a = load_arch(str(CONFIGS / "transformers__GPTBigCodeConfig-defaults.json"))
    attn = a.layers[0].mixer
    assert attn.num_key_value_heads == 1 and attn.kv_bytes_per_token(1, 2) == 256


def test_opt_with_projected_embeddings_is_refused(write_config):
    with pytest.raises(DecodescopeError, match="word_embed_proj_dim 512"):
        load_arch(write_config({**_defaults("OPTConfig"), "word_embed_proj_dim": 512, "hidden_size": 1024,
                                "num_attention_heads": 16}))


def test_gptj_bloom_and_mpt_layouts_by_hand():
    """GPT-J: one LayerNorm (weight and bias) before the parallel attention and MLP, no attention
    biases, fc_in / fc_out with biases, lm_head with a bias of vocab_size. BLOOM: the embedding's
    own LayerNorm, read once per token with the first layer. MPT: no bias anywhere."""
    gptj = load_arch(str(CONFIGS / "transformers__GPTJConfig-defaults.json"))
    names = _names(gptj.layers[0])
    assert "q_proj.bias" not in names and "up_proj.bias" in names and "post_attention_layernorm" not in names
    assert _names(gptj.layers[-1])["lm_head.bias"] == (50400,)
    bloom = load_arch(str(CONFIGS / "transformers__BloomConfig-defaults.json"))
    assert {"word_embeddings_layernorm.weight", "word_embeddings_layernorm.bias"} <= set(_names(bloom.layers[0]))
    assert "word_embeddings_layernorm.weight" not in _names(bloom.layers[1])
    mpt = load_arch(str(CONFIGS / "transformers__MptConfig-defaults.json"))
    assert not [n for n in _names(mpt.layers[0]) if n.endswith("bias")]


def test_a_context_past_a_learned_position_table_is_flagged_as_impossible():
    """GPT-2's 1024 learned positions: a 2001-token context has no position row (engines refuse
    it); a rope model past its max_position_embeddings only runs untrained (Llama-3.1-8B)."""
    gpt2 = load_arch(str(CONFIGS / "openai-community__gpt2.json"))
    notes = predict(gpt2, make_deployment(gpt2, "h100-sxm", context=2000), max_positions=1024).notes
    assert any("learned position table has no row past it" in n for n in notes)
    llama = load_arch("llama-3.1-8b")
    notes = predict(llama, make_deployment(llama, "h100-sxm", context=200_000), max_positions=131072).notes
    assert any("not trained that long" in n for n in notes)
