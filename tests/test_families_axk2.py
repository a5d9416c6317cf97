"""SK Telecom A.X K2 (axk2), from transformers 5.24's models/axk2/modular_axk2.py.

AXK2Attention: q_a_proj [q_lora, hidden], q_a_layernorm [q_lora], then one q_gate_proj
[heads x (qk_nope + qk_rope + v_head_dim), 2 x q_lora] over cat(normed q latent, raw q latent)
(no q_b_proj): the query, and a gate of v_head_dim per head that multiplies the attention
output (sigmoid) before o_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj as
DeepSeek's; and DeepseekV32Indexer in every layer: wq_b [index heads x index_head_dim, q_lora],
wk [index_head_dim, hidden], k_norm a LayerNorm (weight + bias), weights_proj [index heads,
hidden]. AXK2DecoderLayer: input_layernorm is an AXK2GatedRMSNorm in every layer (norm.weight
[hidden], mlp.fc1 [gated_norm_rank, hidden], mlp.fc2 [hidden, gated_norm_rank]);
post_attention_layernorm is one in the "sparse" layers and a plain RMSNorm in the dense ones.
MLPs per mlp_layer_types (the class: layer 0 dense, then MoE with one shared expert). No MTP
module in transformers' model; the class defaults give no num_nextn_predict_layers.

No released config.json of skt/A.X-K2 (688B total / 33B active, https://huggingface.co/skt/A.X-K2)
was found in the public code index; the fixture is the class defaults (A.X-K2-Light's shapes)."""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

DEFAULTS = Path(__file__).parent / "data" / "configs" / "transformers__AXK2Config-defaults.json"
# transformers 5.24, AXK2ForCausalLM on the meta device (AutoModelForCausalLM.from_config of
# AXK2Config()): the sum of every parameter's numel
TRANSFORMERS_COUNT = 20_314_494_976
# decodescope counts each MoE layer's router e_score_correction_bias (128 experts), which the
# checkpoints carry and transformers keeps as a buffer: 47 MoE layers x 128
ROUTER_BIASES = 47 * 128


def test_counts_as_transformers_does():
    a = load_arch(str(DEFAULTS))
    assert a.params_total == TRANSFORMERS_COUNT + ROUTER_BIASES
    assert a.params_total == pytest.approx(TRANSFORMERS_COUNT, rel=1e-5)


def test_attention_tensors_by_hand():
    """Hidden 2048, 32 heads, q_lora 384, kv_lora 128, qk_nope 64, rope 32, v 64: q_gate_proj
    [32 x (64 + 32 + 64), 2 x 384] = [5120, 768]; kv_a [128 + 32, 2048]; kv_b [32 x (64 + 64),
    128] = [4096, 128]; o_proj [2048, 32 x 64]; indexer 16 heads x 128: wq_b [2048, 384],
    wk [128, 2048], k_norm weight + bias 256, weights_proj [16, 2048]. Per layer: q_a 786,432
    + 384 + 3,932,160 + 327,680 + 128 + 524,288 + 4,194,304 + 786,432 + 262,144 + 256 + 32,768
    = 10,846,976, and the input norm 2048 + its gate 2 x 16 x 2048 = 65,536."""
    a = load_arch(str(DEFAULTS))
    shapes = {t.name: t.shape for t in a.layers[5].mixer.tensors()}
    assert "q_b_proj" not in shapes
    assert shapes["q_gate_proj"] == (5120, 768)
    assert (shapes["kv_a_proj_with_mqa"], shapes["kv_b_proj"], shapes["o_proj"]) == ((160, 2048), (4096, 128),
                                                                                       (2048, 2048))
    assert (shapes["indexer.wq_b"], shapes["indexer.wk"], shapes["indexer.weights_proj"]) == ((2048, 384), (128, 2048),
                                                                                              (16, 2048))
    assert (shapes["input_layernorm.mlp.fc1"], shapes["input_layernorm.mlp.fc2"]) == ((16, 2048), (2048, 16))
    assert sum(t.params for t in a.layers[5].mixer.tensors()) == 10_846_976 + 2048 + 65_536


