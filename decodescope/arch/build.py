"""The shared parts of the family builders (attention, MLP / MoE, MTP modules) and the
builders of the Llama-style, DeepSeek and Qwen-hybrid families. A builder is
`(Fields) -> (layers, mtp, notes)`; decodescope.arch.registry maps model_type to builder."""

from decodescope.arch.arch import MTPModule
from decodescope.arch.blocks import MLA, Attention, DenseMLP, GatedDeltaNet, Layer, MoE, Tensor
from decodescope.arch.config import RawConfig
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.arch.text_defaults import TEXT_DEFAULTS
from decodescope.errors import DecodescopeError

STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# families whose q/k/v projections carry biases though their configs name no attention_bias
# (SeedOssConfig's default attention_bias is true, its attention_out_bias false)
QKV_BIAS = ("qwen2", "qwen2_moe", "mimo", "seed_oss", "glm4v", "glm4v_text", "glm46v")
# families whose attention_bias covers q, k and v but not o_proj
QKV_ONLY = (*QKV_BIAS, "glm4", "glm4_moe", "glm4v_moe", "glm4v_moe_text", "chatglm", "param2moe")
# GLM-4-0414 and GLM-4.1V / 4.6V-Flash's language model, Aleph Alpha's Kolibri-1: a norm on the
# attention's and on the MLP's output (post_self_attn_layernorm, post_mlp_layernorm) besides the
# two pre-norms
POST_NORMS = ("glm4", "glm4v", "glm4v_text", "glm46v", "kolibri1")
# families that normalise q and k per head (q_norm / k_norm of head_dim)
# (HunYuanDenseV1Attention builds query_layernorm / key_layernorm whatever use_qk_norm says)
QK_NORM = ("qwen3", "gemma3", "olmo", "exaone4", "exaone_moe", "dots1", "flint", "kolibri1", "hunyuan_v1_dense")
# Llama layouts whose MLP is up_proj -> activation -> down_proj, no gate (Arcee AFM: ReLU^2,
# transformers' modeling_arcee.py ArceeMLP)
UNGATED_MLP = ("arcee",)


# the keys multimodal wrappers nest their language model under, the first present wins:
# text_config (transformers' own wrappers), llm_config (remote code: OpenGVLab InternVL 2-3.5,
# AIDC-AI Ovis 1.6-2.5, NVLM-D, H2OVL), language_config (remote code: DeepSeek-VL2,
# DeepSeek-OCR, Janus / Janus-Pro)
NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config")


def text_fields(raw: RawConfig) -> Fields:
    # the top level keeps a few shared fields (tie_word_embeddings, quantization_config, dtype);
    # the nested config's fields win, its model_type too: a wrapper's own model_type stays only
    # where the nested one names none (DeepSeek-OCR's language_config)
    if not isinstance(raw.data, dict):
        raise DecodescopeError(f"{raw.source}: the config is a JSON {type(raw.data).__name__}, not an object",
                               "pass the model's config.json, a JSON object of its fields")
    # Qwen3-Omni nests it one level deeper: thinker_config.text_config (the talker, which
    # speaks, has a text_config of its own)
    thinker = raw.data.get("thinker_config") or {}
    if not isinstance(thinker, dict):
        raise DecodescopeError(f"{raw.source}: thinker_config is not a JSON object", "fix thinker_config")
    key = next((k for k in NESTED_TEXT_KEYS if raw.data.get(k)), None)
    text = raw.data[key] if key else thinker.get("text_config") or {}
    if not isinstance(text, dict):
        raise DecodescopeError(f"{raw.source}: {key or 'thinker_config.text_config'} is not a JSON object",
                               f"fix {key or 'thinker_config.text_config'}")
    # the nested config's class defaults where it names none (text_defaults.py)
    mt = text.get("model_type")
    data = {**(TEXT_DEFAULTS.get(mt, {}) if isinstance(mt, str) else {}),
            **{k: v for k, v in raw.data.items() if not k.endswith("vision_config")}}
    data.update(text)
    if not key and thinker.get("tie_word_embeddings") is not None:
        # the thinker ties its head by its own flag, not its text_config's (Qwen2.5-Omni's class
        # defaults: thinker false, text_config true; transformers builds the thinker untied)
        data["tie_word_embeddings"] = thinker["tie_word_embeddings"]
    return Fields(data, raw.source)


# ---- attention ----------------------------------------------------------------------

