"""model: one decode round, checked against hand derivations."""

from dataclasses import replace

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import get_gpu
from decodescope.model import make_deployment, parse_format, predict
from decodescope.model.ops import busiest_rank_experts, expected_experts
from decodescope.model.predict import ceiling_rates
from decodescope.model.round import verify_ops


def _predict(model, gpu, **kw):
    arch = load_arch(model)
    return predict(arch, make_deployment(arch, gpu, **kw))


def _weights_bytes(p) -> float:
    return next(c.bytes for c in p.ceiling.breakdown if c.component == "weights")


def test_reference_case_weights_and_ceiling_by_hand():
    """Qwen3.6-27B, 2 x RTX A6000, TP 2, BF16, MTP 3, accept 3.08: the reference case's 35.2 ms
    counted the embedding table (27 GB / 768 GB/s); what a verify pass reads is less."""
    h, i, v, tp = 5120, 17408, 248320, 2
    # per GPU, parameters: column/row-parallel matrices split by TP, norms replicated,
    # 4 KV heads -> 2 per GPU
    attn = (12288 * h + 2 * 1024 * h + h * 6144) / tp + h + 2 * 256
    gdn = (10240 * h + 6144 * h + 2 * 48 * h + 10240 * 4 + 2 * 48 + h * 6144) / tp + 128 + h
    mlp = 3 * i * h / tp + h
    per_gpu = 16 * attn + 48 * gdn + 64 * mlp + v * h / tp + h  # + LM head (vocab-parallel) + final norm
    bytes_per_gpu = 2 * per_gpu  # bf16
    p = _predict("qwen3.6-27b", "rtx-a6000", tp=2, spec="mtp:3", accept=3.08, context=500, link="pcie-sys")
    assert _weights_bytes(p) == pytest.approx(bytes_per_gpu, rel=1e-9)
    assert p.ceiling.ms("weights") == pytest.approx(bytes_per_gpu / 768e9 * 1e3, rel=1e-9)
    assert p.ceiling.ms("weights") == pytest.approx(33.4, abs=0.05)
    # the ceiling adds KV (500 tokens), GDN state, allreduce bytes and 3 MTP draft steps:
    # MTP layer 0.425 B params of which the fc [5120, 10240] is replicated, + LM head 1.27 B
    fc = 2 * h * h
    mtp_per_gpu = (0.4254e9 - fc) / tp + fc + v * h / tp
    assert p.ceiling.ms("draft") == pytest.approx(3 * 2 * mtp_per_gpu / 768e9 * 1e3, rel=0.01)
    assert 70 < p.ceiling.tok_s < 80
    # the measured 55.59 tok/s at 3.08 (a 55.4 ms round) stays under the ceiling
    assert 55.59 < p.ceiling.tok_s


@pytest.mark.parametrize("experts, k, tokens, expected", [
    (8, 2, 1, 2.0),  # one token touches exactly top-k
    (8, 2, 4, 8 * (1 - 0.75 ** 4)),  # 5.47: not 8, not 2
    (256, 8, 1, 8.0),
    (256, 8, 64, 256 * (1 - (1 - 8 / 256) ** 64)),  # 222
    (8, 2, 1000, 8.0),
])
def test_expected_distinct_experts(experts, k, tokens, expected):
    assert expected_experts(experts, k, tokens) == pytest.approx(expected)


@pytest.mark.parametrize("experts, k, tokens, ep, expected", [
    (256, 8, 1, 1, 8.0),  # no EP: every touched expert, split by TP
    (8, 2, 1, 2, 1.43),  # 2 of 8 experts, 2 ranks of 4: exactly 10/7 (both on one rank 3/7 of the time)
    (256, 8, 1, 8, 2.544),  # 8 experts over 8 ranks: the busiest holds ~2.5, not 1
    (256, 8, 10_000, 8, 32.0),  # every expert touched: E / ep
])
def test_busiest_expert_parallel_rank(experts, k, tokens, ep, expected):
    assert busiest_rank_experts(experts, k, tokens, ep) == pytest.approx(expected, abs=0.07)


