"""Google's RecurrentGemma (Griffin; model_type recurrent_gemma) and Sapient's HRM-Text (hrm_text).

Expected counts are transformers 5.24's own RecurrentGemmaForCausalLM on the meta device (the
sum of every parameter's numel), never decodescope's; layouts and cache bytes are derived by
hand from transformers' modeling_recurrent_gemma.py:

- block_types cycles over the layers: ("recurrent", "recurrent", "attention") over 26 layers puts
  attention at layers 2, 5, ..., 23 (8 layers) and the RG-LRU block in the other 18.
- RecurrentGemmaRecurrentBlock: linear_y, linear_x [lru_width, hidden] and linear_out
  [hidden, lru_width], all with biases; conv_1d [lru_width, 1, conv1d_width] with bias;
  rg_lru.recurrent_param [lru_width]; input / recurrent gate weights [heads, lru/heads, lru/heads]
  and biases [heads, lru/heads]. Its cache per request: rg_lru.recurrent_states [lru_width] in
  float32 and conv1d_state [hidden, conv1d_width - 1] in the activation dtype (bf16 here).
- RecurrentGemmaAttention: q [heads x head_dim], k / v [kv_heads x head_dim], no q/k/v biases,
  o_proj with a bias; its DynamicCache layer is a sliding one (layer type "sliding_attention"),
  at most attention_window_size tokens of K and V.
- RecurrentGemmaMlp: gate / up [intermediate_size // 2, hidden], down back, all with biases.
- temporal_pre_norm and channel_pre_norm per layer, final_norm, lm_head tied to the embedding.

transformers' modular_hrm_text.py: two stacks (L_module, H_module) of num_layers_per_stack
layers, each q/k/v/gate_proj/o_proj [12 x 128, 1536] (MHA, no biases) and a SwiGLU MLP
[4096, 1536] x 3; every RMSNorm is NanoChat's, without weights; the model keeps no final norm of
its own; z_L_init [hidden]; an untied lm_head. HrmTextModel.forward runs, per token, for each of
H_cycles: L_module L_cycles times, then H_module once, each pass with cycle_offset giving it its
own KV cache slot: 16 x 2 x (3 + 1) = 128 layer passes with the defaults, of 32 distinct layers."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import memory_need

CONFIGS = Path(__file__).parent / "data" / "configs"
DEFAULTS = CONFIGS / "transformers__RecurrentGemmaConfig-defaults.json"
RG_2B = CONFIGS / "google__recurrentgemma-2b.json"
HRM_DEFAULTS = CONFIGS / "transformers__HrmTextConfig-defaults.json"
HRM_1B = CONFIGS / "sapientinc__HRM-Text-1B.json"
HRM_LAYER = 5 * 1536 * 1536 + 3 * 4096 * 1536  # q, k, v, gate, o; gate / up / down; no norm weights
ATTENTION_LAYERS = [2, 5, 8, 11, 14, 17, 20, 23]


def test_class_defaults_count_matches_transformers():
    # transformers 5.24 on the meta device: RecurrentGemmaForCausalLM(RecurrentGemmaConfig())
    assert load_arch(str(DEFAULTS)).params_total == pytest.approx(2_010_263_040, rel=1e-5)


def test_recurrentgemma_2b_count_matches_transformers_and_the_published_size():
    a = load_arch(str(RG_2B))
    # transformers 5.24 on the meta device, RecurrentGemmaConfig built from this file's fields
    assert a.params_total == pytest.approx(2_682_862_080, rel=1e-5)
    # "2B non-embedding parameters" (transformers' docs/source/en/model_doc/recurrent_gemma.md):
    # less the tied 256000 x 2560 embedding
    assert (a.params_total - 256_000 * 2560) / 1e9 == pytest.approx(2.0, abs=0.05)


def test_layer_layout_follows_the_block_cycle():
    a = load_arch(str(RG_2B))  # the hub file spells the cycle _block_types
    kinds = [layer.kind for layer in a.layers]
    assert [i for i, k in enumerate(kinds) if k == "sliding_attention"] == ATTENTION_LAYERS
    assert kinds.count("linear_attention") == 18


def test_recurrent_and_attention_layers_by_hand():
    a = load_arch(str(DEFAULTS))
    h, lru, heads, block, mlp = 2560, 2560, 10, 256, 7680 // 2
    mlp_params = h + 2 * (mlp * h + mlp) + h * mlp + h  # channel_pre_norm, gate / up, down (biases)
    recurrent = (h + 3 * lru * h + 2 * lru + h  # temporal_pre_norm; x, y, out weights; their biases
                 + lru * 4 + lru + lru  # conv_1d + bias, recurrent_param
                 + 2 * (heads * block * block + heads * block))  # input and recurrent gates
    attention = h + 4 * h * (heads * 256) + h  # q, k, v, o (kv_heads = heads here), o_proj bias
    assert sum(t.params for t in a.layers[0].tensors()) == recurrent + mlp_params
    assert sum(t.params for t in a.layers[2].tensors()) == attention + mlp_params


@pytest.mark.parametrize("tp", [1, 2])
def test_state_and_windowed_kv_per_request(tp):
    a = load_arch(str(RG_2B))
    # 18 recurrent layers: LRU state 2560 x 4 B (float32) + conv window 2560 x 3 x 2 B (bf16)
    state = 18 * (2560 * 4 + 2560 * 3 * 2) / tp
    for context, tokens in ((1000, 1001), (32768, 2048)):  # the cache stops at the 2048-token window
        d = make_deployment(a, "h100-sxm", context=context, tp=tp)
        _, per_req = memory_need(a, d)
        # 8 attention layers, 1 KV head (replicated under TP) of K and V, 256 wide, bf16
        assert per_req[0] == pytest.approx((8 * tokens * 2 * 256 * 2, state))


def test_unknown_block_kind_is_one_clear_error(write_config):
    cfg = json.loads(RG_2B.read_text()) | {"_block_types": ["recurrent", "mamba"]}
    with pytest.raises(DecodescopeError, match="_block_types"):
        load_arch(write_config(cfg))
    with pytest.raises(DecodescopeError, match="block_types"):
        load_arch(write_config(json.loads(RG_2B.read_text()) | {"block_types": []}))


def test_hrm_counts_match_transformers():
    # transformers 5.24 on the meta device: HrmTextForCausalLM(HrmTextConfig()) and HrmTextConfig
    # built from HRM-Text-1B's fields (its num_hidden_layers 16 is the per-stack depth)
    assert load_arch(str(HRM_DEFAULTS)).params_total == pytest.approx(1_447_822_848, rel=1e-5)
    assert load_arch(str(HRM_1B)).params_total == pytest.approx(1_182_795_264, rel=1e-5)


@pytest.mark.parametrize("path", [HRM_DEFAULTS, HRM_1B])
def test_hrm_runs_128_layer_passes_of_32_layers(path):
    """The transformers file says num_layers_per_stack 16 and num_hidden_layers 128; the hub file
    num_hidden_layers 16: the same 2 x (3 L + 1 H) stack passes of 16 layers. Only the first L pass
    (layers 0-15) and the first H pass (48-63) own weights."""
    a = load_arch(str(path))
    assert len(a.layers) == 128
    assert [i for i, x in enumerate(a.layers) if not x.reuses] == [*range(16), *range(48, 64)]
    assert a.params_layers_total == 32 * HRM_LAYER + 1536  # + z_L_init
    # every pass streams its layer's weights, then the untied head
    assert a.params_read_per_token == 128 * HRM_LAYER + 1536 + a.vocab_size * 1536


def test_hrm_every_pass_keeps_its_own_kv_cache():
    a = load_arch(str(HRM_1B))
    _, per_req = memory_need(a, make_deployment(a, "h100-sxm", context=1000))
    # 128 passes x 1001 tokens x K and V of 12 heads x 128, bf16; no recurrent state
    assert per_req[0] == pytest.approx((128 * 1001 * 2 * 12 * 128 * 2, 0.0))


def test_hrm_too_many_loops_is_one_clear_error(write_config):
    cfg = json.loads(HRM_1B.read_text()) | {"H_cycles": 64, "L_cycles": 64}
    with pytest.raises(DecodescopeError, match="layer passes"):
        load_arch(write_config(cfg))
