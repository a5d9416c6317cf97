"""Multimodal wrappers whose language model is (nearly) a decoder family here: GLM-OCR, PaddleOCR-VL,
HunyuanOCR (hunyuan_vl), DeepSeek-OCR 2, Unlimited-OCR, Granite Vision 4, granite_docling, Molmo 2,
Cosmos3-Edge and Qwen2.5-Omni (decodescope/arch/mm_text.py, registry SAME_AS). Each was refused
before ("model_type='<x>_text' is not supported").

Expected counts are transformers 5.24's language model (decoder + an untied LM head) built on the
meta device from the same config; layouts are read by hand from each modeling_<type>.py."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import Attention, DenseMLP, MoE
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"


def _defaults(cls: str) -> Path:
    return CONFIGS / f"transformers__{cls}-defaults.json"


# transformers 5.24 on the meta device: the language model's parameters plus the LM head where
# it is not tied (model.language_model / model.text_model, get_output_embeddings())
TRANSFORMERS_COUNTS = {
    "GlmOcrConfig": 373_359_616,
    "PaddleOCRVLConfig": 360_748_032,
    "GraniteDoclingConfig": 386_630_656,
    "Molmo2Config": 8_191_259_648,
    "UnlimitedOcrConfig": 2_934_734_080,
    "Cosmos3EdgeConfig": 1_946_273_792,
    "Qwen2_5OmniThinkerConfig": 7_615_616_512,
    # Qwen2_5OmniForConditionalGeneration's thinker: Qwen2_5OmniThinkerTextModel 7,070,619,136 +
    # its untied 152,064 x 3,584 head
    "Qwen2_5OmniConfig": 7_615_616_512,
    # the defaults do not build in transformers (Granite4VisionModel needs deepstack_layer_map and
    # downsample_rate): built with deepstack_layer_map [[-1, 0]], downsample_rate "1/4", which
    # change only the projector
    "Granite4VisionConfig": 6_738_415_616,
    # HunYuanVLTextConfig's head_dim is None, which its attention cannot build: built with
    # head_dim 128 (hidden_size / heads, what decodescope assumes)
    "HunYuanVLConfig": 7_667_982_336,
}


@pytest.mark.parametrize("cls", sorted(TRANSFORMERS_COUNTS))
def test_class_defaults_count_as_transformers(cls):
    a = load_arch(str(_defaults(cls)))
    assert a.params_total == pytest.approx(TRANSFORMERS_COUNTS[cls], rel=1e-5)
    assert any("not counted" in n for n in a.notes)  # the vision / audio tower is named, not counted


def test_glm_ocr_release_config_by_hand():
    """zai-org/GLM-OCR: 16 GLM-4.1V layers, hidden 1536, 16 q heads / 8 kv heads of 128, MLP 4608,
    q/k/v and o unbiased (GlmOcrTextAttention), four norms a layer (the two pre-norms and
    post_self_attn / post_mlp_layernorm), untied head of 59,392 rows; one MTP layer that
    transformers skips (layers.16)."""
    a = load_arch(str(CONFIGS / "zai-org__GLM-OCR.trimmed.json"))
    h, q, kv, inter, vocab = 1536, 16 * 128, 8 * 128, 4608, 59392
    layer = 2 * h * q + 2 * h * kv + 3 * h * inter + 4 * h
    assert a.params_total == 16 * layer + 2 * vocab * h + h
    # transformers 5.24 on the meta device: 582,059,520 + the 91,226,112 head (the whole model with
    # its 434 M vision tower: 1.107 B; the model card says 0.9B)
    assert a.params_total == pytest.approx(582_059_520 + 91_226_112, rel=1e-5)
    assert not a.layers[0].mixer.attention_bias and not a.layers[0].mixer.o_bias
    # KV per token per layer: 8 heads x (128 K + 128 V) x 2 bytes
    assert a.layers[0].mixer.kv_bytes_per_token(8, 2) == 4096
    # the MTP layer: eh_proj [h, 2h], enorm, hnorm, shared_head.norm and one more layer
    assert len(a.mtp) == 1 and a.params_mtp == layer + 2 * h * h + 3 * h


def test_paddleocr_vl_is_ernie_and_reads_the_flat_hub_layout(write_config):
    """PaddleOCR-VL's language model is ERNIE-4.5-0.3B: 18 layers, hidden 1024, 16 q heads and 2
    kv heads of 128, SwiGLU 3072, no biases (use_bias false), a tied 103,424-row embedding. Its
    hub config.json puts those fields at the top level (model_type paddleocr_vl, no text_config)."""
    d = json.loads(_defaults("PaddleOCRVLConfig").read_text())
    h, q, kv, inter, vocab = 1024, 16 * 128, 2 * 128, 3072, 103424
    layer = 2 * h * q + 2 * h * kv + 3 * h * inter + 2 * h
    assert load_arch(str(_defaults("PaddleOCRVLConfig"))).params_total == 18 * layer + vocab * h + h
    flat = {**{k: v for k, v in d["text_config"].items() if k != "model_type"}, "model_type": "paddleocr_vl",
            "architectures": ["PaddleOCRVLForConditionalGeneration"], "vision_config": d["vision_config"]}
    a = load_arch(write_config(flat, "flat.json"))
    assert a.params_total == 18 * layer + vocab * h + h and a.tie_word_embeddings


def test_hunyuan_vl_keeps_its_qk_norms_without_use_qk_norm(write_config):
    """HunYuanDenseV1Attention builds query_layernorm / key_layernorm (head_dim each) whatever
    the config says; HunYuanVLTextConfig names no use_qk_norm."""
    a = load_arch(str(_defaults("HunYuanVLConfig")))
    names = [t.name for t in a.layers[0].tensors()]
    assert "q_norm" in names and "k_norm" in names
    # the same for Hunyuan dense itself (hunyuan_v1_dense), with or without the flag
    cfg = json.loads(_defaults("HunYuanVLConfig").read_text())["text_config"]
    flat = {**cfg, "model_type": "hunyuan_v1_dense"}
    flat.pop("use_qk_norm", None)
    assert load_arch(write_config(flat)).params_total == a.params_total


def test_deepseek_ocr2_needs_its_routing_fields(config_variant):
    """DeepseekOcr2TextConfig leaves num_experts_per_tok and mlp_layer_types None (its model
    cannot be built from them either): one clear error; with them set, transformers' count."""
    with pytest.raises(DecodescopeError, match="num_experts_per_tok"):
        load_arch(str(_defaults("DeepseekOcr2Config")))
    routing = {"num_experts_per_tok": 6, "mlp_layer_types": ["dense"] + ["sparse"] * 31}
    a = load_arch(config_variant(_defaults("DeepseekOcr2Config"), text_config=routing))
    # transformers 5.24 on the meta device, the same two fields set
    assert a.params_total == pytest.approx(38_503_739_392, rel=1e-5)
    assert isinstance(a.layers[0].mlp, DenseMLP) and isinstance(a.layers[1].mlp, MoE)
    assert isinstance(a.layers[0].mixer, Attention)  # LlamaAttention (MHA), not MLA


