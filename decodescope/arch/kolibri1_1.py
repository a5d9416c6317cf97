"""Aleph Alpha Kolibri-1.1 (model_type kolibri1_1), as transformers 5.25 builds it
(Kolibri1_1ForCausalLM: src/transformers/models/kolibri1_1/modeling_kolibri1_1.py and
configuration_kolibri1_1.py, generated from modular_kolibri1_1.py).

A layer: GQA attention with per-head q/k norms (head_dim), Kolibri-1's four norms (input,
post_self_attn, post_attention, post_mlp), then a dense MLP (mlp_only_layers, of
mlp_only_intermediate_size) or routed experts (sigmoid router with a per-expert correction
bias, top num_experts_per_tok) plus one shared expert. layer_types mixes two attentions:
- "sliding_attention": RoPE, a window of sliding_window tokens;
- "indexed_attention": NoPE sparse attention. Its indexer has NO weights and NO cache of its
  own: it scores cached keys by the ReLU'd logits of the first index_num_heads query heads
  against key head 0 of the layer's own K cache. A query attends to the index_topk best keys
  of a pool, plus index_num_sink_tokens first and index_num_local_tokens last tokens; a cache
  no longer than that budget is attended whole. The layers of index_layers ("indexers") pick
  a fresh pool of index_pool_size keys each token, from block summaries (the mean of every
  index_compression keys, computed from the cached keys: no summary cache); the others
  ("reindexers") rescore the pool of the closest indexer before them.
kv_source_layers lets an indexed layer read an earlier indexed layer's K/V: it then has no
k_proj / v_proj / k_norm and no cache of its own.

Counts: the router's e_score_correction_bias is a persistent buffer (in the checkpoint, read
every token) that transformers does not count as a parameter; it is counted here (router.bias),
num_local_experts values per MoE layer more than transformers' count."""

from dataclasses import asdict, dataclass

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Tensor
from decodescope.arch.build import attention, moe
from decodescope.arch.fields import Fields
from decodescope.errors import DecodescopeError

SLIDING, INDEXED = "sliding_attention", "indexed_attention"
# Kolibri1_1Config's class defaults, for the fields a config leaves out
DEFAULTS = {"head_dim": 128, "sliding_window": 513, "num_key_value_heads": 4, "num_local_experts": 384,
            "num_experts_per_tok": 6, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
            "index_topk": 2048, "index_pool_size": 16384, "index_compression": 16, "index_num_heads": 12,
            "index_num_local_tokens": 128, "index_num_sink_tokens": 8, "mlp_only_intermediate_size": 3584}
# for each indexed layer in turn, which indexed layer (its rank among them) it takes K/V from:
# Kolibri1_1Config.__post_init__'s default kv_source_layers, which covers 10 indexed layers
DEFAULT_KV_SOURCES = (0, 0, 0, 3, 4, 5, 5, 5, 5, 0)


@dataclass(frozen=True)
class IndexedAttention(Attention):
    """Kolibri-1.1's indexed (sparse) attention: GQA over `budget` tokens of the cache, which
    an indexer picks by scoring key head 0 (head_dim values a token, in the K cache already)
    with `index_heads` query heads. Decode per query token, over a cache of T tokens:
    - attention reads K and V of min(T, budget) tokens;
    - once T > budget, scoring reads key head 0 of min(T, pool_size) pool candidates, and an
      indexer (pool_source) whose cache outgrew its pool also reads key head 0 of all T tokens
      to average them into T / compression block summaries.
    Every TP rank runs the indexer (the selection must agree on all of them): its reads and
    FLOPs are not divided by TP."""
    index_heads: int = 0
    budget: int = 0  # index_topk + index_num_sink_tokens + index_num_local_tokens
    pool_size: int = 0
    compression: int = 1
    pool_source: bool = False  # an indexer (index_layers): picks a new pool every token

    @property
    def kernels(self) -> int:
        # + token scores and their top-k; an indexer also summarises, scores and picks blocks
        return Attention.kernels + (4 if self.pool_source else 2)

    def index_rows(self, context: float) -> float:
        """Key-head-0 rows (head_dim values each) one query token reads to pick its tokens."""
        if context <= self.budget:
            return 0
        summaries = context if self.pool_source and context > self.pool_size else 0
        return min(context, self.pool_size) + summaries

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        kv = Attention.kv_bytes_per_token(self, kv_heads, dtype_bytes)
        return min(context, self.budget) * kv + self.index_rows(context) * self.head_dim * dtype_bytes

    def attention_flops_per_token(self, heads: float, context: float) -> float:
        attended = Attention.attention_flops_per_token(self, heads, min(context, self.budget))
        if context <= self.budget:
            return attended
        blocks = context / self.compression if self.pool_source and context > self.pool_size else 0
        # 2 FLOP per MAC per scoring head over the pool and the block summaries; 1 FLOP an
        # element to average the keys into summaries
        scores = 2 * self.index_heads * self.head_dim * (min(context, self.pool_size) + blocks)
        return attended + scores + (self.head_dim * context if blocks else 0)


