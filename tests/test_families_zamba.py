"""Zamba2 (Zyphra), read from transformers 5.24 models/zamba2/modeling_zamba2.py: Mamba2 layers;
at each "hybrid" entry of layers_block_type a shared transformer block (one of num_mem_blocks,
taken in turn, weights tied) whose attention reads cat(hidden, embeddings), then that
position's own `linear` and Mamba2 layer. Decodescope lists a hybrid entry as two layers: the
shared block (reuses=True past its first use) and the position's own weights.

By hand for Zamba2Config's defaults (h 2560, 54 layers, 9 hybrid, 1 shared block, MLP 10240,
32 heads = 32 KV heads of 2h / 32 = 160, 8 Mamba2 heads of 2h / 8 = 640, 1 group, state 64,
conv 4, adapter rank 128, vocab 32000 tied):
- a Mamba2 layer: norm 2560 + in_proj (2 x 5120 + 2 x 64 + 8 = 10376) x 2560 + conv1d 5248 x 4
  and its bias 5248 + dt_bias, A_log, D 3 x 8 + gated norm 5120 + out_proj 2560 x 5120 = 39,703,704;
- the shared block: norm 5120 + q, k, v 3 x 5120^2 + o 2560 x 5120 + pre_ff norm 2560 + gate_up,
  down 3 x 2560 x 10240 = 170,401,280;
- a hybrid position's own: linear 2560^2 + gate_up adapter 128 x 2560 + 20480 x 128 = 9,502,720;
- 54 x 39,703,704 + 170,401,280 + 9 x 9,502,720 + embedding 81,920,000 + final norm 2560
  = 2,481,848,336, transformers' count.

Zamba (v1, models/zamba), ZambaConfig's defaults (Zamba-7B-v1's shapes: h 3712, 76 layers,
hybrid at 2 and every (i - 3) % 6 == 4 after: 13, one shared block, MLP 14848, 16 heads = 16 KV
heads of 464, 2 Mamba heads over inner 7424, d_state 16, dt rank 232, conv 4, tied):
- a Mamba layer: norm 3712 + in_proj 2 x 7424 x 3712 + conv1d 7424 x 4 and bias 7424 + x_proj
  (232 + 2 x 16) x 7424 (its two heads' together) + dt_proj 7424 x 232 and bias 7424 + A_log
  7424 x 16 + D 7424 + out_proj 3712 x 7424 = 86,530,432;
- the shared block: norm 7424 + q, k, v 3 x 7424^2 + o 3712 x 7424 + norm 3712 + gate, up, down
  3 x 3712 x 14848 = 358,263,680; a hybrid position's own linear 3712^2 = 13,778,944;
- 76 x 86,530,432 + 358,263,680 + 13 x 13,778,944 + 32000 x 3712 + 3712 = 7,232,490,496."""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

DEFAULTS = Path(__file__).parent / "data" / "configs" / "transformers__Zamba2Config-defaults.json"
ZAMBA1 = DEFAULTS.with_name("transformers__ZambaConfig-defaults.json")
MAMBA, SHARED, OWN = 39_703_704, 170_401_280, 9_502_720
HYBRID_AT = [6, 12, 18, 24, 30, 36, 42, 47, 51]  # Zamba2Config's hybrid_layer_ids for its default pattern

# Zamba2-7B's shapes in Zamba2Config's fields: hybrid at 6, 11, 17, ..., 77 of 81 layers, two
# shared blocks, 112 Mamba2 heads of 64 in 2 groups (Zyphra's release config: mamba_headdim 64,
# mamba_ngroups 2, num_mem_blocks 2, ffn_hidden_size 14336, hidden 3584, 81 layers)
Z7 = {"model_type": "zamba2", "hidden_size": 3584, "num_hidden_layers": 81, "n_mamba_heads": 112, "mamba_ngroups": 2,
      "num_mem_blocks": 2, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 32,
      "adapter_rank": 128, "mamba_d_state": 64, "vocab_size": 32000, "use_mem_rope": True,
      "layers_block_type": ["hybrid" if i in (6, 11, 17, 23, 29, 35, 41, 47, 53, 59, 65, 71, 77) else "mamba"
                            for i in range(81)]}
# the optional parts: q/k/v adapters, biases, three shared blocks over five hybrid positions
SMALL = {"model_type": "zamba2", "hidden_size": 256, "num_hidden_layers": 9, "n_mamba_heads": 16, "mamba_ngroups": 2,
         "num_mem_blocks": 3, "intermediate_size": 640, "num_attention_heads": 8, "adapter_rank": 16,
         "use_shared_attention_adapter": True, "add_bias_linear": True, "mamba_d_state": 32, "vocab_size": 1000,
         "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba", "hybrid", "hybrid", "mamba"]}


def test_defaults_count_equals_transformers():
    a = load_arch(str(DEFAULTS))
    # transformers 5.24, AutoModelForCausalLM.from_config(Zamba2Config()) on the meta device
    assert a.params_total == 2_481_848_336 == 54 * MAMBA + SHARED + 9 * OWN + 32000 * 2560 + 2560


