"""MoE decoders whose attention carries a sigmoid output gate, loaded when a config of them is
built: OpenBMB's MiniCPM 5 MoE (minicpm5_moe, transformers 5.25 models/minicpm5_moe)."""

from dataclasses import replace

from decodescope.arch.build import attention, build_decoder
from decodescope.arch.fields import Fields


def build_minicpm5_moe(f: Fields):
    """MiniCPM 5 MoE: Llama's GQA attention whose query projection also yields a sigmoid gate
    per output channel (q_gate_proj, twice the query width; no q/k norms), then per
    mlp_layer_types a dense SwiGLU MLP or n_routed_experts routed experts (DeepSeek-style
    sigmoid router; its correction bias is a buffer, not a weight) beside n_shared_experts
    shared ones of moe_intermediate_size each; an untied LM head."""
    if f.get("mlp_layer_types") is None:  # MiniCPM5MoeConfig's default: the first layer dense
        f = f.with_defaults({"first_k_dense_replace": 1})
    layers, _, notes = build_decoder(f)
    gated = [replace(x, mixer=attention(f, x.mixer.sliding_window, attn_output_gate=True)) for x in layers]
    return gated, [], notes
