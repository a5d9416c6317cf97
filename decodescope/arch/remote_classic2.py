"""More remote-code decoders the engines serve on Llama's layers: OrionStar's Orion-14B (orion,
LayerNorms with biases in place of RMSNorms) and XVERSE (xverse: the dense XVERSE-7B / 13B / 65B
are Llama tensor for tensor; XVERSE-MoE-A4.2B names the same model_type with expert fields).
Each builder is `(Fields) -> (layers, mtp, notes)` and is listed in
decodescope.arch.registry.FAMILIES through _lazy."""

from dataclasses import replace

from decodescope.arch.build import build_decoder
from decodescope.arch.classic import biases, with_tail
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields


def build_orion(f: Fields):
    """Orion-14B Base / Chat / LongChat (OrionForCausalLM; vLLM's orion.py, SGLang's orion.py):
    Llama's attention (q/k/v/o without biases, num_key_value_heads K/V heads) and SwiGLU MLP, with
    nn.LayerNorm (a weight and a bias of hidden_size) for input_layernorm, post_attention_layernorm
    and the final norm. The biases ride as extras: two per layer, the final norm's on the last."""
    h = f.need("hidden_size")
    layers, mtp, notes = build_decoder(Fields({**f.data, "model_type": "llama", "attention_bias": False,
                                               "mlp_bias": False}, f.source))
    norm_bias = biases(h, "input_layernorm", "post_attention_layernorm")
    layers = [replace(x, extra=x.extra + norm_bias) for x in layers]
    return with_tail(layers, biases(h, "norm")), mtp, notes


def build_xverse(f: Fields):
    """XVERSE (XverseForCausalLM, remote code). Dense (XVERSE-7B / 13B / 65B): Llama's tensors, as
    vLLM's registry runs XverseForCausalLM with llama.py (no biases, RMSNorms, an untied head;
    XverseConfig names no num_key_value_heads where the model has none: MHA). With num_experts
    (XVERSE-MoE-A4.2B; SGLang's xverse_moe.py, XverseMoE): every layer's MLP is num_experts routed
    SwiGLU experts of intermediate_size, moe_top_k of them a token, a bias-free router, and one
    shared SwiGLU MLP of intermediate_size x num_shared_experts that every token runs."""
    f.get("moe_top_k")  # checked under the config's own name before it is read as num_experts_per_tok
    g = rename(f, {"num_experts_per_tok": "moe_top_k"}, model_type="llama")
    if g.get("num_experts", default=0):
        # decoder_mlp sizes the shared MLP as num_shared_experts x moe_intermediate_size
        g = Fields({**g.data, "moe_intermediate_size": g.need("intermediate_size", "XVERSE's experts")}, g.source)
    return build_decoder(g)
