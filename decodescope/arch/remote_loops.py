"""ByteDance Ouro, a looped language model vLLM serves (vllm/model_executor/models/ouro.py).
The builder is `(Fields) -> (layers, mtp, notes)`, listed in decodescope.arch.registry.FAMILIES.

Ouro: every token runs the num_hidden_layers layers total_ut_steps times over the
same weights. OuroAttention builds one Attention a loop (layer index ut_step x layers + i), so
each loop keeps its own KV cache. The layers are built in the order a token runs them: the
first loop's own their weights, the later loops' are Layer(reuses=True): read every pass, held
and counted once. A layer has four RMSNorms (input_layernorm and input_layernorm_2 around
attention, post_attention_layernorm and post_attention_layernorm_2 around the MLP); the model's
final norm runs after each loop (its weights once) and early_exit_gate (hidden -> 1, biased) is
held but never read by vLLM, which always runs every loop. vLLM's ouro.py sizes a head as
hidden_size / heads, whatever head_dim says."""

from dataclasses import replace

from decodescope.arch.blocks import DenseMLP, Layer, Tensor, norm_tensor
from decodescope.arch.build import attention
from decodescope.arch.classic import even_head_dim
from decodescope.arch.fields import MAX_LIST, Fields
from decodescope.errors import DecodescopeError

OURO_LOOPS = 4  # vLLM ouro.py: getattr(config, "total_ut_steps", 4)


# ---- ByteDance Ouro ---------------------------------------------------------------------

def build_ouro(f: Fields):
    """Ouro-1.4B / 2.6B (and -Thinking): Qwen2-style MHA/GQA layers (unbiased q/k/v/o, head
    hidden / heads) with four norms, run total_ut_steps times (see the module docstring)."""
    n, h, loops = f.need("num_hidden_layers"), f.need("hidden_size"), f.get("total_ut_steps", default=OURO_LOOPS)
    if n * loops > MAX_LIST:
        raise DecodescopeError(f"{f.source}: {n} layers x {loops} loops run more than {MAX_LIST} layers a token",
                               "lower total_ut_steps")
    attn = attention(f, head_dim=even_head_dim(f), attention_bias=False, o_bias=False)
    sandwich = (norm_tensor("input_layernorm_2", h), norm_tensor("post_attention_layernorm_2", h))
    owner = Layer("attention", attn, DenseMLP(h, f.need("intermediate_size")), sandwich)
    gate = (Tensor("early_exit_gate", (1, h), "rep", linear=False), Tensor("early_exit_gate.bias", (1,), "rep", linear=False))
    first = [replace(owner, idle=gate)] + [owner] * (n - 1)
    layers = first + [replace(owner, reuses=True)] * (n * (loops - 1))
    notes = (f"Ouro: {n} layers run {loops} times (total_ut_steps) over the same weights, each loop with its "
             "own KV cache (vLLM ouro.py); early_exit_gate is held, never read (vLLM runs every loop)",)
    return layers, [], notes
