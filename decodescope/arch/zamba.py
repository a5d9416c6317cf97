"""Builders of Zyphra's Zamba2 and Zamba (v1): Mamba2 (Zamba: multi-head Mamba) layers, and
at the "hybrid" positions a shared transformer block (attention + MLP) run before that
position's own linear and Mamba layer.

transformers 5.24 models/zamba2: the shared block's attention reads cat(hidden state, the
token embeddings), 2 x hidden wide; num_mem_blocks such blocks take the hybrid positions in
turn, their weights tied, so a block's weights are held once but read at every position it
runs at. Each position has its own LoRA adapters (gate_up always, q/k/v with
use_shared_attention_adapter), its own `linear` (hidden x hidden) and its own KV cache
(Zamba2's cache keeps a full-attention layer per hybrid position). Zamba v1
(models/zamba) has one shared block and no adapters."""

from dataclasses import dataclass, replace

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Mamba1, Mamba2, Tensor
from decodescope.arch.build import STATE_DTYPE_BYTES, state_dtype
from decodescope.arch.classic import split_evenly
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import per_layer_words

# Zamba2Config's layers_block_type when a config names none (54 layers, Zamba2-2.7B's)
ZAMBA2_PATTERN = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3
                  + ["hybrid"] + ["mamba"] * 2)
# the words layers_block_type holds: the Zyphra release's "mamba", transformers 5's "linear_attention"
ZAMBA2_KINDS = ("mamba", "linear_attention", "hybrid")
# Zamba2Config's defaults for the fields a config may leave out
ZAMBA2_DEFAULTS = {"hidden_size": 2560, "num_attention_heads": 32, "mamba_d_state": 64, "mamba_d_conv": 4,
                   "mamba_expand": 2, "mamba_ngroups": 1, "n_mamba_heads": 8, "num_mem_blocks": 1,
                   "adapter_rank": 128}


@dataclass(frozen=True)
class ConcatAttention(Attention):
    """Attention over cat(hidden state, embeddings): its input norm and q/k/v read
    `input_size` (2 x hidden_size) values a token; o_proj writes hidden_size."""
    input_size: int = 0

    def tensors(self) -> list[Tensor]:
        wide = ("input_layernorm", "q_proj", "k_proj", "v_proj")
        return [replace(t, shape=t.shape[:-1] + (self.input_size,)) if t.name in wide else t
                for t in super().tensors()]


def _mamba(f: Fields) -> Mamba2:
    """Zamba2MambaMixer: inner = mamba_expand x hidden in n_mamba_heads heads (mamba_headdim is
    derived, whatever the config says); conv1d always has a bias (nn.Conv1d(bias=True)),
    in_proj and out_proj one with add_bias_linear."""
    h = f.need("hidden_size")
    inner, heads = f.need("mamba_expand") * h, f.need("n_mamba_heads")
    return Mamba2(h, heads, split_evenly(f, inner, heads, "mamba_expand x hidden_size", "n_mamba_heads"),
                  f.need("mamba_ngroups"), f.need("mamba_d_state"), f.need("mamba_d_conv"), True,
                  bool(f.get("add_bias_linear", default=False)), STATE_DTYPE_BYTES[state_dtype(f)])


def _shared_block(f: Fields, wide: int, head_dim: int, bias: bool) -> tuple[ConcatAttention, DenseMLP]:
    """Zamba(2)AttentionDecoderLayer: input_layernorm over `wide` (attention_hidden_size, 2h),
    q/k/v from it in heads of head_dim, o_proj back to h; pre_ff_layernorm and a gated GELU
    MLP (gate_up_proj or gate / up, down_proj)."""
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    attn = ConcatAttention(h, heads, f.get("num_key_value_heads", default=heads), head_dim, input_size=wide)
    return attn, DenseMLP(h, f.get("intermediate_size", default=4 * h), bias=bias)


def _head_dim(f: Fields) -> int:
    """2 x hidden_size / num_attention_heads: both classes' attention_head_dim."""
    return split_evenly(f, 2 * f.need("hidden_size"), f.need("num_attention_heads"), "2 x hidden_size",
                        "num_attention_heads")


def _adapters(f: Fields, mlp: DenseMLP) -> tuple[Tensor, ...]:
    """One hybrid position's own weights: `linear` (h x h; vLLM replicates it) and its LoRA
    adapters, A [rank, in] and B [out, rank] (vLLM's Zamba2LoRA: both column-parallel)."""
    h, r = f.need("hidden_size"), f.need("adapter_rank")
    pairs = [("gate_up_proj_adapter", h, 2 * mlp.intermediate_size)]
    if f.get("use_shared_attention_adapter", default=False):  # each adds 2h to q, k and v
        pairs += [(f"linear_{p}_adapter", 2 * h, 2 * h) for p in "qkv"]
    ts = [Tensor("linear", (h, h), "rep")]
    for name, n_in, n_out in pairs:
        ts += [Tensor(name + ".A", (r, n_in), "col"), Tensor(name + ".B", (n_out, r), "col")]
    return tuple(ts)


