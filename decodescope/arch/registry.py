"""config.json -> Arch: model_type -> family builder.

To add a family: write a builder `(Fields) -> (layers, mtp, notes[, input tables])` (decodescope/arch/
build.py or families.py) and list its model_type(s) in FAMILIES."""

from importlib import import_module

from decodescope.arch.arch import Arch
from decodescope.arch.build import build_decoder, build_deepseek, build_qwen_hybrid, text_fields
from decodescope.arch.classic import CLASSIC
from decodescope.arch.config import RawConfig
from decodescope.arch.fields import Fields
from decodescope.arch.families import (build_cohere, build_gemma4, build_granite_hybrid, build_jamba,
                                       build_mimo_v2, build_minimax_m2, build_minimax_m3, build_nemotron_nas, build_nextn_decoder,
                                       build_phimoe, build_starcoder2, translate)
from decodescope.arch.deepseek_v4 import build_deepseek_v4
from decodescope.arch.families2 import (QWEN2_VL, build_afmoe, build_apertus, build_beam, build_laguna, build_lfm2_moe,
                                        build_gemma3n, build_hunyuan, build_longcat_flash, build_minimax,
                                        translate2)
from decodescope.arch.hybrids import (build_falcon_h1, build_kimi_linear, build_lfm2, build_mamba1, build_mamba2,
                                      build_lfm3, build_nemotron_h, build_olmo_hybrid, build_step3p5)
from decodescope.errors import DecodescopeError


def _lazy(module: str, name: str):
    """A builder whose module (a family most runs never build) is imported when a config of it
    is built: each costs 1-8 ms of start-up (its frozen dataclasses), on every `decodescope model`."""
    def build(f: Fields):
        return getattr(import_module(f"decodescope.arch.{module}"), name)(f)
    return build


def _deepseek_v2(f: Fields):
    """DeepSeek-V2 as the remote code of DeepSeek-VL2 and DeepSeek-OCR builds it: MLA, or where
    use_mla is false (DeepSeek-OCR, DeepSeek-VL2-Tiny) MHA over the same MoE, DeepSeek-OCR 2's
    decoder. Text DeepSeek-V2 configs name no use_mla: DeepseekV2Config's default is MLA."""
    return (build_deepseek if f.get("use_mla", default=True) else _lazy("mm_text", "build_deepseek_mha"))(f)

