"""How a model is served: GPUs and their split, formats, batch, context, speculation."""

import re
from dataclasses import dataclass, replace

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.hardware.spec import GPU, Interconnect
from decodescope.model.engines import Backend, EngineProfile, QuantAfter, engines
from decodescope.model.formats import WeightFormat
from decodescope.model.ops import unique_layers

KV_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
# Limits on flags, so that every answer stays well under a second: engines draft at most
# a few tens of tokens per round, and no deployment has more requests or GPUs than these.
MAX_DRAFT_STEPS = 32
MAX_TOPK = 32
MAX_TREE_TOKENS = 1024
MAX_BATCH = 1 << 20
MAX_CONTEXT = 1 << 27
MAX_GPUS = 4096
# GPUs one NVSwitch domain joins (gpus.toml link sources: HGX boards join 8 GPUs through
# NVSwitch; GB200 NVL72 racks 72); beyond that the GPUs talk over the network
NVSWITCH_GPUS = {"gb200": 72}


@dataclass(frozen=True)
class Spec:
    """Speculative decoding: k draft steps, then one verify pass per request over k+1
    tokens (a chain) or over the `draft_tokens` nodes of a tree whose draft steps after
    the first each run `topk` branches (SGLang's --speculative-eagle-topk and
    --speculative-num-draft-tokens). accept_len = mean tokens produced per round, bonus
    token included (1..k+1: one path of the tree is accepted)."""
    method: str = "none"
    k: int = 0
    accept_len: float = 1.0
    topk: int = 1
    draft_tokens: int = 0  # tokens verified per request; 0: the chain's k+1

    @property
    def tokens_per_verify(self) -> int:
        return self.draft_tokens or self.k + 1

    def to_dict(self) -> dict:
        return {"method": self.method, "k": self.k, "accept_len": self.accept_len, "topk": self.topk,
                "verify_tokens": self.tokens_per_verify}


def check_weights_flag(weights: str) -> None:
    """Sizes inside a --weights value (the names themselves are formats.parse_format's)."""
    s = weights.strip().lower()
    if (m := re.fullmatch(r"int4-g(\d+)", s)) and not 8 <= int(m[1]) <= 65536:
        raise DecodescopeError(f"--weights {s}: a group of {int(m[1])} weights per scale is out of range",
                               "use int4-gN with 8 <= N <= 65536 (checkpoints use 32, 64 or 128)")
    if (m := re.fullmatch(r"bpw:(\d+(?:\.\d+)?)", s)) and not 1.0 <= float(m[1]) <= 32.0:
        raise DecodescopeError(f"--weights {s}: {m[1]} bits per weight is out of range",
                               "use bpw:X with 1 <= X <= 32 (EXL2 models use 2.5-8)")


def engine_format(fmt: WeightFormat, engine: EngineProfile) -> WeightFormat:
    """The format as the engine applies it: engines that quantize the LM head with the
    rest (gpt-fast's int8 / int4 modes) give it the weights' bits."""
    if engine.lm_head_quantized and fmt.head_bits == 16 and fmt.bits < 16:
        return replace(fmt, head_bits=fmt.bits)
    return fmt


def parse_spec(spec: str, accept: float | None, tree: str | None = None) -> Spec:
    s = spec.strip().lower()
    if s in ("", "none"):
        if accept not in (None, 1.0):
            raise DecodescopeError("--accept given without --spec", "add --spec mtp:K (or eagle:K, draft:K, ngram:K)")
        if tree:
            raise DecodescopeError("--tree given without --spec", "add --spec eagle:K (or mtp:K)")
        return Spec()
    m = re.fullmatch(r"(mtp|eagle|draft|ngram):(\d+)", s)
    if not m:
        raise DecodescopeError(f"--spec '{spec}' not understood",
                               "use none, mtp:K, eagle:K, draft:K or ngram:K with K draft steps")
    if not 1 <= int(m[2]) <= MAX_DRAFT_STEPS:
        raise DecodescopeError(f"--spec {s}: {m[2]} draft steps is out of range",
                               f"use 1 <= K <= {MAX_DRAFT_STEPS} (engines draft 1-8 tokens per round)")
    k = int(m[2])
    if accept is None:
        raise DecodescopeError(f"--spec {s} needs --accept: the mean tokens per round incl. the bonus token (1..{k + 1})",
                               "read it from the server (SGLang 'accept len', vLLM 'Mean acceptance length'): "
                               "`decodescope log SERVER.log`")
    if not 1.0 <= accept <= k + 1:
        raise DecodescopeError(f"--accept {accept} is outside 1..{k + 1} for {k} draft steps",
                               "accept_len counts tokens per round including the bonus token")
    topk, n = parse_tree(tree, m[1], k) if tree else (1, 0)
    return Spec(m[1], k, accept, topk, n)