def test_unlimited_ocr_layout_by_hand():
    """12 layers of MHA (10 heads of 128 on hidden 1280), layer 0 a dense SwiGLU of 6848, then
    DeepseekV2Moe: 64 experts of 896, top 6, two shared experts merged into one MLP of 1792, a
    64 x 1280 router without bias. Every layer "reference_sliding_attention": counted in full."""
    a = load_arch(str(_defaults("UnlimitedOcrConfig")))
    assert [x.kind for x in a.layers] == ["attention"] * 12
    moe = a.layers[1].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size) == (64, 6, 1792)
    assert any("reference sliding-window" in n for n in a.notes)
    h = 1280
    attn = 4 * h * h + 2 * h
    per_token = 12 * attn + 3 * h * 6848 + 11 * (6 * 3 * h * 896 + 3 * h * 1792 + 64 * h) + 129280 * h + h
    # ~574 M read per token: DeepSeek-OCR's decoder is published as "DeepSeek3B-MoE-A570M"
    assert a.params_read_per_token == per_token


def test_molmo2_layout_and_extra_vocabulary(config_variant):
    """Molmo2TextModel: embed_tokens of vocab_size + additional_vocab_size (151,936 + 128) rows,
    lm_head of vocab_size; q/k norms per head (qk_norm_type qwen3); o_proj never biased."""
    a = load_arch(str(_defaults("Molmo2Config")))
    assert [t.shape for t in a.input_tables] == [(128, 4096)]
    names = {t.name: t.shape for t in a.layers[0].tensors()}
    assert names["q_norm"] == (128,) and "o_proj.bias" not in names
    # qk_norm_type olmo: norms over all heads (32 x 128 and 8 x 128); qkv_bias: q, k, v biased;
    # transformers 5.24 on the meta device with the same two fields
    b = load_arch(config_variant(_defaults("Molmo2Config"),
                                 text_config={"qk_norm_type": "olmo", "attention_bias": True}))
    assert b.params_total == pytest.approx(8_191_655_936, rel=1e-5)
    with pytest.raises(DecodescopeError, match="qk_norm_type"):
        load_arch(config_variant(_defaults("Molmo2Config"), text_config={"qk_norm_type": "gemma"}))


def test_cosmos3_edge_mlp_has_no_gate():
    """Cosmos3EdgeTextMLP: fc1 -> ReLU^2 -> fc2, no gate, no biases."""
    mlp = load_arch(str(_defaults("Cosmos3EdgeConfig"))).layers[0].mlp
    assert isinstance(mlp, DenseMLP) and not mlp.gated and not mlp.bias


