"""Builders of decoders whose layers recur: Google's RecurrentGemma (Griffin), whose recurrent
blocks keep a state per request, and Sapient's HRM-Text, whose two stacks of layers run in loops.

transformers 5.24 models/recurrent_gemma: block_types cycles over the layers ("recurrent" or
"attention"). A recurrent block projects the normed input twice (linear_y, through GELU, and
linear_x, lru_width each, with biases), runs a depthwise causal conv1d (conv1d_width taps, with
bias) and the RG-LRU over x, multiplies by y and projects back (linear_out, with bias). The
RG-LRU's input and recurrent gates are block-diagonal: one [lru_width/heads]^2 block (with bias)
per head. An attention block is MQA/GQA over a window of attention_window_size tokens, o_proj
with a bias. Every layer's MLP is gated (GELU), intermediate_size // 2 wide, with biases.

transformers 5.24 models/hrm_text: an L stack and an H stack of num_layers_per_stack Llama layers
each (MHA, a sigmoid output gate gate_proj beside q/k/v/o, weightless RMSNorms, no final norm of
the model). Every token runs, H_cycles times, the L stack L_cycles times and then the H stack once;
each of those passes writes its own KV cache slot (cycle_offset). The layers are built here in the
order a token runs them: a stack's first pass owns its weights, its later passes are
Layer(reuses=True): read every pass, held and counted once. z_L_init [hidden] starts the L state."""

from dataclasses import asdict, dataclass, replace

from decodescope.arch.blocks import DenseMLP, Layer, StateMixer, Tensor, linear_tensors, norm_tensor
from decodescope.arch.build import attention
from decodescope.arch.classic import NormlessAttention
from decodescope.arch.fields import MAX_LIST, Fields
from decodescope.errors import DecodescopeError

# RecurrentGemmaConfig's defaults: conv taps, window, and the block pattern the layers cycle through
RECURRENT_GEMMA_DEFAULTS = {"conv1d_width": 4, "attention_window_size": 2048}
DEFAULT_BLOCKS = ["recurrent", "recurrent", "attention"]
BLOCK_KINDS = ("recurrent", "attention")
# HrmTextConfig's defaults: the loop counts
HRM_DEFAULTS = {"H_cycles": 2, "L_cycles": 3}
MAX_PASSES = MAX_LIST  # layer passes a token may run: keeps the executed layer list short


@dataclass(frozen=True)
class RGLRUBlock(StateMixer):
    """Griffin's recurrent block. Per request it keeps the LRU state (lru_width, float32: the
    modeling code accumulates in float32) and the conv window (conv1d_width - 1 past inputs of
    each channel of lru_width, in the activation dtype, bf16; the modeling code sizes that window
    by hidden_size, equal to lru_width in every released config). TP splits the channels by head."""
    hidden_size: int
    lru_width: int
    num_attention_heads: int  # the RG-LRU's gate blocks, which TP must divide
    conv1d_width: int
    state_dtype_bytes: int = 4  # the LRU state, float32
    conv_dtype_bytes: int = 2
    kernels = 7  # norm, x/y GEMM, conv, gates (bmm) + scan, multiply, out GEMM, residual

    def tensors(self) -> list[Tensor]:
        h, w, nh = self.hidden_size, self.lru_width, self.num_attention_heads
        block = w // nh
        ts = [norm_tensor("temporal_pre_norm", h)]
        ts += linear_tensors("linear_y", w, h, "col", True) + linear_tensors("linear_x", w, h, "col", True)
        ts += [Tensor("conv_1d", (w, self.conv1d_width), "col", linear=False),
               Tensor("conv_1d.bias", (w,), "col", linear=False),
               Tensor("rg_lru.recurrent_param", (w,), "col", linear=False)]
        for gate in ("input_gate", "recurrent_gate"):  # batched per-head matmuls, kept 16-bit
            ts += [Tensor(f"rg_lru.{gate}_weight", (nh, block, block), "col", linear=False),
                   Tensor(f"rg_lru.{gate}_bias", (nh, block), "col", linear=False)]
        return ts + linear_tensors("linear_out", h, w, "row", True)

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's state on one GPU: LRU state and conv window, split by TP."""
        lru = self.lru_width * self.state_dtype_bytes
        conv = self.lru_width * (self.conv1d_width - 1) * self.conv_dtype_bytes
        return (lru + conv) / tp


