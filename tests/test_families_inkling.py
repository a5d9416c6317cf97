"""Thinking Machines Inkling (model_type inkling_text; inkling_mm_model nests it under
text_config), read from transformers 5.24 models/inkling/modeling_inkling.py.

A layer: input norm, attention (q, k, v, o, r_proj of heads x d_rel, per-head q/k norms, a
depthwise short conv of conv_kernel_size taps on k and on v, the relative-logits bank [d_rel,
rel_extent], or [d_rel, window] on sliding layers), attn_sconv (hidden x taps) on its output, a
post norm, a MoE (experts, shared experts, router of n_routed + n_shared rows and a global_scale)
or a dense SwiGLU MLP with a global_scale, and mlp_sconv on its output. Sliding layers
("hybrid_sliding": every i with (i + 1) % 6 != 0 by default) have swa_* heads; the others
attend in full. The embedding has an RMSNorm of its own.

Per request (InklingShortConvolution casts to float32 before it updates the conv cache): each
layer keeps conv_kernel_size - 1 past inputs of its four convs, k and v (kv_heads x head_dim
each) and the two hidden-wide ones; the KV cache holds K and V of kv_heads x head_dim a token.

The released Inkling (text_config transcribed field by field from the Hub config.json in
https://github.com/WandLZhang/tpu-mech-interp/blob/f9626fd2f6f3322a3db5cf7c66c083bb0ea8d524/scan/test_inkling_layers.py,
h 6144, 66 layers, 64 q heads of 128, 8 KV heads on the 11 full layers and 16 on the 55 sliding
ones, window 512, 4 taps, dense MLPs 24576 wide on layers 0-1, 256 experts of 3072, top-6, 2
shared). By hand, bf16 KV: a sliding layer 16 x 128 x 2 (K, V) x 2 B = 8192 B a token, a full
one 8 x 128 x 2 x 2 = 4096 B. Conv state, 3 taps x 4 B: a sliding layer (2 x 16 x 128 + 2 x
6144) x 12 = 196,608 B, a full one (2 x 8 x 128 + 2 x 6144) x 12 = 172,032 B; 55 x 196,608 +
11 x 172,032 = 12,705,792 B = 12.12 MiB a request, the figure that file gives from the model
card (conv_state_mib 12.12), as it gives 220 MiB for the sliding layers' windows (55 x 512 x
8192 B). Published totals (https://simonwillison.net/2026/Jul/16/inkling/): 975B total, 41B
active."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache
from decodescope.model.ops import layer_ops
from decodescope.model.predict import expected_rates

DATA = Path(__file__).parent / "data" / "configs"
DEFAULTS = DATA / "transformers__InklingTextConfig-defaults.json"
DEFAULTS2 = DATA / "transformers__Inkling2TextConfig-defaults.json"
LOOP = DATA / "transformers__Inkling2LoopTextConfig-defaults.json"
RELEASED = DATA / "thinkingmachines__Inkling.trimmed.json"
SLIDING_KV, FULL_KV = 8192, 4096  # bytes a token and layer (bf16)
SLIDING_STATE, FULL_STATE = 196_608, 172_032  # bytes a request and layer (float32)

# the optional parts by hand (transformers 5.24 InklingTextConfig(**SMALL)): explicit layer_types
# and mlp_layer_types, sliding heads wider than the full ones, 3 taps, 1 shared expert
SMALL = {"model_type": "inkling_text", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
         "num_key_value_heads": 1, "head_dim": 32, "swa_num_attention_heads": 2, "swa_num_key_value_heads": 2,
         "swa_head_dim": 64, "sliding_window_size": 64, "d_rel": 8, "rel_extent": 128, "conv_kernel_size": 3,
         "layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding"], "mlp_layer_types": ["dense", "sparse", "sparse"],
         "intermediate_size": 512, "moe_intermediate_size": 64, "n_routed_experts": 4, "num_experts_per_tok": 2,
         "n_shared_experts": 1, "vocab_size": 1000}


def test_defaults_count_equals_transformers():
    a = load_arch(str(DEFAULTS))
    # transformers 5.24, InklingForCausalLM(InklingTextConfig()) on the meta device
    assert a.params_total == 975_340_270_146
    assert not a.tie_word_embeddings


def test_released_config_count_and_published_active():
    """dense_mlp_idx 2 and dense_intermediate_size: the checkpoint's names, where intermediate_size is
    the experts' width. The published 975B total holds more than this text decoder (its 975B is
    the class defaults' count, every layer MoE); the 41B active is the decoder's."""
    a = load_arch(str(RELEASED))
    # transformers 5.24, InklingForCausalLM(InklingTextConfig(**text_config)) on the meta device
    assert a.params_total == 947_025_547_842
    assert a.params_active == pytest.approx(41e9, rel=0.02)
    assert [type(x.mlp).__name__ for x in a.layers[:3]] == ["InklingMLP", "InklingMLP", "InklingMoE"]
    assert a.layers[0].mlp.intermediate_size == 24576 and a.layers[2].mlp.moe_intermediate_size == 3072


def test_layer_5_and_every_sixth_attend_in_full_with_8_kv_heads():
    a = load_arch(str(RELEASED))
    full = [i for i, x in enumerate(a.layers) if x.kind == "attention"]
    assert full == list(range(5, 66, 6))
    assert {a.layers[i].mixer.num_key_value_heads for i in full} == {8}
    assert {x.mixer.num_key_value_heads for i, x in enumerate(a.layers) if i not in full} == {16}
    assert {x.mixer.attention.sliding_window for i, x in enumerate(a.layers) if i not in full} == {512}


def test_kv_cache_and_conv_state_per_request():
    """Context 1000: 1001 tokens on the 11 full layers, 512 on the 55 sliding ones; the state
    whatever the context. TP 8: 2 of the 16 sliding KV heads and 1 of the 8 full ones a GPU, the
    k / v conv windows with them; the hidden-wide conv windows whole on every GPU:
    (2 x 2 x 128 + 2 x 6144) x 12 = 153,600 B and (2 x 1 x 128 + 2 x 6144) x 12 = 150,528 B."""
    a = load_arch(str(RELEASED))
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert kv == 55 * 512 * SLIDING_KV + 11 * 1001 * FULL_KV
    assert state == 55 * SLIDING_STATE + 11 * FULL_STATE == 12_705_792
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000, tp=8), a.layers)
    assert kv == (55 * 512 * SLIDING_KV + 11 * 1001 * FULL_KV) / 8
    assert state == 55 * 153_600 + 11 * 150_528


def test_small_config_by_hand(write_config):
    """Full attention (4 x 32, 1 KV head): q, o 2 x 128 x 256 + k, v 2 x 32 x 256 + r_proj 32 x 256 +
    k/v convs 2 x 32 x 3 + q/k norms 2 x 32 + bank 8 x 128 + norm 256 = 91,648; sliding (2 x 64, 2 KV
    heads): 4 x 128 x 256 + r_proj 16 x 256 + convs 2 x 128 x 3 + norms 2 x 64 + bank 8 x 64 + 256 =
    136,832; dense MLP 3 x 512 x 256 + 1 + 256 = 393,473; MoE 4 x 3 x 64 x 256 + shared 3 x 64 x 256
    + gate 5 x 256 + 1 + 256 = 247,297; the two hidden convs 2 x 256 x 3 a layer; embedding, its
    norm, final norm, head 2 x 256,000 + 512. KV: sliding 2 x 64 x 2 x 2 = 512 B over 64 tokens,
    full 1 x 32 x 2 x 2 = 128 B over 1001; state (2 taps x 4 B): (2 x 128 + 512) x 8 = 6144 B
    sliding, (2 x 32 + 512) x 8 = 4608 B full."""
    a = load_arch(write_config(SMALL))
    # transformers 5.24 on the meta device: 1,770,499
    assert a.params_total == 1_770_499 == (136_832 + 393_473) + (91_648 + 247_297) + (136_832 + 247_297) \
        + 3 * 1536 + 512_512
    assert [x.kind for x in a.layers] == ["sliding_attention", "attention", "sliding_attention"]
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=1000), a.layers)
    assert (kv, state) == (2 * 64 * 512 + 1001 * 128, 2 * 6144 + 4608)


def test_multimodal_wrapper_reads_text_config_and_notes_the_towers(write_config):
    wrapped = {"model_type": "inkling_mm_model", "text_config": {k: v for k, v in SMALL.items() if k != "model_type"},
               "vision_config": {"hidden_size": 1024}, "audio_config": {"n_mel_bins": 80}}
    a = load_arch(write_config(wrapped))
    assert a.params_total == 1_770_499
    assert any("vision and audio encoders" in n for n in a.notes)


@pytest.mark.parametrize("change", [{"layer_types": ["hybrid", "full_attention", "hybrid"]},
                                    {"mlp_layer_types": ["dense", "moe?", "sparse"]},
                                    {"layer_types": None, "local_layer_ids": [0, 7]},
                                    {"d_rel": 0}, {"conv_kernel_size": "four"}, {"swa_num_attention_heads": None},
                                    {"sliding_window_size": -1}, {"n_shared_experts": 1 << 40}])
def test_bad_fields_are_one_error_naming_the_field(write_config, change):
    field = next((k for k, v in change.items() if v is not None), next(iter(change)))  # a None: the field removed
    with pytest.raises(DecodescopeError, match=field):
        load_arch(write_config({**SMALL, **change}))


def test_one_allreduce_after_the_attention_and_one_after_the_moe_at_tp_8():
    """o_proj is the mixer's one row-parallel output (attn_sconv runs on the reduced hidden), the
    experts' down_proj and the shared experts' the MLP's: two allreduces a layer."""
    a = load_arch(str(RELEASED))
    d = make_deployment(a, "h100-sxm", tp=8)
    ops = layer_ops(a.layers[5], d.weights, d, 1, 1, expected_rates(d))
    assert [op.name for op in ops if op.component == "allreduce"] == ["mixer allreduce", "mlp allreduce"]
    assert any(op.component == "state" for op in ops) and any(op.component == "kv_cache" for op in ops)


