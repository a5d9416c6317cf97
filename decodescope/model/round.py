"""One decode round: k draft steps + one verify pass over k+1 tokens per request (a
tree's draft tokens under EAGLE trees; one plain pass without speculation), per GPU, as a ceiling and as an expected value."""

from dataclasses import dataclass, replace
from math import ceil

from decodescope.arch import Arch, Attention, DenseMLP, Layer, MTPModule, Tensor
from decodescope.model.deployment import Deployment
from decodescope.model.ops import (Op, Rates, embedding_ops, head_ops, layer_ops, pipeline_ops, repeated_ops,
                                   weight_ops)

COMPONENTS = ("weights", "kv_cache", "state", "allreduce", "kernels", "draft", "host")
# EAGLE-3 heads predict over a reduced draft vocabulary, mapped back to the target's:
# https://huggingface.co/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B/blob/main/config.json
# '"draft_vocab_size": 32000' (target vocab 128256)
EAGLE3_DRAFT_VOCAB = 32000


@dataclass(frozen=True)
class Component:
    """One row of a round's breakdown: time, bytes and FLOPs of one component."""
    component: str
    ms: float  # per round (pipeline stages run in sequence at decode, so their times add)
    bytes: float  # per round per TP rank, summed over pipeline stages
    flops: float  # likewise

    def to_dict(self) -> dict:
        return {"component": self.component, "ms": self.ms, "bytes": self.bytes, "flops": self.flops}


@dataclass(frozen=True)
class Estimate:
    """One decode round timed at one set of rates (ceiling or expected)."""
    round_ms: float
    tok_s: float  # per user: accept_len / round
    tok_s_total: float  # all batch requests together
    breakdown: tuple[Component, ...]
    bound: str  # memory | compute | communication | latency (kernel floors) | host

    def to_dict(self) -> dict:
        return {"round_ms": self.round_ms, "tok_s": self.tok_s, "tok_s_total": self.tok_s_total,
                "bound": self.bound, "breakdown": [c.to_dict() for c in self.breakdown]}

    def ms(self, component: str) -> float:
        return next((c.ms for c in self.breakdown if c.component == component), 0.0)


def verify_ops(arch: Arch, d: Deployment, r: Rates) -> list[Op]:
    """The target model's forward pass over k+1 tokens per request (1 without speculation;
    the tree's draft_tokens when EAGLE drafts a tree)."""
    t = d.spec.tokens_per_verify
    ops = embedding_ops(arch, d, d.batch * t, r) + repeated_ops(arch.layers, d.weights, d, d.batch, t, r)
    return ops + head_ops(arch, d.weights, d, d.batch, t, r) + pipeline_ops(arch, d, d.batch, t, r)


def draft_step_ops(arch: Arch, d: Deployment, r: Rates, step: int) -> list[Op]:
    """One draft step: through the draft, then its LM head. The first step drafts one
    token per request; in a tree each later step runs the topk branches kept so far
    (SGLang eagle_worker.py draft_forward: batch x topk tokens per forward, k-1 forwards
    after the draft pass that follows verify; https://github.com/sgl-project/sglang/blob/
    00559eacbf0841146db7e27e445d1971e35e6294/python/sglang/srt/speculative/eagle_worker.py)."""
    method, w = d.spec.method, 1 if step == 0 else d.spec.topk
    if method == "mtp":
        m = arch.mtp[step % len(arch.mtp)]  # one MTP layer is reused for every step
        return _module_ops(m, arch, d, r, w, mtp=True)
    if method == "eagle":
        if d.draft is not None:
            return _draft_model_ops(d.draft, d, r, w)
        return _module_ops(eagle_head(arch, fuse=step == 0), arch, d, r, w, mtp=False,
                           vocab=min(EAGLE3_DRAFT_VOCAB, arch.vocab_size))
    if method == "draft":
        return _draft_model_ops(d.draft, d, r, w)
    return []  # n-gram: lookup on the CPU, no GPU work


def draft_ops(arch: Arch, d: Deployment, r: Rates) -> list[Op]:
    """The k draft steps. They cycle through the same modules (one MTP layer reused for
    every step, one draft model or EAGLE head) at one of two widths (the first step's one
    token, a tree's topk after it; a chain's topk is 1 too), so each distinct step is built once."""
    distinct = max(1, len(arch.mtp)) if d.spec.method == "mtp" else 1
    built: dict[tuple[int, int], list[Op]] = {}
    ops = []
    for s in range(d.spec.k):
        key = (s % distinct, s == 0, 1 if s == 0 else d.spec.topk)  # draft_step_ops' module, first step, width
        if key not in built:
            built[key] = draft_step_ops(arch, d, r, s)
        ops += built[key]
    return ops


def _module_ops(m: MTPModule, arch: Arch, d: Deployment, r: Rates, width: int, mtp: bool,
                vocab: int | None = None) -> list[Op]:
    """`width` tokens per request (a tree's branches)."""
    tokens = d.batch * width
    ops = embedding_ops(arch, d, tokens, r) + weight_ops(list(m.extra), None, d.weights, d, tokens, r, mtp)
    ops += layer_ops(m.layer, d.weights, d, d.batch, width, r, mtp)
    return ops + head_ops(arch, d.weights, d, d.batch, width, r, vocab)


