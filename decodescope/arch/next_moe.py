"""MLA families with DSA indexers beyond build_deepseek's and Hy v4's: Mistral Large 4
(mistral_large4_text: a full-rank query, a learned softmax scale per head, NoPE layers and
layers that attend to an earlier layer's latent KV cache) and GLM-5.3-Flash (glm5_next_text:
Kimi Delta Attention layers between NoPE MLA layers whose indexer scores pooled keys, with
DeepSeek-V4's hyper-connections). Both read GlmMoeDsaConfig's indexer_types ("full" runs an
indexer, "shared" reuses the top-k of the last one before it)."""

from dataclasses import dataclass

from decodescope.arch.blocks import MLA, Layer, Tensor
from decodescope.arch.build import decoder_mlp, nextn_mtp
from decodescope.arch.deepseek_v4 import hyper_connections
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_flags, per_layer_words
from decodescope.arch.mla_families import router_biased_mlp
from decodescope.arch.mixers import KimiDeltaAttention
from decodescope.errors import DecodescopeError


def own_indexers(f: Fields, n: int) -> list[bool]:
    """Whether each layer runs its own indexer: indexer_types, else GlmMoeDsaConfig's default
    from index_topk_pattern ("F" / "S" per layer) or index_topk_freq / index_skip_topk_offset
    (a layer is full where max(i - offset + 1, 0) is a multiple of freq; 1 and 2 by default:
    every layer full)."""
    pattern = f.get("index_topk_pattern")
    if f.get("indexer_types") is not None:
        own = [w == "full" for w in per_layer_words(f, "indexer_types", n, ("full", "shared"))]
    elif isinstance(pattern, str) and len(pattern) == n and set(pattern) <= {"F", "S"}:
        own = [c == "F" for c in pattern]
    elif pattern is not None:
        raise DecodescopeError(f"{f.source}: index_topk_pattern must hold one F or S per layer ({n})",
                               "fix index_topk_pattern, or give indexer_types")
    else:
        freq, offset = f.get("index_topk_freq", default=1), f.get("index_skip_topk_offset", default=2)
        own = [max(i - offset + 1, 0) % freq == 0 for i in range(n)]
    if not own[0]:
        raise DecodescopeError(f"{f.source}: layer 0's indexer is \"shared\": no earlier layer's top-k to reuse",
                               "make layer 0's indexer \"full\"")
    return own


# ---- Mistral Large 4 ------------------------------------------------------------------------

