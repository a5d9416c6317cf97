"""xLSTM, RWKV-7 and RWKV-4 (decodescope/arch/recurrent2.py), each from a real hub config.json, counted
by hand tensor by tensor from the code that builds them (transformers 5.24's models/xlstm and
models/rwkv, flash-linear-attention's fla/models/rwkv7 and fla/layers/rwkv7.py), against the
published count and, where transformers 5.24 has the class, its own count on the meta device
(AutoModelForCausalLM.from_config, the sum of every parameter's numel). None keeps a KV cache; the
state per request is derived by hand from the caches those files allocate.

NX-AI/xLSTM-7b (embedding_dim 4096, num_blocks 32, 8 heads, qk_dim_factor 0.5, v_dim_factor 1,
  ffn_proj_factor 2.667 rounded up to 64, vocab 50304, untied, no biases):
  mLSTM layer: q, k 2 x 2048 x 4096 = 16,777,216; v, ogate_preact, out_proj 3 x 4096^2 = 50,331,648;
  igate / fgate 2 x (8 x 4096 + 8) = 65,552; multihead_norm 4096 -> 67,178,512;
  FFN: up 4096 x 2.667 = 10924.03 -> 10944; proj_up_gate, proj_up, proj_down 3 x 10944 x 4096 =
  134,479,872; norm_mlstm, norm_ffn 8192 -> a block 201,666,576 x 32 = 6,453,330,432;
  embedding and head 2 x 50304 x 4096 = 412,090,368; out_norm 4096 -> 6,865,424,896 (transformers:
  6,865,424,896; the hub's float32 files, 27.5 GB / 4 bytes = 6.87B; the paper: "7B").
  State (xLSTMCache): per head C 256 x 512 + n 256 + m 1 = 131,329 values x 8 heads x 4 bytes
  (float32) = 4,202,528 bytes a layer x 32 = 134,480,896 bytes a request; no KV.
fla-hub/rwkv7-1.5B-world (hidden 2048, 24 layers, head_dim 64 -> 32 heads, value_dim 2048, ranks
  decay 96 / a 96 / v 64 / gate 256, intermediate 8192, vocab 65536, untied, norm biases):
  time-mix: r/k/v/o 4 x 2048^2 = 16,777,216; w_lora and a_lora 2 x (2 x 2048 x 96 + 2048) = 790,528;
  v_lora 2 x 2048 x 64 + 2048 = 264,192 (not in layer 0); g_lora 2 x 2048 x 256 = 1,048,576;
  x_r/w/k/v/a/g 6 x 2048 = 12,288; k_k, k_a, r_k 3 x 2048 = 6,144; g_norm weight + bias 4,096;
  channel-mix: x_k 2048 + key, value 2 x 8192 x 2048 = 33,556,480; attn_norm, ffn_norm with
  biases 8,192 -> 52,467,712 a layer; layer 0: - 264,192 + pre_norm 4,096 = 52,207,616;
  23 x 52,467,712 + 52,207,616 = 1,258,964,992; embedding and head 2 x 65536 x 2048 =
  268,435,456; final norm with bias 4,096 -> 1,527,404,544 (the hub's float32 model.safetensors,
  6.11 GB / 4 bytes = 1.53B; the card: "1.5B").
  State: wkv 32 x 64 x 64 x 4 bytes (float32) = 524,288 + two token shifts 2 x 2048 x 2 bytes =
  8,192 -> 532,480 bytes a layer x 24 = 12,779,520 bytes a request; no KV.
RWKV/rwkv-4-3b-pile (hidden 2560, attention_hidden_size 2560, intermediate 10240, 32 layers,
  vocab 50277, untied):
  time-mix: time_decay, time_first 2 x 2560; three mixes 3 x 2560; key/value/receptance/output
  4 x 2560^2 = 26,214,400; channel-mix: two mixes 2 x 2560, key and value 2 x 10240 x 2560 =
  52,428,800, receptance 2560^2 = 6,553,600; ln1, ln2 with biases 4 x 2560 -> 85,224,960 a layer
  x 32 = 2,727,198,720; pre_ln 5,120; embedding and head 2 x 50277 x 2560 = 257,418,240; ln_out
  5,120 -> 2,984,627,200 (transformers: 2,984,627,200; the name: RWKV-4 "3B", 0.5 % off).
  State (RwkvModel.forward): num, den, max 3 x 2560 x 4 bytes = 30,720 + two token shifts
  2 x 2560 x 2 bytes = 10,240 -> 40,960 bytes a layer x 32 = 1,310,720 bytes a request; no KV."""

from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, predict
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
XLSTM, RWKV7, RWKV4 = (CONFIGS / f"{n}.json" for n in ("NX-AI__xLSTM-7b", "fla-hub__rwkv7-1.5B-world",
                                                        "RWKV__rwkv-4-3b-pile"))

# config -> (hand count above, published count); transformers' meta count equals the hand count
# where it has the class (xLSTM, RWKV-4)
COUNTS = {XLSTM: (6_865_424_896, 6.87e9), RWKV7: (1_527_404_544, 6.11e9 / 4), RWKV4: (2_984_627_200, 3e9)}
# config -> (state bytes a request at TP 1, at TP 2), by hand above: the heads' state splits, token shifts do not
STATES = {XLSTM: (134_480_896, 134_480_896 / 2), RWKV7: (12_779_520, (262_144 + 8_192) * 24),
          RWKV4: (1_310_720, (15_360 + 10_240) * 32)}