def _layers(types, shared: Layer, own: Layer, mamba: Layer, blocks: int) -> list[Layer]:
    """A Mamba layer per "mamba" entry; per "hybrid" entry the shared block (reuses=True past the
    first `blocks` hybrid positions: its weights are held once) and the position's own layer."""
    layers, hybrid = [], 0
    for t in types:
        if t == "hybrid":
            layers += [replace(shared, reuses=hybrid >= blocks), own]
            hybrid += 1
        else:
            layers.append(mamba)
    return layers


def build_zamba2(f: Fields):
    """Zamba2: layers_block_type (or Zamba2Config's default pattern), num_mem_blocks shared
    blocks in turn; each hybrid position's own layer holds its linear, adapters and Mamba2."""
    g = f.with_defaults(ZAMBA2_DEFAULTS)
    types = ZAMBA2_PATTERN if g.get("layers_block_type") is None else per_layer_words(
        g, "layers_block_type", g.need("num_hidden_layers"), ZAMBA2_KINDS)
    # Zamba2Config derives attention_hidden_size (2h) and attention_head_dim, whatever the config says
    mamba = _mamba(g)
    attn, mlp = _shared_block(g, 2 * g.need("hidden_size"), _head_dim(g), bool(g.get("add_bias_linear", default=False)))
    own = Layer("mamba", mamba, None, _adapters(g, mlp))
    notes = () if g.get("layers_block_type") is not None else (
        "no layers_block_type: Zamba2Config's default 54-layer pattern assumed",)
    return _layers(types, Layer("attention", attn, mlp), own, Layer("mamba", mamba, None),
                   g.need("num_mem_blocks")), [], notes


# ZambaConfig's defaults for the fields a config may leave out (Zamba-7B-v1's shapes)
ZAMBA_DEFAULTS = {"hidden_size": 3712, "intermediate_size": 14848, "num_hidden_layers": 76, "num_attention_heads": 16,
                  "num_key_value_heads": 16, "n_mamba_heads": 2, "attn_layer_period": 6, "attn_layer_offset": 4,
                  "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}


def _zamba_types(f: Fields, n: int) -> list[str]:
    """layers_block_type, or ZambaConfig's default: hybrid at layer 2, then wherever
    (i - 3) % attn_layer_period == attn_layer_offset."""
    if f.get("layers_block_type") is not None:
        return per_layer_words(f, "layers_block_type", n, ZAMBA2_KINDS)
    period, offset = f.need("attn_layer_period"), f.need("attn_layer_offset")
    return ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(n - 3)]


def build_zamba(f: Fields):
    """Zamba (v1): one shared block (no adapters) at every hybrid position. Its ZambaMambaMixer
    splits inner = mamba_expand x hidden into n_mamba_heads heads, each with its own x_proj and
    dt_proj; summed over the heads they are Mamba (v1)'s tensors, the state is [inner, d_state]
    plus the conv window. dt rank mamba_dt_rank ("auto": hidden / 16 rounded up)."""
    g = f.with_defaults(ZAMBA_DEFAULTS)
    h, inner = g.need("hidden_size"), g.need("mamba_expand") * g.need("hidden_size")
    # ZambaConfig refuses an inner width its heads do not divide (validate_architecture)
    split_evenly(g, inner, g.need("n_mamba_heads"), "mamba_expand x hidden_size", "n_mamba_heads")
    rank = g.data.get("mamba_dt_rank")
    rank = -(-h // 16) if rank in (None, "auto") else check_int(g.source, "mamba_dt_rank", rank)
    mamba = Mamba1(h, inner, 1, 0, g.need("mamba_d_state"), g.need("mamba_d_conv"),
                   bool(g.get("mamba_conv_bias", default=True)), bool(g.get("mamba_proj_bias", default=False)),
                   STATE_DTYPE_BYTES[state_dtype(g)], dt_rank=rank, dt_bc_norms=False)
    # ZambaConfig: attention_hidden_size and attention_head_dim as given, else 2h and 2h / heads
    wide = g.need("attention_hidden_size") if g.get("attention_hidden_size") else 2 * h
    attn, mlp = _shared_block(g, wide, g.get("attention_head_dim") or _head_dim(g), False)
    own = Layer("mamba", mamba, None, (Tensor("linear", (h, h), "rep"),))
    return _layers(_zamba_types(g, g.need("num_hidden_layers")), Layer("attention", attn, mlp), own,
                   Layer("mamba", mamba, None), 1), [], ()
