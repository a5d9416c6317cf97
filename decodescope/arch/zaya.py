"""Builder of Zyphra's ZAYA1 (model_type zaya): every layer is compressed convolutional
attention (CCA) and a top-1 MoE whose router is a small MLP.

transformers 5.24 models/zaya: CCA projects q to num_attention_heads x head_dim (narrower than
hidden) and k to num_key_value_heads x head_dim, runs a depthwise (cca_time0 taps) and then a
grouped (cca_time1 taps, one group per q or k head) causal conv over cat(q, k), and builds V
from two half-width projections, one of the current token and one of the token before. The KV
cache holds K and V at the compressed width (kv_heads x head_dim each); beside it a request
keeps, per layer, the last (cca_time0 - 1) + (cca_time1 - 1) conv inputs of cat(q, k) and the
previous token's delayed V half: a fixed-size state. The router reads down_proj(hidden)
(router_hidden_size wide, plus the previous layer's router state on later layers), an RMSNorm
and two GELU layers, and scores num_experts + 1 classes: the last is a skip expert that runs
nothing. Residual-scaling vectors (scale and bias of the branch and of the residual) follow the
attention and the MoE; the embeddings get a scale and a bias of their own."""

from dataclasses import asdict, dataclass

from decodescope.arch.blocks import Attention, Layer, MoE, StateMixer, Tensor, linear_tensors, norm_tensor
from decodescope.arch.mixers import AttentionWithState
from decodescope.arch.build import attention, moe
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# ZayaConfig's layer_types words: full attention with the "hybrid" rope, a window with "hybrid_sliding"
ZAYA_KINDS = ("hybrid", "hybrid_sliding")
# ZayaConfig's defaults for the CCA conv taps and the router's width
ZAYA_DEFAULTS = {"cca_time0": 2, "cca_time1": 2, "router_hidden_size": 256}


@dataclass(frozen=True)
class CCAAttention(Attention):
    """The attention half of CCA: q/k/o as Attention's, V as two half-width projections
    (v_proj_current, v_proj_delayed), the two q/k convs with biases, and qk_norm's learned key
    temperature (one per KV head). Its KV cache is Attention's: K and V of kv_heads x head_dim."""
    cca_time0: int = 2  # taps of the depthwise conv
    cca_time1: int = 2  # taps of the grouped conv

    @property
    def conv_channels(self) -> int:  # the convs run over cat(q, k)
        return (self.num_attention_heads + self.num_key_value_heads) * self.head_dim

    def tensors(self) -> list[Tensor]:
        # built with v_proj=False: Attention's tensors less V, which CCA splits in two halves
        half, kv, c = self.num_key_value_heads * self.head_dim // 2, self.num_key_value_heads, self.conv_channels
        ts = super().tensors()
        for name in ("v_proj_current", "v_proj_delayed"):
            ts += linear_tensors(name, half, self.hidden_size, "kv", self.attention_bias, kv_heads=kv)
        return ts + [Tensor("conv_qk_depthwise", (c, self.cca_time0), "col", linear=False),
                     Tensor("conv_qk_depthwise.bias", (c,), "col", linear=False),
                     Tensor("conv_qk_grouped", (c, self.head_dim, self.cca_time1), "col", linear=False),
                     Tensor("conv_qk_grouped.bias", (c,), "col", linear=False),
                     Tensor("qk_norm.temp", (kv,), "rep", linear=False)]


@dataclass(frozen=True)
class CCAState(StateMixer):
    """The fixed-size state of one CCA layer per request: the conv window of cat(q, k)
    ((cca_time0 - 1) + (cca_time1 - 1) past inputs of conv_channels each) and the previous
    token's delayed V half (kv_heads x head_dim / 2), both in the activation dtype (bf16)."""
    conv_channels: int
    window: int  # past tokens the two stacked convs see
    delayed_width: int
    state_dtype_bytes: int = 2
    kernels = 0  # the conv and the V shift run inside CCA's own kernels; its weights are CCAAttention's

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's state on one GPU (q/k heads and V split by TP)."""
        return (self.conv_channels * self.window + self.delayed_width) * self.state_dtype_bytes / tp