# transformers 5.24 on the meta device, the hub config with these fields changed
VARIANTS = [
    (XLSTM, {"use_bias": True}, 6_867_173_888),  # biases on q/k/v/o-gate/out, FFN and norms; out_norm has none
    (XLSTM, {"weight_mode": "fused"}, 6_865_424_896),  # the same rows in two matrices
    (XLSTM, {"embedding_dim": 1024, "hidden_size": 1024, "num_blocks": 6, "num_hidden_layers": 6, "num_heads": 4,
             "qk_dim_factor": 0.25, "v_dim_factor": 2.0, "ffn_proj_factor": 1.5, "use_bias": True}, 172_386_352),
    (RWKV4, {"hidden_size": 2048, "attention_hidden_size": 1024, "intermediate_size": 5000, "num_hidden_layers": 4},
     338_276_352),
    (RWKV4, {"hidden_size": 1024, "attention_hidden_size": None, "intermediate_size": None}, 539_539_456),
]


@pytest.mark.parametrize("path", COUNTS)
def test_hub_config_counts_by_hand_and_as_published(path):
    hand, published = COUNTS[path]
    a = load_arch(str(path))
    assert a.params_total == a.params_active == hand
    assert a.params_total == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize("path", STATES)
def test_state_per_request_and_no_kv_cache(path):
    a = load_arch(str(path))
    for tp, want in zip((1, 2), STATES[path]):
        kv, state = per_request_cache(a, make_deployment(a, "h100-sxm", tp=tp, context=100_000), a.layers)
        assert (kv, state) == (0, want)


@pytest.mark.parametrize("path, changes, count", VARIANTS)
def test_variants_count_as_transformers_does(path, changes, count, config_variant):
    assert load_arch(config_variant(path, **changes)).params_total == count


def test_rwkv7_value_dim_and_null_ranks_follow_fla(config_variant):
    """value_dim 4096 (2 x hidden) widens v_proj, o_proj, the v and g LoRAs' outputs and g_norm; null
    ranks take RWKV7Attention's formula with sqrt(2048) = 45.25 and head_dim 64: decay and a
    max(32, round(2.5 x 45.25 / 32) x 32) = round(3.54) x 32 = 128, v round(1.7 x 45.25 / 32) x 32 =
    64, gate round(5 x 45.25 / 32) x 32 = 224."""
    a = load_arch(config_variant(RWKV7, value_dim=4096))
    v = {t.name: t.shape for t in a.layers[1].mixer.tensors()}
    assert v["v_proj"] == (4096, 2048) and v["o_proj"] == (2048, 4096) and v["g_norm"] == (4096,)
    assert v["v_lora.lora.2"] == (4096, 64) and v["g_lora.lora.2"] == (4096, 256)
    b = load_arch(config_variant(RWKV7, decay_low_rank_dim=None, a_low_rank_dim=None, v_low_rank_dim=None,
                                 gate_low_rank_dim=None))
    m = b.layers[1].mixer
    assert (m.decay_rank, m.a_rank, m.v_rank, m.gate_rank) == (128, 128, 64, 224)
    assert b.layers[0].mixer.v_rank == 0  # layer 0 has no value-residual LoRA


def test_rwkv7_head_dim_null_takes_num_heads(config_variant):
    m = load_arch(config_variant(RWKV7, head_dim=None, num_heads=16)).layers[0].mixer
    assert (m.num_heads, m.head_dim) == (16, 128)


@pytest.mark.parametrize("path, changes, field", [
    (XLSTM, {"qk_dim_factor": "half"}, "qk_dim_factor"),
    (XLSTM, {"num_heads": 3}, "heads"),
    (XLSTM, {"inference_state_dtype": "int8"}, "inference_state_dtype"),
    (XLSTM, {"embedding_dim": -5}, "hidden_size"),
    (RWKV7, {"head_dim": 48}, "heads"),
    (RWKV7, {"value_dim": [2048]}, "value_dim"),
    (RWKV7, {"attn": {"layers": [3]}}, "attn"),
    (RWKV7, {"gate_low_rank_dim": 1.5}, "gate_low_rank_dim"),
    (RWKV4, {"attention_hidden_size": 0}, "attention_hidden_size"),
])
def test_bad_fields_are_one_clear_error(path, changes, field, config_variant):
    with pytest.raises(DecodescopeError, match=field):
        load_arch(config_variant(path, **changes))


def test_tensor_parallel_must_divide_the_heads():
    """TP splits the recurrent state by head: xLSTM-7b's 8 heads over 4 GPUs, not 16."""
    a = load_arch(str(XLSTM))
    assert predict(a, make_deployment(a, "b200", tp=4, link="nvswitch")).expected.tok_s > 0
    with pytest.raises(DecodescopeError, match="linear_num_value_heads = 8"):
        predict(a, make_deployment(a, "gb200", tp=16, link="nvswitch"))
