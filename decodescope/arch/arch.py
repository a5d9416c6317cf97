"""Arch: what a model is, as decode sees it — its layers with shapes, MTP modules,
embedding and LM head — and its parameter counts.

Counting convention (the `params_*` figures): language model only (no vision tower, no
MTP layers); embedding table and LM head both included, tied weights counted once.
`params_read_per_token`: the weights one token touches at batch 1 (active layers + LM
head, no embedding table): what decode reads."""

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from decodescope.arch.blocks import Layer, MoE, Tensor


@dataclass(frozen=True)
class MTPModule:
    """One multi-token-prediction (next-n) module: a decoder layer plus its input
    projection and norms. It shares the target's embedding and LM head."""
    layer: Layer
    extra: tuple[Tensor, ...]  # fc / eh_proj [hidden, 2*hidden] and norms

    def tensors(self) -> list[Tensor]:
        return list(self.extra) + self.layer.tensors()


@dataclass(frozen=True)
class Arch:
    """What a model reads and computes per token: its layers, MTP modules, embedding and head."""
    name: str
    source: str  # where the config came from
    model_type: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str  # the checkpoint's dtype as a weight format: "bf16", "fp16", "fp32"
    layers: tuple[Layer, ...]
    mtp: tuple[MTPModule, ...] = ()
    quantization: dict | None = None  # quantization_config, as in the config
    # tables decode gathers one row per token from, beside the token embedding (Gemma 3n's
    # per-layer embeddings): counted and held where the embedding is, never streamed
    input_tables: tuple[Tensor, ...] = ()
    notes: tuple[str, ...] = ()  # family facts the config does not state, that were assumed
    final_norm_weights: bool = True  # False: a final norm without weights (OLMo v1, nanochat)

    def __post_init__(self):
        # the layer sums are read several times a run (table, JSON): summed once here, over the
        # distinct layers (set, not cached on first use: see Tensor)
        counts = Counter(self.layers).items()
        own = [(x, n) for x, n in counts if not x.reuses]
        object.__setattr__(self, "_layer_params", (sum(n * sum(t.params for t in x.tensors() + list(x.idle))
                                                       for x, n in own),
                                                   sum(n * active_params(x) for x, n in own),
                                                   sum(n * active_params(x) for x, n in counts if x.reuses)))

    @property
    def embedding(self) -> Tensor:
        return Tensor("embed_tokens", (self.vocab_size, self.hidden_size), "vocab", linear=False)

    @property
    def lm_head(self) -> Tensor:
        return Tensor("lm_head", (self.vocab_size, self.hidden_size), "vocab")

    @property
    def final_norm(self) -> Tensor:
        return _final_norm(self.hidden_size if self.final_norm_weights else 0)

    def layer_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts

    @property
    def params_layers_total(self) -> int:
        return self._layer_params[0]

    @property
    def params_layers_active(self) -> int:
        return self._layer_params[1]

    @property
    def params_total(self) -> int:
        head = 0 if self.tie_word_embeddings else self.lm_head.params
        return self.params_layers_total + self.embedding.params + head + self.final_norm.params + self._tables

    @property
    def params_active(self) -> int:
        # input tables (Gemma 3n's per-layer embeddings, Qwen4-Exp's n-gram tables) are left out:
        # a token gathers a few rows of them, and publishers leave them out of "active" / "effective"
        head = 0 if self.tie_word_embeddings else self.lm_head.params
        return self.params_layers_active + self.embedding.params + head + self.final_norm.params

    @property
    def _tables(self) -> int:
        return sum(t.params for t in self.input_tables)

    @property
    def params_read_per_token(self) -> int:
        # a reused layer's weights are read again on each pass through it
        return self.params_layers_active + self._layer_params[2] + self.lm_head.params + self.final_norm.params

    @property
    def params_mtp(self) -> int:
        return sum(t.params for m in self.mtp for t in m.tensors())

    @property
    def is_moe(self) -> bool:
        return any(isinstance(layer.mlp, MoE) for layer in self.layers)

    def summary(self) -> dict:
        return {"name": self.name, "source": self.source, "model_type": self.model_type,
                "hidden_size": self.hidden_size, "vocab_size": self.vocab_size,
                "num_layers": len(self.layers), "layer_kinds": self.layer_counts(),
                "mtp_layers": len(self.mtp), "tie_word_embeddings": self.tie_word_embeddings,
                "dtype": self.dtype, "params_total": self.params_total,
                "params_active": self.params_active,
                "params_read_per_token": self.params_read_per_token,
                "params_mtp": self.params_mtp, "notes": list(self.notes)}


def active_params(layer: Layer) -> int:
    """Parameters one token touches in `layer`: routed experts count top-k of E."""
    total = 0
    for t in layer.tensors():
        if t.experts > 1:
            total += t.params * layer.mlp.num_experts_per_tok // t.experts
        else:
            total += t.params
    return total


@lru_cache(maxsize=64)
def _final_norm(hidden_size: int) -> Tensor:
    """One Tensor per size: every estimate of every lever asks for it."""
    return Tensor("norm", (hidden_size,), "rep", linear=False)
