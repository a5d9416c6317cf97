"""Families whose configs name their fields their own way (ChatGLM, ERNIE, InternLM2,
Baichuan, Gemma 3 as released, EXAONE 4.0, LFM2, Kimi Linear) or whose blocks differ from
the Llama layout (Cohere's parallel block, StarCoder2's plain MLP with biases, GLM-4.5 and
MiMo next-n layers, MiMo-V2-Flash's two attention shapes, MiniMax-M3's sparse layers)."""

from dataclasses import asdict, replace

from decodescope.arch.blocks import DenseMLP, Layer, Mamba1, Mamba2, MoE, Tensor
from decodescope.arch.build import (MLP_LAYER_KINDS, STATE_DTYPE_BYTES, attention, build_decoder, decoder_mlp,
                                    mlp_layer_types, moe, nextn_mtp, state_dtype)
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import (bamba_layer_types, exaone4_layer_types, mimo_v2_sliding, minimax_m3_from_v5,
                                      per_layer_flags, per_layer_words)
from decodescope.errors import DecodescopeError

# Gemma3TextConfig's defaults (transformers models/gemma3/configuration_gemma3.py): the
# released multimodal configs (google/gemma-3-4b-it) leave these out of text_config
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262208, "head_dim": 256, "num_attention_heads": 8,
                        "num_key_value_heads": 4, "sliding_window": 4096, "sliding_window_pattern": 6}


def rename(f: Fields, names: dict, **fixed) -> Fields:
    """The fields under Llama-style names: names maps our key -> the family's key."""
    data = dict(f.data)
    for ours, theirs in names.items():
        if f.data.get(theirs) is not None:
            data[ours] = f.data[theirs]
    return Fields({**data, **fixed}, f.source)


