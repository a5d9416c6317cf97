"""Aleph Alpha Kolibri-1.1 (model_type kolibri1_1), read from transformers 5.25's
src/transformers/models/kolibri1_1/modeling_kolibri1_1.py and configuration_kolibri1_1.py.
The fixture is Kolibri1_1Config() on its defaults (tests/data/configs/SOURCES.md), loaded
without transformers: counts, layout and cache bytes are derived by hand below.

Shapes of the defaults: hidden 2560, vocab 128,000 (untied head), 50 layers, 48 query heads
and 4 KV heads of 128, 384 experts of 512 (top 6) + one shared expert of 512 from layer 2 on,
dense MLPs of 3584 on layers 0 and 1; every 5th layer indexed attention, the others in a
513-token window."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.blocks import MoE
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache
from decodescope.model.ops import attention_op
from decodescope.model.predict import ceiling_rates

FIXTURE = Path(__file__).parent / "data" / "configs" / "transformers__Kolibri1_1Config-defaults.json"
# transformers 5.25: Kolibri1_1ForCausalLM(Kolibri1_1Config()) on the meta device, nn.Parameter only
TRANSFORMERS_COUNT = 75_112_646_912

H, V, D = 2560, 128_000, 128
INDEXED = [4, 9, 14, 19, 24, 29, 34, 39, 44, 49]
# kv_source_layers' default: the 2nd, 3rd and 10th indexed layers read layer 4's K/V, the 7th
# to 9th layer 29's
SHARED_KV = [9, 14, 34, 39, 44, 49]


def _arch():
    return load_arch(str(FIXTURE))


def _config() -> dict:
    return json.loads(FIXTURE.read_text())


def _by_hand() -> dict[str, int]:
    """The parameters of each part, by hand (per layer unless said)."""
    q = o = 48 * D * H  # q_proj 6144 x 2560 and o_proj 2560 x 6144: 15,728,640 each
    k = v = 4 * D * H  # 512 x 2560: 1,310,720 each
    attn = q + k + v + o + D + D + H  # + q_norm, k_norm (128 each), input_layernorm: 34,081,536
    attn_shared = q + o + D + H  # a layer reading another's K/V: no k/v projections, no k_norm: 31,459,968
    expert = 2 * 512 * H + H * 512  # gate_up 1024 x 2560 + down 2560 x 512: 3,932,160
    router = 384 * H  # 983,040
    moe = router + 384 * expert + expert + H  # + the shared expert (512 wide) + post_attention_layernorm
    dense = 3 * 3584 * H + H  # gate, up, down of 3584 + post_attention_layernorm: 27,527,680
    return {"attn": attn, "attn_shared": attn_shared, "expert": expert, "router": router, "moe": moe,
            "dense": dense, "post": 2 * H,  # post_self_attn_layernorm, post_mlp_layernorm
            "head": 2 * V * H + H}  # embedding, untied lm_head, final norm: 655,362,560


def test_params_total_by_hand_and_against_transformers():
    p = _by_hand()
    layers = (44 * p["attn"] + 6 * p["attn_shared"]  # 1,499,587,584 + 188,759,808
              + 2 * p["dense"] + 48 * p["moe"]  # 55,055,360 + 48 x 1,514,867,200 (router bias aside)
              + 50 * p["post"])  # 256,000
    transformers_like = layers + p["head"]
    assert transformers_like == TRANSFORMERS_COUNT  # 75,112,646,912
    # decodescope also counts the router's e_score_correction_bias (384 fp32 values a MoE layer):
    # a persistent buffer in the checkpoint, read every token, that transformers' parameters()
    # leaves out: 48 x 384 = 18,432 more, 0.00002 %
    a = _arch()
    assert a.params_total == TRANSFORMERS_COUNT + 48 * 384 == 75_112_665_344
    assert abs(a.params_total / TRANSFORMERS_COUNT - 1) < 1e-6


def test_params_active_by_hand():
    """A token runs 6 of 384 experts, the shared expert, the router (+ its bias) everywhere else."""
    p = _by_hand()
    moe_active = p["router"] + 384 + 6 * p["expert"] + p["expert"] + H  # 28,511,104
    layers = 44 * p["attn"] + 6 * p["attn_shared"] + 2 * p["dense"] + 48 * moe_active + 50 * p["post"]
    assert _arch().params_active == layers + p["head"] == 3_767_554_304


def test_layout_windowed_indexed_shared_kv_and_mlps():
    a = _arch()
    assert [i for i, x in enumerate(a.layers) if x.kind == "sparse_attention"] == INDEXED
    assert all(x.kind == "sliding_attention" and x.mixer.sliding_window == 513
               for i, x in enumerate(a.layers) if i not in INDEXED)
    assert all(a.layers[i].mixer.sliding_window is None for i in INDEXED)
    # index_layers [4, 14, 19, 29] pick a new pool; the others rescore the pool of the indexer before them
    assert [i for i in INDEXED if a.layers[i].mixer.pool_source] == [4, 14, 19, 29]
    assert [i for i, x in enumerate(a.layers) if x.mixer.kv_shared] == SHARED_KV
    names = {t.name for t in a.layers[9].tensors()}
    assert "k_proj" not in names and "k_norm" not in names and "q_norm" in names
    assert {"post_self_attn_layernorm", "post_mlp_layernorm", "post_attention_layernorm"} <= names
    assert [isinstance(x.mlp, MoE) for x in a.layers[:3]] == [False, False, True]
    assert a.layers[0].mlp.intermediate_size == 3584 and not a.tie_word_embeddings
    # the indexer attends to index_topk 2048 + 8 sink + 128 local tokens
    assert a.layers[4].mixer.budget == 2184


def test_defaults_of_the_per_layer_lists_match_the_config_class(write_config):
    """Kolibri1_1Config.__post_init__ derives layer_types, index_layers, kv_source_layers and
    mlp_only_layers where a config leaves them out: the same model."""
    cfg = {k: v for k, v in _config().items()
           if k not in ("layer_types", "index_layers", "kv_source_layers", "mlp_only_layers")}
    assert load_arch(write_config(cfg)).layers == _arch().layers


def _deployment(a, tp=1):
    return make_deployment(a, "h200", tp=tp, batch=1, context=100_000)


def test_windowed_layer_kv_capped_by_the_window():
    """4 KV heads x 128 x (K + V) x 2 B (bf16) = 2048 B a token; a decode token sees 100,000 + 1
    tokens, of which a sliding layer keeps and reads the last 513: 513 x 2048 = 1,050,624 B."""
    a = _arch()
    d = _deployment(a)
    layer = a.layers[0]
    assert per_request_cache(a, d, (layer,)) == (513 * 2048, 0)
    assert attention_op(layer.mixer, d, 1, 1, ceiling_rates(d)).bytes == 513 * 2048 == 1_050_624


def test_indexed_layer_reads_top_k_kv_and_key_head_0():
    """At 100,001 tokens an indexed layer attends to 2048 + 8 + 128 = 2184 tokens: 2184 x 2048 B
    of K/V. To pick them it scores key head 0 (128 x 2 B = 256 B a token, in the K cache: no
    index cache of its own) of its pool of 16,384 candidates; an indexer (layer 4) picks that
    pool from summaries of the whole cache, so also reads key head 0 of all 100,001 tokens."""
    a = _arch()
    d = _deployment(a)
    indexer, reindexer, shared = a.layers[4], a.layers[24], a.layers[9]
    top_k = 2184 * 2048  # 4,472,832 B
    assert attention_op(indexer.mixer, d, 1, 1, ceiling_rates(d)).bytes == top_k + (16_384 + 100_001) * 256
    assert attention_op(reindexer.mixer, d, 1, 1, ceiling_rates(d)).bytes == top_k + 16_384 * 256 == 8_667_136
    # layer 9 reads layer 4's cache as much, holding none; layer 4 holds all 100,001 tokens
    assert attention_op(shared.mixer, d, 1, 1, ceiling_rates(d)).bytes == 8_667_136
    assert per_request_cache(a, d, (shared,)) == (0, 0)
    assert per_request_cache(a, d, (indexer,)) == (100_001 * 2048, 0)
    # a short cache (under the 2184-token budget) is attended whole, with no scoring
    assert indexer.mixer.kv_read_bytes(2000, 4, 2) == 2000 * 2048
    # TP 4: one KV head a GPU (512 B a token), but every GPU runs the indexer on key head 0
    d4 = _deployment(a, tp=4)
    assert attention_op(indexer.mixer, d4, 1, 1, ceiling_rates(d4)).bytes == 2184 * 512 + 116_385 * 256


def test_whole_cache_per_request():
    """40 sliding layers x 513 tokens + 4 indexed layers with their own K/V (4, 19, 24, 29) x
    100,001 tokens, 2048 B each; the 6 layers that read another's K/V hold none."""
    a = _arch()
    kv, state = per_request_cache(a, _deployment(a), a.layers)
    assert (kv, state) == ((40 * 513 + 4 * 100_001) * 2048, 0) == (861_233_152, 0)