def test_expert_parallel_reads_more_on_the_busiest_rank_at_batch_one():
    arch = load_arch("deepseek-v3")
    tp = _predict("deepseek-v3", "h200", tp=8, weights="fp8")
    ep = predict(arch, make_deployment(arch, "h200", tp=8, ep=8, weights="fp8"))
    assert ep.ceiling.ms("weights") > 1.5 * tp.ceiling.ms("weights")  # EP's imbalance at batch 1
    assert ep.memory.weights_bytes == pytest.approx(tp.memory.weights_bytes, rel=1e-6)  # same bytes held


def test_moe_weights_read_grow_with_batch_but_stay_below_all_experts():
    arch = load_arch("mixtral-8x7b")
    d = make_deployment(arch, "h100-sxm")
    read = {b: _weights_bytes(predict(arch, replace(d, batch=b))) for b in (1, 4, 64)}
    assert read[1] < read[4] < read[64] <= 2 * arch.params_total
    assert read[1] == pytest.approx(2 * arch.params_read_per_token, rel=1e-6)  # batch 1: top-2 of 8


@pytest.mark.parametrize("model, tp, kv_heads_per_gpu", [
    ("llama-3.1-70b", 1, 8), ("llama-3.1-70b", 2, 4), ("llama-3.1-70b", 8, 1),
    ("llama-3.1-70b", 16, 1),  # 8 KV heads on 16 GPUs: each GPU keeps a whole replicated head
])
def test_gqa_kv_cache_read_per_gpu(model, tp, kv_heads_per_gpu):
    # past the 8 GPUs of one NVSwitch board, TP runs over the network
    p = _predict(model, "h100-sxm", tp=tp, context=4096, link="network" if tp > 8 else None)
    # 80 layers x (4096 context + 1 new token) x K and V x heads x 128 x 2 bytes
    expected = 80 * 4097 * 2 * kv_heads_per_gpu * 128 * 2
    assert next(c.bytes for c in p.ceiling.breakdown if c.component == "kv_cache") == expected


def test_mla_latent_cache_is_replicated_under_tp():
    kv = [next(c.bytes for c in _predict("deepseek-v3", "h200", tp=tp, weights="fp8", context=2048,
                                         link="network" if tp > 8 else None).ceiling.breakdown if c.component == "kv_cache") for tp in (8, 16)]
    assert kv[0] == kv[1] == 61 * 2049 * (512 + 64) * 2


def test_sliding_window_caps_the_kv_read():
    p = _predict("gpt-oss-20b", "h100-sxm", context=8192)
    kv = next(c.bytes for c in p.ceiling.breakdown if c.component == "kv_cache")
    # 12 full layers read 8193 tokens, 12 sliding layers min(8193, 128); 8 KV heads x 64 dims
    assert kv == 12 * (8193 + 128) * 2 * 8 * 64 * 2


def test_linear_attention_state_read_once_written_per_verify_token():
    p = _predict("qwen3.6-27b", "rtx-a6000", tp=2, spec="mtp:3", accept=3.0, link="pcie-sys")
    per_req_gpu = 153_944_064 / 2  # SGLang's per-request state, halved by TP
    assert next(c.bytes for c in p.ceiling.breakdown if c.component == "state") == pytest.approx(per_req_gpu * 5)


@pytest.mark.parametrize("fmt, bits, head_bits", [
    ("bf16", 16, 16), ("fp8", 8, 16), ("int8", 8, 16), ("int4-g128", 4.125, 16), ("nvfp4", 4.5, 16),
    ("mxfp4", 4.25, 16), ("q4_k_m", 4.85, 6.5625), ("q8_0", 8.5, 8.5), ("bpw:5.0", 5.0, 5.0),
])
def test_weight_bytes_follow_the_format(fmt, bits, head_bits):
    arch = load_arch("llama-3.1-8b")
    p = predict(arch, make_deployment(arch, "h100-sxm", weights=fmt))
    linear = arch.params_layers_total - 32 * 2 * 4096  # minus the two norms per layer
    norms = 32 * 2 * 4096 + 4096
    expected = linear * bits / 8 + arch.lm_head.params * head_bits / 8 + norms * 2
    assert _weights_bytes(p) == pytest.approx(expected)


