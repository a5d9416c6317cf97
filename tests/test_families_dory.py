"""NVIDIA Nemotron-Labs Dory (dory): the count against transformers 5.24's own model on the meta
device, the executed layer layout, bytes read per token and the KV cache per request worked out
by hand from its modeling_dory.py and configuration_dory.py.

DoryConfig() (the class defaults, nvidia/NVIDIA-Nemotron-Labs-Dory1.0-4B-BF16): hidden 2560, 36
layers, 16 heads / 4 KV heads of 256, MLP 7168, vocab 131072, untied head, sliding_window 1024.
to_dict() writes the released form: 72 blocks (layer_types with "mlp" after each attention word),
n_input_layers 16, n_recurrent_layers 40, n_output_layers 16, i.e. 8 / 20 / 8 layers.
layer_types default: layer i is full attention when (i + 1) % 4 == 0, else sliding.
  input 0-7: full 3, 7 (2 full, 6 sliding); recurrent 8-27: full 11, 15, 19, 23, 27 (5 full,
  15 sliding); output 28-35: full 31, 35 (2 full, 6 sliding).
n_recurrent_loops 2: a token runs layers 0-27, then 8-27 again, then 28-35: 56 layer passes;
the executed positions 28-47 (the second loop) reuse layers 8-27's weights.

One layer (all norms are weightless L2 projections):
  attention: q_proj, gate_proj [4096, 2560], k_proj, v_proj [1024, 2560], o_proj [2560, 4096]
    = 3 x 10,485,760 + 2 x 2,621,440 = 36,700,160; sqk, s_gate [4096] = 8,192
  mlp: gate_proj, up_proj [7168, 2560], down_proj [2560, 7168] = 55,050,240; suv_gate, suv_up
    [7168] = 14,336
  lambda_1, lambda_2 [2560] = 5,120                           -> 91,778,048 a layer
Model: 36 layers = 3,304,009,728; embed_tokens, lm_head 2 x 335,544,320; lm_head.logit_scale
  [131072]; no final norm weight -> 3,975,229,440 (transformers' count below).
Read per token: 56 passes x 91,778,048 + lm_head 335,544,320 + logit_scale 131,072.
KV per token per attention pass: 4 KV heads x (256 K + 256 V) x 2 B = 4,096 B.
  per_loop: every pass its own cache: 2 + 5 x 2 + 2 = 14 full passes, 6 + 15 x 2 + 6 = 42 sliding
  (a sliding cache holds at most 1024 tokens).
  last_loop: one cache per layer whatever the loops: 9 full, 27 sliding.
"""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

DEFAULTS = Path(__file__).parent / "data" / "configs" / "transformers__DoryConfig-defaults.json"
LAYER = 3 * 4096 * 2560 + 2 * 1024 * 2560 + 2 * 4096 + 3 * 7168 * 2560 + 2 * 7168 + 2 * 2560
HEAD = 131072 * 2560
KV_TOKEN = 4 * (256 + 256) * 2
FULL = {3, 7, 11, 15, 19, 23, 27, 31, 35}


def _arch(write_config, name="dory.json", **edits):
    return load_arch(write_config({**json.loads(DEFAULTS.read_text()), **edits}, name))


def _kv(arch, context, tp=1):
    d = make_deployment(arch, "h100-sxm", context=context, tp=tp)
    return per_request_cache(arch, d, arch.layers)[0]


def test_count_matches_transformers():
    arch = load_arch(str(DEFAULTS))
    assert LAYER == 91_778_048
    assert 36 * LAYER + 2 * HEAD + 131072 == 3_975_229_440
    assert arch.params_total == 3_975_229_440  # transformers 5.24 DoryForCausalLM on the meta device
    assert not arch.final_norm_weights