def _layer_list(f: Fields, key: str, n: int, default: list[int]) -> list[int]:
    """A list of layer indices (0 to n - 1), or `default` where the config names none."""
    v = f.list_(key, int)
    if v is None:
        return default
    if not all(0 <= i < n for i in v):
        raise DecodescopeError(f"{f.source}: {key} names layers outside 0 to {n - 1}", f"fix {key}")
    return v


def layer_types(f: Fields, n: int) -> list[str]:
    """One of sliding_attention / indexed_attention per layer; Kolibri1_1Config's default: every
    5th layer indexed."""
    types = f.list_("layer_types", str)
    if types is None:
        return [INDEXED if (i + 1) % 5 == 0 else SLIDING for i in range(n)]
    unknown = sorted(set(types) - {SLIDING, INDEXED})
    if unknown:
        raise DecodescopeError(f"{f.source}: layer_types holds {unknown[0][:40]!r}, not a Kolibri-1.1 layer type",
                               f"use {SLIDING} or {INDEXED} for each layer")
    if len(types) != n:
        raise DecodescopeError(f"{f.source}: layer_types has {len(types)} entries, num_hidden_layers is {n}",
                               "fix layer_types: one entry per layer")
    return types


def index_layers(f: Fields, types: list[str]) -> set[int]:
    """The indexers: increasing indexed layers, the first indexed layer among them; by default
    the 1st, 3rd, 4th and 6th indexed layers."""
    indexed = [i for i, t in enumerate(types) if t == INDEXED]
    chosen = _layer_list(f, "index_layers", len(types), [indexed[j] for j in (0, 2, 3, 5) if j < len(indexed)])
    if chosen != sorted(set(chosen)) or not set(chosen) <= set(indexed) or (indexed and indexed[0] not in chosen):
        raise DecodescopeError(f"{f.source}: index_layers must be increasing indexed-attention layers, the first "
                               "indexed-attention layer among them", "fix index_layers")
    return set(chosen)


def kv_sources(f: Fields, types: list[str]) -> list[int]:
    """The layer whose K/V each layer attends to (itself, or an earlier indexed layer with its own)."""
    n, indexed = len(types), [i for i, t in enumerate(types) if t == INDEXED]
    sources = f.list_("kv_source_layers", int)
    if sources is None:
        if len(indexed) > len(DEFAULT_KV_SOURCES):
            raise DecodescopeError(f"{f.source}: {len(indexed)} indexed-attention layers and no kv_source_layers "
                                   f"(its default covers {len(DEFAULT_KV_SOURCES)})", "give kv_source_layers")
        sources = list(range(n))
        for i, j in zip(indexed, DEFAULT_KV_SOURCES):
            sources[i] = indexed[j]
    if len(sources) != n:
        raise DecodescopeError(f"{f.source}: kv_source_layers has {len(sources)} entries, num_hidden_layers is {n}",
                               "fix kv_source_layers: one entry per layer")
    for i, s in enumerate(sources):
        if not 0 <= s <= i or sources[s] != s or types[s] != types[i] or (types[i] == SLIDING and s != i):
            raise DecodescopeError(f"{f.source}: kv_source_layers[{i}] is {s}: a layer reads its own K/V, or an "
                                   "earlier indexed-attention layer's that keeps its own", "fix kv_source_layers")
    return sources