@pytest.mark.parametrize("spec, draft, has_draft", [
    ("mtp:3", None, True), ("eagle:3", None, True), ("draft:4", "qwen3-1.7b", True), ("ngram:4", None, False),
])
def test_speculation_tok_s_is_accept_len_per_round(spec, draft, has_draft):
    arch = load_arch("qwen3.5-35b-a3b" if spec.startswith("mtp") else "qwen3-32b")
    d = make_deployment(arch, "h100-sxm", spec=spec, accept=2.5, draft=load_arch(draft) if draft else None)
    p = predict(arch, d)
    for e in (p.ceiling, p.expected):
        assert e.tok_s == pytest.approx(2.5 / (e.round_ms / 1e3))
        assert e.round_ms == pytest.approx(sum(c.ms for c in e.breakdown))
    assert ("draft" in [c.component for c in p.ceiling.breakdown]) == has_draft
    plain = _weights_bytes(predict(arch, make_deployment(arch, "h100-sxm")))
    if arch.is_moe:  # 4 tokens touch ~30 of 256 experts per layer, not 8
        assert _weights_bytes(p) > 1.5 * plain
    else:  # a verify pass over k+1 tokens reads the same weights as one plain step
        assert _weights_bytes(p) == pytest.approx(plain, rel=1e-9)


def test_pipeline_stages_split_weights_but_add_up_in_time():
    one = _predict("llama-3.1-70b", "a100-sxm-80gb", weights="int8")
    two = _predict("llama-3.1-70b", "a100-sxm-80gb", weights="int8", pp=2)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2, rel=0.03)
    assert two.ceiling.round_ms == pytest.approx(one.ceiling.round_ms, rel=0.01)  # stages run one after another


def test_compute_bound_batch_is_the_ridge_point():
    p = _predict("llama-3.1-8b", "h100-sxm")
    g = get_gpu("h100-sxm")
    ridge = g.peak_flops("bf16") * 2 / (2 * g.memory_bw_bytes_s)  # FLOP per byte of bf16 weights
    assert p.compute_bound_batch == pytest.approx(ridge, abs=2)


@pytest.mark.parametrize("model, gpu, kw", [
    ("llama-3.1-8b", "rtx-4090", {}), ("qwen3.6-27b", "rtx-a6000", {"tp": 2, "spec": "mtp:3", "accept": 3.0}),
    ("deepseek-v3", "h200", {"tp": 8, "weights": "fp8", "batch": 32}), ("gpt-oss-120b", "h100-sxm", {}),
    ("nemotron-h-56b", "h100-sxm", {"tp": 2}), ("mixtral-8x7b", "a100-sxm-80gb", {"tp": 2, "engine": "vllm"}),
])
def test_ceiling_is_above_expected_and_levers_are_ranked(model, gpu, kw):
    arch = load_arch(model)
    p = predict(arch, make_deployment(arch, gpu, **kw), with_levers=True)
    assert p.ceiling.tok_s > p.expected.tok_s
    assert [x.tok_s for x in p.levers] == sorted((x.tok_s for x in p.levers), reverse=True)
    assert all(x.ceiling_tok_s > x.tok_s for x in p.levers)


def test_levers_of_the_reference_case():
    arch = load_arch("qwen3.6-27b")
    p = predict(arch, make_deployment(arch, "rtx-a6000", tp=2, spec="mtp:3", accept=3.08, link="pcie-sys"),
                with_levers=True)
    names = {x.lever: x for x in p.levers}
    assert {"weights fp8", "weights int4-g128", "accept +1", "tp 4"} <= set(names)
    assert names["accept +1"].tok_s == pytest.approx(p.expected.tok_s * 4.08 / 3.08, rel=0.15)
    assert names["weights fp8"].gain > 0.2  # half the bytes of the dominant component