def parse_tree(tree: str, method: str, k: int) -> tuple[int, int]:
    """`--tree TOPK:N` -> (topk, verified tokens). SGLang's EAGLE worker keeps the N-1
    best-scored of the topk + (k-1) x topk^2 candidates its draft steps produce, plus
    the last verified token (organize_draft_results); with topk 1 it sets N to k+1."""
    if method not in ("eagle", "mtp"):
        raise DecodescopeError(f"--tree with --spec {method}:{k}: only EAGLE-style drafting builds a tree",
                               "use --spec eagle:K or mtp:K with --tree, or drop --tree")
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", tree)
    if not m:
        raise DecodescopeError(f"--tree '{tree}' not understood",
                               "use --tree TOPK:N, e.g. 8:64 for SGLang's --speculative-eagle-topk 8 "
                               "--speculative-num-draft-tokens 64")
    topk, n = int(m[1]), int(m[2])
    if not 1 <= topk <= MAX_TOPK:
        raise DecodescopeError(f"--tree {topk}:{n}: topk {topk} is out of range", f"use 1 <= TOPK <= {MAX_TOPK}")
    most = min(1 + topk + (k - 1) * topk * topk, MAX_TREE_TOKENS)
    if topk == 1 and n != k + 1 or not k + 1 <= n <= most:
        raise DecodescopeError(f"--tree {topk}:{n}: {k} draft steps with topk {topk} verify "
                               + (f"{k + 1} tokens" if topk == 1 else f"{k + 1} to {most} tokens"),
                               "N counts the tree's draft tokens plus the last verified one "
                               "(SGLang's --speculative-num-draft-tokens)")
    return topk, n


@dataclass(frozen=True)
class Deployment:
    """How a model is served: GPUs, split, weight and KV formats, batch, context, speculation, engine."""
    gpu: GPU
    link: Interconnect  # between the GPUs of one TP / PP group
    weights: WeightFormat
    engine: EngineProfile
    tp: int = 1
    pp: int = 1
    ep: int = 1  # experts split over ep of the tp GPUs; each expert then split over tp/ep
    kv_dtype: str = "bf16"
    batch: int = 1  # concurrent requests decoding together
    context: int = 1024  # tokens already in each request's KV cache
    spec: Spec = Spec()
    draft: Arch | None = None  # separate draft model (draft:K), or an EAGLE head's config
    draft_weights: WeightFormat | None = None  # the draft model's format when it differs from `weights`
    # every request decodes the same token at each step (a benchmark that feeds one token id
    # to all sequences): a MoE layer routes them alike and reads the experts of one request;
    # KV cache and recurrent state are still read per request
    same_tokens: bool = False
    # llama.cpp --split-mode row: every weight matrix split by rows over the tp GPUs, the
    # KV cache and all other ops on the main GPU, two exchanges per matmul (model/rowsplit.py)
    split_rows: bool = False
    # the decode attention kernel streams each request's KV cache once per query head, not
    # once per KV head (TensorRT-LLM's masked MHA kernel of late 2023: one thread block per
    # query head and request, before its grouped-query XQA kernel); only GQA / MQA differ
    kv_per_query_head: bool = False
    # the engine's backend (llama.cpp, SGLang) as typed (--backend) or as a row states it; None: the GPU vendor's usual one
    backend: Backend | None = None
    # tokens per pass the build's MoE mat-vec kernel takes where it differs from the profile's
    # (current builds): llama.cpp builds of 2025 left it above one token (validate rows of such builds)
    moe_matvec_max_tokens: int | None = None
    # the producers after which the build quantizes FP8 GEMM inputs in kernels of their own, where
    # it differs from the profile's (current builds): vLLM V0 builds fused none (validate rows)
    fp8_quant_after: tuple[QuantAfter, ...] | None = None

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def runs_on(self) -> Backend | None:
        """The backend whose kernels run: the chosen one where the GPU takes it (a lever onto another
        vendor's GPU falls back), else the GPU vendor's usual one; None for an engine without backends."""
        e, vendor = self.engine, self.gpu.vendor
        if self.backend is not None and vendor in e.backend_vendors.get(self.backend.value, ()):
            return self.backend
        usual = e.backend_by_vendor.get(vendor)
        return Backend(usual) if usual else None

    @property
    def profile(self) -> EngineProfile:
        """The engine profile as the deployment's backend runs it (its by_backend values in place)."""
        return self.engine.on(self.runs_on)

    @property
    def moe_tp(self) -> int:
        return self.tp // self.ep

    @property
    def kv_bytes(self) -> int:
        return KV_BYTES[self.kv_dtype]

    def to_dict(self) -> dict:
        return {"gpu": self.gpu.id, "gpus": self.gpus, "tp": self.tp, "pp": self.pp, "ep": self.ep,
                "link": self.link.id, "weights": self.weights.to_dict(), "kv": self.kv_dtype,
                "batch": self.batch, "context": self.context, "spec": self.spec.to_dict(),
                "draft": self.draft.name if self.draft else None, "engine": self.engine.id,
                "same_tokens": self.same_tokens, "split_rows": self.split_rows,
                "kv_per_query_head": self.kv_per_query_head,
                "backend": self.runs_on.value if self.runs_on else None,
                "moe_matvec_max_tokens": self.moe_matvec_max_tokens,
                "fp8_quant_after": [q.value for q in self.quant_after]}

    @property
    def quant_after(self) -> tuple[QuantAfter, ...]:
        """EngineProfile.fp8_quant_after, or the build's own where the deployment names it."""
        return self.engine.fp8_quant_after if self.fp8_quant_after is None else self.fp8_quant_after


