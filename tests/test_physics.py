"""Engine-specific physics of one decode round, each checked against a derivation by
hand from the engine's source (URLs in decodescope/model/engines.toml and in comments)."""

import collections
import gzip
import json
import statistics
from pathlib import Path

import pytest

from decodescope.arch import GatedDeltaNet, load_arch
from decodescope.hardware import get_gpu
from decodescope.model import get_engine, make_deployment, predict
from decodescope.model.ops import allreduce_op
from decodescope.model.predict import ceiling_rates, expected_rates
from decodescope.model.round import all_accepted, draft_step_ops, verify_ops


def _p(model, gpu, **kw):
    arch = load_arch(model)
    return predict(arch, make_deployment(arch, gpu, **kw))


def _c(p, component, what="bytes", est="ceiling"):
    return next(getattr(c, what) for c in getattr(p, est).breakdown if c.component == component)


def test_sglang_commits_the_accepted_linear_attention_state_after_verify():
    """Qwen3.6-27B, MTP 3 (4 verify tokens): the state is read once and written after
    each of the 4 tokens (5 state volumes); SGLang then copies the accepted state into
    the cache (update_mamba_state_after_mtp_verify): one more read + write = 7."""
    arch = load_arch("qwen3.6-27b")
    kw = dict(tp=2, spec="mtp:3", accept=3.08, context=500, link="pcie-sys")
    sg = predict(arch, make_deployment(arch, "rtx-a6000", engine="sglang", **kw))
    vl = predict(arch, make_deployment(arch, "rtx-a6000", engine="vllm", **kw))
    gdn = [layer.mixer for layer in arch.layers if isinstance(layer.mixer, GatedDeltaNet)]
    one = sum(m.state_bytes(2) for m in gdn)  # one state volume per GPU, all 48 GDN layers
    assert _c(vl, "state") == pytest.approx(5 * one)
    assert _c(sg, "state") == pytest.approx(7 * one)
    # without speculation there is no verify, so nothing to commit: read + 1 write
    plain = predict(arch, make_deployment(arch, "rtx-a6000", engine="sglang", tp=2, link="pcie-sys"))
    assert _c(plain, "state") == pytest.approx(2 * one)


def test_vocab_parallel_embedding_allreduces_every_pass_and_every_draft_step():
    """TP 2, batch 3, MTP 3: the verify pass embeds 3 x 4 tokens -> one allreduce of
    12 x 5120 x 2 bytes = 122,880 B; each MTP step embeds 3 tokens: 30,720 B."""
    arch = load_arch("qwen3.6-27b")
    d = make_deployment(arch, "rtx-a6000", tp=2, batch=3, spec="mtp:3", accept=2.5, link="pcie-sys")
    r = ceiling_rates(d)
    emb = [op for op in verify_ops(arch, d, r) if op.name == "embedding allreduce"]
    assert [op.bytes for op in emb] == [3 * 4 * 5120 * 2]
    for step in range(3):
        emb = [op for op in draft_step_ops(arch, d, r, step) if op.name == "embedding allreduce"]
        assert [op.bytes for op in emb] == [3 * 5120 * 2]
    # one GPU: nothing to reduce
    one = make_deployment(arch, "rtx-a6000", batch=3)
    assert not [op for op in verify_ops(arch, one, ceiling_rates(one)) if op.name == "embedding allreduce"]


def test_lm_head_is_replicated_and_quantized_by_gpt_fast_and_sharded_16_bit_by_vllm():
    """Llama-3.1-8B, int4-g128, TP 2. gpt-fast (tp.py leaves `output` whole; quantize.py
    converts every Linear): 128256 x 4096 x (4 + 16/128) / 8 = 270,883,..B per GPU, no
    logits gather. vLLM (ParallelLMHead, 16-bit): 128256 x 4096 x 2 / 2 = 525,336,576 B."""
    arch = load_arch("llama-3.1-8b")
    for engine, head_bytes, gather in (("gpt-fast", 128256 * 4096 * 4.125 / 8, False),
                                       ("vllm", 128256 * 4096 * 2 / 2, True)):
        d = make_deployment(arch, "a100-sxm-80gb", tp=2, weights="int4-g128", engine=engine)
        ops = verify_ops(arch, d, ceiling_rates(d))
        assert next(op.bytes for op in ops if op.name == "lm_head") == pytest.approx(head_bytes)
        assert any(op.name == "logits gather" for op in ops) == gather


