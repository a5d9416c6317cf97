"""MLA families with a DeepSeek-V3.2-style lightning indexer (top-k sparse attention) beyond
DeepSeek-V3.2 / GLM-5: Tencent Hy v4 (hy_v4) and rednote dots3 (dots3_note).

Hy v4 (transformers' models/hy_v4/modular_hy_v4.py): every layer MLA with a q latent, its output
times sigmoid(gate_proj(x)) with gate_proj [heads x v_head_dim, hidden], a sink logit per head,
and top-k sparse attention; a layer whose indexer_types entry is "full" runs its own indexer
(DeepseekV32Indexer: wq_b, wk, a LayerNorm k_norm with a bias, weights_proj) and caches its
keys, a "shared" one builds none and reuses the top-k of the last full layer. Hyper-connections
(HYV4HyperConnection) around attention and MLP: fn [2 x hc, hc x hidden], base [2 x hc],
scale [2]; a head (HYV4HyperHead) hc_fn [hc, hc x hidden], hc_base [hc], hc_scale [1]. MLPs
per mlp_layer_types, a dense first layer by default. The checkpoint's MTP layers
(model.mtp_layers.*) transformers skips on load.

dots3 (models/dots3_note/modular_dots3_note.py, the text decoder): Dots3NoteTextAttention takes
its shapes from per_layer_config[layer]: indexed layers (an indexer) at kv_lora_rank 512, 128
heads, and sliding-window layers at kv_lora_rank 1024, 64 heads, qk_nope 192; every layer has
k_rope_only_layernorm [qk_rope_head_dim] and a per-head gate g_proj [heads, hidden]. The
released config.json is flat and names the sliding shapes swa_* with "full_attention" for the
indexed layers (use_dsa defaults true); transformers 5 writes text_config with
"indexed_attention" and per_layer_config.

Every expected count is transformers 5.24's own model on the meta device (the sum of every
parameter's numel); decodescope counts one more tensor per MoE layer, the router's
e_score_correction_bias (256 values), a buffer in transformers that the checkpoints carry, so
counts agree within 1e-5. Layouts and cache bytes are derived by hand below."""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
HY_DEFAULTS = CONFIGS / "transformers__HYV4Config-defaults.json"
HY4 = CONFIGS / "tencent__Hy4-preview.json"
DOTS3_DEFAULTS = CONFIGS / "transformers__Dots3NoteConfig-defaults.json"
DOTS3 = CONFIGS / "dots-studio__dots3-note-prev.trimmed.json"

# transformers 5.24, AutoModelForCausalLM.from_config(config) on the meta device
TRANSFORMERS_COUNTS = {
    HY_DEFAULTS: 58_278_193_133,
    HY4: 769_907_389_085,
    # Dots3NoteForCausalLM: the text decoder only; Dots3NoteForConditionalGeneration adds the
    # vision tower (6,871,277,312) and the audio tower (886,199,680): 287,309,195,008 in all
    DOTS3_DEFAULTS: 279_551_718_016,
    DOTS3: 279_551_718_016,
}


@pytest.mark.parametrize("path", TRANSFORMERS_COUNTS, ids=lambda p: p.stem)
def test_counts_as_transformers_does(path):
    assert load_arch(str(path)).params_total == pytest.approx(TRANSFORMERS_COUNTS[path], rel=1e-5)


def test_published_counts():
    """Hy4-preview "770B-A49B" (the r/LocalLLaMA thread of its release,
    https://www.reddit.com/r/LocalLLaMA/comments/1w0igxk/tencenthy4preview_770ba49b_weight_dropped/);
    dots3-note-prev "280B total / 16B activated" (its model card,
    https://huggingface.co/dots-studio/dots3-note-prev), both rounded to 1 B. The vision (~7 B)
    and audio (~0.8 B) towers the card gives apart are not in the 280 B, nor counted here."""
    hy, dots = load_arch(str(HY4)), load_arch(str(DOTS3))
    assert hy.params_total == pytest.approx(770e9, abs=0.5e9)
    assert hy.params_active == pytest.approx(49e9, abs=0.5e9)
    assert dots.params_total == pytest.approx(280e9, abs=0.5e9)
    assert dots.params_active == pytest.approx(16e9, abs=0.5e9)


def test_hy_v4_indexers_and_mlps_by_layer():
    """HYV4Config's defaults (34 layers): indexer_types "full" at layer 0 and every 4th from 1
    (0, 1, 5, ..., 33: 10 layers), "shared" elsewhere; mlp_layer_types dense at layer 0 (an MLP
    of intermediate_size 6912), 256 experts elsewhere. A full layer holds the indexer on top of
    a shared one's tensors: wq_b 16 heads x 128 x q_lora 1536 = 3,145,728, wk 128 x 2816 =
    360,448, k_norm weight + bias 256, weights_proj 16 x 2816 = 45,056: 3,551,488 (transformers'
    layers 1 and 2: 1,743,900,468 - 1,740,348,980)."""
    a = load_arch(str(HY_DEFAULTS))
    own = [i for i, layer in enumerate(a.layers) if any(t.name == "indexer.wq_b" for t in layer.tensors())]
    assert own == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33]
    assert type(a.layers[0].mlp).__name__ == "DenseMLP" and a.layers[0].mlp.intermediate_size == 6912
    assert {a.layers[i].mlp.num_experts for i in range(1, 34)} == {256}
    params = [sum(t.params for t in a.layers[i].tensors()) for i in (1, 2)]
    assert params[0] - params[1] == 3_551_488