def test_gated_norms_and_mlps_by_layer():
    """Layer 0: dense MLP (5120) behind a plain post-attention norm, no fc1/fc2 for it; layers
    1-47: 128 experts of 512 and a shared expert of 512 behind a gated post-attention norm. So
    48 gated input norms + 47 gated post-attention norms = 95 gates of 65,536: 6,225,920."""
    a = load_arch(str(DEFAULTS))
    posts = [i for i, layer in enumerate(a.layers)
             if any(t.name == "post_attention_layernorm.mlp.fc1" for t in layer.tensors())]
    assert posts == list(range(1, 48))
    assert type(a.layers[0].mlp).__name__ == "DenseMLP" and a.layers[0].mlp.intermediate_size == 5120
    assert {(a.layers[i].mlp.num_experts, a.layers[i].mlp.shared_expert_intermediate_size) for i in range(1, 48)} == \
        {(128, 512)}
    gates = sum(t.params for layer in a.layers for t in layer.tensors() if ".mlp.fc" in t.name)
    assert gates == 95 * 65_536
    assert a.mtp == ()


def test_first_k_dense_replace_as_the_class_reads_it(config_variant):
    """Without mlp_layer_types, AXK2Config reads first_k_dense_replace (default 1) and
    moe_layer_freq: first_k_dense_replace 3 makes layers 0-2 dense, with plain post norms."""
    a = load_arch(config_variant(DEFAULTS, mlp_layer_types=None, first_k_dense_replace=3))
    assert [type(x.mlp).__name__ for x in a.layers[:4]] == ["DenseMLP"] * 3 + ["GatedNormMoE"]
    b = load_arch(config_variant(DEFAULTS, mlp_layer_types=None))
    assert [type(x.mlp).__name__ for x in b.layers[:2]] == ["DenseMLP", "GatedNormMoE"]


def test_kv_bytes_and_reads_by_hand():
    """bf16 cache, per layer per token: the latent kv_lora 128 + rope 32 = 160 values x 2 B =
    320 B, plus the indexer's key, 128 fp8 values + one fp32 scale per 128 = 132 B: 452 B. A
    decode query at 100,000 tokens reads the latent of its top 2048 (2048 x 320 = 655,360 B) and
    every index key (100,000 x 132 = 13,200,000 B)."""
    m = load_arch(str(DEFAULTS)).layers[3].mixer
    assert m.kv_bytes_per_token(1, 2) == 452
    assert m.kv_read_bytes(100_000, 1, 2) == 655_360 + 13_200_000


def test_cache_per_request_through_the_model():
    """48 layers x 452 B per token, over context + the token decoded (32,768 tokens)."""
    a = load_arch(str(DEFAULTS))
    d = make_deployment(a, "h100", tp=2, context=32_767)
    kv, state = per_request_cache(a, d, a.layers)
    assert (kv, state) == (32_768 * 48 * 452, 0)


def test_mtp_module_where_the_config_asks(config_variant):
    """num_nextn_predict_layers 1: eh_proj [2048, 4096], enorm, hnorm, shared_head.norm and one
    MoE layer (as DeepSeek's next-n module; the layer its own gated-query MLA and gated norms)."""
    (m,) = load_arch(config_variant(DEFAULTS, num_nextn_predict_layers=1)).mtp
    names = {t.name: t.shape for t in m.tensors()}
    assert names["eh_proj"] == (2048, 4096) and names["q_gate_proj"] == (5120, 768)
    assert "post_attention_layernorm.mlp.fc2" in names


@pytest.mark.parametrize("changes", [{"q_lora_rank": None}, {"index_topk": 0}, {"gated_norm_rank": "16"},
                                     {"mlp_layer_types": ["dense"]}])
def test_bad_fields_give_one_clear_error(config_variant, changes):
    with pytest.raises(DecodescopeError):
        load_arch(config_variant(DEFAULTS, **changes))