# ---- Inkling 2 (transformers 5.24 models/inkling2) ---------------------------------------------
# Inkling2TextConfig's defaults: h 4608, 48 layers (full at 5, 11, ..., 47, sliding in a 1024 window
# elsewhere), 48 q heads and 8 KV heads of 128 on both kinds, 384 experts of 2304, top-8, no
# shared experts, vocab 201024, unpadded_vocab_size 200058. transformers' head holds the 200058
# rows, the checkpoint (and decodescope) vocab_size's: 966 x 4608 = 4,451,328 more.
# KV: 8 x 128 x 2 x 2 B = 4096 B a token and layer. Conv state (4 taps: 3 kept, float32; the full
# layers' dynamic convs keep the same windows): (2 x 8 x 128 + 2 x 4608) x 3 x 4 = 135,168 B a layer.


def test_inkling2_defaults_count_equals_transformers_but_the_padded_head_rows():
    a = load_arch(str(DEFAULTS2))
    # transformers 5.24, Inkling2ForCausalLM(Inkling2TextConfig()) on the meta device: 593,718,478,848
    assert a.params_total == 593_718_478_848 + (201_024 - 200_058) * 4608
    assert a.params_total == pytest.approx(593_718_478_848, rel=1e-5)


def test_inkling2_layout_and_cache_per_request():
    a = load_arch(str(DEFAULTS2))
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == list(range(5, 48, 6))
    assert {x.mixer.attention.dynamic for x in a.layers if x.kind == "attention"} == {True}
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=2000), a.layers)
    assert kv == 40 * 1024 * 4096 + 8 * 2001 * 4096
    assert state == 48 * 135_168


