"""Language models of multimodal wrappers that are nearly a family here (transformers 5.24):
GLM-OCR (GLM-4's layers and a next-n MTP layer), DeepSeek-OCR 2 / Unlimited-OCR (Llama
attention with DeepSeek-V2's MoE) and Ai2's Molmo 2 (OLMo 2-style attention with per-head or
full q/k norms, a table of extra vocabulary rows) and Meta's Chameleon (Llama with a LayerNorm
on each query and key head). The wrappers that are a family tensor for tensor are
registry.SAME_AS entries."""

from dataclasses import replace

from decodescope.arch.blocks import DenseMLP, Layer, Tensor
from decodescope.arch.build import attention, build_decoder, nextn_mtp
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# UnlimitedOcrTextConfig's layer_types words: "reference_sliding_attention" keeps every prompt
# (prefill) token's K/V and a window of sliding_window generated tokens
OCR_LAYER_TYPES = ("full_attention", "reference_sliding_attention")
MOLMO2_QK_NORMS = ("qwen3", "olmo")  # Molmo2TextConfig.qk_norm_type: per head / over all heads


def build_glm_ocr(f: Fields):
    """zai-org/GLM-OCR: GLM-4.1V's text layers (q/k/v unbiased: GlmOcrTextAttention) and
    num_nextn_predict_layers MTP layers after them (the checkpoint's layers.16, which
    transformers skips: _keys_to_ignore_on_load_unexpected); vLLM runs it as a draft."""
    layers, _, notes = build_decoder(Fields({**f.data, "model_type": "glm4", "attention_bias": False}, f.source))
    return layers, nextn_mtp(f, layers[-1]), notes


def build_deepseek_mha(f: Fields):
    """DeepSeek-OCR 2 (deepseek_ocr2_text), Baidu's Unlimited-OCR (unlimited_ocr_text), DeepSeek-OCR /
    DeepSeek-VL2-Tiny (deepseek_vl_v2 with use_mla false, registry._deepseek_v2) and DeepSeekMoE
    16B (deepseek: vLLM's deepseek.py, the same MHA over DeepSeek's experts):
    LlamaAttention (MHA, no MLA) and DeepseekV2Moe / DeepseekV2MLP per mlp_layer_types
    ("dense" / "sparse", or first_k_dense_replace): routed experts of moe_intermediate_size,
    n_shared_experts merged into one shared MLP, a bias-free softmax router."""
    n = f.need("num_hidden_layers")
    kinds = per_layer_words(f, "layer_types", n, OCR_LAYER_TYPES) if f.get("layer_types") is not None else []
    # no layer attends in a plain window: build_decoder would read sliding_window as Mistral's
    plain = {k: v for k, v in f.data.items() if k not in ("layer_types", "sliding_window")}
    layers, mtp, notes = build_decoder(Fields(plain, f.source))
    if "reference_sliding_attention" in kinds:
        window = f.need("sliding_window", "reference sliding-window attention")
        notes = (*notes, f"reference sliding-window attention (Unlimited-OCR): the prompt's K/V stay cached and "
                 f"generated tokens keep a window of {window}; counted as full attention, an upper bound "
                 "once the output outgrows the window")
    return layers, mtp, notes


def build_molmo2(f: Fields):
    """Ai2 Molmo 2 (modeling_molmo2.py): Molmo2Attention is OLMo 2's with q/k RMSNorms per head
    (qk_norm_type "qwen3") or over all heads ("olmo"), q/k/v biased where attention_bias (qkv_bias),
    o_proj never; OLMo's SwiGLU MLP; two RMSNorms per layer, before (or, with norm_after, after)
    each sublayer. The embedding holds additional_vocab_size rows past vocab_size, the LM head
    does not: those rows are an input table."""
    norm = f.str_("qk_norm_type", default="qwen3")
    if norm not in MOLMO2_QK_NORMS:
        raise DecodescopeError(f"{f.source}: qk_norm_type {norm!r} is not one Molmo 2 knows",
                               f"use one of {', '.join(MOLMO2_QK_NORMS)}")
    h = f.need("hidden_size")
    bias = bool(f.get("attention_bias", "qkv_bias", default=False))
    attn = attention(f, qk_norm=True, qk_norm_full=norm == "olmo", attention_bias=bias, o_bias=False)
    mlp = DenseMLP(h, f.need("intermediate_size", "the MLP"))
    layers = [Layer("attention", attn, mlp)] * f.need("num_hidden_layers")
    extra = f.get("additional_vocab_size", default=128)  # Molmo2TextConfig's default
    if isinstance(extra, bool) or not isinstance(extra, int) or not 0 <= extra < 1 << 24:
        raise DecodescopeError(f"{f.source}: additional_vocab_size {extra!r} is not a row count",
                               "set additional_vocab_size to the extra embedding rows (128 in allenai/Molmo2-8B)")
    table = [Tensor("embed_tokens.additional", (extra, h), "vocab", linear=False)] if extra else []
    return layers, [], (), table


def build_chameleon(f: Fields):
    """Meta Chameleon / Anole (chameleon): Llama's layers whose queries and keys pass a LayerNorm
    with its own weight and bias per head (ChameleonLayerNorm over [heads, head_dim]: split with
    the heads under TP); swin_norm (Chameleon-30B) moves the layer norms after each sublayer,
    which adds no weights. Its VQ image tokenizer (vq_config) is not counted."""
    layers, mtp, notes = build_decoder(Fields({**f.data, "model_type": "llama"}, f.source))
    a = layers[0].mixer
    q, kv = a.num_attention_heads * a.head_dim, a.num_key_value_heads
    norms = tuple(Tensor(f"q_norm.{w}", (q,), "col", linear=False) for w in ("weight", "bias")) + tuple(
        Tensor(f"k_norm.{w}", (kv * a.head_dim,), "kv", linear=False, kv_heads=kv) for w in ("weight", "bias"))
    return [replace(x, extra=x.extra + norms) for x in layers], mtp, notes
