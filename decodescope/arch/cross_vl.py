"""Vision-language decoders whose text layers differ from a known family's: Llama 3.2 Vision
(mllama: cross-attention layers over the image tokens), ERNIE-4.5-VL (text and vision expert
groups side by side) and Meta's Muse Glimmer / Muse Spark (gated sliding attention, sandwich
norms; Spark adds residual gates and a pooled MoE)."""

from dataclasses import dataclass

from decodescope.arch.blocks import DenseMLP, Layer, PooledKV, Tensor, norm_tensor
from decodescope.arch.build import attention, mlp_layer_types, moe
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError


@dataclass(frozen=True)
class CrossAttention(PooledKV):
    """Mllama's cross-attention (MllamaTextCrossAttention): text queries attend to the image
    tokens' K and V, projected once per request from the vision encoder's output and kept for
    the whole request; per-head RMSNorms on q and k, no rotary. Its cache is `image_tokens`
    rows whatever the context, and it holds no self-attention KV. A decode pass reads only the
    query side and o_proj: k_proj, v_proj and k_norm made the cached K/V once (`idle`)."""
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    image_tokens: int  # rows of the cross-attention cache, per request
    kernels = 7  # norm, q GEMM, q-norm, attention, o GEMM, gate, residual

    def tensors(self) -> list[Tensor]:
        h, d = self.hidden_size, self.head_dim
        return [norm_tensor("input_layernorm", h), Tensor("q_proj", (self.num_attention_heads * d, h), "col"),
                Tensor("o_proj", (h, self.num_attention_heads * d), "row"), norm_tensor("q_norm", d)]

    @property
    def idle(self) -> tuple[Tensor, ...]:
        h, d, kv = self.hidden_size, self.head_dim, self.num_key_value_heads
        return (Tensor("k_proj", (kv * d, h), "kv", kv_heads=kv), Tensor("v_proj", (kv * d, h), "kv", kv_heads=kv),
                norm_tensor("k_norm", d))

    def kv_cache_bytes(self, context: int, dtype_bytes: float, tp: int) -> float:
        """One request's cross cache on one GPU: its share of the KV heads (at least one)."""
        return self.kv_read_bytes(context, max(1, self.num_key_value_heads // tp), dtype_bytes)

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """K and V of every image token, whatever the text context."""
        return self.image_tokens * kv_heads * 2 * self.head_dim * dtype_bytes

    def attention_flops_per_token(self, heads: float, context: int) -> float:
        # QK^T and PV over head_dim, 2 FLOP per MAC, for each image token
        return 4 * heads * self.head_dim * self.image_tokens


# MllamaVisionConfig as released (Llama-3.2-11B / 90B-Vision): 560-pixel tiles of 14-pixel
# patches, up to 4 tiles per image. The class defaults say 448; text_fields drops vision_config
# from the fields a builder reads, so a vision_config reaches here only when passed on
RELEASED_VISION = {"image_size": 560, "patch_size": 14, "max_num_tiles": 4}


def mllama_image_tokens(f: Fields) -> tuple[int, str]:
    """(image tokens per request, where the geometry came from): one image per request, its
    max_num_tiles tiles of (image_size / patch_size)^2 patches + 1 class token each
    (modeling_mllama.py: num_patches = (image_size // patch_size) ** 2 + 1; the static cache's
    cross_attention_cache_len = num_images * max_num_tiles * num_patches)."""
    vision = f.data.get("vision_config")
    given = isinstance(vision, dict) and all(vision.get(k) is not None for k in RELEASED_VISION)
    geo = {k: vision[k] for k in RELEASED_VISION} if given else RELEASED_VISION
    if not all(type(v) is int and 0 < v <= 1 << 16 for v in geo.values()) or geo["patch_size"] > geo["image_size"]:
        raise DecodescopeError(f"{f.source}: vision_config image_size, patch_size and max_num_tiles must be "
                               "integers from 1 to 65536, the patch no larger than the image", "fix vision_config")
    tokens = geo["max_num_tiles"] * ((geo["image_size"] // geo["patch_size"]) ** 2 + 1)
    return tokens, "its vision_config" if given else "the released checkpoints' vision_config (560 / 14, 4 tiles)"


def build_mllama(f: Fields):
    """Llama 3.2 Vision's language model: Llama layers, with a cross-attention layer (tanh-gated
    attention and MLP, one scalar gate each) at every index in cross_attention_layers; the
    embedding holds 8 rows past vocab_size (the image token among them), the head does not."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    cross_at = f.list_("cross_attention_layers", int)
    if cross_at is None or not all(0 <= i < n for i in cross_at):
        raise DecodescopeError(f"{f.source}: cross_attention_layers must list layers 0 to {n - 1}",
                               "fix text_config.cross_attention_layers (11B: [3, 8, ..., 38])")
    self_attn = attention(f)  # head_dim = hidden / heads in both kinds (no head_dim field)
    tokens, geometry = mllama_image_tokens(f)
    cross = CrossAttention(h, self_attn.num_attention_heads, self_attn.num_key_value_heads, self_attn.head_dim, tokens)
    mlp = DenseMLP(h, f.need("intermediate_size"))
    gates = (Tensor("cross_attn_attn_gate", (1,), "rep", linear=False),
             Tensor("cross_attn_mlp_gate", (1,), "rep", linear=False))
    layers = [Layer("cross_attention", cross, mlp, gates, idle=cross.idle) if i in cross_at
              else Layer("attention", self_attn, mlp)
              for i in range(n)]
    per_layer = 2 * tokens * self_attn.num_key_value_heads * self_attn.head_dim  # K and V values
    notes = (f"cross-attention layers hold the image tokens' K/V, one image per request: {tokens} tokens from "
             f"{geometry}, {per_layer} values per layer per request whatever the context, split by TP as the "
             "KV heads; their k/v projections run once per request, not in decode passes",)
    return layers, [], notes, (Tensor("embed_tokens.extra_rows", (8, h), "vocab", linear=False),)


def _expert_sizes(f: Fields) -> tuple[int, int]:
    """ERNIE-4.5-VL's moe_intermediate_size: [text experts', vision experts'] widths
    (Ernie4_5_VLMoeTextConfig's default [1536, 512])."""
    sizes = f.data.get("moe_intermediate_size", [1536, 512])
    if not isinstance(sizes, list) or len(sizes) != 2:
        raise DecodescopeError(f"{f.source}: moe_intermediate_size must be [text, vision] expert widths",
                               "fix text_config.moe_intermediate_size (28B-A3B: [1536, 512])")
    text, vision = (check_int(f.source, "moe_intermediate_size", x) for x in sizes)
    return text, vision


def build_ernie4_5_vl_moe(f: Fields):
    """ERNIE-4.5-VL's language model (Ernie4_5_VLMoeTextModel): ERNIE 4.5 MoE layers whose sparse
    MLP holds two routed groups of num_experts experts, each with its own router and correction
    bias: text experts run on text tokens, vision experts on image / video tokens, one shared MLP
    on all. Decode emits text tokens only, so the vision group is counted and held (split as
    the text experts are) but never read: Layer.idle."""
    f = rename(f, {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k", "attention_bias": "use_bias"})
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    bias = bool(f.get("attention_bias", default=False))
    kinds = mlp_layer_types(f) if f.get("mlp_layer_types") is not None else ["dense"] + ["sparse"] * (n - 1)
    text_i, vision_i = _expert_sizes(f)
    shared = text_i * f.get("moe_num_shared_experts", default=0)
    # moe() reads one width: the text experts'
    text = moe(Fields({**f.data, "moe_intermediate_size": text_i}, f.source),
               shared_expert_intermediate_size=shared, router_bias=True)
    dense = DenseMLP(h, f.need("intermediate_size"), bias=bias)
    e = text.num_experts
    # per sparse layer: vision experts gate_up [2 x vision_i, h] + down [h, vision_i] each; their router [e, h] + bias [e]
    vision = (Tensor("vision_experts.gate_up_proj", (2 * vision_i, h), "col", experts=e),
              Tensor("vision_experts.down_proj", (h, vision_i), "row", experts=e),
              Tensor("vision_gate", (e, h), "rep", linear=False), Tensor("vision_gate.bias", (e,), "rep", linear=False))
    attn = attention(f)
    layers = [Layer("attention", attn, dense) if k == "dense" else Layer("attention", attn, text, idle=vision)
              for k in kinds]
    notes = (f"vision experts ({e} per sparse layer, width {vision_i}) counted and held, never read: "
             "decode runs text tokens, which route to the text experts only",) if "sparse" in kinds else ()
    return layers, [], notes


def _muse_layer_types(f: Fields, n: int) -> list[str]:
    """layer_types, else MuseGlimmerTextConfig's default: every 4th layer counted back from the
    last attends in full (a NoPE layer), the others within sliding_window."""
    if f.get("layer_types") is None:
        return ["full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention" for i in range(n)]
    return per_layer_words(f, "layer_types", n, ("full_attention", "sliding_attention"))


def _muse_layers(f: Fields, mlps: list, extras: list[tuple[Tensor, ...]]) -> list[Layer]:
    """Muse attention per layer: q, k, v, o and a sigmoid output gate per channel (gate_proj, the
    width of q_proj, counted in q_proj), weightless q/k norms; sliding layers windowed."""
    types = _muse_layer_types(f, len(mlps))
    window = f.need("sliding_window", "the sliding layers") if "sliding_attention" in types else None
    layers = []
    for t, mlp, extra in zip(types, mlps, extras):
        w = window if t == "sliding_attention" else None
        layers.append(Layer("sliding_attention" if w else "attention", attention(f, w, attn_output_gate=True), mlp, extra))
    return layers


def _norms(h: int, *names: str) -> tuple[Tensor, ...]:
    return tuple(norm_tensor(name, h) for name in names)


def build_muse_glimmer(f: Fields):
    """Muse Glimmer's language model (MuseGlimmerTextModel): Gemma 2's four norms per layer
    around gated attention and a dense MLP; the embedding's norm holds no weights."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    mlp = DenseMLP(h, f.need("intermediate_size"))
    return _muse_layers(f, [mlp] * n, [_norms(h, "pre_feedforward_layernorm", "post_feedforward_layernorm")] * n), [], ()


def build_muse_spark(f: Fields):
    """Muse Spark's language model (MuseSparkTextModel): Glimmer's attention; the MLP's pre-norm and
    post-norm weighted (the post-attention norm holds none), each sublayer's residual mixed by a
    learned gate per channel; sparse layers route (sigmoid, correction bias) to experts that run
    at moe_hidden_size: pre_expert_proj and a norm in, a norm on the expert sum, post_expert_proj out."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    kinds = mlp_layer_types(f) if f.get("mlp_layer_types") is not None else ["sparse"] * n
    latent = f.need("moe_hidden_size", "the experts' width")
    routed = moe(f, latent_size=latent, router_bias=True)
    dense = DenseMLP(h, f.need("intermediate_size"))
    own = _norms(h, "post_feedforward_layernorm", "post_attention_residual_gate", "post_feedforward_residual_gate")
    pooled = own + _norms(latent, "pre_expert_norm", "post_expert_norm")
    mlps = [dense if k == "dense" else routed for k in kinds]
    return _muse_layers(f, mlps, [own if k == "dense" else pooled for k in kinds]), [], ()