# ---- Inkling 2 Loop (transformers 5.24 models/inkling2_loop) --------------------------------------
# Inkling2LoopTextConfig's defaults: Inkling 2's layers at h 2304, 24 layers, 24 q heads, 8 KV heads,
# 128 experts of 1152; layers 6-17 run 3 times (passes 2 and 3 re-read their weights), so a token
# passes 6 + 3 x 12 + 6 = 48 layers: the full ones are 5, 11 and 17 of each pass, and 23 - 8 in
# all. Every pass keeps its own KV cache and conv windows (Inkling2LoopTextModel deep-copies the
# looped layers' cache layers): 4096 B a token and layer, (2 x 1024 + 2 x 2304) x 12 = 79,872 B.


def test_inkling2_loop_count_and_passes():
    a = load_arch(str(LOOP))
    # transformers 5.24 on the meta device: 26,068,156,416 (+ the 966 padded head rows x 2304)
    assert a.params_total == 26_068_156_416 + 966 * 2304
    assert len(a.layers) == 48
    assert [i for i, x in enumerate(a.layers) if x.reuses] == list(range(18, 42))
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == [5, 11, 17, 23, 29, 35, 41, 47]
    kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", context=2000), a.layers)
    assert kv == 40 * 1024 * 4096 + 8 * 2001 * 4096
    assert state == 48 * 79_872


def test_each_loop_pass_reads_the_looped_weights_again(write_config):
    """Held once whatever the passes; every pass past the first reads the same looped weights."""
    base = json.loads(LOOP.read_text())
    one, two, three = (load_arch(write_config({**base, "loop_num_passes": p})) for p in (1, 2, 3))
    assert one.params_total == two.params_total == three.params_total
    extra = two.params_read_per_token - one.params_read_per_token
    assert extra > 0 and three.params_read_per_token - two.params_read_per_token == extra


def test_loop_config_names_the_loop_as_checkpoints_do(write_config):
    base = {k: v for k, v in json.loads(LOOP.read_text()).items() if not k.startswith("loop_")}
    loop = {"core_start": 12, "core_end": 18, "num_passes": 2, "gate_rank": 64}
    a = load_arch(write_config({**base, "loop_config": loop}))
    assert len(a.layers) == 24 + 6 and [i for i, x in enumerate(a.layers) if x.reuses] == list(range(18, 24))


@pytest.mark.parametrize("change", [{"loop_layer_index_start": 0}, {"loop_layer_index_end": 30},
                                    {"loop_num_passes": 0}, {"loop_gate_rank": "low"}])
def test_bad_loop_fields_are_one_error(write_config, change):
    with pytest.raises(DecodescopeError, match="loop_"):
        load_arch(write_config({**json.loads(LOOP.read_text()), **change}))