def test_mlc_q4f16_1_quantizes_the_lm_head():
    """MLC's q4f16_1 gives the LM head the linear layers' format (mlc-llm quantization
    schemes: final_fc_weight="same_as_linear_weight"). Llama-2-7B on one GPU, int4-g32:
    32000 x 4096 x (4 + 16/32) / 8 = 73,728,000 B, against 262,144,000 B at 16 bits."""
    arch = load_arch("llama-2-7b")
    d = make_deployment(arch, "rtx-3090-ti", weights="int4-g32", engine="mlc")
    ops = verify_ops(arch, d, ceiling_rates(d))
    assert next(op.bytes for op in ops if op.name == "lm_head") == pytest.approx(32000 * 4096 * 4.5 / 8)


def test_eagle3_head_predicts_over_its_draft_vocabulary():
    """Without --draft the EAGLE-3 head's LM head is 32000 x 4096 (draft_vocab_size of
    yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), not the target's 128256: 262,144,000 B bf16."""
    arch = load_arch("llama-3.1-8b")
    d = make_deployment(arch, "h100-sxm", spec="eagle:3", accept=2.5)
    ops = draft_step_ops(arch, d, ceiling_rates(d), 0)
    assert next(op.bytes for op in ops if op.name == "lm_head") == 32000 * 4096 * 2


@pytest.mark.parametrize("k, accept, p_all", [
    (1, 1.5, 0.5),  # accept_len = 1 + a -> a = 0.5; all of 1 accepted with 0.5
    (2, 1.75, 0.25),  # 1 + a + a^2 = 1.75 -> a = 0.5; a^2 = 0.25
    (3, 1.0, 0.0),  # nothing ever accepted
    (3, 4.0, 1.0),  # everything accepted
])
def test_probability_that_all_drafts_are_accepted(k, accept, p_all):
    assert all_accepted(k, accept) == pytest.approx(p_all, abs=1e-9)


def test_a_draft_model_runs_one_more_forward_when_all_drafts_are_accepted():
    """draft:2 at accept_len 1.75: 2 draft steps + 0.25 catch-up passes (gpt-fast
    generate.py: 'fill last token into draft model') = 2.25 steps' time; at accept_len
    1.0 (nothing accepted) exactly 2."""
    arch, draft = load_arch("llama-3.1-70b"), load_arch("llama-3.1-8b")
    kw = dict(tp=4, spec="draft:2", draft=draft)
    lo = predict(arch, make_deployment(arch, "h100-sxm", accept=1.0, **kw))
    hi = predict(arch, make_deployment(arch, "h100-sxm", accept=1.75, **kw))
    assert _c(hi, "draft", "ms") == pytest.approx(_c(lo, "draft", "ms") * 2.25 / 2)


def test_ngram_drafts_cost_no_draft_step_host_time():
    """n-gram drafts are a lookup in the scheduler: no draft forward, so the host time is
    the pass's alone, and 4 drafts are not slower than 1 at the same accept length."""
    arch = load_arch("llama-3.1-8b")
    one = predict(arch, make_deployment(arch, "h100-sxm", engine="vllm", spec="ngram:1", accept=1.8))
    four = predict(arch, make_deployment(arch, "h100-sxm", engine="vllm", spec="ngram:4", accept=1.8))
    host = get_engine("vllm").host_ms_per_pass  # the pass's host time alone: no draft step adds to it
    assert _c(one, "host", "ms", "expected") == _c(four, "host", "ms", "expected") == host
    assert four.expected.tok_s >= 0.99 * one.expected.tok_s  # only the verify's 3 extra tokens of KV/FLOPs


def test_pipeline_micro_batches_fill_the_stages():
    """Llama-3.1-70B int8 on 2 x A100 over PP 2, batch 64: two micro-batches of 32, each
    waits one pass over both stages. The ceiling round is a PP-1 pass at batch 32 plus
    the hand-off of 32 x 8192 x 2 bytes over the link; all 64 requests progress at once."""
    arch = load_arch("llama-3.1-70b")
    pp = predict(arch, make_deployment(arch, "a100-sxm-80gb", weights="int8", pp=2, batch=64))
    one = predict(arch, make_deployment(arch, "a100-sxm-80gb", weights="int8", batch=32))
    send = 32 * 8192 * 2 / get_gpu("a100-sxm-80gb").link_bw_bytes_s  # ceiling: datasheet link, no alpha
    assert pp.ceiling.round_ms == pytest.approx(one.ceiling.round_ms + send * 1e3, rel=1e-9)
    assert pp.ceiling.tok_s_total == pytest.approx(64 * 1e3 / pp.ceiling.round_ms)
    # per GPU: each stage reads its half of the weights once per micro-batch -> the whole
    # model's bytes per GPU per round, as many as one GPU at batch 32
    assert _c(pp, "weights") == pytest.approx(_c(one, "weights"), rel=1e-9)


