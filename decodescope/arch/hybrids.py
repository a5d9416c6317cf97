"""Builders of the recurrent hybrids: Nemotron-H / Nemotron 3 (one kind per layer, latent
MoE), Falcon-H1 (attention and Mamba2 in parallel in every layer), LFM2 (gated short
convolutions between attention layers), LFM3 (LFM2's with sliding layers, sandwich norms and
gated heads), OLMo Hybrid (Gated DeltaNet with OLMo 3 attention) and Kimi Linear (Kimi Delta
Attention with MLA)."""

from dataclasses import replace

from decodescope.arch.blocks import MLA, DenseMLP, Layer, Mamba1, Mamba2, MoE, Tensor
from decodescope.arch.build import STATE_DTYPE_BYTES, _gdn, attention, decoder_mlp, moe, nextn_mtp, state_dtype
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import moe_layers_enum, per_layer_words
from decodescope.errors import DecodescopeError


def _falcon_mamba(f: Fields) -> Mamba2:
    """Falcon-H1's Mamba2 mixer. transformers' FalconH1Config: d_ssm = mamba_d_ssm, else
    mamba_expand x hidden; mamba_d_head "auto" = d_ssm / mamba_n_heads. in_proj carries
    mamba_proj_bias, out_proj projectors_bias; the gated RMSNorm exists only with mamba_rms_norm."""
    h, heads = f.need("hidden_size"), f.need("mamba_n_heads", "Falcon-H1's Mamba2 mixer")
    d_head = f.data.get("mamba_d_head")
    if d_head in (None, "auto"):
        d_ssm = f.get("mamba_d_ssm") or f.get("mamba_expand", default=2) * h
        d_head = d_ssm // heads
        if d_head < 1 or d_head * heads != d_ssm:
            raise DecodescopeError(f"{f.source}: mamba_d_ssm {d_ssm} is not a multiple of mamba_n_heads {heads}",
                                   "set mamba_d_head, or a mamba_d_ssm that mamba_n_heads divides")
    else:
        d_head = f.get("mamba_d_head")
    bias = bool(f.get("mamba_proj_bias", default=False)) or bool(f.get("projectors_bias", default=False))
    return Mamba2(h, heads, d_head, f.get("mamba_n_groups", default=1), f.get("mamba_d_state", default=256),
                  f.get("mamba_d_conv", default=4), bool(f.get("mamba_conv_bias", default=True)), bias,
                  STATE_DTYPE_BYTES[state_dtype(f)], gated_norm=bool(f.get("mamba_rms_norm", default=False)))


def build_falcon_h1(f: Fields):
    """Falcon-H1: every layer runs attention and a Mamba2 mixer side by side off one RMSNorm
    (their outputs summed), then a SwiGLU MLP behind its own norm (pre_ff_layernorm). The
    muP multipliers of its config scale activations, not shapes."""
    h = f.need("hidden_size")
    from decodescope.arch.mixers import ParallelHybrid  # imported when built (see blocks.StateMixer)
    mixer = ParallelHybrid(attention(f), _falcon_mamba(f))
    mlp = DenseMLP(h, f.need("intermediate_size"), bias=bool(f.get("mlp_bias", default=False)))
    return [Layer("hybrid", mixer, mlp)] * f.need("num_hidden_layers"), [], ()


# Nemotron-H layer kinds: hybrid_override_pattern letters and layers_block_type words
NEMOTRON_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
# transformers 5 writes layers_block_type with its own words for the first two
NEMOTRON_WORDS = {**{k: k for k in NEMOTRON_KINDS.values()}, "linear_attention": "mamba", "full_attention": "attention"}


def _nemotron_pattern(f: Fields, letters: str, words: str) -> list[str] | None:
    """Layer kinds from a pattern string (`letters`) or a list of kind words (`words`)."""
    if f.get(letters) is not None:
        pattern = f.get(letters)
        if not isinstance(pattern, str):
            raise DecodescopeError(f"{f.source}: {letters} is not a string", "one letter per layer")
        unknown = next((i for i, ch in enumerate(pattern) if ch not in NEMOTRON_KINDS), None)
        if unknown is not None:
            raise DecodescopeError(f"{f.source}: {letters} letter '{pattern[unknown]}' at {unknown} is unknown",
                                   "known letters: M (mamba2), * (attention), - (MLP), E (MoE)")
        return [NEMOTRON_KINDS[ch] for ch in pattern]
    kinds = f.list_(words, str)
    if kinds is not None and not set(kinds) <= set(NEMOTRON_WORDS):
        raise DecodescopeError(f"{f.source}: {words} holds {sorted(set(kinds) - set(NEMOTRON_WORDS))}",
                               f"known kinds: {', '.join(NEMOTRON_WORDS)}")
    return None if kinds is None else [NEMOTRON_WORDS[k] for k in kinds]


