"""Decoders built from an encoder's blocks: ModernBERT's decoder (modernbert-decoder, the Ettin
decoders). The builder is `(Fields) -> (layers, mtp, notes)` and is listed in
decodescope.arch.registry.FAMILIES through _lazy."""

from decodescope.arch.blocks import DenseMLP, Layer, linear_tensors, norm_tensor
from decodescope.arch.build import attention
from decodescope.arch.classic import biases, even_head_dim, vector, with_tail
from decodescope.arch.families2 import per_layer_or
from decodescope.arch.layouts import ATTENTION_KINDS
from decodescope.arch.fields import Fields


def build_modernbert_decoder(f: Fields):
    """ModernBERT decoder (transformers' ModernBertDecoderForCausalLM): MHA q, k, v and Wo,
    biased with attention_bias; a GeGLU MLP (Wi: hidden -> 2 x intermediate, Wo), biased with
    mlp_bias; LayerNorms before attention and MLP, biased with norm_bias; layer 0 has no norm
    before attention and the embedding one instead (the same size, counted in its place). Every
    global_attn_every_n_layers-th layer from 0 attends in full (or layer_types), the others
    within local_attention / 2 tokens (sliding_window). Before the tied decoder a prediction
    head: a dense hidden x hidden (classifier_bias) and a LayerNorm; the decoder has a bias
    of vocab_size (decoder_bias)."""
    h, n = f.need("hidden_size"), f.need("num_hidden_layers")
    d = even_head_dim(f)
    every = f.get("global_attn_every_n_layers", default=3)
    types = per_layer_or(f, "layer_types", ATTENTION_KINDS,
                         ["full_attention" if i % every == 0 else "sliding_attention" for i in range(n)])
    local = f.get("local_attention", default=128)
    window = f.get("sliding_window") or (local // 2 if local else None)
    attn_bias, norm_bias = bool(f.get("attention_bias", default=False)), bool(f.get("norm_bias", default=False))
    mlp = DenseMLP(h, f.need("intermediate_size"), bias=bool(f.get("mlp_bias", default=False)))
    extra = biases(h, "attn_norm", "mlp_norm") if norm_bias else ()
    layers = []
    for t in types:
        w = window if t == "sliding_attention" else None
        attn = attention(f, w, attention_bias=attn_bias, o_bias=attn_bias, num_key_value_heads=h // d, head_dim=d)
        layers.append(Layer("sliding_attention" if w else "attention", attn, mlp, extra))
    head = (*linear_tensors("head.dense", h, h, "rep", bool(f.get("classifier_bias", default=False))),
            norm_tensor("head.norm", h), *(biases(h, "head.norm", "final_norm") if norm_bias else ()),
            *((vector("decoder.bias", f.need("vocab_size"), "vocab"),) if f.get("decoder_bias", default=True) else ()))
    return with_tail(layers, head), [], ()
