"""Vision-language models whose hub config.json is read by remote code (trust_remote_code) and
nests the language model under llm_config (OpenGVLab InternVL 2-3.5, AIDC-AI Ovis, NVLM-D,
H2OVL) or language_config (DeepSeek-VL2, DeepSeek-OCR, Janus). Each was refused before
("model_type='internvl_chat' ... is not supported"): decodescope read only text_config.

transformers cannot build these wrappers without their remote code, so the expected counts are
the language model's, derived by hand below (and, where transformers has the nested decoder's
class, its count on the meta device), never read off decodescope."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import MLA, Attention, DenseMLP, MoE
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"
NOTE = "of this multimodal config: not counted"


def _note(arch) -> str:
    return next(n for n in arch.notes if NOTE in n)


def _write(tmp_path: Path, cfg: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_deepseek_ocr_language_model_by_hand():
    """deepseek-ai/DeepSeek-OCR (model_type deepseek_vl_v2; language_config names no model_type,
    use_mla false: DeepseekV2DecoderLayer picks MHA). From the checkpoint's own tensor list:
    embed_tokens and an untied lm_head, 129,280 x 1,280 each        = 330,956,800
    12 layers x (q, k, v, o of 1,280 x 1,280 + 2 norms of 1,280)    =  78,673,920
    layer 0 dense MLP (first_k_dense_replace 1): 3 x 6,848 x 1,280  =  26,296,320
    layers 1-11 MoE: 64 experts x 3 x 896 x 1,280 + gate 64 x 1,280
      + shared MLP 3 x 1,792 x 1,280 (2 shared experts x 896)       = 11 x 227,164,160
    final norm                                                        =       1,280
    total 2,934,734,080 (= transformers 5.24's UnlimitedOcrConfig defaults, the same decoder).
    Active: 58 of 64 experts idle on 11 layers, 11 x 58 x 3,440,640 = 2,195,128,320 fewer:
    739,605,760, of which 574,127,360 beside the embedding table, the card's "570M activated".
    The checkpoint's 3,336,106,240 params hold 401,372,160 more in SAM + CLIP + the projector."""
    a = load_arch(str(CONFIGS / "deepseek-ai__DeepSeek-OCR.json"))
    assert a.params_total == 2_934_734_080
    assert a.params_active == 739_605_760
    assert not a.tie_word_embeddings
    assert len(a.layers) == 12 and isinstance(a.layers[0].mlp, DenseMLP)
    assert all(isinstance(x.mlp, MoE) and x.mlp.num_experts == 64 and x.mlp.num_experts_per_tok == 6
               for x in a.layers[1:])
    attn = a.layers[0].mixer
    assert isinstance(attn, Attention) and not isinstance(attn, MLA)
    # MHA: 10 K and 10 V heads of 128 a layer, 2 bytes each: 5,120 B a layer, 61,440 B a token
    assert (attn.num_key_value_heads, attn.head_dim) == (10, 128)
    assert sum(x.mixer.kv_bytes_per_token(10, 2) for x in a.layers) == 61_440
    assert "vision and projector encoders" in _note(a)


def test_internvl3_1b_qwen2_language_model():
    """OpenGVLab/InternVL3-1B: llm_config qwen2 (Qwen2.5-0.5B's shape), the top-level
    tie_word_embeddings false unties the head. By hand: embed + head 2 x 151,674 x 896 =
    271,799,808; a layer q 896x896+896, k and v 896x128+128 each, o 896x896, MLP 3 x 896 x 4,864,
    2 norms = 14,912,384, x 24 = 357,897,216; final norm 896: 629,697,920, transformers 5.24's
    Qwen2ForCausalLM on this llm_config on the meta device too. The card's 0.9B adds
    InternViT-300M and the MLP projector."""
    a = load_arch(str(CONFIGS / "OpenGVLab__InternVL3-1B.json"))
    assert a.model_type == "qwen2"  # the nested decoder's model_type wins over internvl_chat
    assert a.params_total == 629_697_920
    assert "the vision encoder" in _note(a)


def test_internvl2_5_2b_internlm2_language_model():
    """OpenGVLab/InternVL2_5-2B: llm_config internlm2 (internlm2_5-1_8b-chat), untied. By hand:
    tok_embeddings + output 2 x 92,553 x 2,048 = 379,097,088; a layer wqkv (16 + 2 x 8) x 128 x
    2,048 = 8,388,608, wo 2,048 x 2,048, w1/w3/w2 3 x 2,048 x 8,192, 2 norms = 62,918,656, x 24 =
    1,510,047,744; final norm 2,048: 1,889,146,880, the "1.89B" of internlm2_5-1_8b-chat's card."""
    a = load_arch(str(CONFIGS / "OpenGVLab__InternVL2_5-2B.json"))
    assert a.model_type == "internlm2"
    assert a.params_total == 1_889_146_880


# Janus-Pro-7B's language model: deepseek-llm-7b's shape (hidden 4096, MLP 11008, 30 layers, 32
# heads, vocabulary 102,400); transformers 5.24's LlamaForCausalLM on it, untied, on the meta
# device: 6,910,365,696 (the inline configs below are shapes, not hub files)
JANUS_LM = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
            "num_hidden_layers": 30, "vocab_size": 102400}