FAMILIES = {
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text",
                     "mixtral", "qwen2_moe", "qwen3_moe", "llama4", "llama4_text", "gpt_oss",
                     "olmo2", "olmoe", "granite", "granite_swa", "granitemoe_swa", "phi3", "arcee", "internlm2", "baichuan", "chatglm",
                     "ernie4_5", "ernie4_5_moe",
                     # Qwen3-VL: the language model under text_config is Qwen3 / Qwen3-MoE
                     "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text",
                     # Qwen3-Omni: the thinker's language model (thinker_config.text_config) is Qwen3-MoE
                     "qwen3_omni_moe", "qwen3_omni_moe_text",
                     "ministral3", "smollm3", "seed_oss", "exaone4", "exaone_moe", "dots1",
                     "exaone", "internlm3", "dbrx", "granitemoe", "granitemoeshared", "hyperclovax", *QWEN2_VL, "hunyuan_v1_dense", "solar_open",
                     "glm", "bailing_moe", "bailing_moe_v2", "olmo3",
                     # GLM-4-0414 / GLM-Z1; GLM-4.1V and GLM-4.6V-Flash (their language model)
                     "glm4", "glm4v", "glm4v_text", "glm46v",
                     # Flint (sinks, per-head q/k norms, MoE), Aleph Alpha's Kolibri-1 (GLM-4's post-norms, MoE)
                     "flint", "kolibri1"),
                    build_decoder),
    # deepseek_vl_v2: DeepSeek-VL2 / DeepSeek-OCR, whose language_config may name no model_type
    **dict.fromkeys(("deepseek_v2", "deepseek_vl_v2"), _deepseek_v2),
    **dict.fromkeys(("deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa",
                     "glm4_moe_lite", "youtu", "axk1"), build_deepseek),  # glm4_moe_lite: GLM-4.7-Flash; youtu: dense MLA
    **dict.fromkeys(("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
                     "lara_mini"), build_qwen_hybrid),  # Lara-4-Mini: ungated attention, some in a window
    # glm4v_moe(_text): GLM-4.5V / 4.6V, whose language model is GLM-4.5-Air's
    # param2moe: BharatGen Param-2 MoE, which transformers runs as GLM-4.5 (Glm4MoeForCausalLM)
    **dict.fromkeys(("glm4_moe", "mimo", "glm4v_moe", "glm4v_moe_text", "hy_v3", "param2moe"), build_nextn_decoder),
    **dict.fromkeys(("cohere", "cohere2", "cohere2_moe"), build_cohere),
    "nemotron_h": build_nemotron_h,
    # GPT-NeoX / Pythia, Falcon (and its RefinedWeb configs), Phi-1/2, StableLM, OLMo v1, nanochat,
    # Nemotron-4, Jais-2
    **CLASSIC,
    "starcoder2": build_starcoder2,
    "phimoe": build_phimoe,
    "minimax_m2": build_minimax_m2,
    **dict.fromkeys(("minimax_m3", "minimax_m3_vl", "minimax_m3_vl_text"), build_minimax_m3),
    "nemotron-nas": build_nemotron_nas,
    **dict.fromkeys(("gemma4", "gemma4_text"), build_gemma4),
    "jamba": build_jamba,
    **dict.fromkeys(("granitemoehybrid", "bamba"), build_granite_hybrid),
    "falcon_h1": build_falcon_h1,
    "lfm2": build_lfm2,
    "lfm3": build_lfm3,  # LFM2's layers with sliding attention, sandwich norms, a gate per head
    "olmo_hybrid": build_olmo_hybrid,  # Olmo-Hybrid-7B: Gated DeltaNet + OLMo 3 attention
    "kimi_linear": build_kimi_linear,
    "bailing_hybrid": _lazy("bailing", "build_bailing_hybrid"),  # Ling 3.0 (KDA + gated MLA), Ling / Ring 2.5-2.6 (Lightning + MLA)
    "mamba2": build_mamba2,
    "zamba2": _lazy("zamba", "build_zamba2"),  # Zyphra Zamba2: Mamba2 layers and shared attention blocks
    "zamba": _lazy("zamba", "build_zamba"),  # Zyphra Zamba (v1): multi-head Mamba layers and one shared attention block
    "zaya": _lazy("zaya", "build_zaya"),  # Zyphra ZAYA1: compressed convolutional attention + a top-1 MoE with an MLP router
    **dict.fromkeys(("mamba", "falcon_mamba"), build_mamba1),
    **dict.fromkeys(("step3p5", "step3p7"), build_step3p5),  # step3p7: Step-3.7-Flash, text_config step3p5
    "mimo_v2_flash": build_mimo_v2,
    "laguna": build_laguna,
    "longcat_flash": build_longcat_flash,
    **dict.fromkeys(("gemma3n", "gemma3n_text"), build_gemma3n),
    # Hunyuan-A13B: its release config says hunyuan, the hub's later one hunyuan_v1_moe
    **dict.fromkeys(("hunyuan", "hunyuan_v1_moe"), build_hunyuan),
    "lfm2_moe": build_lfm2_moe,
    "apertus": build_apertus,
    "afmoe": build_afmoe,
    "beam": build_beam,
    # MiniMax-Text-01 and M1: their hub configs name themselves minimax_text_01 / minimax_m1
    **dict.fromkeys(("minimax", "minimax_m1", "minimax_text_01"), build_minimax),
    **dict.fromkeys(("deepseek_v4", "deepseek_ref"), build_deepseek_v4),  # deepseek_ref: SGLang's FP8 repacks
    "hy_v4": _lazy("mla_families", "build_hy_v4"),  # Tencent Hy v4 (Hy4-preview)
    # Mistral Large 4: DSA with a full-rank query, learned query scales, NoPE layers, shared latent KV
    **dict.fromkeys(("mistral_large4", "mistral_large4_text"), _lazy("next_moe", "build_mistral_large4")),
    # GLM-5.3-Flash: Kimi Delta Attention + NoPE DSA with pooled index keys, hyper-connections
    **dict.fromkeys(("glm5_next", "glm5_next_text"), _lazy("next_moe", "build_glm5_next")),
    # rednote dots3: the released config.json is flat (dots3_note), transformers 5 nests text_config
    **dict.fromkeys(("dots3_note", "dots3_note_text"), _lazy("mla_families", "build_dots3_note")),
    # Qwen3.8-Flash-Next: Qwen3.5-MoE with hyper-connections, n-gram per-layer embeddings, QSA
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), _lazy("qwen4", "build_qwen4_exp")),
    # Llama 3.2 Vision: Llama layers + gated cross-attention layers over the image tokens' K/V
    **dict.fromkeys(("mllama", "mllama_text_model"), _lazy("cross_vl", "build_mllama")),
    # ERNIE-4.5-VL: ERNIE 4.5 MoE with a vision expert group beside the text experts
    **dict.fromkeys(("ernie4_5_vl_moe", "ernie4_5_vl_moe_text"), _lazy("cross_vl", "build_ernie4_5_vl_moe")),
    # Meta Muse Glimmer / Spark: gated sliding attention, sandwich norms (Spark: residual gates, pooled MoE)
    **dict.fromkeys(("muse_glimmer", "muse_glimmer_text"), _lazy("cross_vl", "build_muse_glimmer")),
    **dict.fromkeys(("muse_spark", "muse_spark_text"), _lazy("cross_vl", "build_muse_spark")),
    "minicpm5_moe": _lazy("gated_moe", "build_minicpm5_moe"),  # OpenBMB MiniCPM 5 MoE: gated attention + DeepSeek-style MoE
    "ergo": _lazy("ergo", "build_ergo"),  # transformers' ErgoForCausalLM (5.25)
    "kolibri1_1": _lazy("kolibri1_1", "build_kolibri1_1"),  # Aleph Alpha Kolibri-1.1: sliding + indexed (sparse) attention, MoE
    "dory": _lazy("dory", "build_dory"),  # NVIDIA Nemotron-Labs Dory: nGPT layers, a middle section run n_recurrent_loops times
    "internlm": _lazy("remote_classic", "build_internlm"),  # InternLM v1: Llama with q/k/v/o biases (bias)
    "telechat": _lazy("remote_classic", "build_telechat"),  # TeleChat / TeleChat2: n_layer / n_head names, o_proj and down_proj biased
    "orion": _lazy("remote_classic2", "build_orion"),  # OrionStar Orion-14B: Llama with LayerNorms (weight + bias)
    "xverse": _lazy("remote_classic2", "build_xverse"),  # XVERSE dense (Llama's tensors) and XVERSE-MoE (routed + shared experts)
    "axk2": _lazy("axk2", "build_axk2"),  # SK Telecom A.X K2: DeepSeek-V3.2 with a fused query/output gate and gated norms
    "arctic": _lazy("remote_moe_hybrid", "build_arctic"),  # Snowflake Arctic: a dense residual MLP beside 128 experts
    # xAI Grok-1 and Grok-2 (whose hub config says model_type git; read as Grok only with architectures Grok1ForCausalLM)
    **dict.fromkeys(("grok-1", "git"), _lazy("remote_moe_hybrid", "build_grok")),
    "plamo2": _lazy("remote_moe_hybrid", "build_plamo2"),  # PFN PLaMo 2: Mamba layers between GQA attention layers
    "ouro": _lazy("remote_loops", "build_ouro"),  # ByteDance Ouro: a looped LM, its layers run total_ut_steps times (Layer.reuses)
    "aria_text": _lazy("north_aria", "build_aria"),  # rhymes-ai Aria's language model: every MLP routed experts + a shared MLP
    # Thinking Machines Inkling: relative-bias attention with short convs on k, v and both sublayers' outputs
    **dict.fromkeys(("inkling_text", "inkling_mm_model"), _lazy("inkling", "build_inkling")),
    **dict.fromkeys(("inkling2_text", "inkling2"), _lazy("inkling", "build_inkling2")),  # Inkling 2: block attention residuals, gated output, dynamic convs
    **dict.fromkeys(("inkling2_loop_text", "inkling2_loop"), _lazy("inkling", "build_inkling2_loop")),  # Inkling 2 with layers looped (Layer.reuses)
    "recurrent_gemma": _lazy("recurrent", "build_recurrent_gemma"),  # Google RecurrentGemma (Griffin): RG-LRU blocks and local attention
    "hrm_text": _lazy("recurrent", "build_hrm_text"),  # Sapient HRM-Text: an L and an H stack run in loops (Layer.reuses)
    "xlstm": _lazy("recurrent2", "build_xlstm"),  # NX-AI xLSTM (xLSTM-7b): mLSTM blocks with a matrix memory per head, no KV cache
    "rwkv7": _lazy("recurrent2", "build_rwkv7"),  # RWKV-7 "Goose" (fla's RWKV7Config): time-mix with a wkv state per head, LoRA gates
    "rwkv": _lazy("recurrent2", "build_rwkv"),  # RWKV-4 (transformers' RwkvForCausalLM): time-mix WKV state, channel-mix
    "phi4flash": _lazy("hybrids2", "build_phi4flash"),  # Phi-4-mini-flash (SambaY): Mamba + SWA, cross-decoder over one KV cache, GMUs
    "jet_nemotron": _lazy("hybrids2", "build_jet_nemotron"),  # NVIDIA Jet-Nemotron: Qwen2.5 + JetBlock linear attention (dynamic conv)
    "gpt_neo": _lazy("older", "build_gpt_neo"),  # EleutherAI GPT-Neo: global and local (windowed) attention alternating
    "persimmon": _lazy("older", "build_persimmon"),  # Adept Persimmon-8B: per-head q/k LayerNorms, squared-ReLU MLP
    "jetmoe": _lazy("older", "build_jetmoe"),  # JetMoE: routed attention experts (q / o per expert, shared k / v) and routed MLP experts
    "diffllama": _lazy("older", "build_diffllama"),  # differential attention: Llama's tensors + four lambda vectors per layer
    "bitnet": _lazy("older", "build_bitnet"),  # Microsoft BitNet b1.58: Llama + sub-norms before o_proj and down_proj
    "modernbert-decoder": _lazy("bert_decoders", "build_modernbert_decoder"),  # Ettin decoders: MHA, GeGLU, LayerNorms, a prediction head
    "doge": _lazy("older", "build_doge"),  # SmallDoge Doge (dense): Llama + q/k norms, a dynamic mask's dt_proj and A, residual scales
    # DeepSeek-OCR 2, Unlimited-OCR and DeepSeekMoE (v1, remote code's model_type deepseek): Llama
    # attention with DeepSeek-V2's MoE (shared experts, mlp_layer_types or first_k_dense_replace)
    **dict.fromkeys(("deepseek_ocr2", "deepseek_ocr2_text", "unlimited_ocr", "unlimited_ocr_text", "deepseek"),
                    _lazy("mm_text", "build_deepseek_mha")),
    **dict.fromkeys(("molmo2", "molmo2_text"), _lazy("mm_text", "build_molmo2")),  # Ai2 Molmo 2: OLMo-style attention, extra vocabulary rows
    **dict.fromkeys(("glm_ocr", "glm_ocr_text"), _lazy("mm_text", "build_glm_ocr")),  # GLM-OCR: GLM-4.1V's layers, unbiased q/k/v, an MTP layer
    # openbmb MiniCPM 1-4 and MiniCPM-MoE-8x2B (remote code): Llama's tensors with muP scalars
    "minicpm": _lazy("remote_decoders", "build_minicpm"),
    # MiniCPM-V 2-4.5 and MiniCPM-o: a language model picked by the config's version, as vLLM picks it
    **dict.fromkeys(("minicpmv", "minicpmo"), _lazy("remote_decoders", "build_minicpmv")),
    # StepFun Step3 (321B-A38B): one shared K/V head, factorized queries, MoE beside a shared expert
    **dict.fromkeys(("step3_text", "step3_vl"), _lazy("remote_decoders", "build_step3")),
    "qwen": _lazy("remote_decoders", "build_qwen_v1"),  # Qwen v1 (QWenLMHeadModel): Qwen2's tensors, w1 / w2 half of intermediate_size
    "chameleon": _lazy("mm_text", "build_chameleon"),  # Meta Chameleon / Anole: Llama + a LayerNorm per query / key head
}

