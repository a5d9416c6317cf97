"""ZAYA1 (Zyphra, model_type zaya), read from transformers 5.24 models/zaya/modeling_zaya.py:
each of num_hidden_layers layers is compressed convolutional attention (CCA) and a top-1 MoE
whose router is an MLP.

By hand for ZayaConfig's defaults (h 2048, 40 layers, 8 q heads and 2 KV heads of 128, 16
experts of 2048, router 256, cca_time0 = cca_time1 = 2, vocab 262272, tied):
- CCA: input norm 2048 + q_proj 1024 x 2048 + k_proj 256 x 2048 + v_proj_current and
  v_proj_delayed 2 x 128 x 2048 + o_proj 2048 x 1024 + conv_qk_depthwise 1280 x 1 x 2 and its bias
  1280 + conv_qk_grouped 1280 x 128 x 2 (10 groups of 128 channels) and its bias 1280 + qk_norm.temp
  2 = 5,577,730;
- MoE: post-attention norm 2048 + experts 16 x (4096 x 2048 + 2048 x 2048) + router down_proj
  256 x 2048 + 256, norm 256, fc1 and fc2 2 x (256 x 256 + 256), out_proj 17 x 256 (16 experts and
  the skip class) = 201,989,376, and router_states_scale 256 on layers 1-39;
- residual scaling: 2 x 4 vectors of 2048 = 16,384 a layer; the model's input scale and bias 2 x 2048;
- 40 x (5,577,730 + 201,989,376 + 16,384) + 39 x 256 + 4096 + embedding 262272 x 2048 + final
  norm 2048 = 8,840,488,784, transformers' count.

Per request, from ZayaCCAProjection.forward and the cache it updates (bf16): the KV cache holds
K and V after the compression, 2 KV heads x 128 each, (256 + 256) x 2 B = 1024 B a token and
layer; the conv state keeps (cca_time0 - 1) + (cca_time1 - 1) = 2 past inputs of cat(q, k),
1280 channels, and the recurrent state the previous token's v_proj_delayed output, 128 values:
(1280 x 2 + 128) x 2 B = 5376 B a layer.

Published: the ZAYA1-base model card (transformers docs/source/en/model_doc/zaya.md,
https://huggingface.co/Zyphra/ZAYA1-base) says 8.3B total / 800M active; ZAYA1-8B's
(https://www.llmreference.com/model/zaya1-8b) 8.4B total / 760M active. Without the 537M
embedding the defaults hold 8,303,355,728 and a token reads 753,608,528 (1 of 16 experts)."""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache
from decodescope.model.ops import layer_ops
from decodescope.model.predict import expected_rates

DEFAULTS = Path(__file__).parent / "data" / "configs" / "transformers__ZayaConfig-defaults.json"
EMBEDDING = 262_272 * 2048
CCA, MOE, RESIDUAL = 5_577_730, 201_989_376, 16_384
KV_TOKEN, STATE = 1024, 5376  # bytes a layer (bf16)

# the optional parts: sliding layers, attention biases (q, k, both v halves, o), a 3-tap depthwise
# conv, 4 experts, an untied head
SMALL = {"model_type": "zaya", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "attention_bias": True, "cca_time0": 3, "cca_time1": 2,
         "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 128, "router_hidden_size": 32,
         "vocab_size": 1000, "tie_word_embeddings": False, "sliding_window": 512,
         "layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"]}


def test_defaults_count_equals_transformers():
    a = load_arch(str(DEFAULTS))
    # transformers 5.24, AutoModelForCausalLM.from_config(ZayaConfig()) on the meta device
    assert a.params_total == 8_840_488_784 == 40 * (CCA + MOE + RESIDUAL) + 39 * 256 + 4096 + EMBEDDING + 2048
    assert a.tie_word_embeddings


