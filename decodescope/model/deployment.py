"""How a model is served: GPUs and their split, formats, batch, context, speculation."""

import re
from dataclasses import dataclass, replace

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.hardware.spec import GPU, Interconnect
from decodescope.model.engines import EngineProfile
from decodescope.model.formats import WeightFormat

KV_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class Spec:
    """Speculative decoding: k draft steps, then one verify pass over k+1 tokens.
    accept_len = mean tokens produced per round, bonus token included (1..k+1)."""
    method: str = "none"
    k: int = 0
    accept_len: float = 1.0

    @property
    def tokens_per_verify(self) -> int:
        return self.k + 1

    def to_dict(self) -> dict:
        return {"method": self.method, "k": self.k, "accept_len": self.accept_len}


def engine_format(fmt: WeightFormat, engine: EngineProfile) -> WeightFormat:
    """The format as the engine applies it: engines that quantize the LM head with the
    rest (gpt-fast's int8 / int4 modes) give it the weights' bits."""
    if engine.lm_head_quantized and fmt.head_bits == 16 and fmt.bits < 16:
        return replace(fmt, head_bits=fmt.bits)
    return fmt


def parse_spec(spec: str, accept: float | None) -> Spec:
    s = spec.strip().lower()
    if s in ("", "none"):
        if accept not in (None, 1.0):
            raise DecodescopeError("--accept given without --spec", "add --spec mtp:K (or eagle:K, draft:K, ngram:K)")
        return Spec()
    m = re.fullmatch(r"(mtp|eagle|draft|ngram):(\d+)", s)
    if not m or int(m[2]) < 1:
        raise DecodescopeError(f"--spec '{spec}' not understood",
                               "use none, mtp:K, eagle:K, draft:K or ngram:K with K >= 1 draft steps")
    k = int(m[2])
    if accept is None:
        raise DecodescopeError(f"--spec {s} needs --accept: the mean tokens per round incl. the bonus token (1..{k + 1})",
                               "read it from the server (SGLang 'accept len', vLLM 'Mean acceptance length'): "
                               "`decodescope log SERVER.log`")
    if not 1.0 <= accept <= k + 1:
        raise DecodescopeError(f"--accept {accept} is outside 1..{k + 1} for {k} draft steps",
                               "accept_len counts tokens per round including the bonus token")
    return Spec(m[1], k, accept)


@dataclass(frozen=True)
class Deployment:
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

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

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
                "draft": self.draft.name if self.draft else None, "engine": self.engine.id}


def check(arch: Arch, d: Deployment) -> None:
    """Refuse deployments that cannot run: TP not dividing heads, EP not dividing TP."""
    if min(d.tp, d.pp, d.ep, d.batch, d.context) < 1:
        raise DecodescopeError("--tp, --pp, --ep, --batch and --context must be >= 1")
    if d.tp % d.ep:
        raise DecodescopeError(f"--ep {d.ep} must divide --tp {d.tp}",
                               "experts are split over ep of the tp GPUs of a stage")
    if d.pp > len(arch.layers):
        raise DecodescopeError(f"--pp {d.pp} is more stages than the model's {len(arch.layers)} layers")
    if d.kv_dtype not in KV_BYTES:
        raise DecodescopeError(f"--kv {d.kv_dtype} unknown", f"use one of {', '.join(KV_BYTES)}")
    for layer in arch.layers:
        for field, n in _head_counts(layer.mixer):
            if field == "num_key_value_heads":
                ok = n % d.tp == 0 if n >= d.tp else d.tp % n == 0
            else:
                ok = n % d.tp == 0
            if not ok:
                raise DecodescopeError(f"--tp {d.tp} does not divide {field} = {n} of {arch.name}",
                                       "choose a TP size that divides the head counts")
    if d.spec.method == "mtp" and not arch.mtp:
        raise DecodescopeError(f"{arch.name} has no MTP layers (mtp_num_hidden_layers / num_nextn_predict_layers)",
                               "use eagle:K, draft:K with --draft MODEL, or ngram:K")
    if d.spec.method == "draft" and d.draft is None:
        raise DecodescopeError("--spec draft:K needs --draft MODEL (the draft model's config)")


def _head_counts(mixer):
    names = ("num_attention_heads", "num_key_value_heads", "linear_num_key_heads",
             "linear_num_value_heads", "mamba_num_heads")
    return [(n, getattr(mixer, n)) for n in names if mixer is not None and hasattr(mixer, n)]
