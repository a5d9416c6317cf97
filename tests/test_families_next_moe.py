"""Mistral 4 (mistral4), Mistral Large 4 (mistral_large4), GLM-5.3-Flash (glm5_next) and
Tencent Hy v4 VL (hy_v4_vl), from transformers 5.24's modeling code.

mistral4 (models/mistral4/modular_mistral4.py): Mistral4DecoderLayer is DeepseekV3DecoderLayer
(MLA with a q latent, DeepseekV3MoE after first_k_dense_replace dense layers); its router
(DeepseekV2TopkRouter, softmax) keeps no e_score_correction_bias and the Llama-4 query scale
(get_llama_4_attn_scale) has no weights: DeepSeek-V3's decoder tensor for tensor.

mistral_large4 (models/mistral_large4/modular_mistral_large4.py): every layer DSA attention
(GlmMoeDsaAttention) with a full-rank q_proj [heads x (nope + rope), hidden], softmax_scaling
scale and bias [heads]; an indexer where indexer_types says "full": wq_b from the hidden state,
wk, a LayerNorm k_norm (weight, bias), weights_proj, q_input_norm (LayerNorm weight, bias) and
its own softmax_scaling [index heads] x 2. no_rope_layers 0 (every 4th by default): the rope
slice joins the NoPE part (qk_nope 64 + 64), so kv_a_proj_with_mqa is [kv_lora_rank, hidden]
and kv_b_proj [heads x (128 + 128), kv_lora_rank]. kv_source_layers: a layer pointing at an
earlier one builds no kv_a_proj_with_mqa / kv_a_layernorm and caches no latent (it reads the
source's through KVSharingDict); an indexer of its own still caches its keys
("reuse_but_indexer"). One model-level tensor: the rotary embedding's alpha [rope / 2].

glm5_next (models/glm5_next/modular_glm5_next.py): layer_types "linear_attention" (KDA:
Glm5NextTextLinearAttention, q/k/v [heads x head_dim, hidden], one conv over the three, low-
rank forget and output gates, b_proj, a gated norm) except every 4th layer from 3,
"indexed_attention": MLA with no RoPE (qk_rope_head_dim 0) and an indexer that pools
index_kpool keys (index_kpool_compress_ape [kpool, 128], index_kpool_compress_gate [128,
hidden]). Hyper-connections (DeepseekV4HyperConnection: fn [(2 + hc) x hc, hc x hidden], base,
scale [3]) around both sub-layers, a weightless mean head. create_recurrent_attention_mask is
only the 2D padding mask of the KDA layers. 3 dense layers, then DeepseekV3MoE.

hy_v4_vl (models/hy_v4_vl/modular_hy_v4_vl.py): HYV4VLTextConfig subclasses HYV4Config and
HYV4VLTextModel is HYV4Model with mRoPE positions (no weights): Hy v4's decoder.

Every expected count is transformers 5.24's own model on the meta device (the sum of every
parameter's numel: the language model plus the untied LM head). decodescope counts one more
tensor per MoE layer of glm5_next and hy_v4_vl, DeepseekV3TopkRouter's e_score_correction_bias
(a buffer in transformers, in the checkpoints): counts agree within 1e-5."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
MISTRAL4 = CONFIGS / "transformers__Mistral4Config-defaults.json"
LARGE4 = CONFIGS / "transformers__MistralLarge4Config-defaults.json"
GLM5 = CONFIGS / "transformers__Glm5NextConfig-defaults.json"
HYVL = CONFIGS / "transformers__HYV4VLConfig-defaults.json"

# transformers 5.24 on the meta device: Mistral4ForCausalLM; the wrappers' language_model
# (MistralLarge4TextModel, Glm5NextTextModel, HYV4VLTextModel) + lm_head
TRANSFORMERS_COUNTS = {MISTRAL4: 118_972_826_624, LARGE4: 1_050_118_202_912, GLM5: 313_326_816_766,
                       HYVL: 769_907_389_085}


@pytest.mark.parametrize("path", TRANSFORMERS_COUNTS, ids=lambda p: p.stem)
def test_counts_as_transformers_does(path):
    assert load_arch(str(path)).params_total == pytest.approx(TRANSFORMERS_COUNTS[path], rel=1e-5)


def test_published_counts():
    """Mistral-Small-4-119B-2603: "119B params, 6.5B active" (its model card,
    https://huggingface.co/mistralai/Mistral-Small-4-119B-2603; Mistral4Config's defaults are its
    text_config); Mistral Large 4: "1T total / 52B active" (https://mistral.ai/news/mistral-large-4/,
    the class's checkpoint mistralai/Mistral-Large-4-1T-A52B); GLM-5.3-Flash: "320B total
    parameters and just 18B active" (https://z.ai/blog/glm-5.3-flash), its vision encoder and
    next-n layer (about 7 B: one MoE layer) included, which are not counted here."""
    small, large, glm = (load_arch(str(p)) for p in (MISTRAL4, LARGE4, GLM5))
    assert small.params_total == pytest.approx(119e9, abs=0.5e9)
    assert small.params_active == pytest.approx(6.5e9, abs=0.2e9)
    assert large.params_total == pytest.approx(1e12, abs=0.06e12)
    assert large.params_active == pytest.approx(52e9, abs=1.5e9)
    assert glm.params_total == pytest.approx(313e9, abs=1e9) and glm.params_total < 320e9
    assert glm.params_active == pytest.approx(18e9, abs=1e9)


def test_same_as_entries_name_what_they_are_built_as():
    assert "model_type mistral4: built as deepseek_v3" in load_arch(str(MISTRAL4)).notes[0]
    assert "model_type hy_v4_vl_text: built as hy_v4" in load_arch(str(HYVL)).notes[0]


def test_mistral_small_4_layout_and_kv_by_hand():
    """36 MoE layers (first_k_dense_replace 0) of 128 experts, top 4, one shared expert of 2048,
    softmax routing (no bias). The cache per token per layer: kv_lora_rank 256 + rope 64 = 320
    values x 2 B = 640 B; 36 layers: 23,040 B."""
    a = load_arch(str(MISTRAL4))
    assert {layer.kind for layer in a.layers} == {"mla"} and len(a.layers) == 36
    moe = a.layers[0].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size, moe.router_bias) == (
        128, 4, 2048, False)
    d = make_deployment(a, "h100", tp=2, context=32_767)
    assert per_request_cache(a, d, a.layers) == (32_768 * 23_040, 0)


def test_mistral_large_4_layers_by_hand():
    """Layer 0 dense (24576), layers 1-71 MoE (128 experts of 6144, one shared of 6144). RoPE
    layer: q_proj [64 x 128, 6144], kv_a [512 + 64, 6144], kv_b [64 x (64 + 128), 512]; NoPE
    layer (3, 7, ...): kv_a [512, 6144], kv_b [64 x (128 + 128), 512]. Indexer: wq_b [32 x 128,
    6144]. alpha [32] once."""
    a = load_arch(str(LARGE4))
    rope, nope = ({t.name: t.shape for t in a.layers[i].tensors()} for i in (2, 3))
    assert (rope["q_proj"], rope["kv_a_proj_with_mqa"], rope["kv_b_proj"]) == ((8192, 6144), (576, 6144), (12288, 512))
    assert (nope["q_proj"], nope["kv_a_proj_with_mqa"], nope["kv_b_proj"]) == ((8192, 6144), (512, 6144), (16384, 512))
    assert rope["indexer.wq_b"] == (4096, 6144) and rope["softmax_scaling.scale"] == (64,)
    assert [t.shape for t in a.layers[0].extra] == [(32,)] and not a.layers[1].extra
    assert a.layers[0].mlp.intermediate_size == 24576
    assert a.layers[1].mlp.moe_intermediate_size == 6144 and not a.layers[1].mlp.router_bias
    assert sum(a.layers[i].mixer.qk_rope_head_dim == 0 for i in range(72)) == 18


def test_mistral_large_4_kv_by_hand():
    """bf16 cache per token: a RoPE layer's latent (512 + 64) x 2 = 1152 B, a NoPE layer's
    512 x 2 = 1024 B, and every layer's index key, 128 fp8 values + one fp32 scale = 132 B:
    54 x 1152 + 18 x 1024 + 72 x 132 = 90,144 B."""
    a = load_arch(str(LARGE4))
    d = make_deployment(a, "h200", tp=8, weights="fp8", context=32_767)
    assert per_request_cache(a, d, a.layers) == (32_768 * 90_144, 0)


def test_mistral_large_4_kv_sharing(config_variant):
    """kv_source_layers 1 -> 0, 5 -> 4, 7 -> 3 (NoPE from NoPE) and layer 1's indexer "shared".
    transformers 5.24 (meta device): 1,050,081,816,288 = the defaults less layer 1's kv_a
    (576 x 6144) + norm (512) + indexer (26,161,472), layer 5's kv_a + norm and layer 7's
    (512 x 6144 + 512): 36,386,624. The cache loses 1152 + 132 (layer 1), 1152 (layer 5) and
    1024 (layer 7) B per token: 86,684 B; the shared layers still read their source's latent."""
    src, ind = list(range(72)), ["full"] * 72
    src[1], src[5], src[7], ind[1] = 0, 4, 3, "shared"
    a = load_arch(config_variant(LARGE4, text_config={"kv_source_layers": src, "indexer_types": ind}))
    assert a.params_total == 1_050_081_816_288
    assert {t.name for t in a.layers[5].tensors()}.isdisjoint({"kv_a_proj_with_mqa", "kv_a_layernorm"})
    assert a.layers[5].mixer.kv_bytes_per_token(1, 2) == 132
    assert a.layers[5].mixer.kv_read_bytes(100_000, 1, 2) == 2048 * 1152 + 100_000 * 132
    d = make_deployment(a, "h200", tp=8, weights="fp8", context=1023)
    assert per_request_cache(a, d, a.layers) == (1024 * 86_684, 0)


@pytest.mark.parametrize("bad", [{"kv_source_layers": [0, 2] + list(range(2, 72))},
                                 {"kv_source_layers": [0, 0, 1] + list(range(3, 72))},
                                 {"indexer_types": ["shared"] * 72}, {"no_rope_layers": [1, 2] * 36}])
def test_mistral_large_4_refuses_bad_layouts(config_variant, bad):
    with pytest.raises(DecodescopeError):
        load_arch(config_variant(LARGE4, text_config=bad))


def test_glm5_next_layers_by_hand():
    """45 layers: MLA at 3, 7, ..., 43 (11), KDA elsewhere (34); dense MLPs (12288) at 0-2, then
    288 experts of 2048, top 8, one shared, with a correction bias. MLA: q_b [64 x 256, 1536],
    kv_a [512, 4096], kv_b [64 x (256 + 256), 512], o [4096, 64 x 256]; KDA: q/k/v [64 x 128,
    4096]; hyper-connections fn [24, 4 x 4096] on every layer."""
    a = load_arch(str(GLM5))
    assert [i for i, layer in enumerate(a.layers) if layer.kind == "mla"] == list(range(3, 45, 4))
    mla, kda = ({t.name: t.shape for t in a.layers[i].tensors()} for i in (3, 4))
    assert (mla["q_b_proj"], mla["kv_a_proj_with_mqa"], mla["kv_b_proj"], mla["o_proj"]) == (
        (16384, 1536), (512, 4096), (32768, 512), (4096, 16384))
    assert mla["indexer.index_kpool_compress_ape"] == (16, 128) and kda["q_proj"] == (8192, 4096)
    assert mla["attn_hc.fn"] == kda["ffn_hc.fn"] == (24, 16384)
    assert a.layers[2].mlp.intermediate_size == 12288 and a.layers[3].mlp.num_experts == 288
    assert a.layers[3].mlp.router_bias and not a.mtp


def test_glm5_next_cache_and_state_by_hand():
    """bf16 cache per token of an MLA layer: the latent 512 x 2 = 1024 B (no rope) and the
    indexer's key, pooling score and valid flag, (128 + 128 + 1) x 2 = 514 B: 11 x 1538 =
    16,918 B. A KDA layer's state: [64, 128, 128] fp32 = 4,194,304 B and the conv window of
    q, k and v, 3 x 8192 x (4 - 1) x 2 B = 147,456 B: 34 x 4,341,760 = 147,619,840 B per
    request, split by TP 2."""
    a = load_arch(str(GLM5))
    d = make_deployment(a, "h200", tp=2, context=32_767)
    kv, state = per_request_cache(a, d, a.layers)
    assert kv == 32_768 * 16_918 and state == 147_619_840 / 2


def test_glm5_next_shared_indexers(write_config):
    """8 layers, indexer_types "full" x 4 then "shared": layer 7's MLA reuses layer 3's top-k and
    builds no indexer. transformers 5.24 (meta device): 39,167,389,488 (+ 5 x 288 biases here)."""
    cfg = json.loads(GLM5.read_text())
    for k in ("layer_types", "mlp_layer_types", "indexer_types"):
        del cfg["text_config"][k]
    cfg["text_config"].update(num_hidden_layers=8, indexer_types=["full"] * 4 + ["shared"] * 4)
    a = load_arch(write_config(cfg))
    assert a.params_total == pytest.approx(39_167_389_488, rel=1e-5)
    assert not any(t.name.startswith("indexer.") for t in a.layers[7].tensors())
    assert a.layers[7].mixer.kv_bytes_per_token(1, 2) == 1024


def test_glm5_next_reads_linear_attn_config_and_refuses_rope(config_variant):
    a = load_arch(config_variant(GLM5, text_config={"linear_attn_config": {"num_heads": 32, "head_dim": 128}}))
    assert a.layers[0].mixer.num_heads == 32
    with pytest.raises(DecodescopeError):
        load_arch(config_variant(GLM5, text_config={"qk_rope_head_dim": 64}))
