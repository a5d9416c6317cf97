"""Remote-code families of decodescope/arch/remote_moe_hybrid.py: Snowflake Arctic (arctic), xAI
Grok-1 (grok-1) and Grok-2 (hub model_type git) and PFN PLaMo 2 (plamo2), each from a real hub
config.json. transformers 5.24 has none of these classes, so each count is derived by hand from
vLLM's model file (arctic.py, grok1.py, plamo2.py) and checked against the published count.

Snowflake Arctic Instruct (h 7168, 35 layers, 56 heads of 128, 8 KV heads, intermediate 4864,
  128 experts top 2, moe_layer_frequency 1, use_residual, vocab 32000, untied). A layer:
  q, o 2 x 7168^2 = 102,760,448; k, v 2 x 1024 x 7168 = 14,680,064 (attention 117,440,512);
  input / post_attention / residual_layernorm 3 x 7168 = 21,504; residual MLP w13 + w2
  3 x 7168 x 7168 = 154,140,672; router 128 x 7168 = 917,504; an expert 3 x 7168 x 4864 =
  104,595,456, x 128 = 13,388,218,368 -> 13,660,738,560 x 35 = 478,125,849,600; + embedding and
  head 2 x 32000 x 7168 = 458,752,000 + final norm 7,168 = 478,584,608,768 (the card: 480B).
  Active, 2 experts: (117,440,512 + 21,504 + 154,140,672 + 917,504 + 209,190,912) x 35
  + 458,759,168 = 17,318,647,808 (the card: "10B dense + 128 x 3.66B MoE", 17B active: 10.0B
  + 2 x 3.66B; an expert over 35 layers is 104,595,456 x 35 = 3.66B).
Grok-1 (hpcai-tech/grok-1: h 6144, 64 layers, 48 heads of 128, 8 KV heads, 8 experts of 32768
  top 2, vocab 131072, tied). A layer: q, o 2 x 6144^2 = 75,497,472; k, v 2 x 1024 x 6144 =
  12,582,912; four norms 24,576; router 8 x 6144 = 49,152; an expert 3 x 6144 x 32768 =
  603,979,776, x 8 = 4,831,838,208 -> 4,919,992,320 x 64 = 314,879,508,480 + embedding 805,306,368
  + final norm 6,144 = 315,684,820,992 (xAI: 314B, +0.5 %). Active: (88,080,384 + 24,576 + 49,152
  + 2 x 603,979,776) x 64 + 805,312,512 = 83,756,587,008.
Grok-2 (xai-org/grok-2: h 8192, 64 layers, 64 heads of 128, 8 KV heads, residual_moe: a dense MLP
  of 32768 beside 8 experts of 16384 top 2, vocab 131072, untied). A layer: attention 2 x 8192^2
  + 2 x 1024 x 8192 = 150,994,944; dense MLP 3 x 8192 x 32768 = 805,306,368; an expert 3 x 8192
  x 16384 = 402,653,184, x 8 = 3,221,225,472; router 65,536; norms 32,768 -> 4,177,625,088 x 64
  = 267,368,005,632 + 2 x 131072 x 8192 = 2,147,483,648 + 8,192 = 269,515,497,472 (~270B; the
  model page's discussion #6 sums the checkpoint's tensors to 269,515,497,472). Active, 2 experts:
  1,761,705,984 x 64 + 2,147,491,840 = 114,896,674,816.
PLaMo 2 1B (h 2048, 16 layers, mamba_step 2: even layers Mamba, odd ones attention; 16 heads of
  128, 1 KV head; Mamba 32 heads of 128 (inner 4096), d_state 64, d_conv 4, dt_rank max(64, 2048
  / 16) = 128; MLP 8192; vocab 100000, tied as PlamoConfig's default). A Mamba mixer: in_proj
  2 x 4096 x 2048 = 16,777,216; conv1d 4096 x 4 = 16,384; bcdt_proj (128 + 2 x 64) x 4096 =
  1,048,576; dt_proj 32 x 128 = 4,096; A, D, dt_bias 96; dt / B / C norms 256; out_proj 2048 x
  4096 = 8,388,608 -> 26,235,232. An attention mixer: q, o 2 x 2048^2 + k, v 2 x 128 x 2048 +
  q_norm 16 x 128 + k_norm 128 = 8,915,072. MLP 3 x 2048 x 8192 = 50,331,648; norms 4 x 2048.
  8 x (26,235,232 + 50,339,840) + 8 x (8,915,072 + 50,339,840) + embedding 204,800,000 + 2048 =
  1,291,441,920 (the float32 checkpoint: 4.06 GB + 285 MB + 819 MB + 0.6 MB of shards, 5.165 GB
  / 4 B = 1.29B params; its card calls it a 1B model).
KV cache per token (bf16, all attention layers): layers x 2 (K, V) x kv heads x 128 x 2 B.
PLaMo 2 1B's state per request, one Mamba layer: ssm 32 x 128 x 64 fp32 = 1,048,576 B + conv
  window 4096 x (4 - 1) bf16 = 24,576 B = 1,073,152 B; 8 layers 8,585,216 B."""

