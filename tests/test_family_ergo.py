"""Ergo (model_type ergo, transformers 5.25's ErgoForCausalLM; decodescope/arch/ergo.py).

The fixture is ErgoConfig() on its defaults (tests/data/configs/SOURCES.md): hidden 8192, 64
layers, 64 heads of 128 with 8 KV heads, vocab 262,144, layer 0 dense (32768 wide), layers 1-63
256 routed experts of 4096 (top 8) + a shared expert of 8192, full attention every 4th layer, the
others in a 512-token window. Counts are worked out by hand below; transformers' own
ErgoForCausalLM on the meta device counts 1,105,550,917,632 parameters (nn.Parameters only)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import MoE
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache
from decodescope.model.ops import tensor_params_gpu

FIXTURE = Path(__file__).parent / "data" / "configs" / "transformers__ErgoConfig-defaults.json"
TRANSFORMERS_COUNT = 1_105_550_917_632  # transformers 5.25, sum(p.numel() for p in model.parameters())
H, V, E, K = 8192, 262144, 256, 8  # hidden, vocab, routed experts, experts per token

# every layer: attention + its norms + the residual gates
QKV = (64 + 2 * 8) * 128 * H  # fused qkv_proj: (64 q + 8 k + 8 v heads) x 128 rows, 83,886,080
O_PROJ = H * 64 * 128  # o_proj, 67,108,864
QK_NORMS = 2 * 128  # q_norm, k_norm of head_dim
NORMS = 4 * H  # input, post_attention, pre_feedforward, post_feedforward
GATES = 2 * H  # attention_ and feedforward_residual_gate
COMMON = QKV + O_PROJ + QK_NORMS + NORMS + GATES  # 151,044,352
DENSE = 2 * H * 32768  # layer 0: up_proj + down_proj (relu2, no gate), 536,870,912
ROUTER = E * H + E  # the fp32 Linear (no bias) + e_score_correction_bias (a persistent buffer)
EXPERT = 2 * H * 4096  # one routed expert: up + down, 67,108,864
EXPERT_NORM = H  # one row of ErgoExpertNorm's num_experts x hidden
SHARED = 2 * H * 8192 + H  # shared expert: up + down + its norm, 134,225,920
MOE = ROUTER + E * (EXPERT + EXPERT_NORM) + SHARED  # 17,318,289,664
EMBED = HEAD = V * H  # 2,147,483,648 each; untied, the head has no bias
FINAL_NORM = H


def _arch(path=FIXTURE):
    return load_arch(str(path))


def _cfg() -> dict:
    return json.loads(FIXTURE.read_text())


def test_params_total_by_hand_and_against_transformers():
    """64 x 151,044,352 + 536,870,912 + 63 x 17,318,289,664 + 2 x 2,147,483,648 + 8192 =
    1,105,550,933,760. transformers counts 16,128 fewer: the 63 MoE layers' routers' correction
    biases of 256 (nn.Buffer, held in the checkpoint's state dict, not an nn.Parameter)."""
    total = 64 * COMMON + DENSE + 63 * MOE + EMBED + HEAD + FINAL_NORM
    a = _arch()
    assert a.params_total == total == 1_105_550_933_760
    assert a.params_total - TRANSFORMERS_COUNT == 63 * E == 16_128
    assert abs(a.params_total / TRANSFORMERS_COUNT - 1) < 0.01
    assert not a.tie_word_embeddings


def test_active_params_by_hand():
    """A token runs 8 of 256 experts and reads their 8 rows of the per-expert norm; the router,
    its bias and the shared expert always: 2,097,408 + 8 x (67,108,864 + 8192) + 134,225,920 =
    673,259,776 a MoE layer. Active (embedding included, decodescope's convention) 56,914,050,816;
    read per token (no embedding) 54,766,567,168."""
    moe_active = ROUTER + K * (EXPERT + EXPERT_NORM) + SHARED
    assert moe_active == 673_259_776
    active = 64 * COMMON + DENSE + 63 * moe_active + EMBED + HEAD + FINAL_NORM
    a = _arch()
    assert a.params_active == active == 56_914_050_816
    assert a.params_read_per_token == active - EMBED == 54_766_567_168


def test_layout_windows_and_dense_layers():
    """Full attention on layers 3, 7, ..., 63 (16), the other 48 in a 512-token window; layer 0
    dense (ungated, 32768 wide), layers 1-63 MoE with the per-expert and shared-expert norms."""
    a = _arch()
    full = [i for i, x in enumerate(a.layers) if x.kind == "attention"]
    assert full == list(range(3, 64, 4))
    assert all(x.mixer.sliding_window == 512 for x in a.layers if x.kind == "sliding_attention")
    assert all(x.mixer.sliding_window is None for x in a.layers if x.kind == "attention")
    assert [isinstance(x.mlp, MoE) for x in a.layers[:2]] == [False, True]
    assert all(isinstance(x.mlp, MoE) for x in a.layers[1:])
    assert a.layers[0].mlp.intermediate_size == 32768 and not a.layers[0].mlp.gated
    names = {t.name for t in a.layers[1].tensors()}
    assert {"experts.post_expert_norm", "shared_expert.norm", "router.bias", "q_norm", "k_norm",
            "attention_residual_gate", "feedforward_residual_gate", "pre_feedforward_layernorm"} <= names


def test_kv_bytes_of_a_windowed_and_a_full_layer():
    """8 KV heads x 128 x (K + V) x 2 B = 4096 B a token and layer. At context 1000 (1001 tokens
    cached) a windowed layer keeps 512 tokens: 2,097,152 B; a full one all 1001: 4,100,096 B;
    the model (48 x 512 + 16 x 1001) x 4096. Under TP 8 each GPU holds one KV head: an eighth."""
    a = _arch()
    d = make_deployment(a, "h200", context=1000)
    assert per_request_cache(a, d, [a.layers[0]]) == (512 * 4096, 0)
    assert per_request_cache(a, d, [a.layers[3]]) == (1001 * 4096, 0)
    assert per_request_cache(a, d, a.layers) == ((48 * 512 + 16 * 1001) * 4096, 0)
    d8 = make_deployment(a, "h200", tp=8, context=1000)
    assert per_request_cache(a, d8, [a.layers[3]]) == (1001 * 4096 // 8, 0)


def test_expert_norm_rows_split_with_the_experts():
    """Under EP 8 a GPU holds 32 of the 256 expert-norm rows; read: the rows of the experts it runs."""
    norm = next(t for t in _arch().layers[1].tensors() if t.name == "experts.post_expert_norm")
    assert tensor_params_gpu(norm, 8, 8) == 32 * H
    assert tensor_params_gpu(norm, 8, 8, touched_experts=1.0) == H


def test_defaults_of_the_config_class_where_lists_are_left_out(write_config):
    """ErgoConfig.__post_init__: full attention every global_attention_every_n_layers-th layer,
    dense MLPs in the first num_dense_blocks; released configs name the window
    local_attention_window (ErgoConfig.attribute_map)."""
    cfg = {k: v for k, v in _cfg().items() if k not in ("layer_types", "mlp_layer_types", "sliding_window")}
    a = _arch(write_config({**cfg, "local_attention_window": 1024}))
    assert a.params_total == 1_105_550_933_760
    assert [x.mixer.sliding_window for x in a.layers[:4]] == [1024, 1024, 1024, None]
    b = _arch(write_config({**cfg, "num_dense_blocks": 3, "global_attention_every_n_layers": 2}, "b.json"))
    assert sum(x.kind == "attention" for x in b.layers) == 32
    assert b.params_total == 1_105_550_933_760 + 2 * (DENSE - MOE)


@pytest.mark.parametrize("field, value, says", [
    ("first_dense_intermediate_size", -4096, "first_dense_intermediate_size"),
    ("global_attention_every_n_layers", "4", "global_attention_every_n_layers"),
    ("sliding_window", 0, "sliding_window"),
    ("num_dense_blocks", 1e300, "num_dense_blocks"),
    ("num_key_value_heads", 7, "multiple of the KV heads"),
    ("hidden_size", 32, "head_dim"),
    ("mlp_layer_types", ["dense"] * 63, "mlp_layer_types"),
    ("num_experts_per_tok", 300, "experts per token"),
])
def test_hostile_values_are_one_clear_error(write_config, field, value, says):
    cfg = _cfg()
    if field in ("global_attention_every_n_layers", "num_dense_blocks"):
        del cfg["layer_types"], cfg["mlp_layer_types"]  # read only where the lists are left out
    with pytest.raises(DecodescopeError, match=says):
        _arch(write_config({**cfg, field: value}))


def test_a_tiny_model_matches_transformers_state_dict(write_config):
    """Where transformers has Ergo (5.25+): a tiny ErgoForCausalLM's state dict (parameters and
    persistent buffers) has exactly decodescope's count; its parameters, the routers' biases fewer."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "ErgoConfig"):
        pytest.skip("this transformers has no Ergo (5.25+)")
    cfg = transformers.ErgoConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=6, num_attention_heads=4,
                                  num_key_value_heads=2, first_dense_intermediate_size=128, num_dense_blocks=2,
                                  moe_intermediate_size=32, shared_intermediate_size=48, num_experts=8,
                                  num_experts_per_tok=2, sliding_window=16, global_attention_every_n_layers=3)
    model = transformers.ErgoForCausalLM(cfg)
    a = _arch(write_config(cfg.to_dict()))
    assert a.params_total == sum(t.numel() for t in model.state_dict().values())
    assert a.params_total - sum(p.numel() for p in model.parameters()) == 4 * 8  # 4 MoE layers x 8 experts