def attention(f: Fields, window: int | None = None, **kw) -> Attention:
    heads = f.need("num_attention_heads", "attention")
    hidden = f.need("hidden_size")
    bias, mt = bool(f.get("attention_bias", default=False)), f.str_("model_type")
    kw.setdefault("attention_bias", bias or mt in QKV_BIAS)
    kw.setdefault("o_bias", bool(f.get("attention_out_bias", default=bias and mt not in QKV_ONLY)))
    # HF's documented default: no num_key_value_heads means MHA
    kw.setdefault("num_key_value_heads", f.get("num_key_value_heads", default=heads))
    kw.setdefault("head_dim", f.get("head_dim", "attention_head_dim", default=max(1, hidden // heads)))
    return Attention(hidden_size=hidden, num_attention_heads=heads, sliding_window=window or None, **kw)


# layer i of n attends in full (else in a window) where a config names no layer_types:
# FlintConfig (RecursiveSI/flint) and Kolibri1Config's __post_init__ in transformers 5.24
DEFAULT_FULL_LAYERS = {"flint": lambda i, n: i < 2 or i % 4 == 1 or i == n - 1,
                       "kolibri1": lambda i, n: (i + 1) % 5 == 0}


def _layer_types(f: Fields, n: int) -> list[str]:
    """Per-layer attention kind: "full_attention" or "sliding_attention"."""
    types = f.list_("layer_types", str)
    if types:
        if len(types) != n:
            raise DecodescopeError(f"{f.source}: layer_types has {len(types)} entries, num_hidden_layers is {n}",
                                   "fix the config: one layer type per layer")
        return list(types)
    mt = f.str_("model_type")
    window = f.get("sliding_window")
    if mt in DEFAULT_FULL_LAYERS:  # their config classes' default layer_types
        return ["full_attention" if DEFAULT_FULL_LAYERS[mt](i, n) else "sliding_attention" for i in range(n)]
    if mt == "gemma2":  # even layers local, odd global
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if mt.startswith("gemma3"):  # sliding_window_pattern-1 local layers, then one global
        p = f.get("sliding_window_pattern", default=6)
        return ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    if window and f.get("use_sliding_window", default=True) is not False:
        return ["sliding_attention"] * n  # Mistral-style: every layer windowed
    return ["full_attention"] * n


# ---- MLP / MoE ----------------------------------------------------------------------

def _num_experts(f: Fields) -> int:
    return f.get("num_local_experts", "num_experts", "n_routed_experts", default=0)


def moe(f: Fields, **kw) -> MoE:
    hidden, experts = f.need("hidden_size"), _num_experts(f)
    top_k = f.get("num_experts_per_tok", "experts_per_token", "moe_topk") or f.need("num_experts_per_tok",
                                                                                  "MoE routing")
    if top_k > experts:
        raise DecodescopeError(f"{f.source}: {top_k} experts per token of {experts} experts",
                               "num_experts_per_tok cannot exceed the number of experts")
    kw.setdefault("moe_intermediate_size", f.get("moe_intermediate_size") or f.need("intermediate_size", "MoE experts"))
    return MoE(hidden_size=hidden, num_experts=experts, num_experts_per_tok=top_k, **kw)


# mlp_layer_types words (transformers 5 writes them in place of first_k_dense_replace and kin)
MLP_LAYER_KINDS = {"dense": False, "sparse": True, "moe": True}


def _is_moe_layer(f: Fields, i: int) -> bool:
    if not _num_experts(f) or i in (f.list_("mlp_only_layers", int) or []):
        return False
    if f.get("mlp_layer_types") is not None:  # an MTP layer (i past the list) as the last layer
        kinds = mlp_layer_types(f)
        return MLP_LAYER_KINDS[kinds[min(i, len(kinds) - 1)]]
    if f.get("moe_layers") is not None:
        return i in f.list_("moe_layers", int)
    if f.get("first_k_dense_replace") is not None:  # DeepSeek
        return i >= f.get("first_k_dense_replace") and i % f.get("moe_layer_freq", default=1) == 0
    if f.get("interleave_moe_layer_step"):  # Llama 4: every step-th layer is MoE
        return (i + 1) % f.get("interleave_moe_layer_step") == 0
    return (i + 1) % f.get("decoder_sparse_step", default=1) == 0


def mlp_layer_types(f: Fields) -> list[str]:
    """mlp_layer_types, one known word per layer (MLP_LAYER_KINDS)."""
    return per_layer_words(f, "mlp_layer_types", f.need("num_hidden_layers"), MLP_LAYER_KINDS)


def decoder_mlp(f: Fields, i: int) -> DenseMLP | MoE:
    hidden = f.need("hidden_size")
    mt = f.str_("model_type")
    if not _is_moe_layer(f, i):
        inter = f.get("intermediate_size_mlp") if mt.startswith("llama4") else None
        return DenseMLP(hidden, inter or f.need("intermediate_size", "the MLP"),
                        bias=bool(f.get("mlp_bias", default=False)), gated=mt not in UNGATED_MLP)
    if mt.startswith("llama4"):  # one shared expert the size of a routed one
        return moe(f, shared_expert_intermediate_size=f.need("intermediate_size"))
    if mt == "gpt_oss":
        return moe(f, bias=True, router_bias=True)
    shared = f.get("shared_expert_intermediate_size", default=0)
    if not shared and f.get("n_shared_experts", "num_shared_experts"):
        shared = f.get("n_shared_experts", "num_shared_experts") * f.need("moe_intermediate_size")
    return moe(f, shared_expert_intermediate_size=shared,
                shared_expert_gate=bool(shared) and mt.startswith(("qwen2_moe", "qwen3_next", "qwen3_5")),
                # DeepSeek-V3-style sigmoid routing keeps a per-expert correction bias
                router_bias=f.get("topk_method") == "noaux_tc" or bool(f.get("use_routing_bias"))
                or mt.startswith(("glm4_moe", "glm4v_moe", "glm_moe_dsa", "dots1", "param2moe")))


def _num_layers(f: Fields) -> int:
    return f.need("num_hidden_layers")


# ---- families -----------------------------------------------------------------------

# a learned sink logit per head in every layer (gpt-oss; Granite's sliding-window variants,
# transformers' modeling_granite_swa.py: 'self.sinks = nn.Parameter(torch.zeros(config.num_attention_heads))')
SINK_FAMILIES = ("gpt_oss", "granite_swa", "granitemoe_swa", "flint")


def build_decoder(f: Fields):
    """Llama / Mistral / Qwen2-3 / Gemma / Mixtral / Qwen-MoE / Llama 4 / gpt-oss."""
    n, mt = _num_layers(f), f.str_("model_type")
    window = f.get("sliding_window")
    types = _layer_types(f, n)
    chunk = f.get("attention_chunk_size") if mt.startswith("llama4") else None
    qk_norm = mt.startswith(QK_NORM) or bool(f.get("use_qk_norm"))
    h = f.need("hidden_size")
    # Gemma 2/3 wrap the MLP in two more norms (pre_ and post_feedforward_layernorm), GLM-4-0414
    # adds one after attention and one after the MLP
    # HyperCLOVA X SEED: post_norm1 / post_norm2 after attention and the MLP where use_post_norm
    names = (("pre_feedforward_layernorm", "post_feedforward_layernorm") if mt.startswith(("gemma2", "gemma3"))
             else ("post_self_attn_layernorm", "post_mlp_layernorm") if mt in POST_NORMS
             else ("post_norm1", "post_norm2") if mt == "hyperclovax" and f.get("use_post_norm", default=True) else ())
    extra = tuple(Tensor(name, (h,), "rep", linear=False) for name in names)
    layers = []
    for i, t in enumerate(types):
        w = window if t == "sliding_attention" else None
        if chunk and (i + 1) % 4 != 0:  # Llama 4: 3 of 4 layers attend within a chunk (NoPE every 4th)
            w, t = chunk, "sliding_attention"
        # OLMoE and OLMo 2 normalise q and k over all heads at once
        attn = attention(f, w, qk_norm=qk_norm, sinks=mt in SINK_FAMILIES, qk_norm_full=mt.startswith("olmo"))
        mlp = decoder_mlp(f, i)
        layers.append(Layer("sliding_attention" if w else "attention", attn, mlp, extra))
    notes = ("Llama 4 chunked attention counted as a window of attention_chunk_size",) if chunk else ()
    return layers, [], notes


def nextn_mtp(f: Fields, layer: Layer) -> list[MTPModule]:
    """DeepSeek-style next-n modules: eh_proj [hidden, 2*hidden], three norms, one decoder layer."""
    hidden = f.need("hidden_size")
    extra = (Tensor("eh_proj", (hidden, 2 * hidden), "rep"),
             Tensor("enorm", (hidden,), "rep", linear=False),
             Tensor("hnorm", (hidden,), "rep", linear=False),
             Tensor("shared_head.norm", (hidden,), "rep", linear=False))
    return [MTPModule(layer, extra)] * f.get("num_nextn_predict_layers", default=0)


def build_deepseek(f: Fields):
    """DeepSeek-V2/V3/R1/V3.2, Kimi-K2, GLM-5: MLA (+ the V3.2 indexer and top-k sparse
    attention) + (dense first-k, then MoE) + next-n MTP layers."""
    n, hidden = _num_layers(f), f.need("hidden_size")
    topk = f.get("index_topk", default=0)
    mla = MLA(hidden, f.need("num_attention_heads"), f.get("q_lora_rank"),
              f.need("kv_lora_rank", "MLA"), f.need("qk_nope_head_dim", "MLA"),
              f.need("qk_rope_head_dim", "MLA"), f.need("v_head_dim", "MLA"),
              index_n_heads=f.need("index_n_heads", "the sparse-attention indexer") if topk else 0,
              index_head_dim=f.need("index_head_dim", "the sparse-attention indexer") if topk else 0,
              index_topk=topk)
    # A.X-K1 (SK Telecom): DeepSeek-V3 with a norm on each MoE block's output (post_mlp_layernorm)
    post = (Tensor("post_mlp_layernorm", (hidden,), "rep", linear=False),) if f.str_("model_type") == "axk1" else ()
    layers = [Layer("mla", mla, mlp, post if isinstance(mlp, MoE) else ())
              for mlp in (decoder_mlp(f, i) for i in range(n))]
    notes = (f"sparse attention: each token attends to the top {topk} cached tokens its indexer picks",
             ) if topk else ()
    return layers, nextn_mtp(f, Layer("mla", mla, decoder_mlp(f, n))), notes


def state_dtype(f: Fields) -> str:
    ssm = f.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype", default="float32")
    if not isinstance(ssm, str) or ssm not in STATE_DTYPE_BYTES:  # a list or dict is unhashable
        raise DecodescopeError(f"{f.source}: mamba_ssm_dtype {ssm!r} unknown",
                               f"use one of {', '.join(STATE_DTYPE_BYTES)}")
    return ssm


def _gdn(f: Fields) -> GatedDeltaNet:
    ssm = state_dtype(f)
    return GatedDeltaNet(f.need("hidden_size"), f.need("linear_num_key_heads", "Gated DeltaNet"),
                         f.need("linear_num_value_heads", "Gated DeltaNet"),
                         f.need("linear_key_head_dim", "Gated DeltaNet"),
                         f.need("linear_value_head_dim", "Gated DeltaNet"),
                         f.need("linear_conv_kernel_dim", "Gated DeltaNet"),
                         state_dtype_bytes=STATE_DTYPE_BYTES[ssm])


def build_qwen_hybrid(f: Fields):
    """Qwen3-Next, Qwen3.5 / 3.6 dense and MoE: Gated DeltaNet + gated full attention.
    Lara-4-Mini (lara_mini): the same Gated DeltaNet and MoE, its attention ungated (Qwen3's) and
    some of it in a window (layer_types "sliding_attention")."""
    n, hidden = _num_layers(f), f.need("hidden_size")
    gate = f.str_("model_type") != "lara_mini"
    types = per_layer_words(f, "layer_types", n, ("linear_attention", "full_attention", "sliding_attention")) \
        if f.get("layer_types") is not None else None
    if not types and not gate:  # LaraMiniConfig's default: the released pattern, period 5
        pattern = ("linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention")
        types = [pattern[i % 5] for i in range(n)]
    if not types:  # released Qwen3-Next configs: layer i is full attention when (i+1) % interval == 0
        interval = f.need("full_attention_interval", "the linear/full attention pattern")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    layers = []
    for i, t in enumerate(types):
        if t == "linear_attention":
            layers.append(Layer("linear_attention", _gdn(f), decoder_mlp(f, i)))
        elif t == "sliding_attention":
            window = f.need("sliding_window", "the sliding-window layers")
            layers.append(Layer("sliding_attention", attention(f, window, attn_output_gate=gate, qk_norm=True),
                                decoder_mlp(f, i)))
        else:
            layers.append(Layer("attention", attention(f, attn_output_gate=gate, qk_norm=True), decoder_mlp(f, i)))
    n_mtp, notes = f.get("mtp_num_hidden_layers"), ()
    if n_mtp is None and f.get("model_type") == "qwen3_next":
        n_mtp = 1
        notes = ("Qwen3-Next checkpoints carry 1 MTP layer that config.json does not list; assumed 1",)
    mtp = [MTPModule(Layer("attention", attention(f, attn_output_gate=True, qk_norm=True), decoder_mlp(f, n)),
                     (Tensor("fc", (hidden, 2 * hidden), "rep"),
                      Tensor("pre_fc_norm_embedding", (hidden,), "rep", linear=False),
                      Tensor("pre_fc_norm_hidden", (hidden,), "rep", linear=False),
                      Tensor("norm", (hidden,), "rep", linear=False)))
           for _ in range(n_mtp or 0)]
    return layers, mtp, notes
