"""Decoders of 2026 that are an existing family's with one change each, read from the
modeling code of transformers 5.24 (models/<type>/modular_<type>.py):
- Flint (RecursiveSI/flint): Qwen3-MoE's attention and experts with a learned sink per head
  in every layer, a shared expert (ungated), dense MLPs on mlp_only_layers, sliding-window
  layers where layer_types says so;
- Kolibri-1 (Aleph-Alpha/Kolibri-1): per-head q/k norms, GLM-4's two post-norms
  (post_self_attn_layernorm, post_mlp_layernorm), 384 experts and a shared one, 4 of 5
  layers in a 513-token window;
- A.X-K1 (skt/A.X-K1): DeepSeek-V3 plus a norm on each MoE block's output (post_mlp_layernorm);
- Lara-4-Mini (translated/Lara-4-Mini-Base): Qwen3.5-MoE's Gated DeltaNet and experts, its
  attention Qwen3's (no output gate), some of it in a window, no gate on the shared expert;
- nanochat (karpathy/nanochat-d32): norms without weights, an ungated squared-ReLU MLP.
- ModernBERT's decoder (modernbert-decoder, the Ettin decoders): MHA, a GeGLU MLP, LayerNorms,
  2 of 3 layers in a 64-token window, a prediction head before the tied decoder;
- Beam (reflection/Beam-1.0-501B-A23B, the checkpoint BeamConfig's docstring names): AFMoE's
  gated attention with one gate bias per head, 5 of 6 layers in a 512-token window, 3 dense
  MLPs, then 256 routed experts (top 8) without a shared one.
Each fixture is the config class on its defaults (tests/data/configs/SOURCES.md); expected
counts are transformers' own model on the meta device, layouts and cache bytes by hand."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import MoE
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"

# transformers 5.24, AutoModelForCausalLM.from_config(cls()) on the meta device
TRANSFORMERS_COUNTS = {
    "FlintConfig": 39_785_287_456,
    "Kolibri1Config": 78_103_055_360,
    "AXK1Config": 518_983_052_288,
    "LaraMiniConfig": 7_281_684_672,
    "NanoChatConfig": 256_573_440,
    "BeamConfig": 501_267_599_808,
    "ModernBertDecoderConfig": 149_655_232,
}


def _arch(cls: str):
    return load_arch(str(CONFIGS / f"transformers__{cls}-defaults.json"))


def _names(layer) -> set[str]:
    return {t.name for t in layer.tensors()}


@pytest.mark.parametrize("cls", TRANSFORMERS_COUNTS)
def test_counts_equal_transformers(cls):
    assert _arch(cls).params_total == TRANSFORMERS_COUNTS[cls]


def test_flint_layout_sinks_and_window():
    """FlintConfig's layer_types: full attention on layers 0, 1, every i % 4 == 1 and the last
    (48): 14 layers; the other 35 keep 513 tokens. MoE from layer 2. 4 KV heads x 128 x (K + V)
    x 2 B = 2048 B a token; at context 1000 (1001 tokens cached): (14 x 1001 + 35 x 513) x 2048."""
    a = _arch("FlintConfig")
    full = [i for i, layer in enumerate(a.layers) if layer.kind == "attention"]
    assert full == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 48]
    assert [isinstance(layer.mlp, MoE) for layer in a.layers[:3]] == [False, False, True]
    assert all("sinks" in _names(layer) for layer in a.layers)
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert (kv, state) == ((14 * 1001 + 35 * 513) * 2048, 0)


def test_flint_and_kolibri_layer_types_default_as_their_config_classes(write_config):
    """Without layer_types: Flint's rule above, Kolibri-1's full attention every 5th layer."""
    for cls, full in (("FlintConfig", 14), ("Kolibri1Config", 10)):
        cfg = json.loads((CONFIGS / f"transformers__{cls}-defaults.json").read_text())
        del cfg["layer_types"]
        a = load_arch(write_config(cfg, f"{cls}.json"))
        assert sum(layer.kind == "attention" for layer in a.layers) == full


def test_kolibri_post_norms_and_window():
    """Four norms a layer (two pre-norms, two post-norms) and per-head q/k norms of 128; 10 full
    layers of 50, 40 in a 513-token window: (10 x 1001 + 40 x 513) x 2048 B at context 1000."""
    a = _arch("Kolibri1Config")
    assert {"post_self_attn_layernorm", "post_mlp_layernorm", "q_norm", "k_norm"} <= _names(a.layers[0])
    kv, _ = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert kv == (10 * 1001 + 40 * 513) * 2048


def test_axk1_norm_after_each_moe_block_only():
    """mlp_layer_types: layer 0 dense, 60 sparse; the post-MoE norm (7168) only on the 60 (the
    dense layers' copies in the checkpoint are ignored on load). The same config built as
    DeepSeek-V3 lacks exactly those 60 x 7168 values. MLA cache: (512 + 64) x 2 B a token."""
    a = _arch("AXK1Config")
    assert "post_mlp_layernorm" not in _names(a.layers[0])
    assert all("post_mlp_layernorm" in _names(layer) for layer in a.layers[1:])
    cfg = json.loads((CONFIGS / "transformers__AXK1Config-defaults.json").read_text())
    assert a.layers[1].mixer.kv_bytes_per_token(1, 2) == 1152
    assert cfg["mlp_layer_types"].count("sparse") == 60


def test_axk1_differs_from_deepseek_v3_by_the_post_moe_norms(write_config):
    cfg = json.loads((CONFIGS / "transformers__AXK1Config-defaults.json").read_text())
    as_v3 = load_arch(write_config({**cfg, "model_type": "deepseek_v3"}, "as_v3.json"))
    assert TRANSFORMERS_COUNTS["AXK1Config"] - as_v3.params_total == 60 * 7168


def test_lara_mini_layout_ungated_attention_and_state():
    """LaraMiniConfig's default pattern, period 5: linear, sliding, linear, full, sliding; 34
    layers = 14 linear, 13 sliding (512 tokens), 7 full. Attention without Qwen3.5's output
    gate: q_proj 16 heads x 128 = 2048 rows. Gated DeltaNet state a layer: 16 value heads x 128 x
    128 x 4 B = 1,048,576 B recurrent + (2 x 8 x 128 + 16 x 128) x 3 x 2 B = 24,576 B of conv
    window. KV: 4 x 128 x 2 x 2 B = 2048 B a token."""
    a = _arch("LaraMiniConfig")
    kinds = [layer.kind for layer in a.layers]
    assert kinds[:5] == ["linear_attention", "sliding_attention", "linear_attention", "attention", "sliding_attention"]
    assert (kinds.count("linear_attention"), kinds.count("sliding_attention"), kinds.count("attention")) == (14, 13, 7)
    q = next(t for t in a.layers[1].tensors() if t.name == "q_proj")
    assert q.shape == (2048, 1024)
    assert "shared_expert_gate" not in _names(a.layers[0])
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert kv == (7 * 1001 + 13 * 512) * 2048
    assert state == 14 * (1_048_576 + 24_576)


def test_nanochat_by_hand():
    """Untied 50,304 x 768 embedding and head; a layer: q, k, v, o 4 x 768^2 and fc1 / fc2
    2 x 8192 x 768; no norm weights anywhere (the final norm either)."""
    a = _arch("NanoChatConfig")
    layer = 4 * 768 * 768 + 2 * 8192 * 768
    assert a.params_total == 12 * layer + 2 * 50304 * 768
    assert not [n for n in _names(a.layers[0]) if "norm" in n] and a.final_norm.params == 0
    assert "gate_proj" not in _names(a.layers[0])


def test_beam_count_layout_and_window():
    """BeamConfig's defaults are Beam-1.0-501B-A23B ('501B' on its model page,
    https://huggingface.co/reflection/collections). By hand: attention 6144 x 5120 (q), 2 x
    1024 x 5120 (k, v), 5120 x 6144 (o), 6144 x 5120 (gate_proj) = 104,857,600 + 48 gate
    biases + 2 x 128 q/k norms; four norms 4 x 5120; 52 layers. Dense MLP 3 x 5120 x 20480
    = 314,572,800 on layers 0-2; 49 MoE layers of 256 x 3 x 5120 x 2560 = 10,066,329,600
    + a router 256 x 5120; embedding and head 2 x 151936 x 5120 = 1,555,824,640; final norm.
    Active: 8 experts a token, 314,572,800 a layer.
    Full attention on layers 5, 11, ..., 47 and 51 (9), the other 43 keep 512 tokens:
    8 KV heads x 128 x (K + V) x 2 B = 4096 B a token; at context 1000 (1001 cached)
    (9 x 1001 + 43 x 512) x 4096."""
    a = _arch("BeamConfig")
    attn = 6144 * 5120 * 2 + 2 * 1024 * 5120 + 5120 * 6144 + 48 + 2 * 128 + 4 * 5120
    moe_layer, dense = 256 * 3 * 5120 * 2560 + 256 * 5120, 3 * 5120 * 20480
    total = 52 * attn + 3 * dense + 49 * moe_layer + 2 * 151936 * 5120 + 5120
    assert a.params_total == total == TRANSFORMERS_COUNTS["BeamConfig"]
    assert abs(a.params_total / 501e9 - 1) < 0.01
    active = total - 49 * (256 - 8) * 3 * 5120 * 2560
    assert a.params_active == active and abs(active / 23e9 - 1) < 0.03  # "A23B"
    full = [i for i, layer in enumerate(a.layers) if layer.kind == "attention"]
    assert full == [5, 11, 17, 23, 29, 35, 41, 47, 51]
    assert [isinstance(layer.mlp, MoE) for layer in a.layers[:4]] == [False, False, False, True]
    assert {"gate_bias", "post_attention_norm", "post_mlp_layernorm"} <= _names(a.layers[0])
    kv, state = per_request_cache(a, make_deployment(a, "h200", context=1000), a.layers)
    assert (kv, state) == ((9 * 1001 + 43 * 512) * 4096, 0)


def test_beam_without_layer_lists_defaults_as_its_config_class(write_config):
    """BeamConfig.__post_init__: full attention every 6th layer and the last; 3 dense MLPs."""
    cfg = json.loads((CONFIGS / "transformers__BeamConfig-defaults.json").read_text())
    del cfg["layer_types"], cfg["mlp_layer_types"]
    a = load_arch(write_config(cfg, "beam.json"))
    assert a.params_total == TRANSFORMERS_COUNTS["BeamConfig"]
    assert sum(layer.kind == "attention" for layer in a.layers) == 9


@pytest.mark.parametrize("mt", ["gemma4_assistant", "gemma4_unified_assistant"])
def test_a_gemma4_assistant_is_refused_as_a_drafter_of_its_target(write_config, mt):
    """Gemma4AssistantConfig shares every layer's K/V with the target model (its
    validate_architecture: 'All layers in a Gemma 4 Assistant models must be shared') and
    takes the target's hidden state: one clear error naming that, and what to pass instead."""
    text = {"model_type": "gemma4_text", "hidden_size": 256, "num_hidden_layers": 4, "num_kv_shared_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 2048,
            "vocab_size": 262144}
    cfg = {"model_type": mt, "backbone_hidden_size": 1536, "text_config": text}
    with pytest.raises(DecodescopeError, match="assistant, a drafter whose layers read the target model's KV cache"):
        load_arch(write_config(cfg, f"{mt}.json"))


