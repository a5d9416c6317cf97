"""Configs as transformers 5 writes them: per-layer word lists in place of the older keys
(mlp_layer_types "dense" / "sparse" for first_k_dense_replace and kin; layer_types
"linear_attention" / "full_attention" for Mamba and attention layers; Nemotron-H's
layers_block_type words; MiMo-V2-Flash's layer_types for hybrid_layer_pattern; Kimi Linear's
layer_types and linear_* fields for linear_attn_config). A model saved or fine-tuned with
transformers 5 carries these. Each fixture is transformers 5.24's config class on its defaults
(tests/data/configs/SOURCES.md); each expected count is transformers' own model on the meta
device (the sum of every parameter's numel), layouts by hand from its modeling code. Granite's
sliding-window variants and the MoE of EXAONE and of Command A, new in transformers 5, are
here too."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"

# transformers 5.24, AutoModelForCausalLM.from_config(cls()) on the meta device
TRANSFORMERS_COUNTS = {
    "HYV3Config": 295_033_528_320,
    "Glm4MoeLiteConfig": 29_943_390_976,
    "GraniteMoeHybridConfig": 38_601_064_448,
    "MiMoV2FlashConfig": 308_778_768_832,
    "NemotronHConfig": 1_968_355_712,
    "KimiLinearConfig": 49_133_074_464,
    "DeepseekV4Config": 284_325_869_015,
    # Granite's sliding-window variants (new in transformers 5): a sink per head in every layer
    "GraniteSWAConfig": 2_144_463_840,
    "GraniteMoeSWAConfig": 37_039_117_312,
    # EXAONE's MoE (EXAONE 4.0's layout, a dense first layer, 64 experts and a shared one) and
    # Command A's MoE (Cohere's parallel block: the experts share the attention's input norm)
    "ExaoneMoeConfig": 28_550_639_616,
    "Cohere2MoeConfig": 190_004_928_512,
    "ArceeConfig": 4_022_766_080,  # Arcee AFM: Llama's layout with an ungated ReLU^2 MLP
    "HyperCLOVAXConfig": 6_738_677_760,  # HyperCLOVA X SEED: a norm after attention and after the MLP
    "Mamba2Config": 7_285_403_648,  # a pure Mamba2 model: one mixer per layer, no MLP, no attention
    "MambaConfig": 159_308_544,  # the original Mamba (v1): no dt / B / C norms (Jamba's have them)
}
# MiniMax-M3's language model as transformers 5 writes it (minimax_m3_vl_text): on the class
# defaults, and with M3's layout (3 dense full-attention layers, then sparse ones with experts)
MINIMAX_M3_V5 = {"defaults": 447_186_441_216, "sparse-layers": 426_174_565_632}


def _path(cls: str) -> Path:
    return CONFIGS / f"transformers__{cls}-defaults.json"


@pytest.mark.parametrize("cls", TRANSFORMERS_COUNTS)
def test_transformers_5_configs_count_as_transformers_does(cls):
    # within 0.001 %: norms and router biases some classes keep apart differ by a few kB
    assert load_arch(str(_path(cls))).params_total == pytest.approx(TRANSFORMERS_COUNTS[cls], rel=1e-5)


def test_mlp_layer_types_picks_the_dense_layers():
    """Hy3's defaults: layer 0 "dense" (an MLP of intermediate_size 13312), 79 "sparse" (192
    experts top-8 plus a shared one). Before mlp_layer_types was read, every layer was MoE:
    +3.48 B parameters (one dense MLP swapped for 192 experts and a shared one)."""
    a = load_arch(str(_path("HYV3Config")))
    kinds = [type(layer.mlp).__name__ for layer in a.layers]
    assert kinds == ["DenseMLP"] + ["MoE"] * 79
    assert a.layers[0].mlp.intermediate_size == 13312


def test_linear_attention_layers_are_mamba_in_granite_4():
    """GraniteMoeHybridConfig() writes 32 "linear_attention" layers: Mamba2 mixers, not attention
    (read as attention they lost 3 % of the count)."""
    cfg = json.loads(_path("GraniteMoeHybridConfig").read_text())
    assert set(cfg["layer_types"]) == {"linear_attention"}
    assert {layer.kind for layer in load_arch(str(_path("GraniteMoeHybridConfig"))).layers} == {"mamba"}


def test_nemotron_h_block_words_of_transformers_5():
    """layers_block_type ["linear_attention", "moe", "full_attention", "mlp"]: Mamba2, MoE,
    attention, MLP, one each (NemotronHConfig's defaults)."""
    a = load_arch(str(_path("NemotronHConfig")))
    assert [layer.kind for layer in a.layers] == ["mamba", "moe", "attention", "mlp"]


def test_mimo_v2_flash_sliding_layers_double_their_kv_heads_in_transformers_5():
    """modeling_mimo_v2_flash.py: 'SWA layers double the kv heads vs full-attention and have
    attention sinks'; the defaults: 4 K/V heads on full layers, so 8 and 64 sinks on sliding ones."""
    a = load_arch(str(_path("MiMoV2FlashConfig")))
    full = next(layer for layer in a.layers if layer.kind == "attention")
    window = next(layer for layer in a.layers if layer.kind == "sliding_attention")
    assert (full.mixer.num_key_value_heads, window.mixer.num_key_value_heads) == (4, 8)
    assert (full.mixer.sinks, window.mixer.sinks) == (False, True)


def test_kimi_linear_layer_types_place_the_mla_layers():
    cfg = json.loads(_path("KimiLinearConfig").read_text())
    a = load_arch(str(_path("KimiLinearConfig")))
    assert [layer.kind == "mla" for layer in a.layers] == [t == "full_attention" for t in cfg["layer_types"]]


def test_deepseek_v4_layer_types_name_their_compress_rates():
    """layer_types "heavily_compressed_attention" / "compressed_sparse_attention" with
    compress_rates {128, 4}, and mlp_layer_types "hash_moe" for the hash-routed first layers."""
    cfg = json.loads(_path("DeepseekV4Config").read_text())
    a = load_arch(str(_path("DeepseekV4Config")))
    rates = cfg["compress_rates"]
    assert [layer.mixer.compress_ratio for layer in a.layers] == [rates[t] for t in cfg["layer_types"]]
    assert sum(not layer.mlp.router_bias for layer in a.layers) == cfg["mlp_layer_types"].count("hash_moe") == 3


def test_granite_swa_has_sliding_layers_and_a_sink_per_head():
    """GraniteSWAConfig(): one full-attention layer in four, the others a 128-token window; 20
    sinks in each of the 24 layers (480 parameters, what Llama's layout lacks)."""
    cfg = json.loads(_path("GraniteSWAConfig").read_text())
    a = load_arch(str(_path("GraniteSWAConfig")))
    assert [layer.kind for layer in a.layers] == ["sliding_attention" if t == "sliding_attention" else "attention"
                                                  for t in cfg["layer_types"]]
    assert {layer.mixer.sinks for layer in a.layers} == {True}
    assert cfg["num_attention_heads"] * cfg["num_hidden_layers"] == 480


def test_cohere2_moe_experts_have_no_norm_of_their_own():
    """Cohere2MoeConfig(): 8 experts, 2 per token, in a parallel block: one input norm per layer."""
    a = load_arch(str(_path("Cohere2MoeConfig")))
    names = [t.name for t in a.layers[0].tensors()]
    assert "post_attention_layernorm" not in names and "router" in names
    assert (a.layers[0].mlp.num_experts, a.layers[0].mlp.num_experts_per_tok) == (8, 2)


def test_exaone_moe_counts_its_shared_expert():
    """ExaoneMoeConfig(): num_shared_experts 1 of moe_intermediate_size 1024 beside 64 routed."""
    a = load_arch(str(_path("ExaoneMoeConfig")))
    assert type(a.layers[0].mlp).__name__ == "DenseMLP"
    assert a.layers[1].mlp.shared_expert_intermediate_size == 1024


def test_arcee_mlp_has_no_gate():
    """modeling_arcee.py ArceeMLP: up_proj -> ReLU^2 -> down_proj; 2 x 2560 x 18432 per layer."""
    a = load_arch(str(_path("ArceeConfig")))
    mlp = {t.name: t.params for t in a.layers[0].tensors() if t.name in ("gate_proj", "up_proj", "down_proj")}
    assert mlp == {"up_proj": 2560 * 18432, "down_proj": 18432 * 2560}


@pytest.mark.parametrize("variant", MINIMAX_M3_V5)
def test_minimax_m3_as_transformers_5_writes_it(variant):
    """layer_types "minimax_m3_sparse" and flat index_* fields in place of
    sparse_attention_config; one shared expert of shared_intermediate_size. The sparse layers
    read 16 picked + 1 local blocks of 128 tokens (index_topk_blocks, index_local_blocks)."""
    path = CONFIGS / f"transformers__MiniMaxM3VLTextConfig-{variant}.json"
    cfg, a = json.loads(path.read_text()), load_arch(str(path))
    assert a.params_total == MINIMAX_M3_V5[variant]
    assert a.layers[-1].mlp.shared_expert_intermediate_size == 3072
    sparse = [layer for layer in a.layers if layer.kind == "sparse_attention"]
    assert len(sparse) == cfg["layer_types"].count("minimax_m3_sparse")
    assert all(layer.mixer.topk_tokens == (16 + 1) * 128 for layer in sparse)


def test_hyperclovax_has_four_norms_per_layer():
    """modeling_hyperclovax.py: post_norm1 after attention and post_norm2 after the MLP (use_post_norm),
    beside Llama's two pre-norms; no q/k norms (with as many K/V heads as query heads on these
    defaults, OLMo 2's q/k norms would have counted the same)."""
    names = [t.name for t in load_arch(str(_path("HyperCLOVAXConfig"))).layers[0].tensors()]
    assert {"input_layernorm", "post_attention_layernorm", "post_norm1", "post_norm2"} <= set(names)
    assert not {"q_norm", "k_norm"} & set(names)


def test_a_mamba2_request_holds_a_fixed_state_per_layer():
    """Mamba2Config(): 128 heads x 64 x state 128 in fp32 = 4,194,304 bytes of SSM state, plus
    the conv window: (128 x 64 + 2 x 8 groups x 128) channels x (4 - 1) steps x 2 bytes = 61,440;
    4,255,744 bytes per layer and request whatever the context."""
    a = load_arch(str(_path("Mamba2Config")))
    assert {layer.kind for layer in a.layers} == {"mamba"} and all(layer.mlp is None for layer in a.layers)
    assert a.layers[0].mixer.state_bytes(1) == 128 * 64 * 128 * 4 + (128 * 64 + 2 * 8 * 128) * 3 * 2 == 4_255_744


def test_falcon_mamba_7b_counts_as_published():
    """tiiuae/falcon-mamba-7b's config.json: 7,272,665,088 parameters in transformers' model (the
    hub page's "7.27B"); by hand per layer: in_proj 2 x 8192 x 4096, conv 8192 x 4 + 8192,
    x_proj (256 + 2 x 16) x 8192, dt_proj 8192 x 256 + 8192, A_log 8192 x 16, D 8192,
    out_proj 4096 x 8192, norm 4096; two untied 65,024 x 4096 tables and the final norm. A request
    holds 8192 x 16 x 4 B of state + 8192 x 3 x 2 B of conv window = 573,440 B per layer."""
    a = load_arch(str(CONFIGS / "tiiuae__falcon-mamba-7b.json"))
    layer = (2 * 8192 * 4096 + 8192 * 4 + 8192 + (256 + 32) * 8192 + 8192 * 256 + 8192 + 8192 * 16 + 8192
             + 4096 * 8192 + 4096)
    assert a.params_total == 64 * layer + 2 * 65024 * 4096 + 4096 == 7_272_665_088
    assert a.layers[0].mixer.state_bytes(1) == 8192 * 16 * 4 + 8192 * 3 * 2 == 573_440


@pytest.mark.parametrize("variant,count,attention", [("defaults", 9_992_765_440, []),
                                                     ("attention-9-18-27", 9_808_584_064, [9, 18, 27])])
def test_bamba_places_attention_at_attn_layer_indices(variant, count, attention):
    """BambaConfig (IBM Bamba): Granite 4.0-H's Mamba2 / attention layout with a dense MLP in every
    layer, attention at attn_layer_indices (none on the defaults); counts are transformers'."""
    a = load_arch(str(CONFIGS / f"transformers__BambaConfig-{variant}.json"))
    assert a.params_total == count
    assert [i for i, layer in enumerate(a.layers) if layer.kind == "attention"] == attention


def test_granite_moe_shared_counts_its_shared_mlp():
    """GraniteMoeSharedConfig: routed experts plus a gated shared MLP of shared_intermediate_size
    (0 on the defaults). transformers counts 37,039,116,288 on the defaults and 37,441,769,472
    with 1024: the difference is 32 layers x 3 x 4096 x 1024 = 402,653,184."""
    base = load_arch(str(_path("GraniteMoeSharedConfig"))).params_total
    shared = load_arch(str(CONFIGS / "transformers__GraniteMoeSharedConfig-shared-1024.json")).params_total
    assert (base, shared) == (37_039_116_288, 37_441_769_472)
    assert shared - base == 32 * 3 * 4096 * 1024


def test_an_unknown_mlp_layer_word_is_one_clear_error(write_config):
    cfg = json.loads(_path("HYV3Config").read_text())
    cfg["mlp_layer_types"][3] = "expert"
    p = write_config(cfg)
    with pytest.raises(DecodescopeError, match="mlp_layer_types must hold one of dense, sparse, moe per layer"):
        load_arch(p)