@dataclass(frozen=True)
class CCAMixer(AttentionWithState):
    """A CCA layer's mixer: its attention (KV cache per token) and its state (per request)."""
    attention: CCAAttention
    state: CCAState
    state_kernels = 1  # the q/k conv


@dataclass(frozen=True)
class ZayaMoE(MoE):
    """MoE whose router is ZayaRouter: down_proj (with bias) to router_hidden_size, an RMSNorm,
    fc1 and fc2 (with biases), out_proj to num_experts + 1 classes (the skip expert), and on
    every layer but the first router_states_scale, which weighs the previous layer's router state."""
    router_hidden_size: int = 256
    router_states_scale: bool = True

    def tensors(self) -> list[Tensor]:
        r, e = self.router_hidden_size, self.num_experts + 1
        router = [*linear_tensors("gate.down_proj", r, self.hidden_size, "rep", True, linear=False),
                  norm_tensor("gate.router_mlp.norm", r),
                  *linear_tensors("gate.router_mlp.fc1", r, r, "rep", True, linear=False),
                  *linear_tensors("gate.router_mlp.fc2", r, r, "rep", True, linear=False),
                  Tensor("gate.router_mlp.out_proj", (e, r), "rep", linear=False)]
        if self.router_states_scale:
            router.append(norm_tensor("gate.router_states_scale", r))
        return [t for t in super().tensors() if t.name != "router"] + router


def _cca(f: Fields, window: int | None) -> CCAMixer:
    taps = {k: f.need(k) for k in ("cca_time0", "cca_time1")}
    attn = CCAAttention(**asdict(attention(f, window, v_proj=False)), **taps)
    if attn.num_attention_heads % attn.num_key_value_heads or attn.head_dim * attn.num_key_value_heads % 2:
        raise DecodescopeError(f"{f.source}: CCA needs num_attention_heads a multiple of num_key_value_heads "
                               "and an even V width", "fix num_attention_heads / num_key_value_heads / head_dim")
    state = CCAState(attn.conv_channels, attn.cca_time0 + attn.cca_time1 - 2,
                     attn.num_key_value_heads * attn.head_dim // 2)
    return CCAMixer(attn, state)


def _residual_scales(h: int, first: bool) -> tuple[Tensor, ...]:
    """ZayaResidualScaling after the attention and after the MoE (4 vectors of hidden each);
    the model's input_hidden_states_scale / bias are counted on the first layer."""
    names = [f"{block}.{v}" for block in ("post_attention_residual_scale", "post_mlp_residual_scale")
             for v in ("hidden_states_scale", "hidden_states_bias", "residual_scale", "residual_bias")]
    names += ["input_hidden_states_scale", "input_hidden_states_bias"] if first else []
    return tuple(norm_tensor(n, h) for n in names)


def build_zaya(f: Fields):
    """ZAYA1: n layers of CCA + a top-1 ZayaMoE; layer_types picks full or sliding attention."""
    if f.get("zaya_mlp_expansion") is not None:
        raise DecodescopeError(f"{f.source}: this is ZAYA1's original (Megatron-style) config, whose "
                               "num_hidden_layers counts attention and MoE half-layers",
                               "pass the transformers-format config.json (moe_intermediate_size, "
                               "router_hidden_size, layer_types)")
    g = f.with_defaults(ZAYA_DEFAULTS)
    n, h = g.need("num_hidden_layers"), g.need("hidden_size")
    types = per_layer_words(g, "layer_types", n, ZAYA_KINDS) if g.get("layer_types") else ["hybrid"] * n
    window = g.need("sliding_window", "hybrid_sliding layers") if "hybrid_sliding" in types else None
    full, sliding = _cca(g, None), _cca(g, window) if window else None
    routed, r = asdict(moe(g)), g.need("router_hidden_size")
    layers = [Layer("sliding_attention" if t == "hybrid_sliding" else "attention",
                    sliding if t == "hybrid_sliding" else full,
                    ZayaMoE(**routed, router_hidden_size=r, router_states_scale=i > 0), _residual_scales(h, i == 0))
              for i, t in enumerate(types)]
    notes = ("ZAYA1 router: the skip expert (class num_experts + 1) is taken as never chosen, so every "
             "token is charged one routed expert",)
    return layers, [], notes