def test_modernbert_decoder_by_hand_and_its_window():
    """ModernBertDecoderConfig's defaults: h 768, 22 layers, 12 heads of 64 (MHA), intermediate
    1152, vocab 50368, tied. A layer: q, k, v, Wo 4 x 768^2 = 2,359,296; Wi 768 x 2304 + Wo
    1152 x 768 = 2,654,208; two LayerNorms (layer 0: the embedding's norm in place of the one
    before attention) 1,536 -> 5,015,040 x 22 = 110,330,880; embedding 50368 x 768 =
    38,682,624; final norm 768; head dense 768^2 + its norm 768 = 590,592; decoder bias 50,368
    -> 149,655,232. Full attention on layers 0, 3, ..., 21 (8); the other 14 within
    local_attention / 2 = 64 tokens: 12 x 64 x (K + V) x 2 B = 3072 B a token; at context 1000
    (1001 cached) (8 x 1001 + 14 x 64) x 3072."""
    a = _arch("ModernBertDecoderConfig")
    total = 22 * (4 * 768**2 + 768 * 2304 + 1152 * 768 + 2 * 768) + 50368 * 768 + 768 + 768**2 + 768 + 50368
    assert a.params_total == total == TRANSFORMERS_COUNTS["ModernBertDecoderConfig"]
    assert [i for i, layer in enumerate(a.layers) if layer.kind == "attention"] == list(range(0, 22, 3))
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert (kv, state) == ((8 * 1001 + 14 * 64) * 3072, 0)