@pytest.mark.parametrize("model, kw, message", [
    ("qwen3-8b", {"tp": 3}, "does not divide num_attention_heads"),
    ("qwen3-8b", {"spec": "mtp:3", "accept": 2.0}, "has no MTP layers"),
    ("qwen3-8b", {"spec": "eagle:3"}, "needs --accept"),
    ("qwen3-8b", {"spec": "eagle:3", "accept": 5.0}, "outside 1..4"),
    ("qwen3-8b", {"spec": "draft:3", "accept": 2.0}, "needs --draft"),
    ("qwen3-8b", {"spec": "medusa:3"}, "not understood"),
    ("qwen3-8b", {"tp": 4, "ep": 3}, "must divide --tp"),
    ("qwen3-8b", {"weights": "int3"}, "unknown weight format"),
    ("qwen3-8b", {"tp": 2, "gpus": 4}, "is not --tp 2 x --pp 1"),
])
def test_impossible_deployments_are_refused_with_the_reason(model, kw, message):
    with pytest.raises(DecodescopeError, match=message):
        _predict(model, "h100-sxm", **kw)


def test_unknown_gpu_names_the_closest_ids():
    with pytest.raises(DecodescopeError, match="h100"):
        _predict("qwen3-8b", "h1OO-sxm")


def test_memory_fit_is_part_of_the_result():
    small = _predict("llama-3.1-405b", "a10")
    assert not small.memory.fits and small.memory.weights_bytes > small.memory.usable_bytes
    kv_per_req = 8193 * 32 * 2 * 8 * 128 * 2  # tokens x layers x K,V x heads x head_dim x bf16
    ok = _predict("llama-3.1-8b", "h100-sxm", batch=32, context=8192)
    assert ok.memory.kv_cache_bytes == 32 * kv_per_req and ok.memory.fits
    full = _predict("llama-3.1-8b", "h100-sxm", batch=64, context=8192)
    assert not full.memory.fits  # 16 GB of weights + 69 GB of KV > 72 GB usable
    assert full.memory.max_batch == int((72e9 - full.memory.weights_bytes) // kv_per_req)


def test_verify_pass_weight_ops_are_memory_bound_at_batch_one():
    arch = load_arch("qwen3.6-27b")
    d = make_deployment(arch, "rtx-a6000", tp=2, spec="mtp:3", accept=3.0)
    assert {op.bound for op in verify_ops(arch, d, ceiling_rates(d)) if op.component == "weights"} == {"memory"}


def test_fp8_lever_uses_fp8_tensor_rate_where_the_gpu_has_it():
    arch = load_arch("llama-3.1-8b")
    d = make_deployment(arch, "h100-sxm", batch=1024)
    bf16 = predict(arch, d).ceiling.ms("weights")
    fp8 = predict(arch, replace(d, weights=parse_format("fp8"))).ceiling.ms("weights")
    # compute-bound at batch 1024: layers at fp8's twice the FLOP/s, the LM head stays bf16
    layers, head = arch.params_layers_total, arch.lm_head.params
    assert fp8 == pytest.approx(bf16 * (layers / 2 + head) / (layers + head), rel=0.01)


def test_the_kv_cache_takes_the_checkpoints_16_bit_dtype():
    # kv_cache_dtype "auto" (vLLM, SGLang) caches in the model's dtype: Llama-2's config says
    # float16, Llama-3.1's bfloat16; the bytes are the same 2 a value, the label follows the config
    assert make_deployment(load_arch("llama-2-7b"), "h100").kv_dtype == "fp16"
    assert make_deployment(load_arch("llama-3.1-8b"), "h100").kv_dtype == "bf16"
