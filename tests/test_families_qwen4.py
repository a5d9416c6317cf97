"""Qwen4-Exp (model_types qwen4_exp / qwen4_exp_text; released as Qwen/Qwen3.8-Flash-Next):
Qwen3.5-MoE's decoder with hyper-connections, hashed n-gram per-layer embeddings (PLE) and QSA
sparse attention. Counts are checked against transformers 5.24 on the meta device and the model
card; layouts, table sizes, per-request state, KV bytes and reads are worked out by hand from
transformers' modular_qwen4_exp.py and SGLang's qwen4_exp.py / qsa_kv_pool.py."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.config import RawConfig
from decodescope.arch.registry import build_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, predict
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
RELEASE = CONFIGS / "Qwen__Qwen3.8-Flash-Next.json"
DEFAULTS = CONFIGS / "transformers__Qwen4ExpConfig-defaults.json"

# transformers 5.24's Qwen4ExpForCausalLM on the meta device, built from the release's
# text_config: 176,943,899,520 parameters (no vision tower, no mtp.* weights, whose keys it
# ignores). By hand (hidden 2560, hc 4 streams: hc*h = 10240, 48 layers):
#   Gated DeltaNet (36): in_proj_qkv (2 x 16 x 128 + 48 x 128 = 10240) x 2560, in_proj_z 6144 x 2560,
#     in_proj_b / in_proj_a 2 x 48 x 2560, conv1d 10240 x 4, dt_bias, A_log 2 x 48, norm 128,
#     out_proj 2560 x 6144                                                 = 57,958,624
#   QSA attention (12): q_proj (24 x 256 x 2) x 2560, k_proj, v_proj 2 x 512 x 2560, o_proj
#     2560 x 6144, q_norm, k_norm 2 x 256, indexer index_qk_proj (4 + 1) x 128 x 2560,
#     q_layernorm, k_layernorm 2 x 128                                      = 51,446,528
#   MoE (48): experts 512 x 3 x 640 x 2560, router 512 x 2560, shared expert 3 x 640 x 2560,
#     shared_expert_gate 2560                                              = 2,522,810,880
#   hyper-connections (48 x 2): hc_norm 10240, input_mix_weight_down 320 x 10240, _up 10240 x 320,
#     block_inject_weight 4 x 10240                                        = 6,604,800 each
#   PLE (layer 2): key_proj 10240 x 2560, value_proj 2560 x 2560, three norms 3 x 10240, conv1d
#     10240 x 4                                                            = 32,839,680
#     and its n-gram table 320,001,536 x 160 (test_release_ngram_table_by_hand) = 51,200,245,760
#   hyper_connection_mixer 10240 + 2 x 320 x 10240 (no final norm)         = 6,563,840
#   embedding and untied head 2 x 248320 x 2560                            = 1,271,398,400
TRANSFORMERS_RELEASE = 176_943_899_520
# Qwen4ExpConfig() with the five indexer_* fields the class leaves None (it cannot build its
# attention without them) set to the release's 4 / 1 / 128 / 2048 / 4: transformers 5.24 on the
# meta device holds 67,334,739,072. By hand (hidden 2048, hc*h 8192, 40 layers: every 4th
# indexed, no PLE): Gated DeltaNet 30 x 33,718,464, QSA 10 x 28,574,464, MoE 40 x 1,614,809,088,
# hyper-connections 80 x 5,283,840, mixer 5,251,072, embedding + head 2 x 248320 x 2048
TRANSFORMERS_DEFAULTS = 67_334_739_072

# the model card (https://huggingface.co/Qwen/Qwen3.8-Flash-Next): "Number of Parameters: 125B with
# 6B activated, plus 51B n-gram embedding and 4B MTP"; vLLM's recipe (vllm-project/recipes
# models/Qwen/Qwen3.8-Flash-Next.yaml): parameter_count "176B", active_parameters "6B"
CARD_TOTAL, CARD_ACTIVE, CARD_MTP = 176e9, 6e9, 4e9


def _release() -> dict:
    return json.loads(RELEASE.read_text())


def _arch(data: dict):
    return build_arch(RawConfig(data, "test", "test"))


def _with_text(**edits) -> dict:
    data = _release()
    data["text_config"] = {**data["text_config"], **edits}
    return data


def test_release_counts_as_transformers_and_the_card():
    a = load_arch(str(RELEASE))
    assert a.params_total == pytest.approx(TRANSFORMERS_RELEASE, rel=1e-5)
    assert a.params_total == pytest.approx(CARD_TOTAL, rel=0.01)  # 125 B + 51 B
    # activated: the layers a token runs (10 of 512 experts) without embedding and head: 6.04 B
    head = a.lm_head.params
    assert a.params_read_per_token - head == pytest.approx(CARD_ACTIVE, rel=0.01)
    # the MTP module (test_mtp_module_by_hand) with the embedding and head it shares: the card's "4B"
    assert a.params_mtp + a.embedding.params + head == pytest.approx(CARD_MTP, rel=0.05)


def test_class_defaults_count_as_transformers():
    a = load_arch(str(DEFAULTS))
    assert a.params_total == pytest.approx(TRANSFORMERS_DEFAULTS, rel=1e-5)
    assert a.layer_counts() == {"linear_attention": 30, "sparse_attention": 10}
    assert not a.input_tables and not a.mtp


def test_release_layout_by_hand():
    a = load_arch(str(RELEASE))
    # layer_types: full_attention (read as indexed_attention) at every 4th layer
    assert [i for i, x in enumerate(a.layers) if x.kind == "sparse_attention"] == list(range(3, 48, 4))
    # ple_layer_ids [2] is one-indexed: the PLE sits on layer index 1, a Gated DeltaNet layer
    assert [i for i, x in enumerate(a.layers) if hasattr(x.mixer, "parts")] == [1]
    names = {t.name for t in a.layers[0].tensors()}
    # no input_layernorm / post_attention_layernorm: each sub-layer's hyper-connection norms
    assert not names & {"input_layernorm", "post_attention_layernorm"}
    assert {"attn_hyper_connection.block_inject_weight", "mlp_hyper_connection.input_mix_weight_down",
            "shared_expert_gate"} <= names
    # the model's hyper_connection_mixer (no block_inject_weight) on the last layer; no final norm
    last = {t.name: t.shape for t in a.layers[-1].tensors()}
    assert last["hyper_connection_mixer.input_mix_weight_up"] == (10240, 320)
    assert "hyper_connection_mixer.block_inject_weight" not in last
    assert a.final_norm.params == 0
    # the indexer: 4 query heads and one key head of 128 in one projection
    qsa = {t.name: t.shape for t in a.layers[3].tensors()}
    assert qsa["indexer.index_qk_proj"] == (640, 2560) and qsa["q_proj"] == (12288, 2560)


def _primes_from(start: int, count: int) -> list[int]:
    """The first `count` primes >= start, by trial division (independent of decodescope's test)."""
    out, n = [], start
    while len(out) < count:
        if n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)):
            out.append(n)
        n += 1
    return out