def test_modernbert_decoder_as_hub_configs_write_it(write_config):
    """Hub configs give global_attn_every_n_layers and local_attention, not layer_types or
    sliding_window: the same layers."""
    cfg = json.loads((CONFIGS / "transformers__ModernBertDecoderConfig-defaults.json").read_text())
    del cfg["layer_types"], cfg["sliding_window"]
    a = load_arch(write_config({**cfg, "global_attn_every_n_layers": 3, "local_attention": 128}, "ettin.json"))
    assert a.params_total == TRANSFORMERS_COUNTS["ModernBertDecoderConfig"]
    assert sum(layer.kind == "attention" for layer in a.layers) == 8
    assert {layer.mixer.sliding_window for layer in a.layers if layer.kind == "sliding_attention"} == {64}


def test_a_diffusion_language_model_is_refused_as_one(write_config):
    """DiffusionGemmaConfig (transformers 5.24): its text model denoises blocks in parallel."""
    cfg = {"model_type": "diffusion_gemma", "text_config": {"model_type": "diffusion_gemma_text", "hidden_size": 640,
                                                            "num_hidden_layers": 2, "num_attention_heads": 4,
                                                            "vocab_size": 262144}}
    with pytest.raises(DecodescopeError, match="a diffusion language model"):
        load_arch(write_config(cfg, "diffusion_gemma.json"))