@dataclass(frozen=True)
class ScaledMLA(MLA):
    """Mistral Large 4's attention (modeling_mistral_large4.py): MLA with a full-rank q_proj and
    a learned query scale per head (softmax_scaling: scale x log(position + 1) + bias, two
    [heads] vectors); its indexer reads the hidden state through a LayerNorm (q_input_norm,
    weight and bias) and scales its heads alike. With kv_shared the layer attends to an earlier
    layer's latent: no kv_a_proj_with_mqa / kv_a_layernorm and no latent cache of its own (the
    index keys of its own indexer still). index_topk without index_head_dim: it reuses the top-k
    of the last indexer before it."""
    kv_shared: bool = False

    def tensors(self) -> list[Tensor]:
        n, h = self.num_attention_heads, self.hidden_size
        drop = ("kv_a_proj_with_mqa", "kv_a_layernorm") if self.kv_shared else ()
        ts = [t for t in super().tensors() if t.name not in drop
              and not (not self.index_head_dim and t.name.startswith("indexer."))]
        ts += [Tensor("softmax_scaling.scale", (n,), "col", linear=False),
               Tensor("softmax_scaling.bias", (n,), "col", linear=False)]
        if self.index_head_dim:  # LayerNorm weight + bias; scale + bias per index head
            ts += [Tensor("indexer.q_input_norm", (2 * h,), "rep", linear=False),
                   Tensor("indexer.softmax_scaling", (2 * self.index_n_heads,), "rep", linear=False)]
        return ts

    def kv_bytes_per_token(self, kv_heads: int, dtype_bytes: float) -> float:
        latent = 0 if self.kv_shared else (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
        return latent + self.index_bytes_per_token


def _kv_sources(f: Fields, n: int) -> list[int]:
    """kv_source_layers (each layer's latent cache: its own index, or an earlier layer that owns
    its cache), MistralLarge4TextConfig's check; no sharing where absent."""
    src = f.list_("kv_source_layers", int)
    if src is None:
        return list(range(n))
    if len(src) != n or not all(0 <= s <= i and src[s] == s for i, s in enumerate(src)):
        raise DecodescopeError(f"{f.source}: kv_source_layers must name, per layer ({n}), itself or an earlier "
                               "layer that owns its cache", "fix kv_source_layers")
    return src


def _rope_layers(f: Fields, n: int) -> list[int]:
    """no_rope_layers (1: RoPE, 0: NoPE; a longer list is cut at n), else every 4th layer NoPE."""
    flags = f.list_("no_rope_layers", int)
    if flags is None:
        return [int((i + 1) % 4 != 0) for i in range(n)]
    return per_layer_flags(Fields({"no_rope_layers": flags[:n]}, f.source), "no_rope_layers", n)


def _scaled_mla(f: Fields, rope: int, own_index: bool, kv_shared: bool) -> ScaledMLA:
    why, nope, r = "the sparse-attention indexer", f.need("qk_nope_head_dim", "MLA"), f.need("qk_rope_head_dim", "MLA")
    # a NoPE layer folds the rope slice into the no-position part: q and kv_b keep their
    # width, the cached latent loses the rope dims
    return ScaledMLA(f.need("hidden_size"), f.need("num_attention_heads"), None, f.need("kv_lora_rank", "MLA"),
                     nope if rope else nope + r, r if rope else 0, f.need("v_head_dim", "MLA"),
                     index_n_heads=f.need("index_n_heads", why) if own_index else 0,
                     index_head_dim=f.need("index_head_dim", why) if own_index else 0,
                     index_topk=f.need("index_topk", why), kv_shared=kv_shared)


def build_mistral_large4(f: Fields):
    """Mistral Large 4 (MistralLarge4TextModel): every layer DSA attention (ScaledMLA), RoPE or
    NoPE per no_rope_layers, its latent its own or an earlier layer's per kv_source_layers;
    dense first layers then DeepSeek-style MoE with softmax routing (no correction bias). The
    rotary embedding's learned alpha [qk_rope_head_dim / 2] is counted on layer 0."""
    n = f.need("num_hidden_layers")
    if f.get("mlp_layer_types") is None and f.get("first_k_dense_replace") is None:
        f = Fields({**f.data, "first_k_dense_replace": 1}, f.source)  # the config class's default
    own, rope, src = own_indexers(f, n), _rope_layers(f, n), _kv_sources(f, n)
    alpha = (Tensor("rotary_emb.alpha", (f.need("qk_rope_head_dim", "MLA") // 2,), "rep", linear=False),)
    layers = [Layer("mla", _scaled_mla(f, rope[i], own[i], src[i] != i), decoder_mlp(f, i), alpha if i == 0 else ())
              for i in range(n)]
    shared = sum(s != i for i, s in enumerate(src))
    notes = [f"sparse attention: each token attends to the top {f.need('index_topk')} cached tokens; {sum(own)} of "
             f"{n} layers run an indexer (and cache its keys)"]
    notes += [f"{shared} layers attend to an earlier layer's latent KV and cache none of their own"] if shared else []
    notes.append("its multi-token-prediction head (mtp_dspark.*), which transformers skips on load, is not counted")
    return layers, [], tuple(notes)


# ---- GLM-5.3-Flash ----------------------------------------------------------------------------

@dataclass(frozen=True)
class PooledIndexMLA(MLA):
    """GLM-5.3-Flash's DSA attention (Glm5NextTextAttention, NoPE): its indexer scores pools of
    index_kpool keys, each a learned weighted mean (index_kpool_compress_ape [kpool, index dim],
    index_kpool_compress_gate [index dim, hidden]), and attends to the tokens of the best
    index_topk / kpool pools (plus the last, incomplete pool's at most kpool - 1 tokens, not
    counted). Its cache keeps per token the index key, its pooling score and a valid flag
    (index_head_dim + index_head_dim + 1 values, bf16 as the modeling code's indexer cache)."""
    index_kpool: int = 16

    def tensors(self) -> list[Tensor]:
        ts = [t for t in super().tensors() if self.index_head_dim or not t.name.startswith("indexer.")]
        if self.index_head_dim:
            d = self.index_head_dim
            ts += [Tensor("indexer.index_kpool_compress_ape", (self.index_kpool, d), "rep", linear=False),
                   Tensor("indexer.index_kpool_compress_gate", (d, self.hidden_size), "rep")]
        return ts

    @property
    def index_bytes_per_token(self) -> float:
        return (2 * self.index_head_dim + 1) * 2 if self.index_head_dim else 0


def _kda(f: Fields) -> KimiDeltaAttention:
    """The KDA block: linear_attn_config (head_dim, num_heads, short_conv_kernel_size: the
    release's flat config, which Glm5NextTextConfig reads over the linear_* fields transformers
    5 writes); low-rank gates (f_a / f_b, g_a / g_b), one conv over q, k and v."""
    lin = f.get("linear_attn_config", default={})
    if not isinstance(lin, dict):
        raise DecodescopeError(f"{f.source}: linear_attn_config is not a JSON object", "fix linear_attn_config")
    names = (("linear_head_dim", "head_dim"), ("linear_num_heads", "num_heads"),
             ("linear_conv_kernel_dim", "short_conv_kernel_size"))
    g, why = Fields({**f.data, **{k: lin[s] for k, s in names if s in lin}}, f.source), "Kimi Delta Attention"
    return KimiDeltaAttention(f.need("hidden_size"), g.need("linear_num_heads", why), g.need("linear_head_dim", why),
                              g.need("linear_conv_kernel_dim", why))


def _glm5_mla(f: Fields, own_index: bool) -> PooledIndexMLA:
    why, nope, rope = "the sparse-attention indexer", f.need("qk_nope_head_dim", "MLA"), f.data.get("qk_rope_head_dim")
    if rope not in (None, 0):  # Glm5NextTextConfig's check: its DSA layers are NoPE
        raise DecodescopeError(f"{f.source}: qk_rope_head_dim is {rope!r}: GLM-5.3-Flash's attention has no RoPE",
                               "set qk_rope_head_dim to 0")
    return PooledIndexMLA(f.need("hidden_size"), f.need("num_attention_heads"), f.need("q_lora_rank", "MLA's low-rank query"),
                          f.need("kv_lora_rank", "MLA"), nope, 0, f.need("v_head_dim", "MLA"),
                          index_n_heads=f.need("index_n_heads", why) if own_index else 0,
                          index_head_dim=f.need("index_head_dim", why) if own_index else 0,
                          index_topk=f.need("index_topk", why), index_kpool=f.get("index_kpool", default=16))


def build_glm5_next(f: Fields):
    """GLM-5.3-Flash (Glm5NextTextModel): layer_types "linear_attention" (Kimi Delta Attention)
    or "indexed_attention" ("full_attention" read as it; by default every 4th layer from 3),
    mlp_layer_types (3 dense layers, then DeepSeek-style MoE with a correction bias, by
    default); DeepSeek-V4's hyper-connections (with the comb) around both sub-layers, the
    streams merged by a weightless mean before the final norm; next-n layers where
    num_nextn_predict_layers says (the release's model.layers.45, which transformers skips)."""
    n = f.need("num_hidden_layers")
    if f.get("mlp_layer_types") is None:
        f = Fields({**f.data, "mlp_layer_types": ["dense"] * min(3, n) + ["sparse"] * max(0, n - 3)}, f.source)
    if f.get("layer_types") is None:
        types = ["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
    else:
        types = per_layer_words(f, "layer_types", n, ("linear_attention", "indexed_attention", "full_attention"))
    own, kda = own_indexers(f, n), _kda(f) if "linear_attention" in types else None
    hc = hyper_connections(f, ("attn_hc.", "ffn_hc."))
    layers = [Layer("linear_attention", kda, router_biased_mlp(f, i), hc) if t == "linear_attention"
              else Layer("mla", _glm5_mla(f, own[i]), router_biased_mlp(f, i), hc) for i, t in enumerate(types)]
    attn, pool = n - types.count("linear_attention"), f.get("index_kpool", default=16)
    mtp = nextn_mtp(f, Layer("mla", _glm5_mla(f, True), router_biased_mlp(f, n))) if attn else []
    notes = (f"sparse attention in {attn} of {n} layers: each token attends to the tokens of the top "
             f"{f.need('index_topk') // pool} pools of {pool} its indexer picks; the others keep a KDA state",
             ) if attn else ()
    return layers, mtp, notes