@pytest.mark.parametrize("gpu, fp4, mxfp4", [
    ("h100-sxm", "fp8", "bf16"),  # no FP4 tensor cores: NVFP4 at the FP8 rate, MXFP4 MoE kernels at BF16
    ("b200", "fp4", "fp4"),
])
def test_fp4_math_without_fp4_tensor_cores(gpu, fp4, mxfp4):
    g = get_gpu(gpu)
    arch = load_arch("gpt-oss-120b")
    flops = ceiling_rates(make_deployment(arch, gpu)).flops
    assert flops["fp4"] == g.flops[fp4]
    assert flops["mxfp4"] == g.flops[mxfp4]


@pytest.mark.parametrize("model, gpu, kw", [
    # github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference: 70B Q4_K_M on one RTX A6000
    # 48GB (14.58 tok/s) and on 2 x RTX 3090 24GB, llama.cpp's default layer split
    ("llama-3-70b", "rtx-a6000", dict(weights="q4_k_m", engine="llamacpp", kv="fp16", context=512)),
    ("llama-3-70b", "rtx-3090", dict(weights="q4_k_m", engine="llamacpp", kv="fp16", context=512, pp=2)),
    # github.com/turboderp-org/exllamav2 README: Llama 2 70B at 2.5 bpw on one 24 GB GPU, 2048 tokens
    ("llama-2-70b", "rtx-4090", dict(weights="bpw:2.5", engine="exllamav2", kv="fp16", context=2048)),
])
def test_published_runs_fit(model, gpu, kw):
    """llama.cpp and ExLlamaV2 keep the embedding table in host memory and no 10 %
    reserve: 70B Q4_K_M holds 42.4 GB of 48 GB (a 0.9 rule would leave 43.2 usable and
    a 16-bit embedding on the GPU 2.1 GB more)."""
    assert _p(model, gpu, **kw).memory.fits


@pytest.mark.parametrize("engine, tp, usable", [
    ("vllm", 2, 0.9 * 48e9),  # --gpu-memory-utilization 0.9
    ("sglang", 1, 0.88 * 48e9), ("sglang", 2, 0.87 * 48e9),  # mem_fraction_static by TP size
    ("llamacpp", 1, 48e9 - 0.5e9),  # no fraction held back, only the CUDA context
])
def test_usable_memory_is_the_engines(engine, tp, usable):
    p = _p("qwen3-8b", "rtx-a6000", engine=engine, tp=tp)
    assert p.memory.usable_bytes == pytest.approx(usable)


def test_llamacpp_layer_split_runs_a_decode_batch_through_the_stages_in_turn():
    """llama.cpp at PP 2, batch 8: no micro-batches, each stage reads its weights once per
    round for all 8 requests -> per GPU half the model's weights; vLLM splits the batch in
    2 micro-batches of 4 and each GPU reads its half once per micro-batch."""
    cpp = _p("llama-3.1-8b", "rtx-3090", engine="llamacpp", weights="q8_0", pp=2, batch=8)
    vl = _p("llama-3.1-8b", "rtx-3090", engine="vllm", weights="fp8", pp=2, batch=8)
    one = _p("llama-3.1-8b", "rtx-3090", engine="llamacpp", weights="q8_0", batch=8)
    assert _c(cpp, "weights") == pytest.approx(_c(one, "weights") / 2, rel=1e-9)
    one_vl = _p("llama-3.1-8b", "rtx-3090", engine="vllm", weights="fp8", batch=4)
    assert _c(vl, "weights") == pytest.approx(_c(one_vl, "weights"), rel=1e-9)