def _draft_model_ops(draft: Arch, d: Deployment, r: Rates, width: int) -> list[Op]:
    fmt = d.draft_weights or d.weights
    return (embedding_ops(draft, d, d.batch * width, r) + repeated_ops(draft.layers, fmt, d, d.batch, width, r)
            + head_ops(draft, fmt, d, d.batch, width, r))


def eagle_head(arch: Arch, fuse: bool = True) -> MTPModule:
    """Without --draft: an EAGLE-3 style head of the target's shape: one full-attention
    decoder layer, a dense MLP, an fc fusing 3 hidden states, and the target's LM head.
    Only the draft pass after verify gets the target's 3 hidden states to fuse; later steps
    feed the head's own hidden state and skip the fc (fuse=False): SGLang llama_eagle3.py
    'if hidden_states.shape[-1] != embeds.shape[-1]: hidden_states = self.fc(hidden_states)'
    (https://github.com/sgl-project/sglang/blob/03d5a7771f6082e7737a5f19cae7d1e863087013/python/sglang/srt/models/llama_eagle3.py)."""
    attn = next((layer.mixer for layer in arch.layers if isinstance(layer.mixer, Attention)), None)
    h = arch.hidden_size
    if attn is None or attn.sliding_window:
        heads = max(1, h // 128)
        attn = Attention(h, heads, max(1, heads // 8), 128)
    inter = next((layer.mlp.intermediate_size for layer in arch.layers if isinstance(layer.mlp, DenseMLP)), 3 * h)
    fc = (Tensor("fc", (h, 3 * h), "rep"),) if fuse else ()
    return MTPModule(Layer("attention", attn, DenseMLP(h, inter)), fc + (Tensor("norm", (h,), "rep", linear=False),))


def sum_ops(ops: list[Op]) -> dict[str, Component]:
    out: dict[str, list[float]] = {}
    for component, _, nbytes, flops, time_s, _ in ops:
        acc = out.get(component)
        if acc is None:
            acc = out[component] = [0.0, 0.0, 0.0]
        acc[0] += time_s * 1e3
        acc[1] += nbytes
        acc[2] += flops
    return {k: Component(k, *v) for k, v in out.items()}


def all_accepted(k: int, accept_len: float) -> float:
    """P(all k drafts accepted) when each is accepted with the same rate a, solved from
    accept_len = 1 + a + ... + a^k (bonus token included); P = a^k."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        lo, hi = (a, hi) if sum(a ** i for i in range(k + 1)) < accept_len else (lo, a)
    return lo ** k


def draft_steps(d: Deployment) -> float:
    """Draft forward passes per round: k, and for a separate draft model one more when
    all k are accepted (it then runs the last draft token to fill its own cache:
    https://github.com/pytorch-labs/gpt-fast/blob/main/generate.py speculative_decode,
    'fill last token into draft model')."""
    extra = all_accepted(d.spec.k, d.spec.accept_len) if d.spec.method == "draft" else 0.0
    return d.spec.k + extra


def micro_batches(d: Deployment) -> int:
    """Under PP, engines split the batch into up to PP micro-batches that fill the pipeline
    (vLLM V1 keeps PP batches in flight): each request then waits for one pass over all
    stages at the micro-batch's size. llama.cpp's layer split runs a decode batch through
    the stages one after another (its pipelining splits prompts only)."""
    return min(d.pp, d.batch) if d.engine.pp_micro_batches else 1


def estimate(arch: Arch, d: Deployment, r: Rates, host_ms: float, host_ms_draft: float) -> Estimate:
    """Time one round from its ops. PP stages run one after another for a request, so
    their times add; bytes and FLOPs are per GPU: the stages' sum over pp, times the
    micro-batches each GPU runs per round."""
    m = micro_batches(d)
    dm = d if m == 1 else replace(d, batch=ceil(d.batch / m))
    verify = verify_ops(arch, dm, r)
    steps = draft_steps(dm)
    drafts = draft_ops(arch, dm, r)
    per_gpu = m / d.pp
    parts = {k: Component(k, c.ms, c.bytes * per_gpu, c.flops * per_gpu) for k, c in sum_ops(verify).items()}
    if drafts:
        dsum, scale = sum_ops(drafts).values(), steps / d.spec.k  # the draft runs on the last stage's GPUs
        parts["draft"] = Component("draft", scale * sum(c.ms for c in dsum), scale * sum(c.bytes for c in dsum),
                                   scale * sum(c.flops for c in dsum))
    # n-gram drafts are a CPU lookup inside the scheduler step: no draft forward to launch
    host = host_ms + (0.0 if d.spec.method == "ngram" else steps * host_ms_draft)
    if host:
        parts["host"] = Component("host", host, 0.0, 0.0)
    breakdown = tuple(parts[c] for c in COMPONENTS if c in parts)
    round_ms = sum(c.ms for c in breakdown)
    tok_s = d.spec.accept_len / (round_ms / 1e3)
    return Estimate(round_ms, tok_s, tok_s * d.batch, breakdown, _bound(verify + drafts, host))


_BOUND_NAMES = {"memory": "memory", "compute": "compute", "comm": "communication", "fixed": "latency"}  # Op.bound -> round bound


def _bound(ops: list[Op], host_ms: float) -> str:
    t = dict.fromkeys(_BOUND_NAMES, 0.0)  # seconds by Op.bound, renamed below
    for _, _, _, _, time_s, bound in ops:
        t[bound] += time_s
    by_name = {_BOUND_NAMES[b]: s for b, s in t.items()} | {"host": host_ms / 1e3}
    return max(by_name, key=by_name.get)
