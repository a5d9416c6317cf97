"""NVIDIA Nemotron-Labs Dory (model_type dory; transformers' models/dory): an nGPT-style normalized
transformer that runs its middle layers more than once. The decoder runs n_input_layers, then the
n_recurrent_layers n_recurrent_loops times over the same weights, then n_output_layers. Layers are
built here in the order a token runs them: the first loop's recurrent layers own their weights, the
later loops' copies are Layer(reuses=True) (read on every pass, held and counted once).

Every norm is an L2 projection onto the unit sphere with no weights (DoryL2Norm), the final one
too (registry.NORMLESS). What a layer holds instead (modeling_dory.py): an output gate gate_proj
[heads x head_dim, hidden] beside q/k/v/o, per-channel sqk and s_gate vectors of heads x head_dim,
suv_gate / suv_up vectors of the MLP width, and the residual rates lambda_1 / lambda_2 of hidden.
The LM head scales each vocab logit (lm_head.logit_scale), held on the last layer that owns weights.

Released config.json files list the attention and MLP of a layer as two blocks (layer_types with
"mlp" after each attention word, or the remote code's hybrid_layer_pattern "S-S-S-*-"), and count
num_hidden_layers and the n_*_layers in blocks; DoryConfig halves them, as read here."""

from dataclasses import asdict, dataclass, replace

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Tensor
from decodescope.arch.build import attention
from decodescope.arch.fields import MAX_LIST, Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

ATTENTION_WORDS = ("full_attention", "sliding_attention")
# the remote code's (vLLM's DoryConfig) hybrid_layer_pattern: one character a block
PATTERN_WORDS = {"S": "sliding_attention", "*": "full_attention", "-": "mlp"}
KV_MODES = ("per_loop", "last_loop")


@dataclass(frozen=True)
class DoryAttention(Attention):
    """Dory's attention: no input norm weight, a full-width sigmoid output gate and the nGPT
    scales sqk (queries, per channel) and s_gate. With kv_shared (recurrent_kv_cache_mode
    last_loop, every loop but the one that writes) it still projects K and V of its own tokens
    to attend with the shared cache: only the cache is not its own."""

    def tensors(self) -> list[Tensor]:
        width = self.num_attention_heads * self.head_dim
        own = Attention.tensors(replace(self, kv_shared=False))
        return ([t for t in own if t.name != "input_layernorm"]
                + [Tensor("gate_proj", (width, self.hidden_size), "col"),
                   Tensor("sqk", (width,), "col", linear=False), Tensor("s_gate", (width,), "col", linear=False)])


def _blocks(f: Fields, n: int) -> list[str] | None:
    """The per-block words of a released config (attention, then "mlp", per layer), or None."""
    pattern = f.get("hybrid_layer_pattern")
    if f.get("layer_types") is None and pattern is not None:
        if not isinstance(pattern, str) or not set(pattern) <= set(PATTERN_WORDS):
            raise DecodescopeError(f"{f.source}: hybrid_layer_pattern must be a string of S, * and - (one a block)",
                                   "fix hybrid_layer_pattern, or give layer_types")
        f = Fields({**f.data, "layer_types": [PATTERN_WORDS[c] for c in pattern]}, f.source)
    types = f.list_("layer_types", str)
    if types is None or "mlp" not in types:
        return None
    words = per_layer_words(f, "layer_types", n, (*ATTENTION_WORDS, "mlp"))
    if n % 2 or any(a == "mlp" or b != "mlp" for a, b in zip(words[::2], words[1::2])):
        raise DecodescopeError(f"{f.source}: layer_types lists blocks, but not as attention then mlp per layer",
                               "fix layer_types: each attention word followed by \"mlp\"")
    return words[::2]


def dory_layout(f: Fields) -> tuple[list[str], int, int, int]:
    """(attention kind per layer, n_input_layers, n_recurrent_layers, n_output_layers), in layers."""
    n = f.need("num_hidden_layers")
    n_in, n_out = f.get("n_input_layers", default=8), f.get("n_output_layers", default=8)
    n_rec = f.get("n_recurrent_layers")
    types = _blocks(f, n)
    if types is not None:  # counted in blocks: two a layer (DoryConfig.__post_init__)
        n, n_in, n_out, n_rec = n // 2, n_in // 2, n_out // 2, None if n_rec is None else n_rec // 2
    elif f.get("layer_types") is not None:
        types = per_layer_words(f, "layer_types", n, ATTENTION_WORDS)
    else:  # DoryConfig's default: every 4th layer full, the others in a window
        types = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    n_rec = n - n_in - n_out if n_rec is None else n_rec
    if n_rec < 0 or n_in + n_rec + n_out != n:
        raise DecodescopeError(f"{f.source}: n_input_layers {n_in} + n_recurrent_layers {n_rec} + n_output_layers "
                               f"{n_out} (in layers) is not num_hidden_layers {n}",
                               "fix the n_*_layers fields: they split the layers into three sections")
    return types, n_in, n_rec, n_out


def _layer(f: Fields, kind: str, window: int) -> Layer:
    h, inter = f.need("hidden_size"), f.need("intermediate_size")
    attn = DoryAttention(**asdict(attention(f, window if kind == "sliding_attention" else None)))
    mlp = DenseMLP(h, inter, bias=bool(f.get("mlp_bias", default=False)), norm=False)
    extra = (Tensor("mlp.suv_gate", (inter,), "col", linear=False), Tensor("mlp.suv_up", (inter,), "col", linear=False),
             Tensor("lambda_1", (h,), "rep", linear=False), Tensor("lambda_2", (h,), "rep", linear=False))
    return Layer("sliding_attention" if kind == "sliding_attention" else "attention", attn, mlp, extra)


def build_dory(f: Fields):
    """Dory's layers as a token runs them (see the module docstring); notes say the loop and cache mode."""
    types, n_in, n_rec, n_out = dory_layout(f)
    loops = f.get("n_recurrent_loops", default=2)
    mode = f.str_("recurrent_kv_cache_mode", "per_loop")
    if mode not in KV_MODES:
        raise DecodescopeError(f"{f.source}: recurrent_kv_cache_mode {mode!r} is not one of {', '.join(KV_MODES)}",
                               "fix recurrent_kv_cache_mode (DoryConfig knows per_loop and last_loop)")
    if len(types) + (loops - 1) * n_rec > MAX_LIST:
        raise DecodescopeError(f"{f.source}: {loops} loops over {n_rec} layers run more than {MAX_LIST} layers a token",
                               "lower n_recurrent_loops")
    window = f.get("sliding_window", "swa_window_size", default=1024)
    layers = [_layer(f, kind, window) for kind in types]
    rec = layers[n_in:n_in + n_rec]
    # per_loop: each loop keeps its own K/V; last_loop: one cache a layer, which the other loops read
    again = [replace(x, reuses=True, mixer=replace(x.mixer, kv_shared=mode == "last_loop")) for x in rec]
    run = layers[:n_in + n_rec] + again * (loops - 1) + layers[n_in + n_rec:]
    last = max(i for i, x in enumerate(run) if not x.reuses)
    logit_scale = Tensor("lm_head.logit_scale", (f.need("vocab_size"),), "vocab", linear=False)
    run[last] = replace(run[last], extra=run[last].extra + (logit_scale,))
    notes = (f"Dory: {n_in} input layers, {n_rec} recurrent layers run {loops} times over the same weights "
             f"({mode} KV cache{': one per loop' if mode == 'per_loop' else ': one per layer, read by every loop'}),"
             f" {n_out} output layers",)
    return run, [], notes