def check(arch: Arch, d: Deployment) -> None:
    """Refuse deployments that cannot run: sizes out of range, TP not dividing heads, EP
    not dividing TP or on a dense model, GPUs the link cannot join, a foreign draft."""
    _check_sizes(d)
    _check_link(d)
    check_backend(d)
    if not d.engine.runs_on_vendor(d.gpu.vendor):
        raise DecodescopeError(f"engine {d.engine.id} does not run on {d.gpu.name} ({d.gpu.vendor})",
                               f"{d.engine.id} runs on {' and '.join(d.engine.vendors)} GPUs: pick one, or another "
                               "--engine (engines.toml says where each runs)")
    if d.split_rows:
        _check_row_split(arch, d)
    if d.tp % d.ep:
        raise DecodescopeError(f"--ep {d.ep} must divide --tp {d.tp}",
                               "experts are split over ep of the tp GPUs of a stage")
    if d.ep > 1 and not arch.is_moe:
        raise DecodescopeError(f"--ep {d.ep}: {arch.name} is dense, it has no experts to split",
                               "drop --ep (tensor parallelism splits a dense model: --tp)")
    for layer, _ in unique_layers(arch.layers):
        experts = getattr(layer.mlp, "num_experts", 0)
        if d.ep > 1 and experts % d.ep:
            raise DecodescopeError(f"--ep {d.ep} does not divide the {experts} experts of {arch.name}",
                                   "choose an EP size that divides the expert count")
    if d.pp > len(arch.layers):
        raise DecodescopeError(f"--pp {d.pp} is more stages than the model's {len(arch.layers)} layers")
    if d.kv_dtype not in KV_BYTES:
        raise DecodescopeError(f"--kv {d.kv_dtype} unknown", f"use one of {', '.join(KV_BYTES)}")
    for layer, _ in unique_layers(arch.layers):
        for field, n in _head_counts(layer.mixer):
            if field == "num_key_value_heads":
                ok = n % d.tp == 0 if n >= d.tp else d.tp % n == 0
            else:
                ok = n % d.tp == 0
            if not ok:
                raise DecodescopeError(f"--tp {d.tp} does not divide {field} = {n} of {arch.name}",
                                       "choose a TP size that divides the head counts")
    if d.spec.method == "mtp" and not arch.mtp:
        raise DecodescopeError(f"{arch.name} has no MTP layers that decodescope counts "
                               "(mtp_num_hidden_layers / num_nextn_predict_layers; the model's notes say more)",
                               "use eagle:K, draft:K with --draft MODEL, or ngram:K")
    if d.spec.method == "draft" and d.draft is None:
        raise DecodescopeError("--spec draft:K needs --draft MODEL (the draft model's config)")
    if d.spec.method == "draft" and d.draft.vocab_size != arch.vocab_size:
        raise DecodescopeError(f"--draft {d.draft.name} has a vocabulary of {d.draft.vocab_size} tokens, "
                               f"{arch.name} one of {arch.vocab_size}: its drafts cannot be verified",
                               "use a draft model of the same family and tokenizer")