def test_release_ngram_table_by_hand():
    a = load_arch(str(RELEASE))
    # (ngram_size 3 - 1) x heads_per_ngram 8 = 16 heads of ple_embed_dim 2560 / 16 = 160 columns;
    # head j hashes into the (j + 1)-th prime from 20,000,000: 20000003, ..., 20000171
    primes = _primes_from(20_000_000, 16)
    assert primes[0] == 20_000_003 and primes[-1] == 20_000_171
    assert sum(primes) == 320_001_446
    rows = -(-320_001_446 // 128) * 128  # padded to make_ngram_vocab_size_divisible_by
    assert [t.shape for t in a.input_tables] == [(rows, 160)] and rows == 320_001_536
    assert a.input_tables[0].params == 51_200_245_760  # the card's "51B n-gram embedding"
    # a second PLE layer takes the next 16 primes (global head index = PLE layer index x 16 + j)
    two = _arch(_with_text(ple_layer_ids=[2, 3]))
    nxt = sum(_primes_from(20_000_172, 16))
    assert [t.shape[0] for t in two.input_tables] == [rows, -(-nxt // 128) * 128]


def test_release_state_per_request_by_hand():
    a = load_arch(str(RELEASE))
    # Gated DeltaNet: 48 value heads x 128 x 128 x 4 B (mamba_ssm_dtype float32) and the conv window
    # (2 x 16 x 128 + 48 x 128 = 10240 channels) x (4 - 1) x 2 B, heads split over TP
    gdn = 48 * 128 * 128 * 4 + 10240 * 3 * 2
    # PLE (transformers' conv states 1 and 2): the dilated conv's window of (4 - 1) x 3 inputs over
    # hc x h = 10240 channels x 2 B and the last 2 token ids x 8 B, whole on every TP rank
    ple = 10240 * 9 * 2 + 2 * 8
    for tp in (1, 4):
        d = make_deployment(a, "h200", tp=tp, context=1000)
        _, state = per_request_cache(a, d, a.layers)
        assert state == 36 * gdn / tp + ple


def test_release_kv_cache_and_reads_by_hand():
    a = load_arch(str(RELEASE))
    qsa = a.layers[3].mixer
    # per token: K and V of 2 heads x 256 x 2 B, plus a 128-wide bf16 pooled key per 4 tokens
    assert qsa.kv_bytes_per_token(2, 2) == 2048 + 64
    assert qsa.kv_bytes_per_token(1, 1) == 512 + 64  # fp8 KV, TP 2+: the index keys stay bf16
    # at 10,003 tokens: 2500 complete blocks, the top 2048 / 4 = 512 of them and the 3-token tail
    # (2,051 tokens' K and V), and all 2500 pooled keys of 256 B
    assert qsa.kv_read_bytes(10_003, 2, 2) == 2051 * 2048 + 2500 * 256
    assert qsa.kv_read_bytes(1000, 2, 2) == 1000 * 2048 + 250 * 256  # under the budget: every token
    d = make_deployment(a, "h200", context=10_002)  # + the decoded token: 10,003
    kv, _ = per_request_cache(a, d, a.layers)
    assert kv == 12 * 10_003 * (2048 + 64)
    est = predict(a, d).ceiling
    assert next(c.bytes for c in est.breakdown if c.component == "kv_cache") == 12 * (2051 * 2048 + 2500 * 256)


def test_ple_gather_is_immaterial_and_its_allreduce_charged():
    from decodescope.model.ops import layer_ops
    from decodescope.model.predict import expected_rates
    a = load_arch(str(RELEASE))
    d = make_deployment(a, "h200", tp=2, batch=8)
    # a token gathers 16 rows of 160 bf16 values from the one PLE layer's table: 5,120 B, against
    # GBs of weights per pass: not charged
    est = predict(a, d).ceiling
    weights = next(c.bytes for c in est.breakdown if c.component == "weights")
    assert 8 * 16 * 160 * 2 / weights < 1e-5
    # the vocab-parallel table's gathered rows are summed over TP: one more allreduce of
    # 8 tokens x 2560 x 2 B in the PLE layer than in a plain Gated DeltaNet layer
    reduces = [[op for op in layer_ops(a.layers[i], d.weights, d, 8, 1, expected_rates(d)) if op.component == "allreduce"]
               for i in (0, 1)]
    assert len(reduces[0]) == 2 and len(reduces[1]) == 3
    assert all(op.bytes == 8 * 2560 * 2 for op in reduces[1])


def test_mtp_module_by_hand():
    a = load_arch(str(RELEASE))
    # SGLang's Qwen4ExpForCausalLMMTP: fc_embedding and fc_hidden 2 x 2560 x 2560, pre_fc_norm_embedding
    # 2560, pre_fc_norm_hidden 10240, its hyper_connection_mixer 6,563,840, one QSA layer 51,446,528
    # with MoE 2,522,810,880 and two hyper-connections 2 x 6,604,800
    assert len(a.mtp) == 1
    assert a.params_mtp == 13_107_200 + 12_800 + 6_563_840 + 51_446_528 + 2_522_810_880 + 13_209_600
    assert a.mtp[0].layer.kind == "sparse_attention"


def test_text_config_alone_builds_the_same():
    text = _release()["text_config"]
    a, flat = load_arch(str(RELEASE)), _arch(text)
    assert flat.model_type == "qwen4_exp_text" and flat.params_total == a.params_total


def test_dense_attention_without_indexer_fields():
    data = _release()
    data["text_config"] = {k: v for k, v in data["text_config"].items() if not k.startswith("indexer_")}
    a = _arch(data)
    assert a.layers[3].kind == "attention" and "indexer.index_qk_proj" not in {t.name for t in a.layers[3].tensors()}
    assert any("dense" in n for n in a.notes)


@pytest.mark.parametrize("key, value", [("indexer_budget", None), ("indexer_kv_heads", 2), ("indexer_budget", 2050),
                                        ("hc_count", 1), ("ple_layer_ids", [4]), ("ple_layer_ids", [49]),
                                        ("ple_embed_dim", 2561), ("ngram_vocab_size_base", 2 ** 60),
                                        ("heads_per_ngram", "8")])
def test_bad_fields_raise_one_error_naming_them(key, value):
    # a QSA field left out of five, two index key heads, a budget not a multiple of the ratio, one
    # stream, PLE on an attention layer or past the last, a width the 16 n-gram heads do not divide
    with pytest.raises(DecodescopeError, match=key):
        _arch(_with_text(**{key: value}))


def test_offload_and_fp8_table_keys_are_noted():
    a = _arch(_with_text(ple_offload_embedding=True, ple_embedding_dtype="float8_e4m3fn"))
    assert any("host memory" in n for n in a.notes) and any("float8_e4m3fn" in n for n in a.notes)
