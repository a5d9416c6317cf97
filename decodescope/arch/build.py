"""config.json -> Arch, one builder per architecture family, keyed by `model_type`.

To add a family: write a builder `(Fields) -> (layers, mtp, notes)` below and list its
model_type(s) in FAMILIES."""

from decodescope.arch.arch import Arch, MTPModule
from decodescope.arch.blocks import (MLA, Attention, DenseMLP, GatedDeltaNet, Layer, Mamba2,
                                     MoE, Tensor)
from decodescope.arch.config import RawConfig
from decodescope.errors import DecodescopeError

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16"}
STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class Fields:
    """Config fields with errors that name the missing field and the file."""

    def __init__(self, data: dict, source: str):
        self.data, self.source = data, source

    def need(self, key: str, why: str = ""):
        v = self.data.get(key)
        if v is None:
            raise DecodescopeError(
                f"{self.source}: field '{key}' is missing" + (f" (needed for {why})" if why else ""),
                f"add \"{key}\" to the config (see the model's Hugging Face config.json)")
        return v

    def get(self, *keys, default=None):
        for k in keys:
            if self.data.get(k) is not None:
                return self.data[k]
        return default


def _text_fields(raw: RawConfig) -> Fields:
    # multimodal configs nest the language model under text_config; the top level keeps
    # a few shared fields (tie_word_embeddings, quantization_config, dtype)
    data = {k: v for k, v in raw.data.items() if not k.endswith("vision_config")}
    data.update(raw.data.get("text_config") or {})
    return Fields(data, raw.source)


# ---- attention ----------------------------------------------------------------------

