"""inclusionAI's hybrid linear Ling models (model_type bailing_hybrid): Ling 3.0's Kimi Delta
Attention + gated MLA (transformers' models/bailing_hybrid) and Ling 2.5 / 2.6's Lightning
attention + MLA (inclusionAI's modeling_bailing_moe_v2_5.py), with the expectations worked out
by hand from the modeling code."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.config import RawConfig
from decodescope.arch.registry import build_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, predict
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
DEFAULTS = CONFIGS / "transformers__BailingHybridConfig-defaults.json"
LING3_FLASH = CONFIGS / "inclusionAI__Ling-3.0-flash-int4.trimmed.json"

# BailingHybridConfig(): transformers 5.24's BailingHybridForCausalLM on the meta device
# holds 124,414,191,072 parameters. Worked by hand (hidden 2560, vocab 157184, 42 layers):
#   KDA mixer (35 layers): q, k, v 3 x 4096 x 2560, conv1d 3 x 4096 x 4, forget_gate.f_proj and
#     g_proj 2 x 4096 x 2560, b_proj 32 x 2560, dt_bias 4096, A_log 32, o_norm 128,
#     o_proj 2560 x 4096, input norm 2560                                   = 63,052,448
#   MLA mixer (7 layers): q_proj 32 x 192 x 2560, kv_a_proj_with_mqa 576 x 2560, kv_a_layernorm
#     512, kv_b_proj 32 x 256 x 512, o_proj 2560 x 4096, g_proj 32 x 2560, input norm 2560
#                                                                             = 31,968,256
#   dense MLP (layers 0, 1): 3 x 6144 x 2560 + norm 2560                    = 47,188,480
#   MoE (40 layers): 512 experts x 3 x 768 x 2560, router 512 x 2560, shared expert
#     3 x 768 x 2560, norm 2560                                             = 3,027,110,400
#   embedding + untied head 2 x 157184 x 2560, final norm 2560
# The router's e_score_correction_bias is a buffer there, not a parameter.
TRANSFORMERS_DEFAULTS = 124_414_191_072
# transformers allocates no MTP layer (BailingHybridModel ignores checkpoint layers 42 on:
# "Standard causal inference uses only num_hidden_layers decoder layers"); decodescope counts
# the config's num_nextn_predict_layers = 1 apart, in params_mtp: eh_proj 2560 x 5120, enorm,
# hnorm, shared_head.norm 3 x 2560, one gated MLA layer 31,968,256 and one MoE 3,027,110,400
MTP_BY_HAND = 13_107_200 + 7_680 + 31_968_256 + 3_027_110_400


def test_ling3_class_defaults_count_as_transformers():
    a = load_arch(str(DEFAULTS))
    assert a.params_total == pytest.approx(TRANSFORMERS_DEFAULTS, rel=1e-5)
    assert len(a.mtp) == 1 and a.params_mtp == MTP_BY_HAND
    # num_experts_per_token (so spelled in BailingHybridConfig) is the top-k: 8 of 512
    assert a.layers[2].mlp.num_experts_per_tok == 8 and a.layers[2].mlp.num_experts == 512


def test_ling3_layout_by_hand():
    a = load_arch(str(DEFAULTS))
    # BailingHybridConfig.layer_types: full_attention where (i + 1) % layer_group_size (6) == 0
    assert [i for i, x in enumerate(a.layers) if x.kind == "mla"] == [5, 11, 17, 23, 29, 35, 41]
    assert a.layer_counts() == {"linear_attention": 35, "mla": 7}
    # mlp_layer_types: dense for the first_k_dense_replace (2) layers, then routed experts
    assert [i for i, x in enumerate(a.layers) if not hasattr(x.mlp, "num_experts")] == [0, 1]
    kda = {t.name: t.shape for t in a.layers[0].tensors()}
    # full-rank decay and output gates [heads x head_dim, hidden], beta per head, A_log per head,
    # dt_bias per channel, o_norm over one head_dim (128: linear_head_dim, not head_dim 64)
    assert kda["f_proj"] == kda["g_proj"] == (4096, 2560) and kda["b_proj"] == (32, 2560)
    assert kda["A_log"] == (32,) and kda["dt_bias"] == (4096,) and kda["o_norm"] == (128,)
    mla = {t.name: t.shape for t in a.layers[5].tensors()}
    # q_lora_rank None: one q_proj of 32 heads x (128 + 64); a sigmoid gate per head
    assert mla["q_proj"] == (6144, 2560) and mla["g_proj"] == (32, 2560) and "q_a_proj" not in mla


def test_ling3_state_and_cache_per_request():
    a = load_arch(str(DEFAULTS))
    kda, mla = a.layers[0].mixer, a.layers[5].mixer
    # recurrent state 32 heads x 128 (k) x 128 (v) x 4 B (the cache keeps it in float32) and the
    # q, k, v conv windows 3 x 4096 channels x (4 - 1) taps x 2 B (bf16 activations)
    assert kda.state_bytes(1) == 32 * 128 * 128 * 4 + 3 * 4096 * 3 * 2 == 2_170_880
    assert kda.state_bytes(2) == 2_170_880 / 2  # heads and channels split over TP
    # MLA caches one latent of kv_lora_rank 512 + rope 64 per token, 2 B each
    assert mla.kv_bytes_per_token(1, 2) == 576 * 2
    d = make_deployment(a, "h100", batch=1, context=1000)
    kv, state = per_request_cache(a, d, a.layers)
    assert state == 35 * 2_170_880
    assert kv == 7 * (1000 + d.spec.tokens_per_verify) * 576 * 2


def test_ling3_flash_hub_fields():
    # The hub config names the KDA width head_dim (128) and the top-k num_experts_per_tok, and
    # sizes the shared expert apart (moe_shared_expert_intermediate_size 768 x 1): the same
    # decoder as the class defaults, hence the same count. The port's test pins MLA at
    # 5, 11, ..., 41 "verified against the real safetensors index".
    a = load_arch(str(LING3_FLASH))
    assert [i for i, x in enumerate(a.layers) if x.kind == "mla"] == [5, 11, 17, 23, 29, 35, 41]
    assert a.params_total == TRANSFORMERS_DEFAULTS
    assert a.layers[0].mixer.state_bytes(1) == 2_170_880
    assert a.mtp == ()  # this subset of the config names no num_nextn_predict_layers
    p = predict(a, make_deployment(a, "h100", tp=2, batch=8, context=32768))
    assert p.to_dict()


LING25 = {"model_type": "bailing_hybrid", "architectures": ["BailingMoeV2_5ForCausalLM"], "vocab_size": 1000,
          "hidden_size": 256, "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 4,
          "head_dim": 32, "use_qk_norm": True, "layer_group_size": 2, "first_k_dense_replace": 1,
          "intermediate_size": 512, "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 1,
          "moe_intermediate_size": 64, "moe_router_enable_expert_bias": True, "q_lora_rank": 96,
          "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
          "num_nextn_predict_layers": 1, "tie_word_embeddings": False}


def test_ling25_lightning_layers_by_hand(write_config):
    a = load_arch(write_config(LING25, "ling25.json"))
    # BailingMoeV2_5DecoderLayer: attention where (i + 1) % 2 == 0 or i >= 5 // 2 * 2 = 4
    assert [x.kind for x in a.layers] == ["linear_attention", "mla", "linear_attention", "mla", "mla"]
    # Lightning layer: input norm 256, query_key_value 3 x 128 x 256, query/key_layernorm 2 x 32,
    # g_proj 128 x 256, g_norm 128, dense 256 x 128                           = 164,288
    # MLA (no gate): input norm 256, q_a_proj 96 x 256, q_a_layernorm 96, q_b_proj 4 x 48 x 96,
    # kv_a_proj_with_mqa 80 x 256, kv_a_layernorm 64, kv_b_proj 4 x 64 x 64, dense 256 x 128
    #                                                                         = 113,056
    # dense MLP: norm 256 + 3 x 512 x 256 = 393,472; MoE: norm 256, gate 8 x 256, expert_bias 8,
    # experts 8 x 3 x 64 x 256, shared expert 3 x 64 x 256                    = 444,680
    layers = (164_288 + 393_472) + (164_288 + 444_680) + 3 * (113_056 + 444_680)
    assert a.params_total == layers + 2 * 1000 * 256 + 256
    # the MTP layer (BailingMoeV2_5MTPLayer): eh_proj 256 x 512, enorm, hnorm, final_layernorm,
    # MLA and MoE
    assert a.params_mtp == 256 * 512 + 3 * 256 + 113_056 + 444_680
    # the state of simple GLA: 4 heads x 32 x 32 x 4 B, no conv window
    assert a.layers[0].mixer.state_bytes(1) == 4 * 32 * 32 * 4


@pytest.mark.parametrize("edit", [{"layer_group_size": "six"}, {"layer_group_size": 0},
                                  {"layer_types": ["linear_attention"] * 3}, {"linear_head_dim": [128]}])
def test_bad_layouts_are_one_clear_error(edit):
    data = {**json.loads(DEFAULTS.read_text()), **edit}
    if "layer_group_size" in edit:
        data.pop("layer_types")
    with pytest.raises(DecodescopeError):
        build_arch(RawConfig(data, "edited", "edited"))