def _block_types(f: Fields, n: int) -> list[str]:
    """One block kind per layer: block_types cycled over n layers (RecurrentGemmaConfig's
    layers_block_type). The released configs spell the field _block_types."""
    key = "block_types" if f.get("block_types") is not None else "_block_types"
    cycle = f.list_(key, str) if f.get(key) is not None else DEFAULT_BLOCKS
    if not cycle or not set(cycle) <= set(BLOCK_KINDS):
        raise DecodescopeError(f"{f.source}: {key} must be a non-empty list of {', '.join(BLOCK_KINDS)}", f"fix {key}")
    return [cycle[i % len(cycle)] for i in range(n)]


def build_recurrent_gemma(f: Fields):
    """RecurrentGemma: per block_types an RG-LRU block or local attention, each with a biased GELU MLP."""
    g = f.with_defaults(RECURRENT_GEMMA_DEFAULTS)
    n, h, heads = g.need("num_hidden_layers"), g.need("hidden_size"), g.need("num_attention_heads")
    width = g.get("lru_width", default=h)
    if width % heads:
        raise DecodescopeError(f"{f.source}: lru_width {width} is not a multiple of num_attention_heads {heads}",
                               "fix lru_width / num_attention_heads: the RG-LRU gates have one block per head")
    recurrent = RGLRUBlock(h, width, heads, g.need("conv1d_width"))
    local = attention(g, g.need("attention_window_size"), o_bias=True)
    mlp = DenseMLP(h, g.need("intermediate_size") // 2, bias=True)
    layers = [Layer("linear_attention", recurrent, mlp) if kind == "recurrent" else Layer("sliding_attention", local, mlp)
              for kind in _block_types(g, n)]
    return layers, [], ()


def build_hrm_text(f: Fields):
    """HRM-Text: per H cycle, L_cycles passes of the L stack and one of the H stack, each pass of a
    stack after its first reusing its weights."""
    g = f.with_defaults(HRM_DEFAULTS)
    # transformers writes the per-stack depth in num_layers_per_stack and the executed total in
    # num_hidden_layers; the released config.json has only num_hidden_layers, per stack
    per_stack = g.get("num_layers_per_stack") or g.need("num_hidden_layers")
    h_cycles, l_cycles, h = g.need("H_cycles"), g.need("L_cycles"), g.need("hidden_size")
    if per_stack * h_cycles * (l_cycles + 1) > MAX_PASSES:
        raise DecodescopeError(f"{f.source}: {per_stack} layers x {h_cycles} H cycles x ({l_cycles} + 1) stack "
                               f"passes is over {MAX_PASSES} layer passes a token", "fix H_cycles / L_cycles")
    heads = g.need("num_attention_heads")
    # gate_proj [heads x head_dim, hidden] is counted as attn_output_gate's half of q_proj: same shape and split
    attn = NormlessAttention(**asdict(attention(g, num_key_value_heads=heads, attn_output_gate=True)))
    mlp = DenseMLP(h, g.need("intermediate_size"), bias=bool(g.get("mlp_bias", default=False)), norm=False)
    owner = Layer("attention", attn, mlp)
    first = [replace(owner, extra=(norm_tensor("z_L_init", h),))] + [owner] * (per_stack - 1)
    again = [replace(owner, reuses=True)] * per_stack
    layers = []
    for cycle in range(h_cycles):
        layers += (first if cycle == 0 else again) + again * (l_cycles - 1)  # the L stack
        layers += [owner] * per_stack if cycle == 0 else again  # the H stack
    notes = ("HRM-Text: every token runs the L stack L_cycles x H_cycles times and the H stack H_cycles "
             "times; the weights are read on every pass and every pass keeps its own KV cache",)
    return layers, [], notes
