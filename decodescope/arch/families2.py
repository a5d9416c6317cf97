"""More family builders (Laguna, Hunyuan, LongCat-Flash, Gemma 3n, ...): each is
`(Fields) -> (layers, mtp, notes[, input tables])` and is listed in
decodescope.arch.registry.FAMILIES."""

from dataclasses import replace

from decodescope.arch.blocks import MLA, DenseMLP, Layer, MoE, Tensor
from decodescope.arch.build import MLP_LAYER_KINDS, attention, moe
from decodescope.arch.classic import CLASSIC, classic_fields
from decodescope.arch.hybrids import build_lfm2
from decodescope.arch.families import first_kv_shared, per_layer_inputs, rename
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import ATTENTION_KINDS, per_layer_words
from decodescope.errors import DecodescopeError


# the language models of Qwen2-VL and Qwen2.5-VL (model_type at the top, or in text_config)
QWEN2_VL = ("qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text")


def _sub(f: Fields, key: str) -> Fields:
    v = f.get(key, default={})
    if not isinstance(v, dict):
        raise DecodescopeError(f"{f.source}: {key} is not a JSON object", f"fix {key}")
    return Fields(v, f.source)


def translate2(f: Fields) -> Fields:
    """The config of `f` in the field names the builders read (the families of this module and
    of decodescope.arch.classic)."""
    mt = f.str_("model_type")
    if mt in CLASSIC:  # GPT-NeoX, Falcon, Phi, ...: GPT-2 era names (n_head, n_layer, ...)
        return classic_fields(f)
    if mt == "exaone":  # EXAONE 3.0 / 3.5: Llama layout, GPT-2 style names
        return rename(f, {"num_hidden_layers": "num_layers"})
    if mt == "internlm3":  # qkv_bias covers q, k, v and o (InternLM3Config maps it to attention_bias)
        return rename(f, {"attention_bias": "qkv_bias", "mlp_bias": "bias"})
    if mt == "dbrx":  # DBRX: GPT-style top-level names, attention and MoE sizes in sub-objects
        attn, ffn = _sub(f, "attn_config"), _sub(f, "ffn_config")
        g = rename(f, {"hidden_size": "d_model", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads"})
        return Fields({**g.data, "num_key_value_heads": attn.get("kv_n_heads", default=1),
                       "moe_intermediate_size": ffn.get("ffn_hidden_size", default=3584),
                       "num_local_experts": ffn.get("moe_num_experts", default=4),
                       "num_experts_per_tok": ffn.get("moe_top_k", default=1)}, f.source)
    if mt in QWEN2_VL:  # Qwen2-VL / 2.5-VL language models: Qwen2's biased q, k, v and unbiased o_proj
        return Fields({**f.data, "attention_bias": True, "attention_out_bias": False}, f.source)
    if mt in ("minimax", "minimax_m1", "minimax_text_01"):  # its shared_intermediate_size may be 0 (none)
        data = {k: v for k, v in f.data.items() if k != "shared_intermediate_size"}
        return Fields({**data, "shared_expert_intermediate_size": f.data.get("shared_intermediate_size")}, f.source)
    if mt == "glm":  # GLM-4 chat in transformers' own layout: attention_bias biases q, k, v, not o_proj
        return Fields({**f.data, "attention_out_bias": False}, f.source)
    if mt == "solar_open":  # GLM-4.5-style sigmoid routing with a per-expert correction bias
        return Fields({**f.data, "use_routing_bias": True}, f.source)
    if mt == "afmoe":  # num_shared_experts under DeepSeek's name
        return rename(f, {"n_shared_experts": "num_shared_experts"})
    if mt == "hy_v3":  # Tencent Hy3: Qwen3-style q/k norms, DeepSeek-style MoE with a correction bias
        return rename(f, {"use_qk_norm": "qk_norm", "n_shared_experts": "num_shared_experts"},
                       use_routing_bias=True)
    return f


def _per_layer(f: Fields, key: str, item: type, n: int, default) -> list:
    """A per-layer list field (one entry per layer), or `default` repeated when absent."""
    v = f.list_(key, item)
    if v is None:
        return [default] * n
    if len(v) != n:
        raise DecodescopeError(f"{f.source}: {key} has {len(v)} entries, num_hidden_layers is {n}",
                               f"fix {key}: one entry per layer")
    return v


def build_laguna(f: Fields):
    """Poolside Laguna: full or sliding-window GQA per layer_types, with per-head q/k norms,
    a per-layer query head count (num_attention_heads_per_layer) and a sigmoid output gate
    (g_proj: one per head with gating "per-head" or true, else one per channel); a dense MLP
    where mlp_layer_types says "dense" (the first layer by default), elsewhere routed experts
    with a correction bias plus one shared expert."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = _per_layer(f, "layer_types", str, n, "full_attention")
    heads = [check_int(f.source, "num_attention_heads", x)
             for x in _per_layer(f, "num_attention_heads_per_layer", int, n, f.need("num_attention_heads"))]
    mlps = _per_layer(f, "mlp_layer_types", str, n, "sparse")
    if f.get("mlp_layer_types") is None:
        mlps[0] = "dense"
    gating = f.get("gating", default=True)
    routed = moe(f, shared_expert_intermediate_size=f.get("shared_expert_intermediate_size", default=0),
                 router_bias=True)
    dense = DenseMLP(h, f.need("intermediate_size"))
    layers = []
    for t, q_heads, m in zip(types, heads, mlps, strict=True):
        w = f.get("sliding_window") if t == "sliding_attention" else None
        attn = replace(attention(f, w, qk_norm=True), num_attention_heads=q_heads)
        d = attn.head_dim
        gate = (Tensor("g_proj", (q_heads if gating is True or gating == "per-head" else q_heads * d, h), "col"),
                ) if gating else ()
        layers.append(Layer("sliding_attention" if w else "attention", attn, routed if m == "sparse" else dense, gate))
    return layers, [], ()


def build_lfm2_moe(f: Fields):
    """LFM2-MoE: LFM2's short-convolution and attention layers; the first num_dense_layers
    keep a dense MLP (intermediate_size), the rest route to experts (sigmoid gate with a
    per-expert bias when use_expert_bias)."""
    layers, _, notes = build_lfm2(f)
    h, dense_n = f.need("hidden_size"), f.get("num_dense_layers", default=2)
    dense = DenseMLP(h, f.need("intermediate_size"))
    routed = moe(f, router_bias=bool(f.get("use_expert_bias", default=True)))
    return [Layer(x.kind, x.mixer, dense if i < dense_n else routed, x.extra) for i, x in enumerate(layers)], [], notes


def build_apertus(f: Fields):
    """Apertus: per-head q/k norms (qk_norm) and an ungated MLP (up, down) whose xIELU
    activation learns two scalars per layer (alpha_p, alpha_n)."""
    h = f.need("hidden_size")
    attn = attention(f, qk_norm=bool(f.get("qk_norm", default=True)))
    mlp = DenseMLP(h, f.need("intermediate_size"), gated=False, bias=bool(f.get("mlp_bias", default=False)))
    xielu = (Tensor("act_fn.alpha_p", (1,), "rep", linear=False), Tensor("act_fn.alpha_n", (1,), "rep", linear=False))
    return [Layer("attention", attn, mlp, xielu) for _ in range(f.need("num_hidden_layers"))], [], ()


def build_afmoe(f: Fields):
    """AFMoE (Arcee Trinity): every global_attn_every_n_layers-th layer full attention, the
    others a sliding window (or layer_types); per-head q/k norms and a sigmoid output gate
    per channel (gate_proj, the width of q_proj); norms before and after both attention and
    MLP; dense MLPs in the first num_dense_layers, then routed experts with a bias and
    num_shared_experts shared ones."""
    n = f.need("num_hidden_layers")
    every = f.get("global_attn_every_n_layers", default=4)
    types = per_layer_or(f, "layer_types", ATTENTION_KINDS, ["full_attention" if (i + 1) % every == 0 else "sliding_attention"
                                                           for i in range(n)])
    dense_n, moe_i = f.get("num_dense_layers", default=1), f.need("moe_intermediate_size")
    routed = moe(f, shared_expert_intermediate_size=moe_i * f.get("n_shared_experts", default=0), router_bias=True)
    layers = _gated_window_layers(f, types, f.get("sliding_window"), [i >= dense_n for i in range(n)], routed, ())
    return layers, [], ()


def build_beam(f: Fields):
    """Beam (Reflection AI, Beam-1.0-501B-A23B; transformers' BeamConfig): AFMoE's layer with
    one gate bias per head beside gate_proj; by default every 6th layer and the last attend in
    full (without RoPE), the others in a 512-token window, and the first 3 of mlp_layer_types
    are dense; routed experts without a shared one (the router's correction bias is a buffer)."""
    n = f.need("num_hidden_layers")
    types = per_layer_or(f, "layer_types", ATTENTION_KINDS, ["full_attention" if (i + 1) % 6 == 0 or i == n - 1
                                                             else "sliding_attention" for i in range(n)])
    kinds = per_layer_or(f, "mlp_layer_types", MLP_LAYER_KINDS, ["dense"] * min(3, n) + ["sparse"] * max(0, n - 3))
    gate_bias = (Tensor("gate_bias", (f.need("num_attention_heads"),), "rep", linear=False),)
    window = f.get("sliding_window", default=512)
    return _gated_window_layers(f, types, window, [MLP_LAYER_KINDS[k] for k in kinds], moe(f), gate_bias), [], ()


def per_layer_or(f: Fields, key: str, known, default: list[str]) -> list[str]:
    """The config's per-layer words under `key` (layouts.per_layer_words: one of `known` a
    layer), else `default`, which also sets the number of layers."""
    return per_layer_words(f, key, len(default), known) if f.get(key) is not None else default


def _gated_window_layers(f: Fields, types: list[str], window: int | None, routed_at: list[bool], routed: MoE,
                         extra: tuple[Tensor, ...]) -> list[Layer]:
    """Layers of per-head q/k norms, a sigmoid output gate the width of q_proj, a window where
    types says sliding_attention (`window` tokens), norms before and after attention and MLP (the two after are
    extra tensors), a dense MLP or `routed` as routed_at says."""
    h = f.need("hidden_size")
    dense = DenseMLP(h, f.need("intermediate_size"))
    norms = tuple(Tensor(name, (h,), "rep", linear=False) for name in ("post_attention_norm", "post_mlp_layernorm"))
    layers = []
    for t, is_routed in zip(types, routed_at):
        w = window if t == "sliding_attention" else None
        attn = attention(f, w, qk_norm=True, attn_output_gate=True)
        layers.append(Layer("sliding_attention" if w else "attention", attn, routed if is_routed else dense, norms + extra))
    return layers


def build_minimax(f: Fields):
    """MiniMax-Text-01 / M1 (minimax, minimax_m1, minimax_text_01): lightning (linear) attention
    layers with a softmax GQA layer where attn_type_list says 1 (or layer_types says
    full_attention), each followed by routed experts (no shared expert)."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    flags = f.list_("attn_type_list", int)
    types = f.list_("layer_types", str) or (["full_attention" if x else "linear_attention" for x in flags]
                                           if flags else None)
    if not types or len(types) != n:
        raise DecodescopeError(f"{f.source}: MiniMax needs attn_type_list (or layer_types), one entry per layer",
                               "add attn_type_list: 0 for a lightning-attention layer, 1 for softmax attention")
    from decodescope.arch.mixers import LightningAttention  # imported when built
    attn = attention(f)
    linear = LightningAttention(h, attn.num_attention_heads, attn.head_dim)
    routed = moe(f, shared_expert_intermediate_size=f.get("shared_expert_intermediate_size", default=0))
    return [Layer("attention", attn, routed) if t == "full_attention" else Layer("linear_attention", linear, routed)
            for t in types], [], ()


def _int_or_per_layer(f: Fields, key: str, n: int, default: int | None) -> list[int]:
    """A field given as one int for every layer or as a list of one int per layer."""
    v = f.data.get(key)
    v = default if v is None else v
    if v is None:
        raise DecodescopeError(f"{f.source}: field '{key}' is missing", f"add \"{key}\" to the config")
    if isinstance(v, list) and len(v) != n:
        raise DecodescopeError(f"{f.source}: {key} has {len(v)} entries, num_hidden_layers is {n}",
                               f"fix {key}: one entry per layer, or one int for all")
    return [check_int(f.source, key, x) for x in (v if isinstance(v, list) else [v] * n)]


def build_hunyuan(f: Fields):
    """Hunyuan-A13B (hunyuan as released, hunyuan_v1_moe in transformers): GQA with per-head
    q/k norms (use_qk_norm); every layer routes to num_experts experts (moe_topk of them,
    sized moe_intermediate_size, else intermediate_size) and, with use_mixed_mlp_moe, adds
    num_shared_expert shared MLPs of intermediate_size, ungated. moe_topk,
    moe_intermediate_size and num_shared_expert are one int or one per layer. Hunyuan-Large's
    cross-layer attention (use_cla): a layer whose index is not a multiple of cla_share_factor
    reuses the K/V of the layer before it (no k/v projections, no cache of its own)."""
    if f.get("use_mla", default=False):
        raise DecodescopeError(f"{f.source}: Hunyuan with MLA (use_mla) is not modelled",
                               "decodescope reads Hunyuan configs with use_mla false")
    share = f.get("cla_share_factor", default=2) if f.get("use_cla", default=False) else 1
    n, h, inter = f.need("num_hidden_layers"), f.need("hidden_size"), f.need("intermediate_size")
    experts = f.need("num_experts", "Hunyuan's routed experts")
    top_k = _int_or_per_layer(f, "moe_topk", n, 1)
    sizes = _int_or_per_layer(f, "moe_intermediate_size", n, inter)
    shared = _int_or_per_layer(f, "num_shared_expert", n, 1) if f.get("use_mixed_mlp_moe", default=True) else [0] * n
    attn = attention(f, qk_norm=bool(f.get("use_qk_norm", default=True)),
                     head_dim=f.get("head_dim", "attention_head_dim", default=h // f.need("num_attention_heads")))
    layers = []
    for i, (k, size, s) in enumerate(zip(top_k, sizes, shared, strict=True)):
        if not 0 < k <= experts:
            raise DecodescopeError(f"{f.source}: moe_topk {k} of {experts} experts", "fix moe_topk")
        mixer = replace(attn, kv_shared=i % share != 0)
        layers.append(Layer("attention", mixer, MoE(h, experts, k, size, shared_expert_intermediate_size=s * inter)))
    return layers, [], ()


def build_longcat_flash(f: Fields):
    """LongCat-Flash (longcat_flash): each of num_layers blocks runs two MLA attention
    sublayers, each followed by a dense MLP (ffn_hidden_size), and one shortcut MoE beside
    them. Its router picks moe_topk of n_routed_experts real experts plus zero_expert_num
    identity ("zero-computation") experts that cost nothing; decode is modelled with the
    real experts a uniform router picks, moe_topk x real / (real + zero) per token."""
    n, h = f.need("num_layers", "LongCat-Flash's blocks"), f.need("hidden_size")
    real, zero = f.need("n_routed_experts", "routed experts"), f.get("zero_expert_num", default=0)
    top_k = f.need("moe_topk", "MoE routing")
    if top_k > real + zero:
        raise DecodescopeError(f"{f.source}: moe_topk {top_k} of {real + zero} experts", "fix moe_topk")
    picked = max(1, round(top_k * real / (real + zero)))
    mla = MLA(h, f.need("num_attention_heads"), f.get("q_lora_rank"), f.need("kv_lora_rank", "MLA"),
              f.need("qk_nope_head_dim", "MLA"), f.need("qk_rope_head_dim", "MLA"), f.need("v_head_dim", "MLA"))
    dense = DenseMLP(h, f.need("ffn_hidden_size", "the dense MLPs"))
    routed = MoE(h, real, picked, f.need("expert_ffn_hidden_size", "the routed experts"), router_bias=True)
    # the router's rows (and correction biases) for the identity experts
    zero_router = (Tensor("router.zero_experts", (zero, h), "rep", linear=False),
                   Tensor("router.zero_experts.bias", (zero,), "rep", linear=False)) if zero else ()
    block = [Layer("mla", mla, dense), Layer("mla", mla, dense), Layer("moe", None, routed, zero_router)]
    note = (f"zero-computation experts: of {top_k} experts picked per token, {picked} are real ones "
            f"({top_k} x {real} / {real + zero}, a uniform router; LongCat-Flash-Chat's report gives ~27B of "
            "its 18.6-31.3B activated on average)",)
    return block * n, [], note if zero else ()


def build_gemma3n(f: Fields):
    """Gemma 3n's language model (gemma3n / gemma3n_text, transformers' Gemma3nText*): GQA with
    per-head q/k norms on sliding (layer_types) and full layers, the last num_kv_shared_layers
    reading an earlier layer's K/V; gated MLPs (intermediate_size one per layer or one for
    all) with four norms; per layer LAuReL (a rank-laurel_rank bypass), AltUp's coefficients
    and router over altup_num_inputs streams, and Gemma's per-layer inputs (families.
    per_layer_inputs). Layer 0 carries the model's per-token tensors besides: the per-layer
    input projection and AltUp's stream projections."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = _per_layer(f, "layer_types", str, n, "")
    if not all(types):
        types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    inters = _int_or_per_layer(f, "intermediate_size", n, None)
    shared_from = first_kv_shared(f, n)
    per_layer, model_wide, tables = per_layer_inputs(f, n, h)
    if not tables:
        raise DecodescopeError(f"{f.source}: Gemma 3n with no per-layer inputs (hidden_size_per_layer_input 0)",
                               "hidden_size_per_layer_input is positive in Gemma 3n configs")
    rank, streams = f.get("laurel_rank", default=64), f.get("altup_num_inputs", default=4)

    def t(name, *shape, linear=True):
        return Tensor(name, shape, "rep", linear=linear)
    extra = (t("pre_feedforward_layernorm", h, linear=False), t("post_feedforward_layernorm", h, linear=False),
             t("laurel.linear_left", rank, h), t("laurel.linear_right", h, rank),
             t("laurel.post_laurel_norm", h, linear=False), t("altup.correct_output_scale", h, linear=False),
             t("altup.correction_coefs", streams, streams, linear=False),
             t("altup.prediction_coefs", streams * streams, streams, linear=False),
             t("altup.modality_router", streams, h), t("altup.router_norm", h, linear=False), *per_layer)
    model_wide += (*(t(f"altup_projections.{j}", h, h) for j in range(streams - 1)),
                   *(t(f"altup_unembed_projections.{j}", h, h) for j in range(streams - 1)))
    layers = []
    for i, (kind, inter) in enumerate(zip(types, inters, strict=True)):
        w = f.get("sliding_window") if kind == "sliding_attention" else None
        attn = attention(f, w, qk_norm=True, kv_shared=i >= shared_from)
        layers.append(Layer("sliding_attention" if w else "attention", attn, DenseMLP(h, inter),
                            extra + (model_wide if i == 0 else ())))
    return layers, [], (), tables
