"""Older decoders a config may still name: EleutherAI GPT-Neo (alternating global and local
attention over a learned position table), Adept Persimmon (per-head q/k LayerNorms, a squared-ReLU
MLP), JetMoE (routed attention heads and routed MLP experts), DiffLlama (Llama's tensors with
differential attention's lambda vectors), SmallDoge's Doge (Llama's with a dynamic mask) and
Microsoft BitNet b1.58 (Llama's with two sub-layer norms). Each builder is
`(Fields) -> (layers, mtp, notes[, input tables])` and is listed in decodescope.arch.registry.FAMILIES.

As in decodescope.arch.classic, the biases of a final LayerNorm ride as extras of the last layer:
read once per token like the head."""

from dataclasses import dataclass, replace

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Tensor, linear_tensors, norm_tensor
from decodescope.arch.build import attention, build_decoder, moe
from decodescope.arch.classic import biases, even_head_dim, position_table, vector, with_tail
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# GPTNeoConfig's default attention_types: global and local alternating, 12 pairs (24 layers)
GPT_NEO_TYPES = [[["global", "local"], 12]]


def _gpt_neo_layers(f: Fields, n: int) -> list[str]:
    """The attention kind per layer, global or local: attention_layers where the config writes it
    (the hub's files and transformers' to_dict do), else attention_types' [[words, repeats], ...] expanded as
    GPTNeoConfig.expand_attention_types_params does."""
    if f.get("attention_layers") is not None:
        return per_layer_words(f, "attention_layers", n, ("global", "local"))
    spec = f.get("attention_types", default=GPT_NEO_TYPES)
    ok = isinstance(spec, list) and all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and len(item[0]) <= n
        and isinstance(item[1], int) and not isinstance(item[1], bool) and 0 <= item[1] <= n for item in spec)
    words = [w for kinds, times in spec for _ in range(times) for w in kinds] if ok else []
    return per_layer_words(Fields({"attention_layers": words}, f.source), "attention_layers", n, ("global", "local"))


