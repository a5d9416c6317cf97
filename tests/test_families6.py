"""GLM-4-0414 (glm4), Hunyuan-A13B (hunyuan / hunyuan_v1_moe) and Qwen3-Omni's thinker
(qwen3_omni_moe): each real config's count against transformers' own implementation
(5.24, built on the meta device, the sum of every parameter's numel) and against a figure
published for the checkpoint, and their layouts by hand from transformers' modeling code."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"

GLM4_32B = "Edens-Gate__GLM-v2-lora"  # a GLM-4-32B-0414 fine-tune: the base model's dimensions
HUNYUAN = "tencent__Hunyuan-A13B-Instruct"
OMNI = "Qwen__Qwen3-Omni-30B-A3B-Instruct.trimmed"


def test_glm4_32b_counts_four_norms_per_layer_and_matches_transformers():
    a = load_arch(str(CONFIGS / f"{GLM4_32B}.json"))
    names = {t.name for t in a.layers[0].tensors()}
    assert {"post_self_attn_layernorm", "post_mlp_layernorm", "input_layernorm", "post_attention_layernorm"} <= names
    assert not any(n.endswith(".bias") or n.endswith("_bias") for n in names)  # attention_bias false (the 32B)
    # by hand, per layer: q 6144x6144, k and v 6144x(2x128) each, o 6144x6144, MLP 3x6144x23040,
    # four norms of 6144; then two untied 151,552 x 6144 tables and the final norm
    layer = 2 * 6144 * 6144 + 2 * 6144 * 256 + 3 * 6144 * 23040 + 4 * 6144
    assert a.params_total == 61 * layer + 2 * 151552 * 6144 + 6144 == 32_566_081_536
    # transformers' Glm4ForCausalLM on this config: 32,566,081,536. The full fine-tune of the
    # same base (https://huggingface.co/Edens-Gate/GLM/tree/main) holds 65.2 GB of bf16 files
    assert abs(2 * a.params_total / 65.2e9 - 1) < 0.01


def test_glm4v_language_model_biases_q_k_v_not_o(write_config):
    # GLM-4.1V's text decoder (transformers Glm4vTextAttention) hard-codes q/k/v biases and
    # keeps GLM-4's four norms; the sizes here are GLM-4.1V-9B's text_config
    cfg = {"model_type": "glm4v", "vision_config": {"depth": 24},
           "text_config": {"model_type": "glm4v_text", "hidden_size": 4096, "intermediate_size": 13696,
                           "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2,
                           "vocab_size": 151552, "partial_rotary_factor": 0.5}}
    layer = {t.name: t.shape for t in load_arch(write_config(cfg)).layers[0].tensors()}
    assert layer["q_proj.bias"] == (4096,) and layer["k_proj.bias"] == (256,) and layer["v_proj.bias"] == (256,)
    assert "o_proj.bias" not in layer and "post_mlp_layernorm" in layer


def test_hunyuan_a13b_matches_transformers_and_the_card():
    a = load_arch(str(CONFIGS / f"{HUNYUAN}.json"))
    # transformers' HunYuanMoEV1ForCausalLM (model_type hunyuan_v1_moe, head_dim 128): 80,393,183,232;
    # the card: "a total of 80 billion parameters with 13 billion active parameters"
    # (https://huggingface.co/tencent/Hunyuan-A13B-Instruct)
    assert a.params_total == 80_393_183_232
    mlp, attn = a.layers[0].mlp, a.layers[0].mixer
    assert (mlp.num_experts, mlp.num_experts_per_tok, mlp.moe_intermediate_size) == (64, 8, 3072)
    assert mlp.shared_expert_intermediate_size == 3072 and not mlp.shared_expert_gate
    assert attn.qk_norm and attn.head_dim == 128 and a.tie_word_embeddings
    # active by hand, per layer: attention 2x4096x4096 + 2x4096x1024, q/k norms 2x128, two
    # norms 2x4096, router 64x4096, 8 routed + 1 shared expert of 3x4096x3072; the tied table once
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 2 * 128 + 2 * 4096 + 64 * 4096 + 9 * 3 * 4096 * 3072
    assert a.params_active == 32 * layer + 128167 * 4096 + 4096 == 12_747_448_320


def test_hunyuan_per_layer_lists_and_int_fields_read_alike(write_config):
    cfg = json.loads((CONFIGS / f"{HUNYUAN}.json").read_text())
    flat = {**cfg, "model_type": "hunyuan_v1_moe", "head_dim": 128, "moe_topk": 8, "num_shared_expert": 1}
    del flat["moe_intermediate_size"]  # transformers sizes the experts with intermediate_size
    assert load_arch(write_config(flat)).params_total == 80_393_183_232


def test_hunyuan_large_cross_layer_attention_shares_kv_between_pairs_of_layers():
    # Tencent/Tencent-Hunyuan-Large models/modeling_hunyuan.py: attention_type 'cross' where
    # layer_idx % cla_share_factor != 0, and only 'self' layers build k_proj, v_proj, key_layernorm
    a = load_arch(str(CONFIGS / "tencent__Hunyuan-Large.trimmed.json"))
    assert [x.mixer.kv_shared for x in a.layers[:4]] == [False, True, False, True]
    assert "k_proj" not in {t.name for t in a.layers[1].tensors()}
    # README of Tencent/Tencent-Hunyuan-Large: "a total of 389 billion parameters and 52 billion
    # active parameters"
    assert abs(a.params_total / 389e9 - 1) < 0.01
    # active by hand, per layer: q and o 6400 x 6400, k and v 6400 x 640 in every second layer,
    # q/k norms of 80, two norms, a 16 x 6400 router, 1 routed + 1 shared expert of 3 x 6400 x 18304
    own, cross = 2 * 6400 * 6400 + 2 * 6400 * 640 + 2 * 80, 2 * 6400 * 6400 + 80
    rest = 2 * 6400 + 16 * 6400 + 2 * 3 * 6400 * 18304
    assert a.params_active == 32 * (own + cross + 2 * rest) + 129024 * 6400 + 6400


@pytest.mark.parametrize("edit,field", [({"use_mla": True}, "use_mla"), ({"moe_topk": [8] * 31}, "moe_topk"),
                                        ({"moe_topk": 65}, "moe_topk"), ({"num_shared_expert": -1}, "num_shared_expert")])
def test_hunyuan_large_and_broken_fields_end_in_one_clear_error(config_variant, edit, field):
    path = config_variant(CONFIGS / f"{HUNYUAN}.json", **edit)
    with pytest.raises(DecodescopeError, match=field):
        load_arch(path)


def test_qwen3_omni_reads_the_thinkers_language_model():
    a = load_arch(str(CONFIGS / f"{OMNI}.json"))
    assert a.model_type == "qwen3_omni_moe_text" and a.hidden_size == 2048 and len(a.layers) == 48
    mlp = a.layers[0].mlp
    assert (mlp.num_experts, mlp.num_experts_per_tok, mlp.shared_expert_intermediate_size) == (128, 8, 0)
    # transformers' Qwen3OmniMoeThinkerTextModel: 30,221,219,840, plus the 152,064 x 2048 head;
    # the official checkpoint's tensors tally to the same (thinker.model 30.221 B, lm_head 0.311 B)
    assert a.params_total == 30_221_219_840 + 152064 * 2048
    assert any("talker" in n for n in a.notes) and any("vision and audio" in n for n in a.notes)


def test_longcat_flash_counts_two_attention_sublayers_and_the_real_experts():
    a = load_arch(str(CONFIGS / "mlx-community__LongCat-Flash-Chat-bf16.json"))
    # 28 blocks of (MLA + dense MLP) x 2 and one shortcut MoE: 56 latent caches
    assert [x.kind for x in a.layers[:3]] == ["mla", "mla", "moe"] and len(a.layers) == 84
    # by hand per block: two MLA (q_a 1536x6144, q_a norm 1536, q_b 64x192x1536, kv_a 576x6144,
    # kv_a norm 512, kv_b 64x256x512, o 6144x64x128, a 6144 input norm), two dense MLPs of
    # 3x6144x12288 with their 6144 norm, 512 experts of 3x6144x2048, a router of 768 rows
    # (512 real + 256 identity experts) with a correction bias each, and the MoE's norm
    mla = 1536 * 6144 + 1536 + 64 * 192 * 1536 + 576 * 6144 + 512 + 64 * 256 * 512 + 6144 * 64 * 128 + 6144
    block = 2 * mla + 2 * (3 * 6144 * 12288 + 6144) + 512 * 3 * 6144 * 2048 + 768 * 6144 + 768 + 6144
    assert a.params_total == 28 * block + 2 * 131072 * 6144 + 6144
    # the technical report (https://arxiv.org/abs/2509.01322): "a 560-billion-parameter" model
    assert abs(a.params_total / 560e9 - 1) < 0.01
    # 12 picks of 768 experts, 256 of them identity: 8 real experts per token under a uniform
    # router, which lands on the report's "27B on average" (18.6B to 31.3B) within 4 %
    assert a.layers[2].mlp.num_experts_per_tok == 8 and abs(a.params_active / 27e9 - 1) < 0.04
    assert any("zero-computation" in n for n in a.notes)


@pytest.mark.parametrize("edit,field", [({"moe_topk": 769}, "moe_topk"), ({"num_layers": None}, "num_layers"),
                                        ({"zero_expert_num": -1}, "zero_expert_num")])
def test_broken_longcat_fields_end_in_one_clear_error(write_config, edit, field):
    cfg = {**json.loads((CONFIGS / "mlx-community__LongCat-Flash-Chat-bf16.json").read_text()), **edit}
    path = write_config({k: v for k, v in cfg.items() if v is not None})
    with pytest.raises(DecodescopeError, match=field):
        load_arch(path)


def test_ling_2_configs_that_say_bailing_moe_v2_read_as_bailing_moe(write_config):
    cfg = json.loads((CONFIGS / "inclusionAI__Ling-Coder-lite.json").read_text())
    as_v2 = load_arch(write_config({**cfg, "model_type": "bailing_moe_v2"}))
    assert as_v2.params_total == load_arch(str(CONFIGS / "inclusionAI__Ling-Coder-lite.json")).params_total


GEMMA3N = "transformers__Gemma3nTextConfig-defaults"


def test_gemma3n_counts_per_layer_inputs_altup_laurel_and_matches_transformers():
    a = load_arch(str(CONFIGS / f"{GEMMA3N}.json"))
    # transformers 5.24's Gemma3nForCausalLM on this config, built on the meta device: 6,835,235,568
    assert a.params_total == 6_835_235_568
    # the per-layer embedding table, 262,144 x (35 layers x 256), is gathered, never streamed:
    # decode reads the layers and the tied head, not the token and per-layer tables
    table = 262144 * 35 * 256
    assert [t.params for t in a.input_tables] == [table]
    # (the tied head, read each token, is the 262,400 x 2048 token table's size: the two cancel)
    assert a.params_read_per_token == 6_835_235_568 - table
    # the last 15 layers take K/V from an earlier layer: no k/v projections (nor k_norm)
    shared = [x for x in a.layers if x.mixer.kv_shared]
    assert len(shared) == 15 and a.layers.index(shared[0]) == 20
    assert "k_proj" not in {t.name for t in shared[0].tensors()}


def test_gemma3n_kv_cache_only_in_the_layers_that_write_it():
    from decodescope.arch.config import load_config
    from decodescope.arch.registry import build_arch
    from decodescope.model import make_deployment
    from decodescope.model.memory import memory_need
    arch = build_arch(load_config(str(CONFIGS / f"{GEMMA3N}.json")))
    d = make_deployment(arch, "h100-sxm", context=8192)
    kv, _ = memory_need(arch, d)[1][0]
    # layers 0-19 write K/V: 4 full layers hold all 8,193 tokens, 16 sliding ones their 512;
    # 2 KV heads x 256 x (K, V) x 2 B a token
    assert kv == (4 * 8193 + 16 * 512) * 2 * 256 * 2 * 2


def test_gemma3n_multimodal_wrapper_reads_its_text_config(write_config):
    text = json.loads((CONFIGS / f"{GEMMA3N}.json").read_text())
    a = load_arch(write_config({"model_type": "gemma3n", "text_config": text,
                                "vision_config": {"model_type": "gemma3n_vision"},
                                "audio_config": {"model_type": "gemma3n_audio"}}))
    assert a.params_total == 6_835_235_568 and any("vision and audio" in n for n in a.notes)


@pytest.mark.parametrize("edit,field", [({"num_kv_shared_layers": 35}, "num_kv_shared_layers"),
                                        ({"intermediate_size": [16384] * 34}, "intermediate_size"),
                                        ({"hidden_size_per_layer_input": 0}, "per-layer inputs"),
                                        ({"vocab_size_per_layer_input": 0}, "vocab_size_per_layer_input"),
                                        ({"laurel_rank": -1}, "laurel_rank")])
def test_broken_gemma3n_fields_end_in_one_clear_error(config_variant, edit, field):
    path = config_variant(CONFIGS / f"{GEMMA3N}.json", **edit)
    with pytest.raises(DecodescopeError, match=field):
        load_arch(path)


@pytest.mark.parametrize("edit,exact", [({}, 5_077_177_856),
                                        ({"num_kv_shared_layers": 10, "use_double_wide_mlp": True}, 5_657_561_600)])
def test_gemma4_per_layer_inputs_and_shared_kv_match_transformers(config_variant, edit, exact):
    # transformers 5.24's Gemma4ForCausalLM on its class defaults (global_head_dim 512 where a
    # config leaves it out), and with the last 10 layers reusing K/V and running double-wide MLPs
    a = load_arch(config_variant(CONFIGS / "transformers__Gemma4TextConfig-defaults.json", **edit))
    assert a.params_total == exact
    assert [t.params for t in a.input_tables] == [262144 * 30 * 256]
    assert sum(x.mixer.kv_shared for x in a.layers) == edit.get("num_kv_shared_layers", 0)


def test_gemma4_sharing_every_layers_kv_is_one_clear_error(config_variant):
    path = config_variant(CONFIGS / "transformers__Gemma4TextConfig-defaults.json", num_kv_shared_layers=30)
    with pytest.raises(DecodescopeError, match="num_kv_shared_layers"):
        load_arch(path)
