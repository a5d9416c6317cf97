"""Builder of Thinking Machines' Inkling decoder (model_type inkling_text; the multimodal
inkling_mm_model nests it under text_config).

transformers 5.24 models/inkling: every layer is attention and an MLP, no RoPE. The attention
projects q, k, v and o plus r_proj (num_heads x d_rel relative states that mix the
rel_logits_proj.proj bank [d_rel, extent] into a bias per backward distance; extent is
rel_extent on full layers, the window on sliding ones), normalises q and k per head, and runs a
depthwise causal short conv (conv_kernel_size taps, plus the residual) over k and over v before
the cache. Sliding layers ("hybrid_sliding", by default every layer i with (i + 1) % 6 != 0)
attend in a window with their own head counts (swa_*: 16 KV heads by default, the full layers
8). Two more short convs of hidden width run on the attention's output (attn_sconv) and on the
MLP's (mlp_sconv). The MLP is a MoE (mlp_layer_types "sparse") whose router scores the routed
and the shared experts together (n_routed_experts + n_shared_experts outputs, the shared ones
only weigh the shared experts) and carries a learned global_scale; "dense" layers are a SwiGLU
MLP with a global_scale. The embeddings are RMS-normalised (embed_tokens.embed_norm).

Per request a layer keeps, besides its KV cache, the last conv_kernel_size - 1 inputs of each of
its four convs: k and v (kv_heads x head_dim each) and the attention and MLP outputs (hidden
each), kept in float32 (InklingShortConvolution casts to float before it updates the cache)."""

from dataclasses import asdict, dataclass, replace

from decodescope.arch.blocks import Attention, DenseMLP, Layer, MoE, StateMixer, Tensor, linear_tensors, norm_tensor
from decodescope.arch.mixers import AttentionWithState
from decodescope.arch.build import attention, moe
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# InklingTextConfig's defaults for the fields a checkpoint config may leave out
INKLING_DEFAULTS = {"d_rel": 16, "rel_extent": 1024, "sliding_window_size": 512, "n_shared_experts": 2,
                    "conv_kernel_size": 4}
INKLING_KINDS = ("hybrid", "hybrid_sliding")  # full attention, a window of sliding_window_size
MLP_KINDS = ("dense", "sparse")


@dataclass(frozen=True)
class InklingAttention(Attention):
    """Attention (per-head q/k norms) plus r_proj, the relative-logits bank and the k / v short
    convs (depthwise, no bias, split with their KV heads). Its KV cache is Attention's."""
    d_rel: int = 16
    rel_extent: int = 1024  # distances the bias bank covers: rel_extent, or the window on sliding layers
    conv_kernel: int = 4

    def tensors(self) -> list[Tensor]:
        kv = self.num_key_value_heads
        convs = [Tensor(f"{x}_sconv.conv1d", (kv * self.head_dim, self.conv_kernel), "kv", linear=False, kv_heads=kv)
                 for x in ("k", "v")]
        return (super().tensors() + linear_tensors("r_proj", self.num_attention_heads * self.d_rel, self.hidden_size, "col")
                + convs + [Tensor("rel_logits_proj.proj", (self.d_rel, self.rel_extent), "rep", linear=False)])