import json
from pathlib import Path

import pytest

from decodescope.arch import Attention, StateMixer, load_arch
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"
ARCTIC = CONFIGS / "Snowflake__snowflake-arctic-instruct.json"
GROK1 = CONFIGS / "hpcai-tech__grok-1.json"
GROK2 = CONFIGS / "xai-org__grok-2.json"
PLAMO2 = CONFIGS / "mlx-community__plamo-2-1b.json"

# fixture -> (hand count above, active, published total)
COUNTS = {
    ARCTIC: (478_584_608_768, 17_318_647_808, 480e9),
    GROK2: (269_515_497_472, 114_896_674_816, 270e9),  # ~270B: the model page; its discussion #6 sums 269.5B
}
# bf16 K + V bytes per token, all layers
KV_PER_TOKEN = {ARCTIC: 35 * 2 * 8 * 128 * 2, GROK1: 64 * 2 * 8 * 128 * 2, GROK2: 64 * 2 * 8 * 128 * 2,
                PLAMO2: 8 * 2 * 1 * 128 * 2}


def _kv_per_token(arch) -> float:
    return sum(x.mixer.kv_bytes_per_token(x.mixer.num_key_value_heads, 2) for x in arch.layers
               if isinstance(x.mixer, Attention))


def _state_bytes(arch, tp: int = 1) -> float:
    return sum(x.mixer.state_bytes(tp) for x in arch.layers if isinstance(x.mixer, StateMixer))


@pytest.mark.parametrize("path", COUNTS)
def test_counts_match_hand_derivation_and_card(path):
    a = load_arch(str(path))
    total, active, card = COUNTS[path]
    assert (a.params_total, a.params_active) == (total, active)
    assert abs(total / card - 1) < 0.01
    assert _kv_per_token(a) == KV_PER_TOKEN[path] and _state_bytes(a) == 0


def test_grok1_is_read_by_its_architecture_and_matches_the_card(config_variant):
    """hpcai-tech/grok-1's config.json names no model_type (its Grok1Config's is grok-1, which a
    re-export writes, as amd/grok-1-FP8-KV's does): read by its architectures
    (Grok1ModelForCausalLM), the same as with the model_type written: the hand count, within 1 % of
    xAI's 314B, tied (Grok-1 decodes through its input embedding)."""
    for path in (str(GROK1), config_variant(GROK1, model_type="grok-1")):
        a = load_arch(path)
        assert (a.params_total, a.params_active) == (315_684_820_992, 83_756_587_008)
        assert abs(a.params_total / 314e9 - 1) < 0.01 and a.tie_word_embeddings
        assert _kv_per_token(a) == KV_PER_TOKEN[GROK1]
    with pytest.raises(DecodescopeError, match="model_type=''"):
        load_arch(config_variant(GROK1, architectures=["SomethingElse"]))


