"""MLA families with a DeepSeek-V3.2-style lightning indexer beyond build_deepseek's:
Tencent Hy v4 (hy_v4: MLA gated before o_proj, a sink per head, layers that reuse an earlier
layer's top-k instead of running their own indexer, hyper-connections) and rednote dots3
(dots3_note: indexed MLA layers between sliding-window MLA layers of another shape, a gate
per head)."""

from dataclasses import dataclass, replace

from decodescope.arch.blocks import MLA, Layer, MoE, PooledKV, Tensor
from decodescope.arch.build import decoder_mlp, nextn_mtp
from decodescope.arch.deepseek_v4 import hyper_connections
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError


@dataclass(frozen=True)
class GatedMLA(MLA):
    """MLA whose output is gated (a sigmoid) before o_proj: gate "elementwise", Hy v4's
    self_attn.gate_proj [heads x v_head_dim, hidden], or "headwise", dots3's g_proj [heads,
    hidden]; with a learned sink logit per head (Hy v4) and an RMSNorm over the rope slice of
    the shared key (dots3's k_rope_only_layernorm). index_topk without an index_head_dim: the
    layer attends to the top-k tokens an earlier layer's indexer picked (Hy v4's "shared"
    indexer layers), with no indexer weights and no index keys of its own to cache."""
    gate: str = "elementwise"
    sinks: bool = False
    k_rope_norm: bool = False
    kernels = 13  # MLA's 12 and the gate (its GEMM, the sigmoid product fused after attention)

    @property
    def shares_index(self) -> bool:
        return bool(self.index_topk) and not self.index_head_dim

    def tensors(self) -> list[Tensor]:
        n, h = self.num_attention_heads, self.hidden_size
        ts = [t for t in super().tensors() if not (self.shares_index and t.name.startswith("indexer."))]
        if self.gate == "elementwise":  # named apart from an MLP's gate_proj (HF: self_attn.gate_proj)
            ts.append(Tensor("attn_gate_proj", (n * self.v_head_dim, h), "col"))
        else:
            ts.append(Tensor("g_proj", (n, h), "col"))
        if self.sinks:
            ts.append(Tensor("sinks", (n,), "col", linear=False))
        if self.k_rope_norm:
            ts.append(Tensor("k_rope_only_layernorm", (self.qk_rope_head_dim,), "rep", linear=False))
        return ts


@dataclass(frozen=True)
class SlidingMLA(PooledKV):
    """dots3's sliding-window MLA: an MLA layer whose query sees only the last `window` tokens,
    so a request caches the latent (kv_lora_rank + rope, shared by all heads, replicated on
    every TP rank) of those alone, not of the whole context: a cache that says its own size."""
    mla: GatedMLA
    window: int
    num_key_value_heads = 1  # one latent per token, as MLA's

    @property
    def hidden_size(self) -> int:
        return self.mla.hidden_size

    @property
    def num_attention_heads(self) -> int:
        return self.mla.num_attention_heads

    @property
    def kernels(self) -> int:
        return self.mla.kernels

    @property
    def sliding_window(self) -> int:  # the context a decode query reads (decodescope.model.ops)
        return self.window

    def tensors(self) -> list[Tensor]:
        return self.mla.tensors()

    def kv_cache_bytes(self, context: int, dtype_bytes: float, tp: int) -> float:
        """Bytes of one request's cache over `context` tokens, on every GPU (the latent is not split by TP)."""
        return self.kv_read_bytes(context, 1, dtype_bytes)

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """The window's latents."""
        return min(context, self.window) * self.mla.kv_bytes_per_token(1, dtype_bytes)

    def attention_flops_per_token(self, heads: float, context: int) -> float:
        return self.mla.attention_flops_per_token(heads, min(context, self.window))


def _mla(f: Fields, topk: int, own_index: bool, **kw) -> GatedMLA:
    """A gated MLA of `f`'s shapes; with `own_index`, an indexer that picks `topk` tokens."""
    why = "the sparse-attention indexer"
    return GatedMLA(f.need("hidden_size"), f.need("num_attention_heads"), f.need("q_lora_rank", "MLA's low-rank query"),
                    f.need("kv_lora_rank", "MLA"), f.need("qk_nope_head_dim", "MLA"), f.need("qk_rope_head_dim", "MLA"),
                    f.need("v_head_dim", "MLA"), index_n_heads=f.need("index_n_heads", why) if own_index else 0,
                    index_head_dim=f.need("index_head_dim", why) if own_index else 0, index_topk=topk, **kw)


def router_biased_mlp(f: Fields, i: int):
    # sigmoid routing with a per-expert correction bias (e_score_correction_bias: in the
    # checkpoint, a buffer transformers does not count)
    mlp = decoder_mlp(f, i)
    return replace(mlp, router_bias=True) if isinstance(mlp, MoE) else mlp