def _indexed(f: Fields, base: Attention, pool_source: bool) -> IndexedAttention:
    heads, kv = f.need("num_attention_heads"), base.num_key_value_heads
    index_heads = f.need("index_num_heads")
    if index_heads > max(1, heads // max(1, kv)):  # it scores with the query heads of key head 0
        raise DecodescopeError(f"{f.source}: index_num_heads {index_heads} is more than the {heads // max(1, kv)} "
                               "query heads that share key head 0", "fix index_num_heads (12 in Kolibri1_1Config)")
    topk = f.need("index_topk")
    if topk < 1:
        raise DecodescopeError(f"{f.source}: index_topk 0: indexed attention attends to the top-k keys its "
                               "indexer picks", "give index_topk (2048 in Kolibri1_1Config)")
    pool, blocks = f.need("index_pool_size"), f.need("index_compression")
    if pool % blocks:
        raise DecodescopeError(f"{f.source}: index_pool_size {pool} is not a multiple of index_compression {blocks}",
                               "fix index_pool_size or index_compression (16384 and 16 in Kolibri1_1Config)")
    budget = topk + f.need("index_num_sink_tokens") + f.need("index_num_local_tokens")
    return IndexedAttention(**asdict(base), index_heads=index_heads, budget=budget, pool_size=pool,
                            compression=blocks, pool_source=pool_source)


def _layout_notes(types: list[str], indexers: set[int], sources: list[int], f: Fields) -> tuple[str, ...]:
    indexed = [i for i, t in enumerate(types) if t == INDEXED]
    if not indexed:
        return ()
    shared = [i for i, s in enumerate(sources) if s != i]
    return (f"indexed attention on layers {indexed}: each token attends to {f.get('index_topk')} cached tokens "
            f"(+ {f.get('index_num_sink_tokens')} first, {f.get('index_num_local_tokens')} last) its weightless "
            f"indexer picks by scoring key head 0 of the K cache; the indexers {sorted(indexers)} also read key "
            f"head 0 of the whole cache each token to pick a pool of {f.get('index_pool_size')} (transformers "
            "keeps no summary cache), the others rescore that pool",
            f"layers {shared} read the K/V of an earlier layer (kv_source_layers): no k/v projections, no cache",
            "indexed layers were trained on NVFP4-rounded K/V: their cache is counted at the deployment's KV dtype")


def build_kolibri1_1(f: Fields):
    """Kolibri-1.1's layers (the module docstring): (layers, [], notes)."""
    f = Fields({**DEFAULTS, **f.data}, f.source)  # a key present as null stays null
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = layer_types(f, n)
    indexers, sources = index_layers(f, types), kv_sources(f, types)
    dense_at = set(_layer_list(f, "mlp_only_layers", n, [i for i in (0, 1) if i < n]))
    window = f.get("sliding_window") or 0
    if SLIDING in types and window < 1:
        raise DecodescopeError(f"{f.source}: sliding-attention layers need a positive sliding_window",
                               "give sliding_window (513 in Kolibri1_1Config)")
    dense = DenseMLP(h, f.need("mlp_only_intermediate_size")) if dense_at else None
    routed = moe(f, shared_expert_intermediate_size=f.get("shared_expert_intermediate_size", default=0),
                 router_bias=True) if len(dense_at) < n else None
    post = tuple(Tensor(name, (h,), "rep", linear=False) for name in ("post_self_attn_layernorm", "post_mlp_layernorm"))
    layers = []
    for i, t in enumerate(types):
        base = attention(f, window if t == SLIDING else None, qk_norm=True, kv_shared=sources[i] != i)
        mixer = base if t == SLIDING else _indexed(f, base, i in indexers)
        layers.append(Layer("sliding_attention" if t == SLIDING else "sparse_attention", mixer,
                            dense if i in dense_at else routed, post))
    return layers, [], _layout_notes(types, indexers, sources, f)