# model_type -> {the name a builder reads: the name the family's config uses}
RENAMES = {
    "ernie4_5": {"attention_bias": "use_bias"},  # baidu/ERNIE-4.5-0.3B: one flag for the attention projections
    "granitemoeshared": {"shared_expert_intermediate_size": "shared_intermediate_size"},  # a shared (gated) MLP
    "internlm2": {"attention_bias": "bias"},  # one `bias` flag for wqkv and wo
    **dict.fromkeys(("step3p5", "step3p7"), {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_top_k"}),
    # Lfm2Config reads block_ff_dim and tie_embedding under these names
    "lfm2": {"intermediate_size": "block_ff_dim", "tie_word_embeddings": "tie_embedding"},
    # BharatGen Param-2 MoE (Param2MoeConfig's attribute_map: the original configs' names), GLM-4.5's model
    "param2moe": {"n_routed_experts": "num_experts", "n_shared_experts": "num_shared_experts",
                  "attention_bias": "use_qkv_bias", "num_nextn_predict_layers": "num_mtp_layers"},
    # NX-AI/xLSTM-7b's config names the width and depth as xLSTMConfig's own fields
    "xlstm": {"hidden_size": "embedding_dim", "num_hidden_layers": "num_blocks"},
}


def translate(f: Fields) -> Fields:
    """The config of `f` in the field names the builders read."""
    mt = f.str_("model_type")
    if mt in RENAMES:
        return rename(f, RENAMES[mt])
    if mt == "chatglm":  # THUDM/glm-4-9b, chatglm3-6b
        mqa = f.get("multi_query_attention", default=False)
        g = rename(f, {"num_hidden_layers": "num_layers", "vocab_size": "padded_vocab_size",
                        "intermediate_size": "ffn_hidden_size", "head_dim": "kv_channels"},
                    attention_bias=bool(f.get("add_qkv_bias", default=False)),
                    mlp_bias=bool(f.get("add_bias_linear", default=False)))
        if mqa:
            g.data["num_key_value_heads"] = f.need("multi_query_group_num", "multi-query attention")
        return g
    if mt == "bamba":  # IBM Bamba: Granite 4.0-H's layout, attention at attn_layer_indices, Mamba2 elsewhere
        return bamba_layer_types(f)
    if mt == "ernie4_5_moe":  # baidu/ERNIE-4.5-21B-A3B-PT
        shared = f.get("moe_num_shared_experts", default=0)
        return rename(f, {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k",
                           "first_k_dense_replace": "moe_layer_start_index", "moe_layer_freq": "moe_layer_interval",
                           "attention_bias": "use_bias"},
                       n_shared_experts=shared, shared_expert_intermediate_size=0)
    if mt.startswith("gemma3") and not mt.startswith("gemma3n"):  # Gemma 3n: its own fields
        return f.with_defaults(GEMMA3_TEXT_DEFAULTS)
    if mt in ("exaone4", "exaone_moe"):  # sliding_window_pattern: a string of L (local) / G (global), or every n-th global
        return exaone4_layer_types(f)
    if mt == "minimax_m3_vl_text":
        f = minimax_m3_from_v5(f)
    if mt in ("mimo_v2_flash", "minimax_m3", "minimax_m3_vl", "minimax_m3_vl_text"):  # moe_layer_freq: 0 / 1 per layer
        freq = f.data.get("moe_layer_freq")
        if isinstance(freq, list):
            data = {k: v for k, v in f.data.items() if k != "moe_layer_freq"}
            return Fields({**data, "moe_layers": [i for i, x in enumerate(freq) if x]}, f.source)
        if f.data.get("mlp_layer_types") is not None:  # transformers 5's words for the same flags
            moe_at = [i for i, k in enumerate(mlp_layer_types(f)) if MLP_LAYER_KINDS[k]]
            return Fields({**f.data, "moe_layers": moe_at}, f.source)
    if mt == "kimi_linear":  # DeepSeek names under Kimi's keys
        return rename(f, {"num_experts_per_tok": "num_experts_per_token", "n_shared_experts": "num_shared_experts"},
                       topk_method="noaux_tc")
    if mt.startswith("gemma4"):
        return rename(f, {"num_experts_per_tok": "top_k_experts"})
    if mt.startswith("bailing_moe"):  # Ling / Ring (inclusionAI): v2 (Ling 2.0) sizes its shared expert apart
        shared = f.get("moe_shared_expert_intermediate_size", default=0) * f.get("num_shared_experts", default=0)
        return rename(f, {"attention_bias": "use_qkv_bias", "n_shared_experts": "num_shared_experts",
                          "use_routing_bias": "moe_router_enable_expert_bias"}, shared_expert_intermediate_size=shared)
    return f


def build_cohere(f: Fields):
    """Cohere Command-R / Aya (cohere), Command R7B / A (cohere2) and its MoE (cohere2_moe):
    attention and MLP (or experts) run in parallel off one LayerNorm (weight only), so the MLP
    has no norm of its own."""
    n, mt = f.need("num_hidden_layers"), f.str_("model_type")
    qk = bool(f.get("use_qk_norm", default=False))
    types = per_layer_words(f, "layer_types", n, ("full_attention", "sliding_attention")) \
        if f.get("layer_types") is not None else None
    if mt.startswith("cohere2") and not types:  # every sliding_window_pattern-th layer is global
        p = f.get("sliding_window_pattern", default=4)
        types = ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    layers = []
    for i in range(n):
        w = f.get("sliding_window") if types and types[i] == "sliding_attention" else None
        attn = attention(f, w, qk_norm=qk, qk_norm_full=True)
        mlp = decoder_mlp(f, i)  # experts where the config has them (cohere2_moe)
        layers.append(Layer("sliding_attention" if w else "attention", attn, replace(mlp, norm=False)))
    return layers, [], ()


def build_starcoder2(f: Fields):
    """StarCoder2: LayerNorms with biases, biased q/k/v/o, a plain (ungated) GELU MLP
    c_fc / c_proj with biases."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    bias = bool(f.get("use_bias", default=True))
    norm_bias = (Tensor("input_layernorm.bias", (h,), "rep", linear=False),
                 Tensor("post_attention_layernorm.bias", (h,), "rep", linear=False))
    window = f.get("sliding_window")
    layers = [Layer("sliding_attention" if window else "attention",
                    attention(f, window, attention_bias=bias, o_bias=bias),
                    DenseMLP(h, f.need("intermediate_size"), gated=False, bias=bias), norm_bias)
              for _ in range(n)]
    return layers, [], ()


def build_phimoe(f: Fields):
    """Phi-3.5-MoE: Mixtral layout with biased attention and LayerNorms with biases."""
    layers, _, notes = build_decoder(f)
    h = f.need("hidden_size")
    norm_bias = (Tensor("input_layernorm.bias", (h,), "rep", linear=False),
                 Tensor("post_attention_layernorm.bias", (h,), "rep", linear=False))
    return [Layer(x.kind, x.mixer, x.mlp, norm_bias) for x in layers], [], notes


def build_nextn_decoder(f: Fields):
    """GLM-4.5/4.6/4.7 (glm4_moe) and MiMo: a Llama-style decoder plus DeepSeek-style
    next-n MTP layers."""
    layers, _, notes = build_decoder(f)
    n = len(layers)
    mtp_layer = Layer("attention", attention(f, qk_norm=bool(f.get("use_qk_norm"))), decoder_mlp(f, n))
    return layers, nextn_mtp(f, mtp_layer), notes


def build_minimax_m2(f: Fields):
    """MiniMax-M2: every layer GQA attention with q/k norms over all heads + 256-expert MoE.
    Its config names MTP modules (num_mtp_modules) that the released checkpoint does not ship."""
    layers, _, notes = build_decoder(f)
    if f.get("num_local_experts") is None:
        raise DecodescopeError(f"{f.source}: minimax_m2 without num_local_experts", "add num_local_experts")
    full = [Layer(x.kind, attention(f, x.mixer.sliding_window, qk_norm=True, qk_norm_full=True), x.mlp)
            for x in layers]
    return full, [], notes + _unshipped_mtp(f)


def _unshipped_mtp(f: Fields) -> tuple[str, ...]:
    """MiniMax configs name MTP modules (num_mtp_modules, num_nextn_predict_layers) of no
    published layout (MiniMax-M2's released checkpoint ships none): said, not counted."""
    n = f.get("num_mtp_modules", "num_nextn_predict_layers", default=0)
    return (f"config names {n} MTP module(s) that decodescope does not count (MiniMax-M2's released "
            "checkpoint ships none): --spec mtp is not offered",) if isinstance(n, int) and n > 0 else ()


def _ffn_size(mult: float, hidden: int) -> int:
    # DeciLM's _ffn_mult_to_intermediate_size: 2/3 * mult * hidden, rounded up to a multiple of 256
    size = int(2 * mult * hidden / 3)
    return -(-size // 256) * 256


def build_nemotron_nas(f: Fields):
    """Llama-Nemotron Super / Ultra (DeciLM, model_type nemotron-nas): one block config per
    layer; a block may skip attention or the MLP (no_op) or replace either with one linear."""
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    blocks = f.list_("block_configs", dict) or []
    if len(blocks) != f.need("num_hidden_layers"):
        raise DecodescopeError(f"{f.source}: {len(blocks)} block_configs for num_hidden_layers "
                               f"{f.need('num_hidden_layers')}", "one block config per layer")
    layers, skipped = [], 0
    for i, b in enumerate(blocks):
        att, ffn = b.get("attention"), b.get("ffn")
        if not isinstance(att, dict) or not isinstance(ffn, dict):
            raise DecodescopeError(f"{f.source}: block_configs[{i}] lacks attention / ffn", "fix block_configs")
        mixer = mlp = None
        if att.get("replace_with_linear"):
            mixer_t = (Tensor("input_layernorm", (h,), "rep", linear=False), Tensor("linear_attn", (h, h), "rep"))
        else:
            mixer_t = ()
        if not att.get("no_op") and not att.get("replace_with_linear"):
            g = check_int(f.source, "num_key_value_heads", att.get("n_heads_in_group"))  # heads per KV head
            mixer = attention(f, num_key_value_heads=max(1, heads // g))
        if ffn.get("replace_with_linear"):
            mixer_t += (Tensor("post_attention_layernorm", (h,), "rep", linear=False), Tensor("linear_mlp", (h, h), "rep"))
        elif not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 64:
                raise DecodescopeError(f"{f.source}: block_configs[{i}] ffn_mult {mult!r} out of range",
                                       "ffn_mult is a positive multiple of hidden_size, at most 64")
            mlp = DenseMLP(h, _ffn_size(mult, h), bias=bool(f.get("mlp_bias", default=False)))
        if mixer is None and mlp is None and not mixer_t:
            skipped += 1  # a layer with nothing in it: the residual passes through
            continue
        layers.append(Layer("attention" if mixer else "mlp", mixer, mlp, mixer_t))
    return layers, [], (f"{skipped} of {len(blocks)} layers are empty (no-op attention and MLP)",) if skipped else ()


def build_gemma4(f: Fields):
    """Gemma 4 (gemma4 / gemma4_text): sliding layers with head_dim and num_key_value_heads,
    global layers with global_head_dim and num_global_key_value_heads whose K doubles as V
    (attention_k_eq_v); with enable_moe_block, a routed-expert block beside the dense MLP;
    per-layer inputs (hidden_size_per_layer_input) and the last num_kv_shared_layers layers
    reading earlier layers' K/V, as in Gemma 3n."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = f.list_("layer_types", str)
    if not types or len(types) != n:
        raise DecodescopeError(f"{f.source}: Gemma 4 needs layer_types, one per layer", "add layer_types")
    norms = tuple(Tensor(name, (h,), "rep", linear=False)
                  for name in ("pre_feedforward_layernorm", "post_feedforward_layernorm"))
    moe_block = bool(f.get("enable_moe_block", default=False))
    per_layer, model_wide, tables = per_layer_inputs(f, n, h)
    shared_from = first_kv_shared(f, n)
    layers = []
    for i, t in enumerate(types):
        if t == "full_attention":
            # transformers 5.24's Gemma4TextConfig: global_head_dim 512 where a config leaves it out
            attn = attention(f, qk_norm=True, head_dim=f.get("global_head_dim", default=512),
                             num_key_value_heads=f.get("num_global_key_value_heads", "num_key_value_heads",
                                                       default=f.need("num_attention_heads")),
                             v_proj=not f.get("attention_k_eq_v", default=False), kv_shared=i >= shared_from)
        else:
            attn = attention(f, f.get("sliding_window"), qk_norm=True, kv_shared=i >= shared_from)
        # use_double_wide_mlp: the layers that reuse K/V run an MLP twice as wide
        wide = 2 if f.get("use_double_wide_mlp", default=False) and i >= shared_from else 1
        dense = DenseMLP(h, wide * f.need("intermediate_size"))
        if moe_block:  # the dense MLP's tensors ride along as extras of the MoE layer
            mlp: DenseMLP | MoE = moe(f, moe_intermediate_size=f.need("moe_intermediate_size"))
            extra = norms + tuple(dense.tensors())
        else:
            mlp, extra = dense, norms
        extra += per_layer + (model_wide if i == 0 else ())
        layers.append(Layer("sliding_attention" if attn.sliding_window else "attention", attn, mlp, extra))
    return layers, [], (), tables


def first_kv_shared(f: Fields, n: int) -> int:
    """The first of the last num_kv_shared_layers layers, which read earlier layers' K/V (Gemma 3n / 4)."""
    first = n - f.get("num_kv_shared_layers", default=0)
    if first < 1:
        raise DecodescopeError(f"{f.source}: num_kv_shared_layers must leave a layer with its own K/V",
                               "num_kv_shared_layers is below num_hidden_layers")
    return first


def per_layer_inputs(f: Fields, n: int, h: int):
    """Gemma 3n / 4 per-layer inputs, where hidden_size_per_layer_input is set: (each layer's
    gate, projection and norm; the model's projection to them and its norm, read once per
    token; the embedding table gathered a row per token, as Arch.input_tables)."""
    p = f.get("hidden_size_per_layer_input", default=0)
    if not p:
        return (), (), ()
    vocab = f.need("vocab_size_per_layer_input", "per-layer inputs")
    if not vocab:
        raise DecodescopeError(f"{f.source}: hidden_size_per_layer_input {p} but vocab_size_per_layer_input 0",
                               "both are positive in configs with per-layer inputs")
    per_layer = (Tensor("per_layer_input_gate", (p, h), "rep"), Tensor("per_layer_projection", (h, p), "rep"),
                 Tensor("post_per_layer_input_norm", (h,), "rep", linear=False))
    model_wide = (Tensor("per_layer_model_projection", (n * p, h), "rep"),
                  Tensor("per_layer_projection_norm", (p,), "rep", linear=False))
    return per_layer, model_wide, (Tensor("embed_tokens_per_layer", (vocab, n * p), "vocab", linear=False),)


def build_jamba(f: Fields):
    """Jamba: Mamba (v1) layers with attention every attn_layer_period-th layer (from
    attn_layer_offset) and MoE every expert_layer_period-th (from expert_layer_offset)."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    a_period, a_offset = f.get("attn_layer_period", default=8), f.get("attn_layer_offset", default=4)
    e_period, e_offset = f.get("expert_layer_period", default=2), f.get("expert_layer_offset", default=1)
    inner = f.get("mamba_expand", default=2) * h
    mamba = Mamba1(h, inner, 1, 0, f.get("mamba_d_state", default=16), f.get("mamba_d_conv", default=4),
                   bool(f.get("mamba_conv_bias", default=True)), bool(f.get("mamba_proj_bias", default=False)),
                   STATE_DTYPE_BYTES[state_dtype(f)], dt_rank=f.get("mamba_dt_rank", default=-(-h // 16)))
    layers = []
    for i in range(n):
        experts = f.get("num_experts", default=0) > 1 and i % e_period == e_offset
        mlp = moe(f) if experts else DenseMLP(h, f.need("intermediate_size"))
        if i % a_period == a_offset:
            layers.append(Layer("attention", attention(f), mlp))
        else:
            layers.append(Layer("mamba", mamba, mlp))
    return layers, [], ()



# layer_types words: Granite's own, and transformers 5's for the same two kinds
GRANITE_HYBRID_KINDS = {"mamba": "mamba", "attention": "attention", "linear_attention": "mamba",
                        "full_attention": "attention"}


def build_granite_hybrid(f: Fields):
    """Granite 4.0-H (granitemoehybrid): Mamba2 or attention per layer_types, and in every
    layer routed experts (intermediate_size each) plus a shared MLP (shared_intermediate_size).
    Mamba defaults are GraniteMoeHybridConfig's (128 heads, 1 group, state 256, head "auto")."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    types = per_layer_words(f, "layer_types", n, GRANITE_HYBRID_KINDS)
    heads = f.get("mamba_n_heads", default=128)
    d_head = f.data.get("mamba_d_head")
    d_head = f.get("mamba_expand", default=2) * h // heads if d_head in (None, "auto") else f.get("mamba_d_head")
    mamba = Mamba2(h, heads, max(1, d_head), f.get("mamba_n_groups", default=1), f.get("mamba_d_state", default=256),
                   f.get("mamba_d_conv", default=4), bool(f.get("mamba_conv_bias", default=True)),
                   bool(f.get("mamba_proj_bias", default=False)), STATE_DTYPE_BYTES[state_dtype(f)])
    shared = f.get("shared_intermediate_size", default=0)
    if f.get("num_local_experts"):
        mlp: DenseMLP | MoE = moe(f, shared_expert_intermediate_size=shared)
    else:
        mlp = DenseMLP(h, shared or f.need("intermediate_size"))
    layers = [Layer("mamba", mamba, mlp) if GRANITE_HYBRID_KINDS[t] == "mamba" else Layer("attention", attention(f), mlp)
              for t in types]
    return layers, [], ()


def build_mimo_v2(f: Fields):
    """MiMo-V2-Flash: hybrid_layer_pattern picks sliding-window layers (1: swa_* head counts,
    sliding_window tokens, a learned sink per head) or full-attention layers (0); Q/K heads
    of head_dim, V heads of v_head_dim; moe_layer_freq picks the MoE layers (1) from the
    dense ones (0)."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    swa, v5 = mimo_v2_sliding(f, n)
    moe_at = set(f.list_("moe_layers", int) or ())
    full = attention(f, v_head_dim=f.get("v_head_dim", default=0),
                     sinks=bool(f.get("add_full_attention_sink_bias", default=False)))
    window = attention(f, f.need("sliding_window", "the sliding-window layers"),
                       num_key_value_heads=f.get("swa_num_key_value_heads", default=0)
                       or f.need("num_key_value_heads") * (2 if v5 else 1),
                       head_dim=f.get("swa_head_dim", "head_dim"),
                       v_head_dim=f.get("swa_v_head_dim", "v_head_dim", default=0),
                       sinks=bool(f.get("add_swa_attention_sink_bias", default=v5)))
    dense = DenseMLP(h, f.need("intermediate_size"))
    routed = moe(f, router_bias=f.get("topk_method") == "noaux_tc")
    return [Layer("sliding_attention" if s else "attention", window if s else full, routed if i in moe_at else dense)
            for i, s in enumerate(swa)], [], ()


def build_minimax_m3(f: Fields):
    """MiniMax-M3: GQA with per-head q/k norms; the layers sparse_attention_freq marks read
    only the top sparse_topk_blocks blocks (plus the local and initial ones) an indexer
    picks; dense MLPs (dense_intermediate_size) where moe_layer_freq is 0, else routed
    experts and a shared one (shared_intermediate_size). Its config names MTP modules that
    are not counted here."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    sparse = f.get("sparse_attention_config", default={})
    if not isinstance(sparse, dict):
        raise DecodescopeError(f"{f.source}: sparse_attention_config is not a JSON object", "fix it")
    g = Fields(sparse, f.source)
    on = per_layer_flags(g, "sparse_attention_freq", n) if sparse.get("use_sparse_attention") else [0] * n
    dense_attn = attention(f, qk_norm=True)
    if any(on):
        block = g.need("sparse_block_size", "MiniMax sparse attention")
        picked = (g.need("sparse_topk_blocks", "MiniMax sparse attention") + g.get("sparse_local_block", default=1)
                  + g.get("sparse_init_block", default=0)) * block
        from decodescope.arch.mixers import BlockSparseAttention  # imported when built
        sparse_attn = BlockSparseAttention(**{**asdict(dense_attn), "index_heads": g.need("sparse_num_index_heads"),
                                              "index_dim": g.need("sparse_index_dim"), "topk_tokens": picked})
    moe_at = set(f.list_("moe_layers", int) or ())
    dense = DenseMLP(h, f.get("dense_intermediate_size", "intermediate_size"))
    routed = moe(f, shared_expert_intermediate_size=f.get("n_shared_experts", default=0)
                 * f.get("shared_intermediate_size", "moe_intermediate_size", default=0),
                 router_bias=bool(f.get("use_routing_bias", default=False)))
    layers = [Layer("sparse_attention" if on[i] else "attention", sparse_attn if on[i] else dense_attn,
                    routed if i in moe_at else dense) for i in range(n)]
    return layers, [], _unshipped_mtp(f)