# model_types whose decoder is another family's, tensor for tensor: transformers 5.24's model
# of each class on its defaults has the parameter count of the named family's builder on the same
# config (tests/test_families_same_as.py); their sliding layers, MoE and MLA come from the same fields
SAME_AS = {
    "helium": "llama",  # Kyutai Helium
    "cwm": "llama",  # Meta Code World Model: Llama 3 with sliding layers in layer_types
    "iquestcoder": "llama",
    "aquila": "llama",  # BAAI Aquila / Aquila2 (remote code): vLLM runs AquilaForCausalLM as LlamaForCausalLM
    "vaultgemma": "llama",  # two norms per layer (not Gemma 2's four), head_dim 256, tied head
    "apertus1p5_text": "apertus",
    "sarvam_mla": "deepseek_v3",  # MLA + DeepSeek-style MoE
    "minicpm3": "deepseek_v3",  # MLA with dense MLPs
    "mellum": "qwen3_moe",  # per-head q/k norms, routed experts per mlp_layer_types
    "sarvam_moe": "qwen3_moe",  # per-head q/k norms (use_qk_norm), DeepSeek-style expert fields
    "flex_olmo": "olmo2",  # OLMo 2's norms (q/k over all heads, post-norms) with routed experts
    "gemma4_unified_text": "gemma4_text",  # Gemma 4 "unified": its vision tokens attend both ways
    "ministral": "mistral",  # Ministral-8B in transformers' own model_type: Mistral's layout, per-layer windows
    # rednote dots.ocr (remote code; flat fields): vLLM's dots_ocr.py runs Qwen2ForCausalLM as its language model
    "dots_ocr": "qwen2",
    # Phi-3 / 3.5-vision (remote code; flat fields): vLLM's phi3v.py runs the Phi-3 decoder (LlamaForCausalLM)
    "phi3_v": "phi3",
    # Phi-4-multimodal: Phi-4-mini's decoder; its speech and vision LoRA adapters run only on
    # those inputs (phi4mm: the hub's remote-code model_type; phi4_multimodal: transformers')
    "phi4_multimodal": "phi3", "phi4mm": "phi3",
    # Cohere North / Compass (North-Micro-Vision-Instruct's language model): Cohere's parallel block,
    # its sliding layers named in layer_types
    "cohere_compass_text": "cohere", "cohere_compass": "cohere",
    # Janus / Janus-Pro / DeepSeek-VL (multi_modality): LlamaForCausalLM(language_config), where
    # language_config names no model_type
    "multi_modality": "llama",
    "emu3": "llama", "emu3_text_model": "llama",  # BAAI Emu3: Emu3TextModel is LlamaModel (its VQ-VAE not counted)
    # Mistral Small 4 (mistral3 wrapping text_config mistral4): DeepSeek-V3's MLA and MoE with
    # softmax routing (no correction bias); its Llama-4 query scaling has no weights
    "mistral4": "deepseek_v3",
    # Tencent Hy v4 VL's language model: HYV4Config's decoder (its mRoPE has no weights)
    "hy_v4_vl": "hy_v4", "hy_v4_vl_text": "hy_v4",
    # multimodal wrappers whose language model is a family here (modular_<type>.py in transformers
    # 5.24; tests/test_families_mm_wrappers.py). PaddleOCR-VL: ERNIE-4.5-0.3B (PaddleOCRDecoderLayer
    # is Ernie4_5DecoderLayer); its hub config.json is flat, model_type paddleocr_vl at the top
    **dict.fromkeys(("paddleocr_vl", "paddleocr_vl_text"), "ernie4_5"),
    **dict.fromkeys(("hunyuan_vl", "hunyuan_vl_text"), "hunyuan_v1_dense"),  # HunyuanOCR: Hunyuan dense, xdrope
    # EXAONE 4.5: the hub's text_config says exaone4_5_text, which Exaone4_5_Config's __post_init__
    # reads as exaone4 (transformers 5.24 configuration_exaone4_5.py)
    **dict.fromkeys(("exaone4_5", "exaone4_5_text"), "exaone4"),
    # Granite Vision 4 / Granite-Docling (transformers' granite_docling): GraniteModel under text_config
    **dict.fromkeys(("granite4_vision", "granite4_vision_text", "granite_docling", "granite_docling_text"), "granite"),
    # NVIDIA Cosmos3-Edge: Llama attention and an ungated ReLU^2 MLP (fc1 / fc2), Arcee's tensors
    **dict.fromkeys(("cosmos3_edge", "cosmos3_edge_text"), "arcee"),
    # Qwen2.5-Omni: the thinker's language model (thinker_config.text_config) is Qwen2.5-VL's
    **dict.fromkeys(("qwen2_5_omni", "qwen2_5_omni_thinker", "qwen2_5_omni_text"), "qwen2_5_vl_text"),
}