# ---- Tencent Hy v4 ----------------------------------------------------------------------

def _hy_own_indexers(f: Fields, n: int) -> list[bool]:
    """Whether each layer runs its own indexer ("full") or reuses the top-k of the last one
    before it ("shared"): indexer_types, else HYV4Config's default (layer 0, then every 4th
    from layer 1)."""
    if f.get("indexer_types") is None:
        return [i == 0 or (i - 1) % 4 == 0 for i in range(n)]
    own = [w == "full" for w in per_layer_words(f, "indexer_types", n, ("full", "shared"))]
    if not own[0]:
        raise DecodescopeError(f"{f.source}: indexer_types[0] is \"shared\": no earlier layer's top-k to reuse",
                               "make layer 0's indexer \"full\"")
    return own


def build_hy_v4(f: Fields):
    """Hy v4 (modeling_hy_v4.py): every layer gated MLA with a sink per head and top-k sparse
    attention, its own indexer where indexer_types says "full"; dense MLPs then DeepSeek-style
    MoE per mlp_layer_types; hyper-connections around both sub-layers (pre / post weights, no
    comb) and a head that merges the hc_mult copies before the final norm; next-n MTP modules."""
    n, h, hc = f.need("num_hidden_layers"), f.need("hidden_size"), f.get("hc_mult", default=4)
    if f.get("mlp_layer_types") is None:  # HYV4Config's default: a dense first layer, then MoE
        f = Fields({**f.data, "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1)}, f.source)
    topk = f.need("index_topk", "the sparse-attention indexer")
    own = _hy_own_indexers(f, n)
    mix = hyper_connections(f, ("attn_hc.", "ffn_hc."), comb=False)
    # HYV4HyperHead: hc_fn [hc, hc x hidden], hc_base [hc], one scale, read once per token after
    # the last layer (an Arch holds nothing else between the layers and the final norm): counted there
    head = (Tensor("hc_head.hc_fn", (hc, hc * h), "rep", linear=False),
            Tensor("hc_head.hc_base", (hc,), "rep", linear=False),
            Tensor("hc_head.hc_scale", (1,), "rep", linear=False))
    layers = [Layer("mla", _mla(f, topk, o, sinks=True), router_biased_mlp(f, i), mix + (head if i == n - 1 else ()))
              for i, o in enumerate(own)]
    # the MTP layer runs its own indexer and has no hyper-connections
    mtp = nextn_mtp(f, Layer("mla", _mla(f, topk, True, sinks=True), router_biased_mlp(f, n)))
    notes = (f"sparse attention: each token attends to the top {topk} cached tokens; {sum(own)} of {n} layers "
             "run an indexer (and cache its keys), the others reuse the top-k of the last one before them",)
    return layers, mtp, notes


# ---- rednote dots3 ------------------------------------------------------------------------

# Dots3NoteTextConfig's sliding layers where the config names no swa_* field
DOTS3_SWA = {"num_attention_heads": 64, "q_lora_rank": 1024, "kv_lora_rank": 1024, "head_dim": 256,
             "qk_nope_head_dim": 192, "v_head_dim": 128}
DOTS3_KINDS = ("indexed_attention", "full_attention", "sliding_attention")


def _dots3_fields(f: Fields) -> Fields:
    """Dots3NoteTextConfig's aliases under the names read here: the released config's
    sliding_window_size for sliding_window (default 512), and the shared experts' width,
    shared_experts_intermediate_size (default 1536), as moe_shared_expert_intermediate_size;
    first_k_dense_replace 1 where no mlp_layer_types says which layers are dense."""
    d = dict(f.data)
    if d.get("sliding_window") is None:
        d["sliding_window"] = d.get("sliding_window_size", 512)
    if d.get("moe_shared_expert_intermediate_size") is None:
        d["moe_shared_expert_intermediate_size"] = d.get("shared_experts_intermediate_size", 1536)
    if d.get("mlp_layer_types") is None and d.get("first_k_dense_replace") is None:
        d["first_k_dense_replace"] = 1
    return Fields(d, f.source)


def _dots3_types(f: Fields, n: int) -> list[str]:
    """Each layer's attention (DOTS3_KINDS), as Dots3NoteTextConfig reads it: layer_types, else
    layers 0, 1 and every 4th from 1 attend in full and the others slide (all in full without
    use_sliding_window). use_dsa (true where no per_layer_config is given: the released
    config.json's "full_attention" layers are indexed) turns full layers indexed, false the
    reverse; transformers 5 writes "indexed_attention" with per_layer_config."""
    if f.get("layer_types") is None:
        slide = f.get("use_sliding_window", default=True)
        types = ["indexed_attention" if not slide or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n)]
    else:
        types = per_layer_words(f, "layer_types", n, DOTS3_KINDS)
    dsa = f.get("use_dsa", default=None if f.get("per_layer_config") is not None else True)
    if dsa is None:
        return types
    old, new = ("full_attention", "indexed_attention") if dsa else ("indexed_attention", "full_attention")
    return [new if t == old else t for t in types]


def _swa_fields(f: Fields) -> dict:
    """The sliding layers' MLA shapes of the released config.json (swa_*); their rope width is
    swa_qk_rope_head_dim, else swa_head_dim - swa_qk_nope_head_dim."""
    swa = {k: f.data.get(f"swa_{k}", v) for k, v in DOTS3_SWA.items()}
    if f.data.get("swa_qk_rope_head_dim") is not None:
        return {**swa, "qk_rope_head_dim": f.data["swa_qk_rope_head_dim"]}
    g = Fields({**f.data, **swa}, f"{f.source} (its swa_* fields)")
    rope = g.need("head_dim") - g.need("qk_nope_head_dim")
    if rope < 1:
        raise DecodescopeError(f"{f.source}: swa_head_dim {g.need('head_dim')} leaves no rope dims beside "
                               f"swa_qk_nope_head_dim {g.need('qk_nope_head_dim')}", "give swa_qk_rope_head_dim")
    return {**swa, "qk_rope_head_dim": rope}


def _dots3_layer_fields(f: Fields, types: list[str]) -> list[Fields]:
    """Each layer's fields: the top level's under transformers 5's per_layer_config (layer index
    -> the fields that differ), or, without it, under the swa_* fields in every sliding layer."""
    per = f.get("per_layer_config")
    if per is None:
        swa = Fields({**f.data, **_swa_fields(f)}, f"{f.source} (its swa_* fields)")
        return [swa if t == "sliding_attention" else f for t in types]
    if not isinstance(per, dict) or not all(isinstance(k, str) and k.isascii() and k.isdigit() and int(k) < len(types)
                                            and isinstance(v, dict) for k, v in per.items()):
        raise DecodescopeError(f"{f.source}: per_layer_config must map layer indices (0 to {len(types) - 1}) "
                               "to objects of fields", "fix per_layer_config")
    over = {int(k): (v, k) for k, v in per.items()}
    return [Fields({**f.data, **over[i][0]}, f"{f.source} (per_layer_config[{over[i][1]}])") if i in over else f
            for i in range(len(types))]


def _dots3_mlp(f: Fields, i: int):
    mlp = router_biased_mlp(f, i)
    if not isinstance(mlp, MoE):
        return mlp
    shared = f.need("moe_shared_expert_intermediate_size") * f.get("n_shared_experts", default=1)
    return replace(mlp, shared_expert_intermediate_size=shared)


def build_dots3_note(f: Fields):
    """dots3 (modeling_dots3_note.py, the text decoder): MLA with a per-head sigmoid gate and a
    norm of the key's rope slice in every layer; indexed layers (an indexer, top-k sparse
    attention) between sliding-window layers of their own shape (more latent, fewer heads);
    dense first layers, then DeepSeek-style MoE."""
    f = _dots3_fields(f)
    n = f.need("num_hidden_layers")
    types = _dots3_types(f, n)
    topk = f.need("index_topk", "the sparse-attention indexer") if "indexed_attention" in types else 0
    window = f.need("sliding_window", "the sliding layers") if "sliding_attention" in types else 0
    if "sliding_attention" in types and window < 1:
        raise DecodescopeError(f"{f.source}: sliding layers with a window of 0 tokens", "give sliding_window_size")
    layers = []
    for i, (t, g) in enumerate(zip(types, _dots3_layer_fields(f, types))):
        indexed = t == "indexed_attention"
        mla = _mla(g, topk if indexed else 0, indexed, gate="headwise", k_rope_norm=True)
        mixer = SlidingMLA(mla, window) if t == "sliding_attention" else mla
        layers.append(Layer("sliding_mla" if t == "sliding_attention" else "mla", mixer, _dots3_mlp(f, i)))
    notes = [f"sparse attention: the {types.count('indexed_attention')} indexed layers attend to the top {topk} "
             "cached tokens their indexer picks"] if topk else []
    notes += [f"the {types.count('sliding_attention')} sliding layers cache and attend to the last {window} tokens"
              ] if window else []
    notes.append("its next-n (MTP) layer, which transformers skips on load (model.layers.46 in the release), "
                 "is not counted: the config gives neither its count nor its shape")
    return layers, [], tuple(notes)