def _attention(f: Fields, window: int | None = None, **kw) -> Attention:
    heads = f.need("num_attention_heads", "attention")
    hidden = f.need("hidden_size")
    return Attention(
        hidden_size=hidden, num_attention_heads=heads,
        # HF's documented default: no num_key_value_heads means MHA
        num_key_value_heads=f.get("num_key_value_heads", default=heads),
        head_dim=f.get("head_dim", "attention_head_dim", default=hidden // heads),
        sliding_window=window, attention_bias=bool(f.get("attention_bias", default=False)), **kw)


def _layer_types(f: Fields, n: int) -> list[str]:
    """Per-layer attention kind: "full_attention" or "sliding_attention"."""
    types = f.get("layer_types")
    if types:
        if len(types) != n:
            raise DecodescopeError(f"{f.source}: layer_types has {len(types)} entries, num_hidden_layers is {n}",
                                   "fix the config: one layer type per layer")
        return list(types)
    mt = f.get("model_type", default="")
    window = f.get("sliding_window")
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


def _moe(f: Fields, **kw) -> MoE:
    hidden = f.need("hidden_size")
    return MoE(hidden_size=hidden, num_experts=_num_experts(f),
               num_experts_per_tok=f.get("num_experts_per_tok", "experts_per_token", "moe_topk")
               or f.need("num_experts_per_tok", "MoE routing"),
               moe_intermediate_size=f.get("moe_intermediate_size") or f.need("intermediate_size", "MoE experts"),
               **kw)


def _is_moe_layer(f: Fields, i: int) -> bool:
    if not _num_experts(f) or i in (f.get("mlp_only_layers") or []):
        return False
    if f.get("moe_layers") is not None:
        return i in f.get("moe_layers")
    if f.get("first_k_dense_replace") is not None:  # DeepSeek
        return i >= f.get("first_k_dense_replace") and i % f.get("moe_layer_freq", default=1) == 0
    if f.get("interleave_moe_layer_step"):  # Llama 4: every step-th layer is MoE
        return (i + 1) % f.get("interleave_moe_layer_step") == 0
    return (i + 1) % f.get("decoder_sparse_step", default=1) == 0


def _decoder_mlp(f: Fields, i: int) -> DenseMLP | MoE:
    hidden = f.need("hidden_size")
    mt = f.get("model_type", default="")
    if not _is_moe_layer(f, i):
        inter = f.get("intermediate_size_mlp") if mt.startswith("llama4") else None
        return DenseMLP(hidden, inter or f.need("intermediate_size", "the MLP"),
                        bias=bool(f.get("mlp_bias", default=False)))
    if mt.startswith("llama4"):  # one shared expert the size of a routed one
        return _moe(f, shared_expert_intermediate_size=f.need("intermediate_size"))
    if mt == "gpt_oss":
        return _moe(f, bias=True, router_bias=True)
    shared = f.get("shared_expert_intermediate_size", default=0)
    if not shared and f.get("n_shared_experts"):
        shared = f.get("n_shared_experts") * f.need("moe_intermediate_size")
    return _moe(f, shared_expert_intermediate_size=shared,
                shared_expert_gate=bool(shared) and mt.startswith(("qwen2_moe", "qwen3_next", "qwen3_5")),
                router_bias=f.get("topk_method") == "noaux_tc")


def _num_layers(f: Fields) -> int:
    return f.need("num_hidden_layers")


# ---- families -----------------------------------------------------------------------

def build_decoder(f: Fields):
    """Llama / Mistral / Qwen2-3 / Gemma / Mixtral / Qwen-MoE / Llama 4 / gpt-oss."""
    n, mt = _num_layers(f), f.get("model_type", default="")
    window = f.get("sliding_window")
    types = _layer_types(f, n)
    chunk = f.get("attention_chunk_size") if mt.startswith("llama4") else None
    qk_norm = mt.startswith(("qwen3", "gemma3", "olmo2")) or bool(f.get("use_qk_norm"))
    layers = []
    for i, t in enumerate(types):
        w = window if t == "sliding_attention" else None
        if chunk and (i + 1) % 4 != 0:  # Llama 4: 3 of 4 layers attend within a chunk (NoPE every 4th)
            w, t = chunk, "sliding_attention"
        attn = _attention(f, w, qk_norm=qk_norm, sinks=mt == "gpt_oss")
        mlp = _decoder_mlp(f, i)
        layers.append(Layer("sliding_attention" if w else "attention", attn, mlp))
    notes = ("Llama 4 chunked attention counted as a window of attention_chunk_size",) if chunk else ()
    return layers, [], notes


def build_deepseek(f: Fields):
    """DeepSeek-V2/V3/R1, Kimi-K2: MLA + (dense first-k, then MoE) + next-n MTP layers."""
    n, hidden = _num_layers(f), f.need("hidden_size")

    def mla():
        return MLA(hidden, f.need("num_attention_heads"), f.get("q_lora_rank"),
                   f.need("kv_lora_rank", "MLA"), f.need("qk_nope_head_dim", "MLA"),
                   f.need("qk_rope_head_dim", "MLA"), f.need("v_head_dim", "MLA"))

    layers = [Layer("mla", mla(), _decoder_mlp(f, i)) for i in range(n)]
    mtp = [MTPModule(Layer("mla", mla(), _decoder_mlp(f, n)),
                     (Tensor("eh_proj", (hidden, 2 * hidden), "rep"),
                      Tensor("enorm", (hidden,), "rep", linear=False),
                      Tensor("hnorm", (hidden,), "rep", linear=False),
                      Tensor("shared_head.norm", (hidden,), "rep", linear=False)))
           for _ in range(f.get("num_nextn_predict_layers", default=0))]
    return layers, mtp, ()


def _gdn(f: Fields) -> GatedDeltaNet:
    ssm = f.get("mamba_ssm_dtype", default="float32")
    return GatedDeltaNet(f.need("hidden_size"), f.need("linear_num_key_heads", "Gated DeltaNet"),
                         f.need("linear_num_value_heads", "Gated DeltaNet"),
                         f.need("linear_key_head_dim", "Gated DeltaNet"),
                         f.need("linear_value_head_dim", "Gated DeltaNet"),
                         f.need("linear_conv_kernel_dim", "Gated DeltaNet"),
                         state_dtype_bytes=STATE_DTYPE_BYTES[ssm])


def build_qwen_hybrid(f: Fields):
    """Qwen3-Next, Qwen3.5 / 3.6 dense and MoE: Gated DeltaNet + gated full attention."""
    n, hidden = _num_layers(f), f.need("hidden_size")
    types = f.get("layer_types")
    if not types:  # released Qwen3-Next configs: layer i is full attention when (i+1) % interval == 0
        interval = f.need("full_attention_interval", "the linear/full attention pattern")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    layers = []
    for i, t in enumerate(types):
        if t == "linear_attention":
            layers.append(Layer("linear_attention", _gdn(f), _decoder_mlp(f, i)))
        else:
            layers.append(Layer("attention", _attention(f, attn_output_gate=True, qk_norm=True), _decoder_mlp(f, i)))
    n_mtp, notes = f.get("mtp_num_hidden_layers"), ()
    if n_mtp is None and f.get("model_type") == "qwen3_next":
        n_mtp = 1
        notes = ("Qwen3-Next checkpoints carry 1 MTP layer that config.json does not list; assumed 1",)
    mtp = [MTPModule(Layer("attention", _attention(f, attn_output_gate=True, qk_norm=True), _decoder_mlp(f, n)),
                     (Tensor("fc", (hidden, 2 * hidden), "rep"),
                      Tensor("pre_fc_norm_embedding", (hidden,), "rep", linear=False),
                      Tensor("pre_fc_norm_hidden", (hidden,), "rep", linear=False),
                      Tensor("norm", (hidden,), "rep", linear=False)))
           for _ in range(n_mtp or 0)]
    return layers, mtp, notes


def build_nemotron_h(f: Fields):
    """Nemotron-H: a pattern string, one letter per block: M mamba2, * attention, - MLP, E MoE."""
    pattern = f.need("hybrid_override_pattern", "the Nemotron-H layer pattern")
    ssm = f.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype", default="float32")
    hidden = f.need("hidden_size")
    layers = []
    for i, ch in enumerate(pattern):
        if ch == "M":
            mixer = Mamba2(hidden, f.need("mamba_num_heads", "Mamba2"), f.need("mamba_head_dim", "Mamba2"),
                           f.need("n_groups", "Mamba2"), f.need("ssm_state_size", "Mamba2"),
                           f.need("conv_kernel", "Mamba2"), bool(f.get("use_conv_bias", default=True)),
                           bool(f.get("mamba_proj_bias", default=False)), STATE_DTYPE_BYTES[ssm])
            layers.append(Layer("mamba", mixer, None))
        elif ch == "*":
            layers.append(Layer("attention", _attention(f), None))
        elif ch == "-":
            layers.append(Layer("mlp", None, DenseMLP(hidden, f.need("intermediate_size"), gated=False)))
        elif ch == "E":
            moe = _moe(f, gated=False, router_bias=True,
                       shared_expert_intermediate_size=f.get("moe_shared_expert_intermediate_size", default=0))
            layers.append(Layer("moe", None, moe))
        else:
            raise DecodescopeError(f"{f.source}: hybrid_override_pattern letter '{ch}' at {i} is unknown",
                                   "known letters: M (mamba2), * (attention), - (MLP), E (MoE)")
    return layers, [], ()


FAMILIES = {
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text",
                     "mixtral", "qwen2_moe", "qwen3_moe", "llama4", "llama4_text", "gpt_oss",
                     "olmo2", "granite", "phi3"), build_decoder),
    **dict.fromkeys(("deepseek_v2", "deepseek_v3", "kimi_k2"), build_deepseek),
    **dict.fromkeys(("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
                    build_qwen_hybrid),
    "nemotron_h": build_nemotron_h,
}