def _nemotron_block(f: Fields, kind: str):
    h = f.need("hidden_size")
    if kind == "mamba":
        return Mamba2(h, f.need("mamba_num_heads", "Mamba2"), f.need("mamba_head_dim", "Mamba2"),
                      f.need("n_groups", "Mamba2"), f.need("ssm_state_size", "Mamba2"),
                      f.need("conv_kernel", "Mamba2"), bool(f.get("use_conv_bias", default=True)),
                      bool(f.get("mamba_proj_bias", default=False)), STATE_DTYPE_BYTES[state_dtype(f)])
    if kind == "attention":
        return attention(f)
    if kind == "mlp":
        return DenseMLP(h, f.need("intermediate_size"), gated=False)
    return moe(f, gated=False, router_bias=True, latent_size=f.get("moe_latent_size", default=0),
               shared_expert_intermediate_size=f.get("moe_shared_expert_intermediate_size", default=0))


def build_nemotron_h(f: Fields):
    """Nemotron-H and Nemotron 3: one kind per layer, from hybrid_override_pattern (M mamba2,
    * attention, - MLP, E MoE) or layers_block_type; Nemotron 3 Super / Ultra route their
    experts in a latent (moe_latent_size) and carry MTP layers (mtp_hybrid_override_pattern,
    e.g. "*E": one attention and one MoE block per module)."""
    kinds = _nemotron_pattern(f, "hybrid_override_pattern", "layers_block_type")
    if not kinds:
        raise DecodescopeError(f"{f.source}: field 'hybrid_override_pattern' is missing (needed for the "
                               "Nemotron-H layer pattern)", "add hybrid_override_pattern or layers_block_type")
    layers = []
    for kind in kinds:
        block = _nemotron_block(f, kind)
        mixer = block if kind in ("mamba", "attention") else None
        layers.append(Layer(kind, mixer, None if mixer else block))
    mtp_kinds = _nemotron_pattern(f, "mtp_hybrid_override_pattern", "mtp_layers_block_type") or []
    mtp = []
    if mtp_kinds and f.get("num_nextn_predict_layers"):
        # one module: its blocks in order, folded into one layer (a mixer and an MLP at most)
        mixer = next((_nemotron_block(f, k) for k in mtp_kinds if k in ("mamba", "attention")), None)
        mlp = next((_nemotron_block(f, k) for k in mtp_kinds if k in ("mlp", "moe")), None)
        mtp = nextn_mtp(f, Layer(mtp_kinds[0], mixer, mlp))
    return layers, mtp, ()