def test_qwen2_5_omni_head_follows_the_thinkers_flag(write_config):
    """Qwen2.5-Omni's defaults: thinker_config.tie_word_embeddings false, its text_config's true;
    transformers ties by the thinker's, so the head is counted. The hub's config.json names no
    model_type in thinker_config.text_config: the top-level qwen2_5_omni is read."""
    a = load_arch(str(_defaults("Qwen2_5OmniConfig")))
    assert not a.tie_word_embeddings and any("talker" in n for n in a.notes)
    d = json.loads(_defaults("Qwen2_5OmniConfig").read_text())
    del d["thinker_config"]["text_config"]["model_type"]
    assert load_arch(write_config(d, "hub.json")).params_total == a.params_total


@pytest.mark.parametrize("cls", ["GraniteDoclingConfig", "PaddleOCRVLConfig"])
def test_tied_wrappers(cls):
    assert load_arch(str(_defaults(cls))).tie_word_embeddings


def test_exaone4_5_reads_its_text_config_as_exaone4(write_config):
    """EXAONE 4.5's hub config names its language model exaone4_5_text, which transformers 5.24
    reads as exaone4 (Exaone4_5_Config.__post_init__). EXAONE-4.5-33B's shape: h 5120, 64 layers,
    40 query heads of 128, 8 KV heads, intermediate 27392, vocab 153600, untied.
    A layer: q and o 2 x 5120^2 = 52,428,800; k and v 2 x 1024 x 5120 = 10,485,760; q_norm and
    k_norm 2 x 128; MLP 3 x 5120 x 27392 = 420,741,120; post-attention and post-feedforward norms
    2 x 5120 -> 483,666,176 x 64 = 30,954,635,264; + embedding and head 2 x 153600 x 5120 =
    1,572,864,000 + final norm 5120 = 32,527,504,384 (the same as transformers' Exaone4ForCausalLM
    on the meta device for these fields)."""
    text = {"model_type": "exaone4_5_text", "architectures": ["Exaone4ForCausalLM"], "hidden_size": 5120,
            "intermediate_size": 27392, "num_hidden_layers": 64, "num_attention_heads": 40,
            "num_key_value_heads": 8, "vocab_size": 153600, "max_position_embeddings": 262144,
            "sliding_window": 4096, "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
    cfg = {"model_type": "exaone4_5", "architectures": ["Exaone4_5_ForConditionalGeneration"],
           "tie_word_embeddings": False, "vocab_size": 153600, "text_config": text,
           "vision_config": {"model_type": "exaone4_5_vision", "depth": 32, "hidden_size": 2048}}
    text["layer_types"] = text["layer_types"] * 16
    a = load_arch(write_config(cfg))
    assert a.params_total == 32_527_504_384
    assert sum(layer.mixer.sliding_window == 4096 for layer in a.layers) == 48


def test_a_nested_config_takes_its_class_defaults_where_it_names_none():
    """llava-hf/llava-1.5-7b-hf's text_config names only max_position_embeddings, rms_norm_eps and
    vocab_size (32064): transformers wrote it as a diff against LlamaConfig, whose defaults (hidden
    4096, intermediate 11008, 32 layers, 32 heads, MHA) are Vicuna-7B's. Llama-2-7B's 6,738,415,616
    with a vocabulary of 32,064 in place of 32,000, embedding and untied head: 6,738,415,616 +
    2 x 64 x 4096 = 6,738,939,904."""
    a = load_arch(str(CONFIGS / "llava-hf__llava-1.5-7b-hf.json"))
    assert a.params_total == 6_738_939_904
    m = a.layers[0].mixer  # MHA: Llama's num_key_value_heads default None is num_attention_heads
    assert (len(a.layers), m.num_attention_heads, m.num_key_value_heads, m.head_dim) == (32, 32, 32, 128)


def test_class_defaults_never_override_what_a_config_names(write_config):
    """Mistral's class default sliding_window (4096) fills a text_config that names none; one that
    says null keeps full attention; a wrapper-level field wins over the class default."""
    text = {"model_type": "mistral", "vocab_size": 32064, "num_hidden_layers": 2}
    windowed = load_arch(write_config({"model_type": "llava_next", "text_config": text}, "a.json"))
    assert {layer.mixer.sliding_window for layer in windowed.layers} == {4096}
    full = load_arch(write_config({"model_type": "llava_next", "text_config": {**text, "sliding_window": None}}, "b.json"))
    assert {layer.mixer.sliding_window for layer in full.layers} == {None}
    wide = load_arch(write_config({"model_type": "llava_next", "hidden_size": 2048, "text_config": text}, "c.json"))
    assert wide.layers[0].mixer.hidden_size == 2048
