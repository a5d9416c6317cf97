"""Model types whose decoder is another family's (decodescope/arch/registry.py SAME_AS). Each
fixture is transformers 5.24's config class on its defaults (tests/data/configs/SOURCES.md);
each expected count is transformers' own model of that class on the meta device (the sum of
every parameter's numel), not decodescope's: equal to the parameter, the tensors are the same."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch

CONFIGS = Path(__file__).parent / "data" / "configs"

# class: (model_type, transformers 5.24's count on the class defaults)
TRANSFORMERS_COUNTS = {
    "HeliumConfig": ("helium", 2_172_643_840),
    "CwmConfig": ("cwm", 32_581_097_472),
    "IQuestCoderConfig": ("iquestcoder", 39_794_283_520),
    "VaultGemmaConfig": ("vaultgemma", 2_614_222_080),
    "Apertus1p5TextConfig": ("apertus1p5_text", 8_091_086_912),
    "SarvamMLAConfig": ("sarvam_mla", 106_031_763_456),
    "MiniCPM3Config": ("minicpm3", 4_073_875_968),
    "MellumConfig": ("mellum", 12_149_923_072),
    "SarvamMoEConfig": ("sarvam_moe", 32_152_648_064),
    "FlexOlmoConfig": ("flex_olmo", 33_270_665_216),
    "Gemma4UnifiedTextConfig": ("gemma4_unified_text", 3_010_758_400),
    # MinistralConfig() leaves head_dim None, on which transformers' attention fails: head_dim 128
    # (hidden 4096 / 32 heads, Ministral-8B's) set, as SOURCES.md says
    "MinistralConfig": ("ministral", 7_241_732_096),
    # the language model alone: transformers' Phi4MultimodalForCausalLM holds 5,308,268,992 with
    # its vision and audio encoders; the parameters outside them (names without "audio",
    # "image_embed" or "vision") sum to 4,400,286,720
    "Phi4MultimodalConfig": ("phi4_multimodal", 4_400_286_720),
    # CohereCompassTextConfig() does not build as it is (KeyError 'full_attention' in
    # rope_parameters): the fixture names RoPE for its one layer type, as SOURCES.md says
    "CohereCompassTextConfig": ("cohere_compass_text", 34_980_831_232),
}


def _load(cls: str):
    path = CONFIGS / f"transformers__{cls}-defaults.json"
    return load_arch(str(path)), json.loads(path.read_text())


@pytest.mark.parametrize("cls", TRANSFORMERS_COUNTS)
def test_the_same_decoder_counts_as_transformers_does(cls):
    a, cfg = _load(cls)
    model_type, count = TRANSFORMERS_COUNTS[cls]
    assert cfg["model_type"] == model_type
    assert a.params_total == count
    assert any(n.startswith(f"model_type {model_type}: built as") for n in a.notes)


def test_cwm_keeps_its_sliding_layers():
    """CwmConfig(): layer_types of 64 layers, one full-attention layer in four, the others a
    sliding window of 8192 tokens (the KV cache they hold stops growing there)."""
    a, cfg = _load("CwmConfig")
    assert [layer.kind for layer in a.layers] == ["sliding_attention" if t == "sliding_attention" else "attention"
                                                  for t in cfg["layer_types"]]
    assert cfg["layer_types"].count("full_attention") == 16
    assert {layer.mixer.sliding_window for layer in a.layers if layer.kind == "sliding_attention"} == {8192}


def test_minicpm3_is_mla_with_dense_mlps_and_a_tied_head():
    a, _ = _load("MiniCPM3Config")
    assert {layer.kind for layer in a.layers} == {"mla"}
    assert {type(layer.mlp).__name__ for layer in a.layers} == {"DenseMLP"}
    assert a.tie_word_embeddings


def test_a_tied_head_by_class_default_where_the_config_leaves_the_key_out(write_config):
    """VaultGemmaConfig ties its head by default: a config.json without tie_word_embeddings
    still has one table of 256,000 x 2,304 (590 M parameters), not two."""
    a, cfg = _load("VaultGemmaConfig")
    del cfg["tie_word_embeddings"]
    b = load_arch(write_config(cfg))
    assert b.tie_word_embeddings and b.params_total == a.params_total == 2_614_222_080
    untied = load_arch(write_config({**cfg, "tie_word_embeddings": False}, "untied.json"))
    assert a.params_total + 256_000 * 2_304 == untied.params_total


def test_ministral_windows_every_layer_as_its_config_class():
    """MinistralConfig's layer_types: "sliding_attention" on every layer where sliding_window
    is set (4096 tokens on the defaults), as Mistral's own configs read."""
    a, cfg = _load("MinistralConfig")
    assert set(cfg["layer_types"]) == {"sliding_attention"}
    assert {layer.mixer.sliding_window for layer in a.layers} == {4096}


def test_phi4_multimodal_counts_its_language_model_and_notes_the_encoders():
    a, cfg = _load("Phi4MultimodalConfig")
    assert cfg["vision_config"] and cfg["audio_config"]
    assert any("vision and audio encoders" in n and "not counted" in n for n in a.notes)