def build_arch(raw: RawConfig) -> Arch:
    """Build the Arch of a parsed config."""
    f = _text_fields(raw)
    mt = f.get("model_type")
    if mt not in FAMILIES:
        raise DecodescopeError(
            f"{raw.source}: architecture model_type={mt!r} ({', '.join(f.get('architectures', default=[]))}) "
            "is not supported",
            f"supported model_types: {', '.join(sorted(FAMILIES))}. A decoder that looks like one of these "
            "can be tried by setting its model_type; adding a family is one builder in decodescope/arch/build.py")
    layers, mtp, notes = FAMILIES[mt](f)
    dtype = f.get("torch_dtype", "dtype", default="bfloat16")
    if dtype not in DTYPES:
        raise DecodescopeError(f"{raw.source}: dtype {dtype!r} unknown", f"use one of {', '.join(DTYPES)}")
    # transformers' per-class default: Gemma ties its embeddings, the other families here do not
    tie = raw.data.get("tie_word_embeddings", f.get("tie_word_embeddings", default=mt.startswith("gemma")))
    return Arch(name=raw.name, source=raw.source, model_type=mt, hidden_size=f.need("hidden_size"),
                vocab_size=f.need("vocab_size"), tie_word_embeddings=bool(tie), dtype=DTYPES[dtype],
                layers=tuple(layers), mtp=tuple(mtp), quantization=f.get("quantization_config"),
                notes=tuple(notes))