def test_hy_v4_gate_sinks_and_hyper_connections():
    """Hidden 2816, 32 heads of v_head_dim 256, hc_mult 4: gate_proj [32 x 256, 2816], one sink
    per head; per sub-layer fn [2 x 4, 4 x 2816] = [8, 11264], base [8], scale [2] (no comb: not
    DeepSeek-V4's (2 + 4) x 4 mixes); the hc head [4, 11264], [4], [1] once, with the last layer."""
    a = load_arch(str(HY_DEFAULTS))
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert shapes["attn_gate_proj"] == (8192, 2816) and shapes["sinks"] == (32,)
    for part in ("attn_hc.", "ffn_hc."):
        assert (shapes[part + "fn"], shapes[part + "base"], shapes[part + "scale"]) == ((8, 11264), (8,), (2,))
    heads = [i for i, layer in enumerate(a.layers) if any(t.name.startswith("hc_head.") for t in layer.tensors())]
    assert heads == [33]
    last = {t.name: t.shape for t in a.layers[33].tensors()}
    assert (last["hc_head.hc_fn"], last["hc_head.hc_base"], last["hc_head.hc_scale"]) == ((4, 11264), (4,), (1,))


def test_deepseek_v4_hyper_connections_keep_their_comb():
    """DeepSeek-V4's defaults (hidden 4096, hc_mult 4) through the shared hyper_connections:
    fn [(2 + 4) x 4, 4 x 4096] = [24, 16384], base [24], 3 scales, as before Hy v4 reused it."""
    a = load_arch(str(CONFIGS / "transformers__DeepseekV4Config-defaults.json"))
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert (shapes["hc_attn_fn"], shapes["hc_attn_base"], shapes["hc_attn_scale"]) == ((24, 16384), (24,), (3,))
    assert shapes["hc_ffn_fn"] == (24, 16384)


def test_hy4_preview_mtp_layer():
    """num_nextn_predict_layers 1: eh_proj [6144, 12288], enorm, hnorm, a final norm and one layer
    with its own indexer (index_n_heads 32) and 256 experts, without hyper-connections; about
    10 B parameters (10.05 B: MoE 256 x 3 x 2048 x 6144 = 9.66 B, the rest attention and eh_proj)."""
    a = load_arch(str(HY4))
    (m,) = a.mtp
    names = {t.name for t in m.tensors()}
    assert {"eh_proj", "enorm", "hnorm", "indexer.wq_b"} <= names and not any("hc" in n for n in names)
    assert m.layer.mixer.index_n_heads == 32 and m.layer.mlp.num_experts == 256
    assert a.params_mtp == pytest.approx(10.05e9, rel=1e-3)


def test_hy_v4_kv_bytes_and_reads_by_hand():
    """Hy4-preview, bf16 cache. One full-indexer layer per token: the latent kv_lora_rank 512 +
    rope 64 = 576 values x 2 B = 1152 B, plus the indexer's key: 128 fp8 values and one fp32
    scale per 128 = 132 B: 1284 B. A shared layer caches the latent only: 1152 B. A decode query
    at 100,000 tokens reads the latent of its top 2048 (2048 x 1152 = 2,359,296 B) and, where the
    layer has its own indexer, every cached index key (100,000 x 132 = 13,200,000 B)."""
    a = load_arch(str(HY4))
    full, shared = a.layers[1].mixer, a.layers[2].mixer
    assert full.kv_bytes_per_token(1, 2) == 1284 and shared.kv_bytes_per_token(1, 2) == 1152
    assert full.kv_read_bytes(100_000, 1, 2) == 2_359_296 + 13_200_000
    assert shared.kv_read_bytes(100_000, 1, 2) == 2_359_296
    assert shared.kv_read_bytes(1000, 1, 2) == 1000 * 1152  # fewer tokens than the top-k: all of them


def test_hy_v4_cache_per_request_through_the_model():
    """21 full layers x 1284 B + 57 shared x 1152 B per token, over context + the token decoded."""
    a = load_arch(str(HY4))
    d = make_deployment(a, "h200", tp=8, weights="fp8", context=32_767)
    kv, state = per_request_cache(a, d, a.layers)
    assert (kv, state) == (32_768 * (21 * 1284 + 57 * 1152), 0)


