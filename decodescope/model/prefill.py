"""Context (prefill) passes in what a benchmark times. End to end, a static batch: one
context pass over every prompt, then the decode steps at a growing context. Some benchmarks
time the whole generation (TensorRT-LLM's gptSessionBenchmark times `session.generate()`
from the prompts to the last token: https://github.com/NVIDIA/TensorRT-LLM/blob/027cd518e3b63809a5c5799187991e7f1164fb12/
benchmarks/cpp/gptSessionBenchmark.cpp), so their tok/s = batch x output tokens / that time.
Serving: requests keep arriving, and a decode round's time per output token also holds its
share of the newcomers' context passes (`serving`)."""

from dataclasses import dataclass, replace

from decodescope.arch import MLA, Arch, Attention, MoE, PooledKV
from decodescope.model.deployment import Deployment, check
from decodescope.model.ops import (Op, Rates, embedding_ops, head_ops, pipeline_ops, reduce_and_floor_ops,
                                   unique_layers, weight_ops)
from decodescope.model.predict import ceiling_rates, estimates, expected_rates
from decodescope.model.round import estimate


@dataclass(frozen=True)
class EndToEnd:
    prefill_s: float  # one context pass over batch x prompt tokens
    decode_s: float  # the output - 1 decode steps after it (the context pass yields the first token)
    tok_s_total: float  # batch x output tokens / (prefill_s + decode_s)


def prefill_ops(arch: Arch, d: Deployment, r: Rates, prompt: int) -> list[Op]:
    """One context pass over d.batch prompts of `prompt` tokens each. Every weight GEMM runs
    over batch x prompt tokens (2 FLOP per parameter and token; at thousands of tokens the
    roofline makes it compute-bound); causal attention: token i attends to i + 1 tokens,
    on average (prompt + 1) / 2; the KV cache of the prompt is written once; the LM head
    runs on each request's last token only (the first output token)."""
    tokens = d.batch * prompt
    ops = embedding_ops(arch, d, tokens, r)
    for layer, n in unique_layers(arch.layers):
        moe = layer.mlp if isinstance(layer.mlp, MoE) else None
        layer_ops = weight_ops(layer.tensors(), moe, d.weights, d, tokens, r)
        if isinstance(layer.mixer, (Attention, MLA, PooledKV)):  # PooledKV: DeepSeek-V4, dots3's sliding MLA
            layer_ops.append(_causal_attention(layer.mixer, d, prompt, r))
        layer_ops += reduce_and_floor_ops(layer, tokens, d, r)  # allreduces over every prompt token
        ops += [Op(o.component, o.name, o.bytes * n, o.flops * n, o.time_s * n, o.bound) for o in layer_ops]
    return ops + head_ops(arch, d.weights, d, d.batch, 1, r) + pipeline_ops(arch, d, d.batch, prompt, r)


def _causal_attention(mixer, d: Deployment, prompt: int, r: Rates) -> Op:
    """QK^T and PV of every prompt token over its prefix (mean (prompt + 1) / 2 tokens), in
    16-bit on the tensor cores, plus writing the prompt's KV cache once (bytes)."""
    kv_heads = 1 if isinstance(mixer, MLA) else max(1, mixer.num_key_value_heads // d.tp)
    nbytes = d.batch * mixer.kv_read_bytes(prompt, kv_heads, d.kv_bytes)
    flops = d.batch * prompt * mixer.attention_flops_per_token(mixer.num_attention_heads / d.tp, (prompt + 1) / 2)
    t_mem, t_comp = nbytes / r.bw, flops / r.flops["bf16"]
    return Op("kv_cache", "prefill attention", nbytes, flops, max(t_mem, t_comp),
              "compute" if t_comp > t_mem else "memory")


def end_to_end(arch: Arch, d: Deployment, prompt: int, output: int) -> tuple[EndToEnd, EndToEnd]:
    """(ceiling, expected) of a static batch of d.batch requests, `prompt` tokens in and
    `output` tokens out each. Decode step j (1..output-1) attends to prompt + j tokens, so
    its time is linear in j (KV bytes and attention FLOPs grow with the context; a sliding
    window bends it once): Simpson's rule over the first, middle and last step."""
    check(arch, d)
    e = d.engine
    out = []
    for r, host_ms in ((ceiling_rates(d), 0.0), (expected_rates(d), e.host_ms_per_pass)):
        prefill = sum(op.time_s for op in prefill_ops(arch, d, r, prompt)) + host_ms / 1e3
        steps = output - 1
        decode = 0.0
        if steps:
            first, last = prompt, prompt + steps - 1  # tokens already cached before the step
            ends = [estimate(arch, replace(d, context=c), r, host_ms, 0.0).round_ms / 1e3
                    for c in (first, (first + last) / 2, last)]
            decode = steps * (ends[0] + 4 * ends[1] + ends[2]) / 6
        out.append(EndToEnd(prefill, decode, d.batch * output / (prefill + decode)))
    return out[0], out[1]


@dataclass(frozen=True)
class Serving:
    round_s: float  # one decode round plus its share of the arriving requests' context passes
    tok_s: float  # per user: tokens per round (the accept length) / round_s


def serving(arch: Arch, d: Deployment, prompt: int, output: int) -> tuple[Serving, Serving]:
    """(ceiling, expected) of a serving benchmark that keeps d.batch requests in flight, each
    with `prompt` tokens in and `output` out (bench_serving --max-concurrency): its time per
    output token is the time from a request's first token to its last over output - 1.
    In that time each of the other d.batch - 1 requests finishes once and is replaced
    (Little's law: a request lasts output / accept_len rounds; accept_len is 1 without
    speculation), so a round carries (d.batch - 1) x accept_len / output context passes of
    one prompt each (none at d.batch 1: the next request starts after this one ends). SGLang
    runs a context pass on its own between two decode rounds
    (Scheduler.get_next_batch_to_run: 'if new_batch is not None: # Run prefill first if
    possible', python/sglang/srt/managers/scheduler.py at sgl-project/sglang 0003215c;
    prefill and decode share a batch only with --enable-mixed-chunk, default False)."""
    ceiling, expected = estimates(arch, d)
    one = replace(d, batch=1)  # arrivals spread out: one prompt per context pass
    out = []
    for est, r, host_ms in ((ceiling, ceiling_rates(one), 0.0), (expected, expected_rates(one), d.engine.host_ms_per_pass)):
        prefill_s = sum(op.time_s for op in prefill_ops(arch, one, r, prompt)) + host_ms / 1e3
        round_s = est.round_ms / 1e3 + (d.batch - 1) * d.spec.accept_len / output * prefill_s
        out.append(Serving(round_s, d.spec.accept_len / round_s))
    return out[0], out[1]