# checkpoint dtype -> the weight format an engine serves it in: engines load float32
# checkpoints in 16 bits by default (vLLM's dtype "auto" picks bfloat16 for them)
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "bf16", "half": "fp16",
          "float8_e4m3fn": "fp8"}
# families whose final norm holds no weights (OLMo v1's non-parametric LayerNorm, nanochat's RMSNorm;
# Qwen4-Exp has none: its hyper_connection_mixer, counted on the last layer, takes the place;
# Dory's final norm is a weightless L2 projection; HRM-Text's stacks end in weightless RMSNorms)
NORMLESS = ("olmo", "nanochat", "qwen4_exp", "qwen4_exp_text", "dory", "hrm_text")
# the model_types whose transformers config class ties the head to the embedding where a config
# leaves tie_word_embeddings out (matched whole: gpt_neo ties, gpt_neox does not)
TIED_BY_DEFAULT = frozenset((
    "bloom", "cohere", "cohere2", "cohere2_moe", "cohere_compass", "cohere_compass_text", "gemma", "gemma2", "gemma3",
    "gemma3_text", "gemma3n", "gemma3n_text", "gemma4", "gemma4_text", "gemma4_unified_text", "gpt2", "gpt_bigcode",
    "gpt_neo", "jetmoe", "lfm2", "lfm2_moe", "lfm3", "minicpm", "minicpm3", "modernbert-decoder", "mpt", "opt",
    "recurrent_gemma", "starcoder2",
    "vaultgemma", "zamba", "zamba2", "zaya",
    # remote code whose configs name no tie_word_embeddings: PretrainedConfig's default ties the head
    # (telechat-7B's and plamo-2-1b's checkpoints hold no lm_head; Grok-1 decodes through its
    # input embedding, InOutEmbed in xai-org/grok-1's model.py)
    "telechat", "plamo2", "grok-1", "phi4flash"))