def test_defaults_against_the_published_counts():
    """8.3B total (ZAYA1-base's card) and 760M active (ZAYA1-8B's) without the embedding; a token
    reads 1 of the 16 experts: 40 x 15/16 x 16 x 3 x 2048^2 parameters it does not."""
    a = load_arch(str(DEFAULTS))
    assert a.params_active == 8_840_488_784 - 40 * 15 * 3 * 2048 * 2048 == 1_290_741_584
    assert a.params_total - EMBEDDING == pytest.approx(8.3e9, rel=0.01)
    assert a.params_active - EMBEDDING == pytest.approx(760e6, rel=0.02)


def test_kv_cache_and_conv_state_per_request():
    """Every layer attends in full (layer_types all "hybrid"): at context 1000, 1001 tokens of
    1024 B in each of 40 layers; the state 5376 B a layer whatever the context; TP 2 halves both
    (2 KV heads, one a GPU)."""
    a = load_arch(str(DEFAULTS))
    assert [x.kind for x in a.layers] == ["attention"] * 40
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert (kv, state) == (40 * 1001 * KV_TOKEN, 40 * STATE)
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000, tp=2), a.layers)
    assert (kv, state) == (40 * 1001 * KV_TOKEN / 2, 40 * STATE / 2)


def test_sliding_layers_biases_and_wider_conv(write_config):
    """KV: 2 heads x 64 x (K + V) x 2 B = 512 B a token, the sliding layers over 512 tokens;
    state: conv (2 + 1) taps of 384 channels + a delayed V half of 64, bf16 = 2432 B a layer.
    Count: CCA 256 + q 256 x 257 + k 128 x 257 + v halves 2 x 64 x 257 + o 256 x 257 + depthwise
    384 x 3 + 384 + grouped 384 x 64 x 2 + 384 + temp 2 = 248,706; MoE 256 + 4 x 3 x 128 x 256 +
    router 32 x 257 + 32 + 2 x 32 x 33 + 5 x 32 = 404,000; residual 2048; untied head."""
    a = load_arch(write_config(SMALL))
    # transformers 5.24 on the meta device, ZayaConfig(**SMALL)
    assert a.params_total == 3_131_880 == 4 * (248_706 + 404_000 + 2048) + 3 * 32 + 512 + 2 * 256_000 + 256
    assert [x.kind for x in a.layers] == ["sliding_attention", "attention"] * 2
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=2000), a.layers)
    assert kv == 2 * 512 * 512 + 2 * 2001 * 512
    assert state == 4 * (384 * 3 + 64) * 2


def test_tied_when_the_config_says_nothing(write_config):
    """ZayaConfig ties the head by default: a config without tie_word_embeddings holds one table."""
    small = {k: v for k, v in SMALL.items() if k != "tie_word_embeddings"}
    assert load_arch(write_config(small)).params_total == 3_131_880 - 1000 * 256


@pytest.mark.parametrize("change", [{"cca_time0": 0}, {"cca_time1": "two"}, {"router_hidden_size": -1},
                                    {"cca_time0": 1 << 40},
                                    {"layer_types": ["hybrid", "full_attention", "hybrid", "hybrid"]},
                                    {"sliding_window": None}, {"num_attention_heads": 3},
                                    {"zaya_mlp_expansion": 256}])
def test_bad_fields_are_one_error(write_config, change):
    with pytest.raises(DecodescopeError):
        load_arch(write_config({**SMALL, **change}))


def test_one_allreduce_after_cca_and_one_after_the_moe_at_tp_2():
    """CCA has one row-parallel o_proj: one allreduce after the mixer, one after the MoE, not the
    extra one a mixer with two outputs (Falcon-H1's attention and Mamba2) pays."""
    a = load_arch(str(DEFAULTS))
    d = make_deployment(a, "h100-sxm", tp=2)
    ops = layer_ops(a.layers[0], d.weights, d, 1, 1, expected_rates(d))
    assert [op.name for op in ops if op.component == "allreduce"] == ["mixer allreduce", "mlp allreduce"]