def parse_backend(name: str | None) -> Backend | None:
    """--backend as typed: one of Backend's values, or None (the GPU vendor's usual one)."""
    if name is None:
        return None
    try:
        return Backend(name.strip().lower())
    except ValueError:
        raise DecodescopeError(f"--backend '{name}' unknown",
                               f"use one of: {' '.join(b.value for b in Backend)}") from None


def check_backend(d: Deployment) -> None:
    """A chosen backend needs an engine that has backends (llama.cpp, SGLang) and a GPU that runs it."""
    if d.backend is None:
        return
    e, b = d.engine, d.backend.value
    if not e.backend_vendors:
        with_backends = " or ".join(k for k, p in engines().items() if p.backend_vendors)
        raise DecodescopeError(f"--backend {b}: engine {e.id} has no backend choice",
                               f"--backend applies to --engine {with_backends}; drop --backend")
    if b not in e.backend_vendors:
        raise DecodescopeError(f"--backend {b}: engine {e.id} has no {b} build",
                               f"use one of: {' '.join(e.backend_vendors)}, or drop --backend")
    vendors = e.backend_vendors[b]
    if d.gpu.vendor not in vendors:
        raise DecodescopeError(f"--backend {b} does not run on {d.gpu.name} ({d.gpu.vendor})",
                               f"{b} runs on {' or '.join(vendors)} GPUs; "
                               f"drop --backend for {d.gpu.vendor}'s usual one")


def _check_sizes(d: Deployment) -> None:
    for flag, v, hi in (("--tp", d.tp, MAX_GPUS), ("--pp", d.pp, MAX_GPUS), ("--ep", d.ep, MAX_GPUS),
                        ("--batch", d.batch, MAX_BATCH), ("--context", d.context, MAX_CONTEXT)):
        if not 1 <= v <= hi:
            raise DecodescopeError(f"{flag} {v} is out of range", f"use 1 <= {flag.lstrip('-')} <= {hi}")
    if d.gpus > MAX_GPUS:
        raise DecodescopeError(f"--tp {d.tp} x --pp {d.pp} = {d.gpus} GPUs is out of range",
                               f"use at most {MAX_GPUS} GPUs per replica")


def _check_link(d: Deployment) -> None:
    if d.gpus > 1 and d.link.id == "none":
        raise DecodescopeError(f"--link none joins no GPUs, but TP {d.tp} x PP {d.pp} needs {d.gpus}",
                               "name the link between the GPUs (--link pcie, nvlink, nvswitch, network), "
                               "or use one GPU")
    # the GPUs one switch or one full mesh joins (GPU.link_peers: each links to every other of its board)
    mesh = d.link.id == d.gpu.link and d.gpu.link_peers > 1
    domain = NVSWITCH_GPUS.get(d.gpu.id, 8) if d.link.id == "nvswitch" else d.gpu.link_peers + 1 if mesh else 0
    if domain and d.gpus > domain:
        what = "NVSwitch domain" if d.link.id == "nvswitch" else f"{d.link.id} mesh"
        raise DecodescopeError(f"{d.gpus} GPUs over {d.link.id}: one {d.gpu.id} {what} joins {domain}",
                               f"keep TP x PP <= {domain} on one board, or name the link between nodes "
                               "(--link network)")


def _head_counts(mixer):
    names = ("num_attention_heads", "num_key_value_heads", "linear_num_key_heads",
             "linear_num_value_heads", "mamba_num_heads")
    return [(n, getattr(mixer, n)) for n in names if mixer is not None and hasattr(mixer, n)]


def _check_row_split(arch: Arch, d: Deployment) -> None:
    """llama.cpp splits 2-D weight matrices by rows over the GPUs of one stage; expert
    tensors (3-D) cannot be split (ggml_cuda_op_mul_mat asserts `!(split && ne02 > 1)`)."""
    if "row" not in d.engine.splits:
        raise DecodescopeError(f"--split-mode row is llama.cpp's; engine {d.engine.id} does not split by rows",
                               "use --engine llamacpp, or --tp N for tensor parallelism")
    if d.tp < 2 or d.pp > 1:
        raise DecodescopeError(f"--split-mode row splits each matrix over --tp GPUs (tp {d.tp}, pp {d.pp})",
                               "give the GPU count as --tp N (N >= 2) and leave --pp at 1")
    if arch.is_moe:
        raise DecodescopeError(f"--split-mode row: llama.cpp cannot split the expert tensors of {arch.name}",
                               "use the layer split (--pp N)")