def test_dots3_layers_by_hand():
    """Released config: "full_attention" (indexed, use_dsa left out) at 0, 1 and every 4th from 1
    (13 layers), 33 sliding layers of swa_* shape. Indexed: 128 heads, q_b [128 x (128 + 64),
    1024], kv_a [512 + 64, 5120], g_proj [128, 5120]; sliding: 64 heads, q_b [64 x (192 + 64),
    1024], kv_a [1024 + 64, 5120], kv_b [64 x (192 + 128), 1024], o_proj [5120, 64 x 128],
    g_proj [64, 5120], no indexer; k_rope_only_layernorm [64] in both. Layer 0 dense (13824)."""
    a = load_arch(str(DOTS3))
    indexed = [i for i, layer in enumerate(a.layers) if layer.kind == "mla"]
    assert indexed == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45]
    full = {t.name: t.shape for t in a.layers[1].tensors()}
    swa = {t.name: t.shape for t in a.layers[2].tensors()}
    assert (full["q_b_proj"], full["kv_a_proj_with_mqa"], full["g_proj"]) == ((24576, 1024), (576, 5120), (128, 5120))
    assert (swa["q_b_proj"], swa["kv_a_proj_with_mqa"], swa["kv_b_proj"], swa["o_proj"], swa["g_proj"]) == (
        (16384, 1024), (1088, 5120), (20480, 1024), (5120, 8192), (64, 5120))
    assert full["k_rope_only_layernorm"] == swa["k_rope_only_layernorm"] == (64,)
    assert "indexer.wq_b" in full and not any(n.startswith("indexer.") for n in swa)
    assert a.layers[0].mlp.intermediate_size == 13824 and a.layers[1].mlp.num_experts == 256


def test_dots3_both_config_forms_build_one_decoder():
    """transformers 5's per_layer_config (sliding_window 512) and the release's swa_* fields
    (sliding_window_size 513) give the same tensors; only the window differs."""
    a, b = load_arch(str(DOTS3_DEFAULTS)), load_arch(str(DOTS3))
    assert [sorted((t.name, t.shape) for t in x.tensors()) for x in a.layers] == \
        [sorted((t.name, t.shape) for t in x.tensors()) for x in b.layers]
    assert (a.layers[2].mixer.window, b.layers[2].mixer.window) == (512, 513)


def test_dots3_kv_bytes_and_reads_by_hand():
    """bf16 cache. An indexed layer per token: (512 + 64) x 2 = 1152 B of latent + 132 B of index
    key = 1284 B, every token kept. A sliding layer: (1024 + 64) x 2 = 2176 B per token, for the
    last 513 tokens only: 513 x 2176 = 1,116,288 B at any longer context, and that is all a decode
    query there reads."""
    a = load_arch(str(DOTS3))
    indexed, sliding = a.layers[1].mixer, a.layers[2].mixer
    assert indexed.kv_bytes_per_token(1, 2) == 1284
    assert sliding.kv_cache_bytes(32_768, 2, 1) == sliding.kv_read_bytes(32_768, 1, 2) == 1_116_288
    assert sliding.kv_cache_bytes(100, 2, 1) == 100 * 2176
    assert indexed.kv_read_bytes(100_000, 1, 2) == 2048 * 1152 + 100_000 * 132


def test_dots3_cache_per_request_through_the_model():
    """13 indexed layers x 32,768 tokens x 1284 B + 33 sliding layers x 513 x 2176 B."""
    a = load_arch(str(DOTS3))
    d = make_deployment(a, "h200", tp=8, context=32_767)
    kv, _ = per_request_cache(a, d, a.layers)
    assert kv == 13 * 32_768 * 1284 + 33 * 1_116_288


def test_dots3_towers_noted_not_counted():
    """Both forms name vision_config and audio_config: decodescope says it leaves them out."""
    for path in (DOTS3, DOTS3_DEFAULTS):
        assert any("vision and audio encoders" in n for n in load_arch(str(path)).notes)


def test_dots3_use_dsa_false_drops_the_indexers(config_variant):
    """use_dsa false keeps "full_attention" layers in full, without an indexer: 13 x (wq_b 64 x
    128 x 1024 + wk 128 x 5120 + k_norm 256 + weights_proj 64 x 5120 = 9,371,904) fewer
    (transformers 5.24 on the meta device: 279,429,883,264)."""
    a = load_arch(config_variant(DOTS3, use_dsa=False))
    assert a.params_total == pytest.approx(279_429_883_264, rel=1e-5)
    assert load_arch(str(DOTS3)).params_total - a.params_total == 13 * 9_371_904


@pytest.mark.parametrize("base,changes,match", [
    (HY_DEFAULTS, {"indexer_types": ["shared"] + ["full"] * 33}, "no earlier layer"),
    (HY_DEFAULTS, {"indexer_types": ["full"] * 3}, "indexer_types"),
    (DOTS3, {"layer_types": ["linear_attention"] * 46}, "layer_types"),
    (DOTS3, {"per_layer_config": {"x": {}}}, "per_layer_config"),
    (DOTS3, {"per_layer_config": {"99": {}}}, "per_layer_config"),
    (DOTS3, {"swa_qk_rope_head_dim": None, "swa_head_dim": 192}, "leaves no rope dims"),
    (DOTS3, {"swa_kv_lora_rank": "big"}, "kv_lora_rank"),
])
def test_bad_fields_give_one_clear_error(config_variant, base, changes, match):
    with pytest.raises(DecodescopeError, match=match):
        load_arch(config_variant(base, **changes))