def test_the_shared_block_is_held_once_and_read_at_every_hybrid_position():
    """63 layers: 54 Mamba2, and before each of the 9 hybrid positions' own layer the shared
    block, reusing at all but the first. A token reads the block 9 times: the layers once, the
    block 8 more times, the (tied) head and the final norm."""
    a = load_arch(str(DEFAULTS))
    shared = [i for i, layer in enumerate(a.layers) if layer.kind == "attention"]
    assert shared == [p + k for k, p in enumerate(HYBRID_AT)]  # each shifts the later ones by one
    assert [a.layers[i].reuses for i in shared] == [False] + [True] * 8
    assert sum(t.params for t in a.layers[shared[0]].tensors()) == SHARED
    assert sum(t.params for t in a.layers[shared[0] + 1].tensors()) == MAMBA + OWN
    layers = 54 * MAMBA + SHARED + 9 * OWN
    assert a.params_read_per_token == layers + 8 * SHARED + 32000 * 2560 + 2560


def test_every_hybrid_position_caches_its_own_kv():
    """Zamba2's DynamicCache gives each hybrid layer a full-attention cache: K and V of 32 heads
    x 160 x 2 B = 20,480 B a token, 9 times; at context 1000, 1001 tokens. Each of the 54 Mamba2
    layers holds 8 x 640 x 64 fp32 (1,310,720 B) + a conv window 5248 x 3 bf16 (31,488 B)."""
    a = load_arch(str(DEFAULTS))
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert kv == 9 * 1001 * 20_480
    assert state == 54 * (1_310_720 + 31_488)


def test_zamba2_7b_shapes(write_config):
    """Zamba2-7B's model card: 7.4B parameters."""
    a = load_arch(write_config(Z7))
    assert a.params_total == 7_356_749_648  # transformers 5.24 on the meta device, Zamba2Config(**Z7)
    assert a.params_total == pytest.approx(7.4e9, rel=0.01)
    assert [x.reuses for x in a.layers if x.kind == "attention"] == [False, False] + [True] * 11


def test_attention_adapters_biases_and_three_blocks(write_config):
    a = load_arch(write_config(SMALL))
    assert a.params_total == 9_106_240  # transformers 5.24 on the meta device, Zamba2Config(**SMALL)
    assert [x.reuses for x in a.layers if x.kind == "attention"] == [False] * 3 + [True] * 2
    own = {t.name for t in a.layers[2].tensors()}
    assert {"linear_q_adapter.A", "linear_k_adapter.B", "linear_v_adapter.A", "in_proj.bias"} <= own


@pytest.mark.parametrize("change", [{"n_mamba_heads": 7}, {"num_mem_blocks": "two"}, {"num_attention_heads": 3},
                                    {"layers_block_type": ["mamba", "attention"]}, {"adapter_rank": -1}])
def test_bad_fields_are_one_error(write_config, change):
    with pytest.raises(DecodescopeError):
        load_arch(write_config({**SMALL, **change}))


def test_zamba_v1_count_layout_and_cache():
    """KV: 16 heads x 464 x (K + V) x 2 B = 29,696 B a token at each of the 13 hybrid positions;
    state: inner 7424 x d_state 16 fp32 (475,136 B) + conv window 7424 x 3 bf16 (44,544 B) a layer."""
    a = load_arch(str(ZAMBA1))
    # transformers 5.24, AutoModelForCausalLM.from_config(ZambaConfig()) on the meta device
    assert a.params_total == 7_232_490_496 == 76 * 86_530_432 + 358_263_680 + 13 * 13_778_944 + 32000 * 3712 + 3712
    hybrid = [2] + [i for i in range(3, 76) if (i - 3) % 6 == 4]
    shared = [i for i, layer in enumerate(a.layers) if layer.kind == "attention"]
    assert shared == [p + k for k, p in enumerate(hybrid)] and len(shared) == 13
    assert [a.layers[i].reuses for i in shared] == [False] + [True] * 12
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert kv == 13 * 1001 * 29_696
    assert state == 76 * (475_136 + 44_544)


def test_zamba_v1_options(write_config):
    """No conv bias, biased in/out projections, 3 Mamba heads, GQA (2 KV heads), hybrid layers
    from attn_layer_period 3 / offset 1: layers 2 and 4 of 7. (Tied: transformers 5.24 ties the
    shared blocks only with tie_word_embeddings, counting every use of them otherwise.)"""
    cfg = {"model_type": "zamba", "hidden_size": 192, "num_hidden_layers": 7, "num_attention_heads": 4,
           "num_key_value_heads": 2, "n_mamba_heads": 3, "intermediate_size": 500, "mamba_d_state": 8,
           "mamba_dt_rank": 5, "mamba_conv_bias": False, "mamba_proj_bias": True, "attn_layer_period": 3,
           "attn_layer_offset": 1, "vocab_size": 500}
    a = load_arch(write_config(cfg))
    assert a.params_total == 2_491_008  # transformers 5.24 on the meta device, ZambaConfig(**cfg)
    assert [x.kind for x in a.layers] == ["mamba", "mamba", "attention", "mamba", "mamba", "attention", "mamba",
                                          "mamba", "mamba"]