# configs that name no model_type, read by their architectures (hpcai-tech/grok-1's config.json)
TYPE_BY_ARCHITECTURE = {"Grok1ModelForCausalLM": "grok-1"}


# the top-level keys of the parts a multimodal config runs on images or audio, never on decoded
# text: encoders, their projectors (DeepSeek-VL2 / -OCR projector_config, Janus aligner_config)
# and Janus' image-generation parts; Ovis names its encoder visual_tokenizer_config (1.6 / 2) or
# vit_config (2.5); Phi-3-vision its CLIP encoder img_processor
ENCODER_KEYS = ("vision_config", "audio_config", "vq_config", "vit_config", "visual_tokenizer_config", "img_processor",
                "projector_config", "aligner_config", "gen_vision_config", "gen_aligner_config", "gen_head_config")


def _dtype(f) -> tuple[str, tuple[str, ...]]:
    dtype = f.get("torch_dtype", "dtype", default="bfloat16")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise DecodescopeError(f"{f.source}: torch_dtype {dtype!r} is not a checkpoint dtype decodescope knows",
                               f"use one of {', '.join(DTYPES)}, or pass the format with --weights")
    note = ("float32 checkpoint: served in bf16, as engines do by default",) if dtype == "float32" else ()
    return DTYPES[dtype], note


