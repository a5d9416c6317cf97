"""The GPT-style decoders: LayerNorms with biases, biased projections, parallel attention +
MLP blocks (GPT-2, StarCoder, OPT, GPT-J, CodeGen, BLOOM, MPT, GPT-NeoX / Pythia, Falcon, Phi-1 / 1.5 / 2, StableLM,
OLMo v1, nanochat, Nemotron-4 / Minitron, Jais-2). Each builder is `(Fields) -> (layers, mtp, notes)` and is listed in
decodescope.arch.registry.FAMILIES through CLASSIC.

Arch holds the final norm's weight and an LM head without bias; where a family's final norm
has a bias (a LayerNorm) or its head has one (Phi), those vectors ride as extras of the last
layer: read once per token like the head, held where the last layer is."""

from dataclasses import asdict, dataclass, replace

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Tensor
from decodescope.arch.build import attention
from decodescope.arch.fields import Fields
from decodescope.errors import DecodescopeError

# the GPT-2 era names these configs may still carry (Falcon's first configs: n_head,
# n_head_kv, n_layer, n_embed; Falcon 40B-era ones num_kv_heads), read as the Llama-style
# names where those are absent
ALIASES = {"hidden_size": ("n_embd", "n_embed", "d_model"), "num_attention_heads": ("n_head", "n_heads"),
           "num_hidden_layers": ("n_layer", "n_layers"), "num_key_value_heads": ("num_kv_heads", "n_head_kv")}
# Falcon's first hub configs: RefinedWeb is the 40B's layout (new_decoder_architecture),
# RefinedWebModel the 7B's (multi-query); NeMo's Falcon converter reads them the same way
FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")


def classic_fields(f: Fields) -> Fields:
    """The config of a family of this module under the names its builder reads."""
    data = dict(f.data)
    for ours, theirs in ALIASES.items():
        if data.get(ours) is None:
            data[ours] = next((data[k] for k in theirs if data.get(k) is not None), None)
    if data.get("model_type") == "opt":  # OPTDecoder keeps a final LayerNorm only in this case
        data["_remove_final_layer_norm"] = not (data.get("do_layer_norm_before", True)
                                                and not data.get("_remove_final_layer_norm", False))
    if data.get("model_type") in FALCON:
        if data.get("new_decoder_architecture") is None:
            data["new_decoder_architecture"] = data["model_type"] == "RefinedWeb"
        if data.get("tie_word_embeddings") is None:  # FalconConfig ties the head to the embedding by default
            data["tie_word_embeddings"] = True
    return Fields(data, f.source)


def vector(name: str, n: int, shard: str = "rep") -> Tensor:
    """A norm weight or a bias: n values, kept 16-bit."""
    return Tensor(name, (n,), shard, linear=False)


def biases(h: int, *norms: str) -> tuple[Tensor, ...]:
    return tuple(vector(f"{name}.bias", h) for name in norms)


def split_evenly(f: Fields, total: int, n: int, what: str, key: str) -> int:
    """total / n (n: the config's `key`), which must divide it into parts of at least one: the
    model file reshapes by it."""
    if total < n or total % n:
        raise DecodescopeError(f"{f.source}: {what} {total} is not a multiple of {key} {n}",
                               f"fix {what} or {key}: the model splits it evenly")
    return total // n


def even_head_dim(f: Fields) -> int:
    """hidden_size / heads, which these families' fused projections assume (their configs check it)."""
    return split_evenly(f, f.need("hidden_size"), f.need("num_attention_heads"), "hidden_size", "num_attention_heads")


def with_tail(layers: list[Layer], tail: tuple[Tensor, ...]) -> list[Layer]:
    """`layers`, the last also holding the model's `tail` vectors (a final LayerNorm's bias)."""
    return layers[:-1] + [replace(layers[-1], extra=layers[-1].extra + tail)]


def _stack(f: Fields, layer: Layer, tail: tuple[Tensor, ...]) -> list[Layer]:
    """num_hidden_layers copies of `layer`, the last also holding the model's `tail` vectors."""
    return with_tail([layer] * f.need("num_hidden_layers"), tail)


