"""Ergo (model_type ergo; transformers 5.25's ErgoForCausalLM, whose ErgoConfig docstring names
the checkpoint Amazon-FMR/Ergo). Read from transformers 5.25.0
src/transformers/models/ergo/modeling_ergo.py and configuration_ergo.py.

A layer (ErgoDecoderLayer): attention with one fused qkv_proj of (heads + 2 x kv_heads) x
head_dim rows (head_dim = hidden / heads; ErgoAttention reads no head_dim field), o_proj, and
q/k RMSNorms of head_dim; no biases. Layers "sliding_attention" in layer_types attend to the last
sliding_window tokens (with RoPE), the others ("full_attention", by default every
global_attention_every_n_layers-th) to the whole context, without position embeddings. Then an
ungated relu2 MLP (up_proj, down_proj): first_dense_intermediate_size wide where mlp_layer_types
says "dense" (the first num_dense_blocks layers by default), elsewhere ErgoMoE: a sigmoid router
(an fp32 Linear without bias) picks num_experts_per_tok of num_experts relu2 experts (up, down),
each followed by its own RMSNorm scale (ErgoExpertNorm: num_experts x hidden; a token reads the
rows of its top-k experts only), plus one always-on shared expert (up, down and a norm).
Four norms a layer (input, post_attention, pre_ and post_feedforward), and two residual gates of
hidden (ErgoResidualGate) mix each branch into the residual stream. The embedding (fp32) and the
LM head are untied (ErgoForCausalLM declares no tied weights); the head has no bias.

The count and transformers': transformers counts nn.Parameters only. The router's
e_score_correction_bias (num_experts, float32) is an nn.Buffer, but a persistent one, so the
checkpoint holds it and the router reads it for every token's top-k: it is counted here
(MoE.router_bias), num_experts more per MoE layer than transformers' count (16,128 for the
class defaults: 1,105,550,933,760 against 1,105,550,917,632). The qk_scale of full-attention
layers (global_attention_scale) is a non-persistent buffer: neither holds it.

Bytes: the fused qkv_proj is modelled as q_proj, k_proj and v_proj (the same weights, split by
heads under tensor parallelism as vLLM's QKVParallelLinear splits a fused one). ErgoPreTrainedModel
keeps the embedding, the router, every norm and the residual gates in float32
(_keep_in_fp32_modules_strict); a decodescope tensor has no dtype of its own, so they are counted
at the checkpoint's dtype, which the notes quantify."""

from dataclasses import asdict, dataclass

from decodescope.arch.blocks import DenseMLP, Layer, MoE, Tensor, norm_tensor
from decodescope.arch.build import MLP_LAYER_KINDS, attention, moe
from decodescope.arch.families2 import per_layer_or
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import ATTENTION_KINDS
from decodescope.errors import DecodescopeError

# ErgoConfig's class defaults (transformers 5.25) for the fields only this family reads, and its
# MoE and KV-head fields; hidden_size, layers, heads and vocab_size stay required
ERGO_DEFAULTS = {"first_dense_intermediate_size": 32768, "num_dense_blocks": 1, "shared_intermediate_size": 8192,
                 "moe_intermediate_size": 4096, "num_experts": 256, "num_experts_per_tok": 8,
                 "num_key_value_heads": 8, "global_attention_every_n_layers": 4}
DEFAULT_WINDOW = 512  # ErgoConfig.sliding_window, tokens


@dataclass(frozen=True)
class ErgoMoE(MoE):
    """MoE's routed experts (ungated relu2), fp32 router, correction bias and shared expert, plus
    ErgoExpertNorm's scale of hidden per routed expert (a stack of num_experts: a token reads its
    top-k rows, split over EP ranks as the experts are) and the shared expert's own norm."""
    kernels = 10  # MoE's 8 + the per-route expert norm + the shared expert's norm

    def tensors(self) -> list[Tensor]:
        h = self.hidden_size
        return super().tensors() + [Tensor("experts.post_expert_norm", (h,), "rep", linear=False,
                                           experts=self.num_experts),
                                    norm_tensor("shared_expert.norm", h)]