def _older_modelopt(quant):
    """ModelOpt 0.31-era exports (e.g. Qwen3-32B-FP8-Static-PerTensor) name no quant_method and
    write the KV cache's algorithm as a string ("FP8"); read them as the newer dict form."""
    if not isinstance(quant, dict) or (quant.get("producer") or {}).get("name") != "modelopt":
        return quant
    kv = quant.get("kv_cache_scheme")
    kv = {"num_bits": 8, "type": "float"} if kv == "FP8" else kv
    return {**quant, "quant_method": quant.get("quant_method") or "modelopt", "kv_cache_scheme": kv}


def _kv_scales_only(quant) -> tuple[object, tuple[str, ...]]:
    """AMD's FP8-KV checkpoints, tencent/Hy3-FP8 and some ModelOpt exports write kv_cache_scheme
    "static" (or "dynamic"): the checkpoint carries calibrated K/V scales, which vLLM uses only
    with --kv-cache-dtype fp8 (ROCm's vLLM guide on amd/Llama-3.1-8B-Instruct-FP8-KV); the cache
    stays in the model's dtype by default. Read as no KV scheme, with a note."""
    kv = quant.get("kv_cache_scheme") if isinstance(quant, dict) else None
    if kv not in ("static", "dynamic"):
        return quant, ()
    return {**quant, "kv_cache_scheme": None}, (
        f'kv_cache_scheme "{kv}": the checkpoint carries FP8 K/V scales, used with --kv fp8 (vLLM: '
        "--kv-cache-dtype fp8); the KV cache stays in the model's dtype unless asked",)