def test_the_loop_runs_the_recurrent_layers_twice():
    arch = load_arch(str(DEFAULTS))
    order = list(range(28)) + list(range(8, 28)) + list(range(28, 36))  # the layer each pass runs
    assert len(arch.layers) == 56
    assert [x.reuses for x in arch.layers] == [False] * 28 + [True] * 20 + [False] * 8
    assert [x.kind for x in arch.layers] == ["attention" if i in FULL else "sliding_attention" for i in order]
    assert [x.mixer.sliding_window for x in arch.layers] == [None if i in FULL else 1024 for i in order]


def test_bytes_read_per_token_count_each_loop():
    arch = load_arch(str(DEFAULTS))
    assert arch.params_read_per_token == 56 * LAYER + HEAD + 131072


def test_each_loop_keeps_its_own_kv_cache():
    arch = load_arch(str(DEFAULTS))
    t = 32768 + 1  # the context and the token decoded
    assert _kv(arch, 32768) == pytest.approx(KV_TOKEN * (14 * t + 42 * 1024))
    assert _kv(arch, 500) == pytest.approx(KV_TOKEN * 56 * 501)
    assert _kv(arch, 32768, tp=2) == pytest.approx(KV_TOKEN / 2 * (14 * t + 42 * 1024))  # 2 of 4 KV heads a GPU


def test_last_loop_mode_keeps_one_cache_per_layer(write_config):
    arch = _arch(write_config, recurrent_kv_cache_mode="last_loop")
    assert _kv(arch, 32768) == pytest.approx(KV_TOKEN * (9 * 32769 + 27 * 1024))
    assert arch.params_total == 3_975_229_440
    assert arch.params_read_per_token == 56 * LAYER + HEAD + 131072  # earlier loops still project K and V


def test_more_loops_read_more_but_hold_the_same(write_config):
    arch = _arch(write_config, n_recurrent_loops=3)
    assert len(arch.layers) == 76
    assert arch.params_total == 3_975_229_440
    assert arch.params_read_per_token == 76 * LAYER + HEAD + 131072
    one = _arch(write_config, "one.json", n_recurrent_loops=1)
    assert not any(x.reuses for x in one.layers) and len(one.layers) == 36


def test_the_layer_form_and_the_remote_pattern_read_the_same(write_config):
    """DoryConfig's own form (layers, no "mlp" words) and vLLM's remote-code hybrid_layer_pattern
    ("S-S-S-*-": S sliding, * full, - mlp, one character a block) build the same layers."""
    base = load_arch(str(DEFAULTS))
    layers = _arch(write_config, "layers.json", num_hidden_layers=36, n_input_layers=8, n_recurrent_layers=20,
                   n_output_layers=8, layer_types=None)
    pattern = _arch(write_config, "pattern.json", layer_types=None, hybrid_layer_pattern="S-S-S-*-" * 9)
    assert layers.layers == base.layers == pattern.layers


@pytest.mark.parametrize("edits", [dict(recurrent_kv_cache_mode="every_loop"), dict(n_recurrent_loops=0),
                                   dict(n_input_layers=40), dict(n_recurrent_layers=10),
                                   dict(layer_types=["mlp", "sliding_attention"] * 36),
                                   dict(layer_types=None, hybrid_layer_pattern="SSX"),
                                   dict(n_recurrent_loops=10_000)])
def test_bad_layouts_give_one_clear_error(write_config, edits):
    with pytest.raises(DecodescopeError):
        _arch(write_config, **edits)


def test_input_and_output_layers_above_the_total_are_refused(write_config):
    """The defaults count in blocks (two a layer): 72 blocks = 36 layers cannot hold 40 input and
    40 output blocks (20 + 20 layers): the recurrent section would be -4 layers."""
    cfg = json.loads(DEFAULTS.read_text())
    cfg.update({"n_input_layers": 40, "n_output_layers": 40})
    cfg.pop("n_recurrent_layers", None)
    path = write_config(cfg)
    with pytest.raises(DecodescopeError, match="is not num_hidden_layers 36"):
        load_arch(path)