def _layout(f: Fields, n: int) -> tuple[list[str], list[bool], int]:
    """(attention kind per layer, MoE or not per layer, window in tokens), as ErgoConfig's
    __post_init__ fills layer_types and mlp_layer_types where a config leaves them out."""
    every = f.need("global_attention_every_n_layers")
    types = per_layer_or(f, "layer_types", ATTENTION_KINDS,
                         ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)])
    dense_n = f.need("num_dense_blocks")
    kinds = per_layer_or(f, "mlp_layer_types", MLP_LAYER_KINDS,
                         ["dense" if i < dense_n else "sparse" for i in range(n)])
    # released checkpoints name the window local_attention_window (ErgoConfig.attribute_map)
    window = f.get("sliding_window", "local_attention_window", default=DEFAULT_WINDOW)
    if window < 1 and "sliding_attention" in types:  # 0 would read as no window at all
        raise DecodescopeError(f"{f.source}: sliding_window {window}: Ergo's sliding layers need a window",
                               f"give sliding_window ({DEFAULT_WINDOW} in ErgoConfig)")
    return types, [MLP_LAYER_KINDS[k] for k in kinds], window


def _attention(f: Fields, window: int | None):
    heads, h = f.need("num_attention_heads", "attention"), f.need("hidden_size")
    kv = f.need("num_key_value_heads")
    if heads > h or heads % kv:
        raise DecodescopeError(f"{f.source}: {heads} heads of hidden_size {h} with {kv} KV heads: ErgoAttention "
                               "needs head_dim = hidden_size / heads >= 1 and heads a multiple of the KV heads",
                               "fix num_attention_heads / num_key_value_heads")
    return attention(f, window, qk_norm=True, head_dim=h // heads, num_key_value_heads=kv,
                     attention_bias=False, o_bias=False)


def _notes(f: Fields, routed: ErgoMoE | None) -> tuple[str, ...]:
    h, vocab = f.need("hidden_size"), f.need("vocab_size")
    more = f"the embedding holds {vocab * h * 2 / 2**30:.1f} GiB"  # fp32 is 2 bytes a weight over bf16
    if routed:
        more += f" and each MoE layer's router reads {routed.num_experts * h * 2 / 2**20:.1f} MiB a token"
    notes = [f"Ergo keeps its embedding, router, norms and residual gates in float32; counted at the checkpoint "
             f"dtype, so {more} more than modelled"]
    if routed:
        notes += ["router e_score_correction_bias counted: a persistent buffer the checkpoint holds, which "
                  "transformers' parameter count leaves out",
                  "each routed expert's output is normalised before the weighted sum, so tensor parallelism "
                  "reduces top-k rows a token, not one: not modelled"]
    return tuple(notes)


def build_ergo(f: Fields):
    """Ergo: windowed or full GQA with per-head q/k norms, a dense relu2 MLP in the leading layers
    and relu2 routed experts with per-expert norms plus a shared expert after them."""
    f = f.with_defaults(ERGO_DEFAULTS)
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types, routed_at, window = _layout(f, n)
    extra = tuple(norm_tensor(name, h) for name in ("pre_feedforward_layernorm", "post_feedforward_layernorm",
                                                    "attention_residual_gate", "feedforward_residual_gate"))
    dense = DenseMLP(h, f.need("first_dense_intermediate_size"), gated=False) if not all(routed_at) else None
    routed = None
    if any(routed_at):
        shared = f.need("shared_intermediate_size", "Ergo's shared expert")
        routed = ErgoMoE(**asdict(moe(f, shared_expert_intermediate_size=shared, gated=False, router_bias=True)))
    full, sliding = _attention(f, None), _attention(f, window)
    layers = [Layer("sliding_attention" if t == "sliding_attention" else "attention",
                    sliding if t == "sliding_attention" else full, routed if r else dense, extra)
              for t, r in zip(types, routed_at, strict=True)]
    return layers, [], _notes(f, routed)