def _type_by_architecture(f: Fields) -> str:
    archs = f.get("architectures", default=[])
    return next((TYPE_BY_ARCHITECTURE[a] for a in archs if a in TYPE_BY_ARCHITECTURE), "") if isinstance(archs, list) else ""


# drafters that cannot decode alone: their layers read the target model's KV cache
# (transformers 5.24 Gemma4AssistantConfig: 'All layers in a Gemma 4 Assistant models must be shared')
DRAFT_ONLY = ("gemma4_assistant", "gemma4_unified_assistant")
# diffusion language models: a block of tokens denoised in parallel over several passes, no
# decode round of one token a pass (transformers 5.24 DiffusionGemmaConfig)
DIFFUSION = ("diffusion_gemma", "diffusion_gemma_text")
# robot action policies: a vision-language backbone whose action expert denoises a chunk of
# actions over num_inference_steps (transformers 5.25 PI0Config / PI05Config: vlm_config, dit_config)
ACTION_POLICIES = ("pi0", "pi05")


def _refuse_non_decoders(raw: RawConfig) -> None:
    text = raw.data.get("text_config")
    named = (raw.data.get("model_type"), text.get("model_type") if isinstance(text, dict) else None)
    if any(isinstance(t, str) and t in DIFFUSION for t in named):  # a wrong type is the field check's to report
        raise DecodescopeError(f"{raw.source}: a diffusion language model, which denoises a block of tokens in "
                               "parallel over several passes: there is no autoregressive decode round to model",
                               "pass the config of an autoregressive model")
    if isinstance(named[0], str) and named[0] in ACTION_POLICIES:
        raise DecodescopeError(f"{raw.source}: {raw.data['model_type']} is a robot action policy: its action expert "
                               "denoises a chunk of actions over several passes, no token-by-token decode round",
                               "pass the config of an autoregressive language model (the backbone's text model is "
                               "its vlm_config's text_config)")
    if isinstance(named[0], str) and named[0] in DRAFT_ONLY:
        raise DecodescopeError(f"{raw.source}: {raw.data['model_type']} is Gemma 4's assistant, a drafter whose layers "
                               "read the target model's KV cache and take its hidden state: it does not decode alone",
                               "pass the target Gemma 4 config; drafting with the assistant is not modelled "
                               "(--spec eagle:K --accept A prices the nearest kind, a draft head on the target's hidden state)")