def build_gpt_neox(f: Fields):
    """GPT-NeoX-20B / Pythia: fused biased query_key_value and dense (attention_bias), a plain
    GELU MLP with biases, two LayerNorms with biases per layer whether or not the block runs
    attention and MLP in parallel (use_parallel_residual), untied embed_out."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    bias = bool(f.get("attention_bias", default=True))
    attn = attention(f, attention_bias=bias, o_bias=bias, num_key_value_heads=h // d, head_dim=d)
    mlp = DenseMLP(h, f.need("intermediate_size"), gated=False, bias=True)
    layer = Layer("attention", attn, mlp, biases(h, "input_layernorm", "post_attention_layernorm"))
    return _stack(f, layer, biases(h, "final_layer_norm")), [], ()


def _falcon_kv_heads(f: Fields, heads: int) -> int:
    # FalconAttention: the new (40B) layout reads num_kv_heads (MHA when absent); the old one
    # is multi-query (one K/V head, the 7B) unless multi_query is false (then MHA)
    if f.get("new_decoder_architecture"):
        return f.get("num_key_value_heads", default=heads)
    return 1 if f.get("multi_query", default=True) else heads


def build_falcon(f: Fields):
    """Falcon 7B / 40B / 180B / Falcon2-11B: fused query_key_value ((heads + 2 x kv) x head_dim
    rows), attention and a plain GELU MLP (ffn_hidden_size, 4 x hidden by default) in parallel
    off one LayerNorm, or off two (ln_attn, ln_mlp) where num_ln_in_parallel_attn is 2 (the new
    layout's default), or in sequence with two norms (parallel_attn false); every Linear biased
    with bias; a tied head by default."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    bias = bool(f.get("bias", default=False))
    attn = attention(f, attention_bias=bias, o_bias=bias, num_key_value_heads=_falcon_kv_heads(f, h // d),
                     head_dim=d)
    n_ln = f.get("num_ln_in_parallel_attn", default=2 if f.get("new_decoder_architecture") else 1)
    two_norms = not f.get("parallel_attn", default=True) or n_ln == 2
    mlp = DenseMLP(h, f.get("ffn_hidden_size", default=4 * h), gated=False, bias=bias, norm=two_norms)
    norms = ("input_layernorm", "post_attention_layernorm") if two_norms else ("input_layernorm",)
    layer = Layer("attention", attn, mlp, biases(h, *norms))
    return _stack(f, layer, biases(h, "ln_f")), [], ()


def build_phi(f: Fields):
    """Phi-1 / 1.5 / 2: attention (q, k, v, dense, all biased) and a plain GELU MLP (fc1, fc2
    with biases) in parallel off one LayerNorm; with qk_layernorm a LayerNorm (weight and bias)
    over each head of q and of k; a final LayerNorm and an LM head, both with biases."""
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    attn = attention(f, attention_bias=True, o_bias=True)
    # PhiAttention sizes its q/k LayerNorms hidden_size // heads, whatever head_dim says
    qk = tuple(vector(norm + part, h // heads) for norm in ("q_layernorm", "k_layernorm")
               for part in ("", ".bias")) if f.get("qk_layernorm") else ()
    mlp = DenseMLP(h, f.need("intermediate_size"), gated=False, bias=True, norm=False)
    layer = Layer("attention", attn, mlp, biases(h, "input_layernorm") + qk)
    tail = biases(h, "final_layernorm") + (vector("lm_head.bias", f.need("vocab_size"), "vocab"),)
    return _stack(f, layer, tail), [], ()


def build_stablelm(f: Fields):
    """StableLM (3B-4E1T, StableLM 2): LayerNorms with biases; biased q, k, v (use_qkv_bias), an
    unbiased o_proj; with qk_layernorm a bias-free LayerNorm per head of q and of k (heads x
    head_dim values each); a SwiGLU MLP, in parallel off the input norm with
    use_parallel_residual (then no post-attention norm)."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    attn = attention(f, attention_bias=bool(f.get("use_qkv_bias", default=False)), o_bias=False, head_dim=d,
                     qk_norm=bool(f.get("qk_layernorm", default=False)), qk_norm_full=True)
    parallel = bool(f.get("use_parallel_residual", default=False))
    mlp = DenseMLP(h, f.need("intermediate_size"), norm=not parallel)
    norms = ("input_layernorm",) if parallel else ("input_layernorm", "post_attention_layernorm")
    layer = Layer("attention", attn, mlp, biases(h, *norms))
    return _stack(f, layer, biases(h, "norm")), [], ()


@dataclass(frozen=True)
class NormlessAttention(Attention):
    """Attention whose input norm holds no weights (OLMo v1's non-parametric LayerNorm)."""

    def tensors(self) -> list[Tensor]:
        return [t for t in super().tensors() if t.name != "input_layernorm"]


def build_olmo(f: Fields):
    """OLMo v1 (transformers' olmo, the -hf checkpoints) and nanochat: norms without weight or
    bias. OLMo: q, k, v, o biased with attention_bias, a SwiGLU MLP; clip_qkv clamps activations,
    no shape. nanochat (karpathy/nanochat): no biases, an ungated squared-ReLU MLP (fc1, fc2),
    q and k normalised per head by the same weightless RMSNorm."""
    attn = NormlessAttention(**asdict(attention(f, o_bias=bool(f.get("attention_bias", default=False)))))
    gated = f.str_("model_type") != "nanochat"
    mlp = DenseMLP(f.need("hidden_size"), f.need("intermediate_size"), gated=gated, norm=False)
    return [Layer("attention", attn, mlp)] * f.need("num_hidden_layers"), [], ()


def position_table(f: Fields, rows: int) -> tuple[Tensor, ...]:
    """A learned position table of `rows` x hidden: gathered a row per token (Arch.input_tables)."""
    return (Tensor("position_embeddings", (rows, f.need("hidden_size")), "vocab", linear=False),)


def build_gpt2(f: Fields):
    """GPT-2 (gpt2) and StarCoder / SantaCoder (gpt_bigcode): learned positions (n_positions
    rows), biased LayerNorms before attention and MLP, a fused biased c_attn (multi-query in
    gpt_bigcode unless multi_query is false: one K/V head) and c_proj, a plain GELU MLP of
    n_inner (4 x hidden by default) with biases; a tied head."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    mqa = f.str_("model_type") == "gpt_bigcode" and f.get("multi_query", default=True)
    attn = attention(f, attention_bias=True, o_bias=True, num_key_value_heads=1 if mqa else h // d, head_dim=d)
    mlp = DenseMLP(h, f.get("n_inner") or 4 * h, gated=False, bias=True)
    layer = Layer("attention", attn, mlp, biases(h, "input_layernorm", "post_attention_layernorm"))
    return _stack(f, layer, biases(h, "ln_f")), [], (), position_table(f, f.need("n_positions", "learned positions"))


def build_opt(f: Fields):
    """OPT (facebook/opt-*): learned positions (max_position_embeddings + 2 rows: OPT offsets
    position ids by 2), biased q, k, v, out_proj, LayerNorms with biases, a plain ReLU MLP
    (ffn_dim) with biases, a tied head. The final LayerNorm is absent where the config says
    _remove_final_layer_norm or do_layer_norm_before is false (opt-350m, whose 512-wide
    embeddings are refused below)."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    if f.get("word_embed_proj_dim", default=h) != h:
        raise DecodescopeError(f"{f.source}: word_embed_proj_dim {f.get('word_embed_proj_dim')} differs from "
                               f"hidden_size {h} (opt-350m's projected embeddings)",
                               "decodescope reads OPT models whose embeddings are hidden_size wide")
    attn = attention(f, attention_bias=True, o_bias=True, num_key_value_heads=h // d, head_dim=d)
    mlp = DenseMLP(h, f.need("ffn_dim", "the MLP"), gated=False, bias=True)
    layer = Layer("attention", attn, mlp, biases(h, "input_layernorm", "post_attention_layernorm"))
    tail = () if f.get("_remove_final_layer_norm", default=False) else biases(h, "final_layer_norm")
    return _stack(f, layer, tail), [], (), position_table(f, f.need("max_position_embeddings") + 2)


def build_gptj(f: Fields):
    """GPT-J (gptj) and CodeGen (codegen, q / k / v fused, the same sizes): attention and MLP in
    parallel off one biased LayerNorm (ln_1), no attention biases, a plain GELU MLP of n_inner
    (4 x hidden by default) with biases; an untied LM head with a bias."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    attn = attention(f, attention_bias=False, o_bias=False, num_key_value_heads=h // d, head_dim=d)
    mlp = DenseMLP(h, f.get("n_inner") or 4 * h, gated=False, bias=True, norm=False)
    tail = biases(h, "ln_f") + (vector("lm_head.bias", f.need("vocab_size"), "vocab"),)
    return _stack(f, Layer("attention", attn, mlp, biases(h, "input_layernorm")), tail), [], ()


def build_bloom(f: Fields):
    """BLOOM (bloom): a biased LayerNorm on the embedding (word_embeddings_layernorm, read with
    the first layer), biased LayerNorms before attention and MLP, a fused biased
    query_key_value and dense, a plain GELU MLP of 4 x hidden with biases; ALiBi, no position
    weights; a tied head."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    attn = attention(f, attention_bias=True, o_bias=True, num_key_value_heads=h // d, head_dim=d)
    layer = Layer("attention", attn, DenseMLP(h, 4 * h, gated=False, bias=True),
                  biases(h, "input_layernorm", "post_attention_layernorm"))
    layers = _stack(f, layer, biases(h, "ln_f"))
    embedding_norm = (vector("word_embeddings_layernorm.weight", h),) + biases(h, "word_embeddings_layernorm")
    return [replace(layers[0], extra=layers[0].extra + embedding_norm)] + layers[1:], [], ()


def build_mpt(f: Fields):
    """MPT (mpt): LayerNorms without biases, a fused Wqkv and out_proj, an ungated GELU MLP of
    expansion_ratio x hidden, no biases (no_bias, true in every released MPT; transformers'
    MptModel builds none whatever it says); ALiBi, no position weights; a tied head."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    attn = attention(f, num_key_value_heads=h // d, head_dim=d)
    mlp = DenseMLP(h, f.get("expansion_ratio", default=4) * h, gated=False)
    return [Layer("attention", attn, mlp)] * f.need("num_hidden_layers"), [], ()


def build_relu2(f: Fields):
    """Nemotron-4 / Minitron / Mistral-NeMo-Minitron (nemotron) and Jais-2 (jais2): LayerNorms
    with biases (Nemotron's LayerNorm1P scales by 1 + weight: the same tensors) before
    attention, before the MLP and at the end; q, k, v, o biased with attention_bias; an ungated
    squared-ReLU MLP (up, down) biased with mlp_bias. Both biases default to true in Jais2Config,
    to false in NemotronConfig; head_dim may differ from hidden / heads."""
    h, biased = f.need("hidden_size"), f.str_("model_type") == "jais2"
    bias = bool(f.get("attention_bias", default=biased))
    mlp = DenseMLP(h, f.need("intermediate_size"), gated=False, bias=bool(f.get("mlp_bias", default=biased)))
    layer = Layer("attention", attention(f, attention_bias=bias, o_bias=bias), mlp,
                  biases(h, "input_layernorm", "post_attention_layernorm"))
    return _stack(f, layer, biases(h, "norm")), [], ()


CLASSIC = {"gpt_neox": build_gpt_neox, **dict.fromkeys(FALCON, build_falcon), "phi": build_phi,
           "stablelm": build_stablelm, **dict.fromkeys(("olmo", "nanochat"), build_olmo),
           **dict.fromkeys(("nemotron", "jais2"), build_relu2), **dict.fromkeys(("gpt2", "gpt_bigcode"), build_gpt2),
           "opt": build_opt, **dict.fromkeys(("gptj", "codegen"), build_gptj), "bloom": build_bloom,
           "mpt": build_mpt}