def test_plamo2_counts_state_and_kv(config_variant):
    """PLaMo 2 1B's config leaves tie_word_embeddings to PlamoConfig, whose default ties the head
    (the checkpoint holds 1.29B, no lm_head; registry.TIED_BY_DEFAULT): the hand count, as with it set; 8 Mamba layers keep
    8,585,216 B of state a request (halved on 2 GPUs: heads split), 8 attention layers cache 4,096 B
    a token."""
    a = load_arch(str(PLAMO2))
    assert a.params_total == load_arch(config_variant(PLAMO2, tie_word_embeddings=True)).params_total
    assert (a.params_total, a.params_active) == (1_291_441_920, 1_291_441_920)
    assert abs(a.params_total / 1.29e9 - 1) < 0.01
    assert a.layer_counts() == {"mamba": 8, "attention": 8} and a.layers[0].kind == "mamba"
    assert _state_bytes(a) == 8 * (32 * 128 * 64 * 4 + 4096 * 3 * 2) == 8_585_216
    assert _state_bytes(a, tp=2) == 8_585_216 / 2
    assert _kv_per_token(a) == KV_PER_TOKEN[PLAMO2] == 4096
    assert any("sliding_window 2048 is not applied" in n for n in a.notes)


@pytest.mark.parametrize("n, step, mamba", [(16, 2, [i % 2 == 0 for i in range(16)]),
                                            (8, 4, [i % 4 != 2 for i in range(8)]),
                                            (2, 4, [True, False])])
def test_plamo2_layer_pattern_follows_vllm(config_variant, n, step, mamba):
    # vLLM plamo2.py is_mamba: the middle layer of each mamba_step attends; a model of at most
    # step // 2 layers attends only in its last layer
    a = load_arch(config_variant(PLAMO2, num_hidden_layers=n, mamba_step=step))
    assert [x.kind == "mamba" for x in a.layers] == mamba


def test_arctic_moe_layer_frequency_and_residual(config_variant):
    """moe_layer_frequency 2: odd-numbered layers (i + 1 even) MoE, the others one dense SwiGLU MLP
    of 4864 (3 x 7168 x 4864 = 104,595,456) with no residual MLP; use_residual false drops the
    residual MLP and its norm (154,140,672 + 7,168 a layer)."""
    a = load_arch(config_variant(ARCTIC, moe_layer_frequency=2))
    assert [type(x.mlp).__name__ for x in a.layers[:3]] == ["DenseMLP", "MoE", "DenseMLP"]
    dense = 117_440_512 + 2 * 7168 + 104_595_456
    assert a.params_total == 18 * dense + 17 * 13_660_738_560 + 458_752_000 + 7168
    plain = load_arch(config_variant(ARCTIC, use_residual=False, parallel_attn_mlp_res=False))
    assert plain.params_total == 478_584_608_768 - 35 * (154_140_672 + 7168)


def test_arctic_quantization_field(config_variant):
    # ArcticQuantizationConfig: DeepSpeed FP quantization at load, the count stays the checkpoint's
    a = load_arch(config_variant(ARCTIC, quantization={"q_bits": 6, "mantissa_bits": 3, "group_size": 128}))
    assert a.params_total == 478_584_608_768 and any("DeepSpeed FP6" in n for n in a.notes)
    for bad in ([8], {"q_bits": "eight"}, {"q_bits": 99}):
        with pytest.raises(DecodescopeError, match="quantization|q_bits"):
            load_arch(config_variant(ARCTIC, quantization=bad))


def test_git_is_grok2_only_with_its_architecture(config_variant):
    # model_type git is also Microsoft's GIT captioner: refused unless architectures names Grok1ForCausalLM
    with pytest.raises(DecodescopeError, match="Microsoft GIT"):
        load_arch(config_variant(GROK2, architectures=["GitForCausalLM"]))
    grok2 = load_arch(str(GROK2))
    assert grok2.layers[0].mlp.shared_expert_intermediate_size == 32768 and not grok2.tie_word_embeddings


@pytest.mark.parametrize("path, field, value", [(ARCTIC, "moe_layer_frequency", 0), (PLAMO2, "mamba_step", 1),
                                                (PLAMO2, "hidden_size_per_head", "128"),
                                                (PLAMO2, "mamba_num_heads", None)])
def test_bad_fields_give_one_clear_error(config_variant, path, field, value):
    with pytest.raises(DecodescopeError, match=field):
        load_arch(config_variant(path, **{field: value}))


def test_bundled_configs_are_the_hub_files():
    # the model_types as the hub writes them (Grok-1's none, Grok-2's git)
    types = {p: json.loads(p.read_text()).get("model_type") for p in (ARCTIC, GROK1, GROK2, PLAMO2)}
    assert types == {ARCTIC: "arctic", GROK1: None, GROK2: "git", PLAMO2: "plamo2"}