JANUS_PARTS = {k: {"cls": k} for k in ("vision_config", "aligner_config", "gen_vision_config",
                                        "gen_aligner_config", "gen_head_config")}


@pytest.mark.parametrize("nested_type", [{"model_type": "llama"}, {}])
def test_janus_language_config(tmp_path, nested_type):
    """multi_modality: the language_config's llama decides, or where it names no model_type the
    wrapper's multi_modality (SAME_AS llama); every image part is named, none counted."""
    a = load_arch(_write(tmp_path, {"model_type": "multi_modality", "torch_dtype": "bfloat16", **JANUS_PARTS,
                                    "language_config": {**JANUS_LM, **nested_type}}))
    assert a.params_total == 6_910_365_696
    assert "vision, aligner, gen_vision, gen_aligner and gen_head encoders" in _note(a)


# a tiny Qwen3 decoder: embed + untied head 2 x 1,000 x 64 = 128,000; a layer q 64x64, k and v
# 64x32 each (2 kv heads of 16), o 64x64, q/k norms 2 x 16, MLP 3 x 64 x 128, 2 norms = 37,024;
# 2 layers 74,048; final norm 64: 202,112
TINY_QWEN3 = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000,
              "tie_word_embeddings": False}


@pytest.mark.parametrize("wrapper, encoder, word", [
    ("internvl_chat", "vision_config", "vision"),
    ("NVLM_D", "vision_config", "vision"),
    ("h2ovl_chat", "vision_config", "vision"),
    ("ovis", "visual_tokenizer_config", "visual_tokenizer"),  # Ovis 1.6 / 2
    ("ovis2_5", "vit_config", "vit"),
])
def test_llm_config_wrappers(tmp_path, wrapper, encoder, word):
    a = load_arch(_write(tmp_path, {"model_type": wrapper, encoder: {"hidden_size": 1152}, "llm_config": TINY_QWEN3}))
    assert a.model_type == "qwen3" and a.params_total == 202_112
    assert f"the {word} encoder " in _note(a)


def test_deepseek_vl2_language_config_with_mla(tmp_path):
    """DeepSeek-VL2's language_config keeps DeepseekV2Config's default use_mla (true): MLA layers,
    whether the wrapper (deepseek_vl_v2) or the nested deepseek_v2 names the family."""
    lm = {"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "kv_lora_rank": 32, "q_lora_rank": None, "qk_nope_head_dim": 16,
          "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
          "n_shared_experts": 1, "first_k_dense_replace": 1, "vocab_size": 1000}
    for nested in ({}, {"model_type": "deepseek_v2"}):
        a = load_arch(_write(tmp_path, {"model_type": "deepseek_vl_v2", "language_config": {**lm, **nested},
                                        "vision_config": {}, "projector_config": {"n_embed": 256}}))
        assert all(isinstance(x.mixer, MLA) for x in a.layers)
        assert isinstance(a.layers[1].mlp, MoE)


def test_a_nested_config_that_is_not_an_object_is_refused(tmp_path):
    with pytest.raises(DecodescopeError, match="llm_config is not a JSON object"):
        load_arch(_write(tmp_path, {"model_type": "internvl_chat", "llm_config": [1, 2]}))