@pytest.mark.parametrize("edit, says", [
    ({"layer_types": ["sliding_attention"] * 49 + ["chunked_attention"]}, "'chunked_attention'"),
    ({"layer_types": ["sliding_attention"] * 49}, "layer_types has 49 entries"),
    ({"index_pool_size": -16384}, "index_pool_size"),
    ({"index_compression": 0}, "index_compression"),
    ({"index_pool_size": 1000}, "not a multiple of index_compression"),
    ({"index_num_heads": 13}, "index_num_heads"),  # more than the 12 query heads of key head 0
    ({"index_num_sink_tokens": -1}, "index_num_sink_tokens"),
    ({"index_topk": 0}, "index_topk"),
    ({"mlp_only_intermediate_size": -3584}, "mlp_only_intermediate_size"),
    ({"hidden_size": -2560}, "hidden_size"),
    ({"sliding_window": None}, "sliding_window"),
    ({"kv_source_layers": [0] * 50}, "kv_source_layers[1]"),  # a sliding layer reading layer 0's K/V
    ({"kv_source_layers": list(range(49)) + [50]}, "kv_source_layers[49]"),  # a later layer
    ({"index_layers": [9, 14]}, "index_layers"),  # the first indexed layer (4) must pick a pool
    ({"mlp_only_layers": [0, 50]}, "mlp_only_layers"),
    ({"num_hidden_layers": 60, "layer_types": None, "kv_source_layers": None, "index_layers": None},
     "give kv_source_layers"),  # 12 indexed layers: the class's default covers 10
])
def test_hostile_values_give_one_clear_error(write_config, edit, says):
    with pytest.raises(DecodescopeError) as e:
        load_arch(write_config({**_config(), **edit}))
    assert says in str(e.value)
