"""Aria (rhymes-ai/Aria's language model, transformers' aria_text): a Llama decoder whose every
MLP is a mixture of experts under Aria's own field names. (Cohere's North / Compass decoder needs
no builder: it is Cohere's, registry.SAME_AS.)"""

from dataclasses import replace

from decodescope.arch.blocks import Tensor
from decodescope.arch.build import build_decoder
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields
from decodescope.errors import DecodescopeError

# AriaTextConfig's defaults in transformers 5.24, for the MoE keys a config may leave out
ARIA_TEXT_DEFAULTS = {"moe_num_experts": 8, "moe_topk": 2, "moe_num_shared_experts": 2}


def build_aria(f: Fields):
    """transformers' modeling_aria.py: every layer's MLP is AriaTextMoELayer, routed experts of
    intermediate_size (SiLU-gated, no biases) plus one always-on shared MLP (AriaSharedExpertsMLP,
    with no gate of its own) of intermediate_size x moe_num_shared_experts, biased where
    mlp_bias; two RMSNorms per layer."""
    f = f.with_defaults(ARIA_TEXT_DEFAULTS)
    if not f.need("moe_num_experts"):
        raise DecodescopeError(f"{f.source}: moe_num_experts is 0, but every Aria layer routes to experts",
                               "set moe_num_experts to the checkpoint's number of experts (64 in rhymes-ai/Aria)")
    inter = f.need("intermediate_size", "Aria's experts")
    shared = f.need("moe_num_shared_experts") * inter
    # the experts are intermediate_size wide whatever else the config names (AriaTextConfig
    # reads no moe_intermediate_size)
    g = rename(f, {"num_experts": "moe_num_experts"}, moe_intermediate_size=inter,
               shared_expert_intermediate_size=shared)
    layers, mtp, notes = build_decoder(g)
    if not (f.get("mlp_bias", default=False) and shared):
        return layers, mtp, notes
    bias = (Tensor("shared_expert.gate_up_proj.bias", (2 * shared,), "col", linear=False),
            Tensor("shared_expert.down_proj.bias", (f.need("hidden_size"),), "rep", linear=False))
    return [replace(x, extra=x.extra + bias) for x in layers], mtp, notes
