"""inclusionAI's hybrid linear Ling / Ring models (model_type bailing_hybrid): groups of
layer_group_size layers, the last of each MLA and the others linear attention, a dense MLP in
the first first_k_dense_replace layers and DeepSeek-style MoE (routed experts + shared expert)
after them, and num_nextn_predict_layers next-n MTP layers after the decoder.

Two decoders share the model_type, told apart by `architectures`:
- Ling 3.0 (BailingMoeV3ForCausalLM; transformers' models/bailing_hybrid): Kimi Delta Attention
  with full-rank decay and output gates, and MLA with a sigmoid gate per head.
- Ling / Ring 2.5 and 2.6 (BailingMoeV2_5ForCausalLM, inclusionAI's remote code
  modeling_bailing_moe_v2_5.py): Lightning attention and MLA without a gate."""

from decodescope.arch.blocks import MLA, Layer, Tensor
from decodescope.arch.build import decoder_mlp, nextn_mtp
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words

# the architectures whose bailing_hybrid config is the Lightning-attention decoder of Ling 2.5 / 2.6
LIGHTNING_ARCHS = ("BailingMoeV2_5ForCausalLM",)


def _moe_names(f: Fields) -> Fields:
    """Ling's MoE fields under the names decoder_mlp reads: top-k (transformers writes
    num_experts_per_token), the expert-bias flag, and the shared expert's width when the
    config sizes it apart (moe_shared_expert_intermediate_size per shared expert, as vLLM's
    BailingMoeV25 reads it; else moe_intermediate_size per shared expert, decoder_mlp's rule)."""
    per_expert = f.get("moe_shared_expert_intermediate_size", default=0)
    shared = per_expert * f.get("num_shared_experts", "n_shared_experts", default=0)
    return rename(f, {"num_experts_per_tok": "num_experts_per_token",
                      "use_routing_bias": "moe_router_enable_expert_bias"},
                  **({"shared_expert_intermediate_size": shared} if shared else {}))


def _is_mla(f: Fields, n: int, lightning: bool) -> list[bool]:
    """Which layers are MLA: transformers 5's layer_types, else the last of every group,
    (i + 1) % layer_group_size == 0. Ling 2.5's modeling code also makes MLA the layers past
    the last whole group (i >= n // size * size); transformers' Ling 3.0 does not."""
    if f.get("layer_types") is not None:
        types = per_layer_words(f, "layer_types", n, ("full_attention", "linear_attention"))
        return [t == "full_attention" for t in types]
    size = f.need("layer_group_size", "the pattern of linear and MLA layers")
    tail = n // size * size if lightning else n
    return [(i + 1) % size == 0 or i >= tail for i in range(n)]


def _mla(f: Fields) -> MLA:
    return MLA(f.need("hidden_size"), f.need("num_attention_heads"), f.get("q_lora_rank"),
               f.need("kv_lora_rank", "MLA"), f.need("qk_nope_head_dim", "MLA"),
               f.need("qk_rope_head_dim", "MLA"), f.need("v_head_dim", "MLA"))


def _kda(f: Fields):
    """Ling 3.0's linear layer: q, k, v of heads x head_dim through short convs, a full-rank
    decay gate (forget_gate.f_proj) and output gate (g_proj) unless the config asks for
    low-rank ones (use_kda_lora). transformers writes linear_num_heads / linear_head_dim /
    linear_conv_kernel_dim (its head_dim then holds the MLA rope width); the hub configs
    name them num_attention_heads / head_dim / short_conv_kernel_size."""
    from decodescope.arch.mixers import KimiDeltaAttention  # imported when built (see blocks.StateMixer)
    why = "Ling 3.0's Kimi Delta Attention"
    low_rank = bool(f.get("use_kda_lora", default=False)) and not f.get("no_kda_lora", default=False)
    return KimiDeltaAttention(f.need("hidden_size"), f.get("linear_num_heads") or f.need("num_attention_heads"),
                              f.get("linear_head_dim") or f.need("head_dim", why),
                              f.get("linear_conv_kernel_dim") or f.need("short_conv_kernel_size", why),
                              full_rank_gate=not low_rank)


def _lightning(f: Fields):
    """Ling 2.5's linear layer: MiniMax's Lightning attention shapes (query_key_value,
    g_proj, g_norm over all heads, dense); its per-head q/k norms (use_qk_norm) are the
    layer's extra tensors."""
    from decodescope.arch.mixers import LightningAttention  # imported when built
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    d = f.get("head_dim") or h // heads
    norms = tuple(Tensor(name, (d,), "rep", linear=False) for name in ("query_layernorm", "key_layernorm"))
    return LightningAttention(h, heads, d), norms if f.get("use_qk_norm", default=False) else ()


def build_bailing_hybrid(f: Fields):
    """Ling 3.0 (KDA + gated MLA) or Ling / Ring 2.5-2.6 (Lightning + MLA), by architectures."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    archs = f.get("architectures", default=[])
    lightning = isinstance(archs, list) and any(a in LIGHTNING_ARCHS for a in archs)
    f = _moe_names(f)
    mla = _mla(f)
    # Ling 3.0: sigmoid(g_proj(x)) scales each head's output before o_proj ([heads, hidden])
    gate = () if lightning else (Tensor("g_proj", (mla.num_attention_heads, h), "col"),)
    linear, norms = _lightning(f) if lightning else (_kda(f), ())
    layers = [Layer("mla", mla, decoder_mlp(f, i), gate) if is_mla else
              Layer("linear_attention", linear, decoder_mlp(f, i), norms)
              for i, is_mla in enumerate(_is_mla(f, n, lightning))]
    # the MTP layers (checkpoint layers n, n + 1, ...) are MLA + MoE decoder layers
    return layers, nextn_mtp(f, Layer("mla", mla, decoder_mlp(f, n), gate)), ()