def _lfm2_ff(f: Fields) -> int:
    """LFM2's MLP width as transformers' Lfm2MLP derives it: with block_auto_adjust_ff_dim,
    2/3 of intermediate_size (block_ff_dim), times block_ffn_dim_multiplier, rounded up to
    a multiple of block_multiple_of."""
    ff = f.need("intermediate_size", "the MLP (block_ff_dim)")
    if not f.get("block_auto_adjust_ff_dim", default=True):
        return ff
    ff = int(2 * ff / 3)
    mult = f.get("block_ffn_dim_multiplier", default=1.0)
    if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 64:
        raise DecodescopeError(f"{f.source}: block_ffn_dim_multiplier {mult!r} out of range",
                               "a positive factor of the MLP width, at most 64")
    ff = int(mult * ff)
    step = check_int(f.source, "block_multiple_of", f.get("block_multiple_of", default=256))
    return max(step, -(-ff // step) * step)


def build_lfm2(f: Fields):
    """LFM2: gated short-convolution layers ("conv") and GQA attention layers with per-head
    q/k norms (layer_types, or full_attn_idxs in the first configs), each followed by a
    SwiGLU MLP."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = f.list_("layer_types", str)
    if types is None:
        full = set(f.list_("full_attn_idxs", int) or range(n))
        types = ["full_attention" if i in full else "conv" for i in range(n)]
    if len(types) != n or not set(types) <= {"conv", "full_attention"}:
        raise DecodescopeError(f"{f.source}: layer_types must give \"conv\" or \"full_attention\" for each of "
                               f"{n} layers", "fix layer_types (or full_attn_idxs)")
    from decodescope.arch.mixers import ShortConv
    conv = ShortConv(h, f.need("conv_L_cache", "LFM2's short convolution"), bool(f.get("conv_bias", default=False)))
    mlp = DenseMLP(h, _lfm2_ff(f))
    attn = attention(f, qk_norm=True)
    return [Layer("conv", conv, mlp) if t == "conv" else Layer("attention", attn, mlp) for t in types], [], ()


def _kimi_delta_layers(f: Fields, n: int):
    """The MLA layers (1-based) and the Kimi Delta Attention block: from linear_attn_config, or
    from transformers 5's layer_types and linear_* fields (low-rank gates, as its
    KimiLinearDeltaAttention's g_a_proj / g_b_proj)."""
    from decodescope.arch.mixers import KimiDeltaAttention
    h, lin = f.need("hidden_size"), f.get("linear_attn_config")
    if lin is None and f.get("layer_types") is not None:
        types = per_layer_words(f, "layer_types", n, ("full_attention", "linear_attention"))
        kda = KimiDeltaAttention(h, f.need("linear_num_heads", "Kimi Delta Attention"),
                                 f.need("linear_head_dim", "Kimi Delta Attention"),
                                 f.need("linear_conv_kernel_dim", "Kimi Delta Attention"), False)
        return {i + 1 for i, t in enumerate(types) if t == "full_attention"}, kda
    if not isinstance(lin, dict):
        raise DecodescopeError(f"{f.source}: kimi_linear needs linear_attn_config", "add linear_attn_config or layer_types")
    g = Fields(lin, f.source)
    kda = KimiDeltaAttention(h, g.need("num_heads", "Kimi Delta Attention"), g.need("head_dim", "Kimi Delta Attention"),
                             g.need("short_conv_kernel_size", "Kimi Delta Attention"),
                             bool(lin.get("use_full_rank_gate", False)))
    return set(g.list_("full_attn_layers", int) or ()), kda


def build_mamba2(f: Fields):
    """Mamba2 (Codestral Mamba): every layer one Mamba2 mixer (its own norm), no MLP and no
    attention, so a request holds a fixed-size state whatever its context
    (transformers' Mamba2Mixer: in_proj, conv1d, dt_bias, A_log, D, a gated norm, out_proj)."""
    h = f.need("hidden_size")
    heads = f.need("num_heads", "Mamba2")
    head_dim = f.get("head_dim", default=0) or f.get("expand", default=2) * h // heads
    mamba = Mamba2(h, heads, head_dim, f.need("n_groups", "Mamba2"), f.need("state_size", "Mamba2"),
                   f.need("conv_kernel", "Mamba2"), bool(f.get("use_conv_bias", default=True)),
                   bool(f.get("use_bias", default=False)), STATE_DTYPE_BYTES[state_dtype(f)])
    return [Layer("mamba", mamba, None)] * f.need("num_hidden_layers"), [], ()


def build_mamba1(f: Fields):
    """Mamba (v1) and Falcon-Mamba: every layer one Mamba mixer (in_proj, conv1d, x_proj,
    dt_proj, A_log, D, out_proj) and nothing else; inner = intermediate_size (expand x hidden),
    dt rank time_step_rank ("auto": hidden / 16 rounded up)."""
    h = f.need("hidden_size")
    inner = f.get("intermediate_size", default=0) or f.get("expand", default=2) * h
    rank = f.data.get("time_step_rank")
    rank = -(-h // 16) if rank in (None, "auto") else check_int(f.source, "time_step_rank", rank)
    mamba = Mamba1(h, inner, 1, 0, f.need("state_size", "Mamba"), f.need("conv_kernel", "Mamba"),
                   bool(f.get("use_conv_bias", default=True)), bool(f.get("use_bias", default=False)),
                   STATE_DTYPE_BYTES[state_dtype(f)], dt_rank=rank, dt_bc_norms=False)
    return [Layer("mamba", mamba, None)] * f.need("num_hidden_layers"), [], ()


def build_kimi_linear(f: Fields):
    """Kimi Linear: linear_attn_config lists, 1-based, the Kimi Delta Attention layers
    (kda_layers) and the MLA layers (full_attn_layers); DeepSeek-style MoE after the
    first_k_dense_replace dense layers."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    full, kda = _kimi_delta_layers(f, n)
    mla = MLA(h, f.need("num_attention_heads"), f.get("q_lora_rank"), f.need("kv_lora_rank", "MLA"),
              f.need("qk_nope_head_dim", "MLA"), f.need("qk_rope_head_dim", "MLA"), f.need("v_head_dim", "MLA"))
    latent = f.get("routed_expert_hidden_size", default=0)  # Kimi K3: experts in a latent, as Nemotron 3's

    def mlp(i: int):
        block = decoder_mlp(f, i)
        return replace(block, latent_size=latent) if latent and isinstance(block, MoE) else block
    layers = [Layer("mla", mla, mlp(i)) if i + 1 in full else Layer("linear_attention", kda, mlp(i)) for i in range(n)]
    notes = ("the MLA output gate and attention residuals (mla_use_output_gate, attn_res_block_size) are not counted",
             ) if f.get("mla_use_output_gate") or f.get("attn_res_block_size") else ()
    return layers, [], notes


def _step_moe_layers(f: Fields, n: int) -> set[int]:
    if f.data.get("mlp_layer_types") is not None:  # as transformers 5 writes it: "sparse" / "dense" per layer
        return {i for i, t in enumerate(per_layer_words(f, "mlp_layer_types", n, ("sparse", "dense"))) if t == "sparse"}
    at = moe_layers_enum(f, n)  # absent in the trimmed configs: DeepSeek's first_k_dense_replace
    return set(range(f.get("first_k_dense_replace", default=0), n)) if at is None else at


def build_step3p5(f: Fields):
    """Step 3.5 / 3.7 Flash: layer_types (which also lists the MTP layers) picks full or
    sliding attention; sliding layers take attention_other_setting's heads; a sigmoid gate
    per head (g_proj, use_head_wise_attn_gate); per-head q/k norms; routed experts plus a
    shared one (share_expert_dim) in the moe_layers_enum layers, dense MLPs elsewhere."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = f.list_("layer_types", str) or ["full_attention"] * n
    other = f.get("attention_other_setting", default={})
    if len(types) < n or not isinstance(other, dict):
        raise DecodescopeError(f"{f.source}: layer_types needs one entry per layer; attention_other_setting an object",
                               "fix layer_types / attention_other_setting")
    kv = f.get("num_attention_groups", "num_key_value_heads", default=f.need("num_attention_heads", "attention"))
    # transformers 5 writes the sliding layers' heads as num_sliding_attention_heads, not in
    # attention_other_setting, and builds the per-head gate on every layer (its `gating` is a
    # class attribute, True), where StepFun's own configs say use_head_wise_attn_gate
    o = Fields({"num_attention_heads": f.get("num_sliding_attention_heads"), **other}, f.source)
    gated = f.get("use_head_wise_attn_gate", default=f.data.get("mlp_layer_types") is not None)

    def layer(t: str, mlp) -> Layer:
        if t == "sliding_attention":
            attn = attention(f, f.need("sliding_window"), qk_norm=True,
                             num_key_value_heads=o.get("num_attention_groups", "num_key_value_heads", default=kv),
                             head_dim=o.get("head_dim", default=f.need("head_dim")))
            if o.get("num_attention_heads"):
                attn = replace(attn, num_attention_heads=o.get("num_attention_heads"))
        else:
            attn = attention(f, qk_norm=True, num_key_value_heads=kv)
        gate = (Tensor("g_proj", (attn.num_attention_heads, h), "col"),) if gated else ()
        return Layer("sliding_attention" if attn.sliding_window else "attention", attn, mlp, gate)

    moe_at = _step_moe_layers(f, n)
    routed = moe(f, shared_expert_intermediate_size=f.get("share_expert_dim", default=0),
                 router_bias=bool(f.get("use_moe_router_bias", default=False)))
    dense = DenseMLP(h, f.need("intermediate_size"))
    layers = [layer(t, routed if i in moe_at else dense) for i, t in enumerate(types[:n])]
    mtp_types = (f.list_("mtp_layer_types", str) or []) + types[n:]  # transformers 5 splits them off layer_types
    mtp_layer = layer(mtp_types[0] if mtp_types else "full_attention", routed)
    return layers, nextn_mtp(f, mtp_layer), ()


# OlmoHybridConfig.layer_types words
OLMO_HYBRID_KINDS = ("linear_attention", "full_attention")


def _olmo_hybrid_fields(f: Fields) -> Fields:
    """`f` with what OlmoHybridConfig.__post_init__ derives when absent: key and value heads of the
    linear layers = num_attention_heads, a key head of 0.75 x hidden / key heads (rounded down), a
    value head twice that, a 4-tap conv; layer i full attention when i % 4 == 3 (the last layer
    when none is)."""
    n, heads, h = f.need("num_hidden_layers"), f.need("num_attention_heads"), f.need("hidden_size")
    k_dim = f.get("linear_key_head_dim") or 3 * h // (4 * f.get("linear_num_key_heads", default=heads))
    types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
    if "full_attention" not in types:
        types[-1] = "full_attention"
    return f.with_defaults({"linear_num_key_heads": heads, "linear_num_value_heads": heads,
                            "linear_key_head_dim": k_dim, "linear_value_head_dim": 2 * k_dim,
                            "linear_conv_kernel_dim": 4, "layer_types": types})


def build_olmo_hybrid(f: Fields):
    """OLMo Hybrid: Gated DeltaNet layers and, per layer_types, OLMo 3 full attention (q and k
    normed over all heads at once), a SwiGLU MLP in each. Its GatedDeltaNet keeps the q/k/v/g/a/b
    projections apart that Qwen3-Next fuses, shape for shape (q + k + v = in_proj_qkv, g =
    in_proj_z, o_norm over one value head = norm), and holds the same state per request;
    linear_allow_neg_eigval doubles beta, no weight. Each kind has two hidden-wide norms: the
    linear layers input_layernorm + post_attention_layernorm, the attention layers OLMo 2's
    post_attention_layernorm + post_feedforward_layernorm on the outputs, counted as the
    attention's and the MLP's own norm (as build_decoder counts olmo2 / olmo3)."""
    g = _olmo_hybrid_fields(f)
    types = per_layer_words(g, "layer_types", g.need("num_hidden_layers"), OLMO_HYBRID_KINDS)
    mlp = DenseMLP(g.need("hidden_size"), g.need("intermediate_size", "the MLP"))
    gdn, attn = _gdn(g), attention(g, qk_norm=True, qk_norm_full=True)
    return [Layer("linear_attention", gdn, mlp) if t == "linear_attention" else Layer("attention", attn, mlp)
            for t in types], [], ()


# Lfm3Config's defaults for the fields a config may leave out; Lfm3Config.layer_types words
LFM3_DEFAULTS = {"head_dim": 128, "num_key_value_heads": 4, "conv_L_cache": 7}
LFM3_KINDS = ("conv", "full_attention", "sliding_attention")


def _lfm3_layer_types(f: Fields, n: int) -> list[str]:
    """layer_types, or Lfm3Config's default: full attention when i % 4 == 2, sliding when i % 4 == 0
    (past layer 0), convolution otherwise."""
    if f.get("layer_types") is None:
        return ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i else "conv"
                for i in range(n)]
    return per_layer_words(f, "layer_types", n, LFM3_KINDS)


def build_lfm3(f: Fields):
    """LFM3: LFM2's gated short convolutions and GQA attention (per-head q/k norms) per
    layer_types, the sliding layers within sliding_window tokens (their cache no longer). Each
    layer: operator_norm and ffn_norm before the mixer and the MLP, and with use_sandwich_norm
    post_operator_norm and post_ffn_norm after them; with use_attention_gate a sigmoid gate per
    head on the attention output (g_proj [heads, hidden]). The MLP (w1, w3, w2) is intermediate_size
    wide as given: Lfm3MLP has no LFM2-style 2/3 adjustment. embedding_norm is the final norm."""
    g = f.with_defaults(LFM3_DEFAULTS)
    n, h = g.need("num_hidden_layers"), g.need("hidden_size")
    types = _lfm3_layer_types(g, n)
    window = None
    if "sliding_attention" in types:  # Lfm3Config's 256 tokens when absent; transformers' mask refuses a null one
        window = Fields({"sliding_window": 256, **f.data}, f.source).need("sliding_window", "the sliding_attention layers")
    from decodescope.arch.mixers import ShortConv
    conv = ShortConv(h, g.need("conv_L_cache", "LFM3's short convolution"), bool(g.get("conv_bias", default=False)))
    mlp = DenseMLP(h, g.need("intermediate_size", "the MLP"))
    sandwich = tuple(Tensor(name, (h,), "rep", linear=False) for name in ("post_operator_norm", "post_ffn_norm")
                     ) if g.get("use_sandwich_norm", default=True) else ()
    full, sliding = attention(g, qk_norm=True), attention(g, window, qk_norm=True)
    gate = (Tensor("g_proj", (full.num_attention_heads, h), "col"),) if g.get("use_attention_gate", default=True) else ()

    def layer(t: str) -> Layer:
        if t == "conv":
            return Layer("conv", conv, mlp, sandwich)
        attn = sliding if t == "sliding_attention" else full
        return Layer("sliding_attention" if attn.sliding_window else "attention", attn, mlp, sandwich + gate)
    return [layer(t) for t in types], [], ()