def build_arch(raw: RawConfig) -> Arch:
    """Build the Arch of a parsed config."""
    _refuse_non_decoders(raw)
    f = text_fields(raw)
    mt = f.str_("model_type")
    if not mt and (mt := _type_by_architecture(f)):
        f = Fields({**f.data, "model_type": mt}, f.source)
    tie_default, same_note = mt in TIED_BY_DEFAULT, ()
    if mt in SAME_AS:
        same_note = (f"model_type {mt}: built as {SAME_AS[mt]}, the same decoder tensor for tensor",)
        mt = SAME_AS[mt]
        f = Fields({**f.data, "model_type": mt}, f.source)
    if not mt and "quantization" in raw.data and "producer" in raw.data:
        raise DecodescopeError(f"{raw.source} is a ModelOpt hf_quant_config.json, not the model's config.json",
                               "pass the config.json beside it (its quantization_config holds the same)")
    if mt not in FAMILIES:
        archs = f.get("architectures", default=[])
        raise DecodescopeError(
            f"{raw.source}: architecture model_type={mt!r} ({', '.join(map(str, archs)) if isinstance(archs, list) else archs}) "
            "is not supported",
            f"supported model_types: {', '.join(sorted({*FAMILIES, *SAME_AS}))}. A decoder that looks like one of these "
            "can be tried by setting its model_type; adding a family is one builder in decodescope/arch/")
    f = translate2(translate(f))
    layers, mtp, notes, *tables = FAMILIES[mt](f)  # a builder may add its input tables (Gemma 3n)
    dtype, dtype_note = _dtype(f)
    tie = raw.data.get("tie_word_embeddings", f.get("tie_word_embeddings", default=tie_default))
    quant, kv_note = _kv_scales_only(_older_modelopt(f.get("quantization_config")))
    if quant is not None and not (isinstance(quant, dict) and isinstance(quant.get("kv_cache_scheme") or {}, dict)):
        raise DecodescopeError(f"{raw.source}: quantization_config (or its kv_cache_scheme) is not a JSON object",
                               "fix quantization_config")
    if isinstance(quant, dict) and f.get("expert_dtype", default=None) == "fp4":
        # DeepSeek-V4 names its routed experts' FP4 beside quantization_config, not in it
        # (vLLM's and SGLang's fp8 configs read config.expert_dtype); the weight format needs both
        quant = {**quant, "expert_dtype": "fp4"}
    holder = raw.data.get("thinker_config") or raw.data
    towers = [k.removesuffix("_config") for k in ENCODER_KEYS if holder.get(k)]
    names = ", ".join(towers[:-1]) + " and " + towers[-1] if len(towers) > 1 else "".join(towers)
    tower_note = (f"the {names} encoder{'s' if len(towers) > 1 else ''} of this multimodal "
                  "config: not counted, as decode runs the language model only",) if towers else ()
    if raw.data.get("talker_config"):
        tower_note += ("the talker (speech output) of this config: not counted, as text decode runs the thinker only",)
    return Arch(name=raw.name, source=raw.source, model_type=mt, hidden_size=f.need("hidden_size"),
                vocab_size=f.need("vocab_size"), tie_word_embeddings=bool(tie), dtype=dtype,
                layers=tuple(layers), mtp=tuple(mtp), quantization=quant, input_tables=tuple(tables[0]) if tables else (),
                notes=same_note + tuple(notes) + dtype_note + kv_note + tower_note,
                final_norm_weights=mt not in NORMLESS and not f.get("_remove_final_layer_norm", default=False))