@dataclass(frozen=True)
class InklingConvState(StateMixer):
    """The four short convs' windows of one layer per request: conv_kernel - 1 past inputs of k
    and v (split with the KV heads, replicated once TP > kv_heads, as the cache is) and of the
    attention and MLP outputs (hidden wide, after the allreduce: whole on every GPU)."""
    hidden_size: int
    kv_heads: int
    head_dim: int
    conv_kernel: int
    state_dtype_bytes: int = 4  # float32, as transformers' cache holds them
    kernels = 0  # the convs' kernels are counted on the attention and the MLP

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's conv windows on one GPU."""
        kv = max(1, self.kv_heads // tp) * self.head_dim
        return (2 * kv + 2 * self.hidden_size) * (self.conv_kernel - 1) * self.state_dtype_bytes


@dataclass(frozen=True)
class InklingMixer(AttentionWithState):
    """An Inkling layer's mixer: its attention (KV cache per token) and its convs' state (per
    request); attn_sconv runs after o_proj's allreduce."""
    attention: InklingAttention
    state: InklingConvState
    state_kernels = 3  # the k and v convs, attn_sconv


@dataclass(frozen=True)
class InklingMoE(MoE):
    """MoE whose router (gate.weight) scores the routed and the shared experts, with a learned
    gate.global_scale; the shared experts are MoE's shared expert of n_shared x the expert width.
    Its e_score_correction_bias is a buffer in transformers, not a parameter: left out."""
    shared_experts: int = 2
    kernels = 9  # MoE's, and mlp_sconv

    def tensors(self) -> list[Tensor]:
        routed = [t for t in super().tensors() if t.name != "router"]
        return routed + [Tensor("gate.weight", (self.num_experts + self.shared_experts, self.hidden_size), "rep",
                                linear=False), Tensor("gate.global_scale", (1,), "rep", linear=False)]


@dataclass(frozen=True)
class InklingMLP(DenseMLP):
    """The dense SwiGLU MLP of the first layers, with a learned global_scale on its output."""
    kernels = 5  # DenseMLP's, and mlp_sconv

    def tensors(self) -> list[Tensor]:
        return super().tensors() + [Tensor("global_scale", (1,), "rep", linear=False)]


def _attention_types(f: Fields, n: int) -> list[str]:
    """layer_types, else local_layer_ids (the sliding layers), else InklingTextConfig's rule."""
    if f.get("layer_types") is not None:
        return per_layer_words(f, "layer_types", n, INKLING_KINDS)
    local = f.list_("local_layer_ids", int)
    if local is not None and not all(0 <= i < n for i in local):
        raise DecodescopeError(f"{f.source}: local_layer_ids must name layers 0 to {n - 1}", "fix local_layer_ids")
    local = set(local) if local is not None else {i for i in range(n) if (i + 1) % 6}
    return ["hybrid_sliding" if i in local else "hybrid" for i in range(n)]


def _mlp_widths(f: Fields) -> tuple[int, int]:
    """(dense width, expert width): checkpoints write the experts' under intermediate_size and the
    dense MLP's as dense_intermediate_size (InklingTextConfig.__post_init__ swaps them)."""
    if f.get("dense_intermediate_size") is not None:
        return f.need("dense_intermediate_size"), f.need("intermediate_size")
    return f.need("intermediate_size"), f.need("moe_intermediate_size")


def _mixer(f: Fields, sliding: bool) -> InklingMixer:
    g = f
    if sliding:  # the sliding layers' own head counts and width
        g = Fields({**f.data, "num_attention_heads": f.need("swa_num_attention_heads"),
                    "num_key_value_heads": f.need("swa_num_key_value_heads"),
                    "head_dim": f.need("swa_head_dim")}, f.source)
    window = f.need("sliding_window_size") if sliding else None
    base = attention(g, window, qk_norm=True)
    k = f.get("sconv_kernel_size", "conv_kernel_size")
    attn = InklingAttention(**asdict(base), d_rel=f.need("d_rel"), rel_extent=window or f.need("rel_extent"),
                            conv_kernel=k)
    return InklingMixer(attn, InklingConvState(base.hidden_size, base.num_key_value_heads, base.head_dim, k))


def build_inkling(f: Fields):
    """Inkling: n layers of InklingMixer and an InklingMoE (or, where mlp_layer_types says dense /
    below dense_mlp_idx, an InklingMLP), two hidden-wide conv weights each."""
    g = f.with_defaults({**INKLING_DEFAULTS, "dense_mlp_idx": 0})
    n, h = g.need("num_hidden_layers"), g.need("hidden_size")
    kinds = _attention_types(g, n)
    dense_at = g.need("dense_mlp_idx")
    mlps = (per_layer_words(g, "mlp_layer_types", n, MLP_KINDS) if g.get("mlp_layer_types") is not None
            else ["dense" if i < dense_at else "sparse" for i in range(n)])
    dense_w, expert_w = _mlp_widths(g)
    shared = g.need("n_shared_experts")
    sparse = InklingMoE(**asdict(moe(g, moe_intermediate_size=expert_w, shared_expert_intermediate_size=shared * expert_w)),
                        shared_experts=shared)
    mixers = {kind: _mixer(g, kind == "hybrid_sliding") for kind in set(kinds)}
    convs = tuple(Tensor(f"{x}_sconv.conv1d", (h, mixers[kinds[0]].attention.conv_kernel), "rep", linear=False)
                  for x in ("attn", "mlp"))
    layers = [Layer("sliding_attention" if t == "hybrid_sliding" else "attention", mixers[t],
                    InklingMLP(h, dense_w) if m == "dense" else sparse,
                    convs + ((norm_tensor("embed_tokens.embed_norm", h),) if i == 0 else ()))
              for i, (t, m) in enumerate(zip(kinds, mlps))]
    notes = ("Inkling: the embedding's RMSNorm (embed_norm) is counted on layer 0; the router's "
             "e_score_correction_bias (a buffer in transformers) is not counted",)
    mtp = g.get("mtp_config")
    if g.get("num_mtp_layers") or (isinstance(mtp, dict) and mtp.get("num_nextn_predict_layers")):
        notes += ("Inkling's MTP layers (mtp_config) are not modelled: transformers 5.24 does not load them",)
    return layers, [], notes


# ---- Inkling 2 (model_type inkling2_text; inkling2 nests it under text_config) ----------------
#
# transformers 5.24 models/inkling2: Inkling's layer with every MLP a MoE (no shared experts, a
# plain router), the q, k and v inputs of each layer read from block attention residuals (a learned
# query over the sums of the earlier blocks of n_layers_per_attn_res_block layers: attention_input,
# mlp_input, the model's final_input), an output gate (o_proj.gate_proj, q's shape), a sink logit
# per head from the input (sink_proj), per-head learned q and relative-state scales, and on full
# layers dynamic k / v convs (static_weight + weight_proj taps per token and KV head) fed by their
# own q / k / v input norms. The block sums live within one token's pass: no state per request.

@dataclass(frozen=True)
class Inkling2Attention(InklingAttention):
    """Attention with attn_output_gate (it stands for o_proj.gate_proj, q's shape), no q / k norm
    weights but a learned scale per head and channel, sink_proj, the relative-position bias's
    own linear and scale, and k / v convs: fixed on sliding layers, dynamic on full ones."""
    dynamic: bool = False  # a full layer: dynamic convs, q / k / v input norms in place of input_layernorm

    def tensors(self) -> list[Tensor]:
        h, n, kv, d, k, r = (self.hidden_size, self.num_attention_heads, self.num_key_value_heads, self.head_dim,
                             self.conv_kernel, self.d_rel)
        ts = [t for t in Attention.tensors(self) if not (self.dynamic and t.name == "input_layernorm")]
        for x in ("k_proj", "v_proj"):
            ts += ([Tensor(f"{x}.sconv.static_weight", (k, kv * d), "kv", linear=False, kv_heads=kv),
                    Tensor(f"{x}.sconv.weight_proj", (kv * k, h), "kv", kv_heads=kv)] if self.dynamic
                   else [Tensor(f"{x}.sconv.conv1d", (kv * d, k), "kv", linear=False, kv_heads=kv)])
        ts += [norm_tensor(f"{x}_input_layernorm", h) for x in "qkv"] if self.dynamic else []
        return ts + [Tensor("q_proj.norm.scale", (n, d), "col", linear=False), *linear_tensors("sink_proj", n, h, "col"),
                     *linear_tensors("relative_position_bias.linear", n * r, h, "col"),
                     Tensor("relative_position_bias.norm.scale", (n, r), "col", linear=False),
                     Tensor("relative_position_bias.proj", (r, self.rel_extent), "rep", linear=False)]


@dataclass(frozen=True)
class Inkling2MoE(MoE):
    kernels = 9  # MoE's, and post_mlp_convolution


def _mixer2(f: Fields, sliding: bool) -> InklingMixer:
    """Inkling's mixer with Inkling2Attention: its state is the same four conv windows."""
    one = _mixer(f, sliding)
    attn = Inkling2Attention(**{**asdict(one.attention), "qk_norm": False, "attn_output_gate": True},
                             dynamic=not sliding)
    return InklingMixer(attn, one.state)


def _residual_queries(h: int, i: int, n: int, full: bool) -> tuple[Tensor, ...]:
    """A layer's block-residual queries (3 on a full layer's attention input: q, k and v), the
    embedding norm on layer 0 and the model's final_input query on the last."""
    ts = [norm_tensor("mlp_input.query", h)]
    if i == 0:  # layer 0 reads the embedding itself, through its norm
        ts.append(norm_tensor("embed_tokens.embed_norm", h))
    else:
        ts.append(Tensor("attention_input.query", (3 if full else 1, h), "rep", linear=False))
    if i == n - 1:
        ts.append(norm_tensor("final_input.query", h))
    return tuple(ts)


def build_inkling2(f: Fields):
    """Inkling 2: n layers of Inkling2Attention + an Inkling2MoE; layer_types, else every sixth in full."""
    g = f.with_defaults({**INKLING_DEFAULTS, "sliding_window_size": 1024, "swa_num_key_value_heads": 8})
    n, h = g.need("num_hidden_layers"), g.need("hidden_size")
    kinds = (per_layer_words(g, "layer_types", n, INKLING_KINDS) if g.get("layer_types") is not None
             else ["hybrid" if (i + 1) % 6 == 0 else "hybrid_sliding" for i in range(n)])
    mixers = {kind: _mixer2(g, kind == "hybrid_sliding") for kind in set(kinds)}
    sparse = Inkling2MoE(**asdict(moe(g)))
    convs = tuple(Tensor(f"post_{x}_convolution.conv1d", (h, mixers[kinds[0]].attention.conv_kernel), "rep",
                         linear=False) for x in ("attention", "mlp"))
    layers = [Layer("sliding_attention" if t == "hybrid_sliding" else "attention", mixers[t], sparse,
                    convs + _residual_queries(h, i, n, t == "hybrid"))
              for i, t in enumerate(kinds)]
    notes = ("Inkling 2: the head counted at vocab_size rows, as the checkpoint stores it; transformers drops "
             "the rows past unpadded_vocab_size on load",
             "Inkling 2: the block attention residuals' queries are counted, their small per-token "
             "attention over block sums is not timed")
    return layers, [], notes


# Inkling2LoopTextConfig's loop fields, and the names its checkpoints' loop_config gives them
LOOP_DEFAULTS = {"loop_layer_index_start": 6, "loop_layer_index_end": 18, "loop_num_passes": 3, "loop_gate_rank": 64}
LOOP_CONFIG_NAMES = {"core_start": "loop_layer_index_start", "core_end": "loop_layer_index_end",
                     "num_passes": "loop_num_passes", "gate_rank": "loop_gate_rank"}


def _message_gates(h: int, rank: int) -> tuple[Tensor, ...]:
    """A looped layer's four message gates (q, k, v and MLP inputs): down_proj [rank, 2h] over the
    normalised hidden state and message, float32 forget and message gates [h, rank]."""
    return tuple(t for x in ("q", "k", "v", "mlp")
                 for t in (Tensor(f"{x}_message_gate.down_proj", (rank, 2 * h), "rep"),
                           Tensor(f"{x}_message_gate.forget_gate_proj", (h, rank), "rep", linear=False),
                           Tensor(f"{x}_message_gate.message_gate_proj", (h, rank), "rep", linear=False)))


def build_inkling2_loop(f: Fields):
    """Inkling 2 Loop (transformers 5.24 models/inkling2_loop): Inkling 2's layers, those from
    loop_layer_index_start to loop_layer_index_end - 1 run loop_num_passes times in a row, each
    pass with a KV cache and conv windows of its own (the model deep-copies their cache layers);
    passes after the first mix in the previous pass's block states through the message gates and
    the model's message_input queries [loop layers, 4, hidden] (counted on the first looped layer)."""
    loop = f.get("loop_config")
    renamed = {LOOP_CONFIG_NAMES[k]: v for k, v in loop.items() if k in LOOP_CONFIG_NAMES} if isinstance(loop, dict) else {}
    g = Fields({**f.data, **renamed}, f.source).with_defaults(LOOP_DEFAULTS)  # loop_config wins, as in transformers
    layers, _, notes = build_inkling2(g)
    start, end = g.need("loop_layer_index_start"), g.need("loop_layer_index_end")
    passes, h = g.need("loop_num_passes"), g.need("hidden_size")
    if not 0 < start < end <= len(layers):
        raise DecodescopeError(f"{f.source}: the looped layers {start} to {end - 1} are not within layers 1 to "
                               f"{len(layers) - 1}", "fix loop_layer_index_start / loop_layer_index_end")
    gates = _message_gates(h, g.need("loop_gate_rank"))
    queries = (Tensor("message_input.query", (end - start, 4, h), "rep", linear=False),)
    looped = [replace(x, extra=x.extra + gates + (queries if i == start else ()))
              for i, x in enumerate(layers[start:end], start)]
    again = [replace(x, reuses=True) for x in looped] * (passes - 1)
    notes += (f"Inkling 2 Loop: layers {start}-{end - 1} run {passes} times; their message gates are "
              "charged on every pass, the first included, which does not run them",)
    return layers[:start] + looped + again + layers[end:], [], notes