def build_gpt_neo(f: Fields):
    """GPT-Neo 125M-2.7B (gpt_neo): learned positions (max_position_embeddings rows), biased
    LayerNorms ln_1 / ln_2 / ln_f, q / k / v without bias and out_proj with one, a plain GELU MLP
    (c_fc, c_proj, intermediate_size or 4 x hidden) with biases, MHA; "local" layers attend to the
    last window_size tokens (GPTNeoSelfAttention's mask), "global" ones to all; a tied head."""
    f = rename(f, {"num_hidden_layers": "num_layers", "num_attention_heads": "num_heads"})
    h, d, n = f.need("hidden_size"), even_head_dim(f), f.need("num_hidden_layers")
    window = f.get("window_size", default=256)
    mlp = DenseMLP(h, f.get("intermediate_size") or 4 * h, gated=False, bias=True)
    norms = biases(h, "input_layernorm", "post_attention_layernorm")
    layers = []
    for kind in _gpt_neo_layers(f, n):
        local = kind == "local"
        attn = attention(f, window if local else None, attention_bias=False, o_bias=True,
                         num_key_value_heads=h // d, head_dim=d)
        layers.append(Layer("sliding_attention" if local else "attention", attn, mlp, norms))
    rows = f.need("max_position_embeddings", "learned positions")
    return with_tail(layers, biases(h, "ln_f")), [], (), position_table(f, rows)


def build_persimmon(f: Fields):
    """Persimmon-8B (persimmon): a fused query_key_value and dense, both biased, MHA; with
    qk_layernorm (PersimmonConfig's default) a LayerNorm with bias over each head of q and of k
    (head_dim values each); biased LayerNorms before attention, before the MLP and at the end; an
    ungated squared-ReLU MLP (dense_h_to_4h, dense_4h_to_h) with biases; an untied head."""
    h, d = f.need("hidden_size"), even_head_dim(f)
    qk = bool(f.get("qk_layernorm", default=True))
    attn = attention(f, attention_bias=True, o_bias=True, num_key_value_heads=h // d, head_dim=d, qk_norm=qk)
    qk_biases = (vector("q_norm.bias", d), vector("k_norm.bias", d)) if qk else ()
    mlp = DenseMLP(h, f.need("intermediate_size"), gated=False, bias=True)
    layer = Layer("attention", attn, mlp, biases(h, "input_layernorm", "post_attention_layernorm") + qk_biases)
    return with_tail([layer] * f.need("num_hidden_layers"), biases(h, "final_layernorm")), [], ()


@dataclass(frozen=True)
class MixtureOfAttention(Attention):
    """JetMoE's attention (JetMoeAttention / JetMoeMoA): a router picks top_k of num_experts
    experts per token, each a q_proj making num_key_value_heads heads and an o_proj back; k and v
    come from one shared kv_proj (2 x kv heads x head_dim rows), so the cache is K + V of the
    num_key_value_heads heads per token, and the query heads (num_attention_heads = top_k x kv heads)
    are the chosen experts' heads. The experts share the MLP's num_experts_per_tok, so the layer's
    MoE stands for both when decodescope counts the experts a pass reads."""
    num_experts: int = 1

    def tensors(self) -> list[Tensor]:
        h, e, kv = self.hidden_size, self.num_experts, self.num_key_value_heads
        width = kv * self.head_dim  # one expert's query (and output) width
        return [norm_tensor("input_layernorm", h),
                Tensor("attention_experts.router", (e, h), "rep", linear=False),
                *linear_tensors("attention_experts.q_proj", width, h, "col", experts=e),
                *linear_tensors("attention_experts.o_proj", h, width, "row", experts=e),
                norm_tensor("attention_experts.bias", h),  # added to the experts' summed output
                *linear_tensors("k_proj", width, h, "kv", kv_heads=kv),
                *linear_tensors("v_proj", width, h, "kv", kv_heads=kv)]


def build_jetmoe(f: Fields):
    """JetMoE (jetmoe): every layer a mixture of attention heads (MixtureOfAttention) and a
    routed MLP (JetMoeMoE: num_local_experts gated experts of intermediate_size, top
    num_experts_per_tok, no shared expert, a bias vector on the summed output), RMSNorms before
    each; head_dim is kv_channels; a tied head by default."""
    h, top_k = f.need("hidden_size"), f.need("num_experts_per_tok", "MoE routing")
    kv, experts = f.need("num_key_value_heads"), f.need("num_local_experts", "MoE routing")
    mixer = MixtureOfAttention(h, kv * top_k, kv, f.get("kv_channels", default=128), num_experts=experts)
    mlp = moe(f, moe_intermediate_size=f.need("intermediate_size", "MoE experts"))
    layer = Layer("attention", mixer, mlp, (vector("mlp.bias", h),))
    return [layer] * f.need("num_hidden_layers"), [], ()


def build_diffllama(f: Fields):
    """DiffLlama (diffllama): Llama's layers whose attention subtracts a second softmax map
    weighted by lambda, learned as four head_dim vectors per layer (lambda_q1, lambda_k1,
    lambda_q2, lambda_k2); its sub-layer norm (groupnorm, an RMSNorm over 2 x head_dim) holds no
    weights. K and V are cached as Llama's: num_key_value_heads x head_dim each per token."""
    layers, mtp, notes = build_decoder(f)
    d = layers[0].mixer.head_dim
    lambdas = tuple(vector(f"lambda_{v}", d) for v in ("q1", "k1", "q2", "k2"))
    return [replace(layer, extra=layer.extra + lambdas) for layer in layers], mtp, notes


def build_doge(f: Fields):
    """SmallDoge Doge (doge), dense: Llama's layers with per-head q/k RMSNorms (head_dim each);
    its dynamic mask adds dt_proj (kv heads x kv heads x head_dim, over the values; biased with
    attention_bias) and A (one per kv head); each layer scales its two residuals by learned vectors
    (input_residual, post_attention_residual, hidden_size each). K and V are cached as Llama's."""
    if f.get("is_moe"):
        raise DecodescopeError(f"{f.source}: is_moe: Doge's cross-domain MoE (product-key routing over "
                               "expert embedding rows) is not modelled",
                               "decodescope reads the dense Doge models (is_moe false)")
    # DogeConfig keeps num_experts (16384) with is_moe false: a dense MLP, no routed experts
    layers, mtp, notes = build_decoder(Fields({**f.data, "num_experts": None}, f.source))
    h, bias = f.need("hidden_size"), bool(f.get("attention_bias", default=False))
    out = []
    for layer in layers:
        m = replace(layer.mixer, qk_norm=True)
        kv, d = m.num_key_value_heads, m.head_dim
        extra = (vector("A", kv), *linear_tensors("dt_proj", kv, kv * d, "rep", bias),
                 vector("input_residual", h), vector("post_attention_residual", h))
        out.append(replace(layer, mixer=m, extra=layer.extra + extra))
    return out, mtp, notes + ("Doge's dynamic mask keeps keep_window_size keys per query past that length; "
                              "counted as reading the whole cache, which it scores",)


def build_bitnet(f: Fields):
    """Microsoft BitNet b1.58 (bitnet): Llama's layers with an RMSNorm on the attention output
    before o_proj (attn_sub_norm, hidden_size) and one on the MLP's product before down_proj
    (ffn_sub_norm, intermediate_size); squared-ReLU gating (relu2) over the same three MLP
    matrices. Its ternary weights are the checkpoint's format (quantization_config "bitnet")."""
    layers, mtp, notes = build_decoder(f)
    subs = (vector("attn_sub_norm", f.need("hidden_size")), vector("ffn_sub_norm", f.need("intermediate_size")))
    return [replace(layer, extra=layer.extra + subs) for layer in layers], mtp, notes