def test_sglang_custom_allreduce_reaches_its_measured_share_of_nvlink():
    """SGLang's own allreduce on H100 (https://github.com/sgl-project/sglang/pull/2904):
    TP 8 takes 7.8 us at 32 KB and 33.8 us at 1 MB; the ring formula's bandwidth term then
    runs at 0.142 x 450 GB/s = 63.9 GB/s, not NCCL's 0.67 x 450 = 301.5 GB/s. A 70B verify
    of 64 tokens at TP 8 reduces 64 x 8192 x 2 B = 1,048,576 B: 1.75 x 1,048,576 B / 63.9 GB/s
    = 28.72 us + alpha 6 us x the profile's fitted scale. The PR's two sizes ask for different
    scales (32 KB: (7.8 - 0.9) / 6 = 1.15; 1 MB: (33.8 - 28.72) / 6 = 0.85); the fitted 1.2 gives
    8.1 us (+4 %) and 35.9 us (+6 %): both within 7 %. Over PCIe across sockets SGLang falls back
    to NCCL: the link's 0.5 applies."""
    arch = load_arch("llama-3.1-70b")
    sgl = expected_rates(make_deployment(arch, "h100-sxm", tp=8, engine="sglang"))
    vllm = expected_rates(make_deployment(arch, "h100-sxm", tp=8, engine="vllm"))
    assert sgl.link_bw == pytest.approx(450e9 * 0.142, rel=1e-12)
    assert vllm.link_bw == pytest.approx(450e9 * 0.67, rel=1e-12)
    scale = get_engine("sglang").allreduce_latency_scale
    t = allreduce_op("mlp allreduce", 1_048_576, 8, sgl).time_s
    assert t == pytest.approx(1.75 * 1_048_576 / 63.9e9 + 6e-6 * scale, rel=1e-9)
    assert t * 1e6 == pytest.approx(33.8, rel=0.07)
    assert allreduce_op("mlp allreduce", 32_768, 8, sgl).time_s * 1e6 == pytest.approx(7.8, rel=0.07)
    a6000 = expected_rates(make_deployment(load_arch("qwen3.6-27b"), "rtx-a6000", tp=2, engine="sglang",
                                           link="pcie-sys"))
    assert a6000.link_bw == pytest.approx(16 * 1.969e9 * 0.5, rel=1e-12)  # PCIe 4.0 x16 per direction x 0.5


def test_a_real_weight_product_costs_microseconds_beyond_its_bytes():
    """Why SGLang's fitted kernel floor (engines.toml, ~4.7 us) is above the 1.1 us of an
    empty kernel in a CUDA graph: in the H200 trace of a Llama-3.1-8B decode loop (32
    layers x 5 steps = 160 calls of each GEMV, durations ranked as the bytes are), by hand
    from the kernels' medians:
      gate_up 4096 x 28672 x 2 B = 234,881,024 B in 56.576 us; qkv 4096 x 6144 x 2 B =
      50,331,648 B in 15.744 us: 184,549,376 B / 40.832 us = 4.52 TB/s, and
      15.744 - 50,331,648 B / 4.52 TB/s = 15.744 - 11.14 = 4.60 us fixed.
      Split-K pair, each + its 1.696 us reduce: down 117,440,512 B in 31.488 us, o
      33,554,432 B in 12.192 us: 83,886,080 B / 19.296 us = 4.35 TB/s, fixed 12.192 - 7.72 = 4.47 us.
    The LM head (1,050,673,152 B, 243.456 us) agrees: 1,050,673,152 / 4.52 TB/s + 4.60 = 237.1 us."""
    trace = json.load(gzip.open(Path(__file__).parent / "data/h200/trace_graph_llama8b_shape.json.gz"))
    durs = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            durs[e["name"]].append(e["dur"])
    med = {name.split("_v_bz")[0].removeprefix("nvjet_sm90_tst_") + ("_splitK" if "splitK_TNT" in name else ""):
           statistics.median(v) for name, v in durs.items() if name.startswith("nvjet")}
    reduce_us = statistics.median(next(v for k, v in durs.items() if "splitKreduce" in k))
    gate_up, qkv = med["128x8_64x12_2x1"], med["64x8_64x16_4x1"]
    down, o = med["128x8_64x12_2x1_splitK"] + reduce_us, med["64x8_64x16_2x1_splitK"] + reduce_us
    bw = (234_881_024 - 50_331_648) / (gate_up - qkv)  # B/us
    assert bw / 1e6 == pytest.approx(4.52, abs=0.01)  # TB/s
    assert qkv - 50_331_648 / bw == pytest.approx(4.60, abs=0.01)
    bw_split = (117_440_512 - 33_554_432) / (down - o)
    assert bw_split / 1e6 == pytest.approx(4.35, abs=0.01)
    assert o - 33_554_432 / bw_split == pytest.approx(4.47, abs=0.01)
    assert med["256x8_64x6_2x1"] == pytest.approx(1_050_673_152 / bw + 4.60, rel=0.03)
    assert get_engine("sglang").kernel_floor_us > 1.1 * 3
