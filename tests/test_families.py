"""Families beyond the bundled presets: each real config's parameter count against the
figure its publisher gives (model card, or the hub page's safetensors count)."""

from pathlib import Path

import pytest

from decodescope.arch import MoE, load_arch

CONFIGS = Path(__file__).parent / "data" / "configs"

# file, published billions, what the figure counts, where it is published. Comments give
# the figure as the page states it (paraphrased where not quoted).
PUBLISHED = [
    # model card: Aya 23 8B, 8 billion parameters
    ("CohereForAI__aya-23-8B", 8.0, "total", "https://huggingface.co/CohereForAI/aya-23-8B"),
    # model card: a 3B parameter model; hub page: 3.03B params
    ("bigcode__starcoder2-3b", 3.03, "total", "https://huggingface.co/bigcode/starcoder2-3b"),
    # Gemma 3 technical report, table 1: 4B: 675M embedding, 3,209M non-embedding parameters
    ("google__gemma-3-4b-it", 3.209, "non_embedding", "https://arxiv.org/abs/2503.19786"),
    # hub page: 9.24B params
    ("google__gemma-2-9b", 9.24, "total", "https://huggingface.co/google/gemma-2-9b"),
    # hub page: 9.4B params
    ("THUDM__glm-4-9b-chat", 9.4, "total", "https://huggingface.co/THUDM/glm-4-9b-chat"),
    # hub page: 7.51B params
    ("baichuan-inc__Baichuan2-7B-Chat", 7.51, "total", "https://huggingface.co/baichuan-inc/Baichuan2-7B-Chat"),
    # hub page: 7.74B params
    ("internlm__internlm2_5-7b-chat", 7.74, "total", "https://huggingface.co/internlm/internlm2_5-7b-chat"),
    # hub page: 7.83B params, which include the checkpoint's MTP layer
    ("XiaomiMiMo__MiMo-7B-Base", 7.83, "with_mtp", "https://huggingface.co/XiaomiMiMo/MiMo-7B-Base"),
    # MiniMax-M2 model card: 230 billion total, 10 billion active parameters; M2.5 keeps
    # M2's dimensions (62 layers, 256 experts of 1536, hidden 3072)
    ("MiniMaxAI__MiniMax-M2.5", 230, "total", "https://huggingface.co/MiniMaxAI/MiniMax-M2"),
    # GLM-4.5 model card: 355B total, 32B active parameters (GLM-4.7 keeps the dimensions)
    ("zai-org__GLM-4.7-FP8", 355, "total", "https://huggingface.co/zai-org/GLM-4.5"),
    # GLM-5 model card: 744B parameters (40B active)
    ("zai-org__GLM-5", 744, "total", "https://huggingface.co/zai-org/GLM-5"),
    # hub page: 685B params: the 671B main model and the checkpoint's MTP layer, which carries
    # its own copies of the embedding table and the head (as DeepSeek-V3's card explains its 685B)
    ("deepseek-ai__DeepSeek-V3.2", 685, "checkpoint", "https://huggingface.co/deepseek-ai/DeepSeek-V3.2"),
    # model card: "Jamba 1.5 Mini has 12B active and 52B total parameters"
    ("ai21labs__AI21-Jamba-1.5-Mini", 52, "total", "https://huggingface.co/ai21labs/AI21-Jamba-1.5-Mini"),
    # model card: Granite-4.0-H-Small, 32B total parameters, 9B active
    ("ibm-granite__granite-4.0-h-small.trimmed", 32, "total", "https://huggingface.co/ibm-granite/granite-4.0-h-small"),
    # Gemma 4 model card: 26B A4B, 25.2B total parameters, 3.8B active
    ("google__gemma-4-26B-A4B", 25.2, "total", "https://huggingface.co/google/gemma-4-26B-A4B-it"),
    # model card: 1B active, 7B total parameters; hub page: 6.92B params
    ("allenai__OLMoE-1B-7B-0924", 6.92, "total", "https://huggingface.co/allenai/OLMoE-1B-7B-0924"),
    # hub page: 41.9B params; model card: 6.6B active parameters
    ("microsoft__Phi-3.5-MoE-instruct", 41.9, "total", "https://huggingface.co/microsoft/Phi-3.5-MoE-instruct"),
    # hub page: 21.8B params (the card rounds to 21B total, 3B activated)
    ("baidu__ERNIE-4.5-21B-A3B-PT", 21.8, "total", "https://huggingface.co/baidu/ERNIE-4.5-21B-A3B-PT"),
    # model card: Number of Parameters: 7.61B
    ("Qwen__Qwen2.5-7B-Instruct", 7.61, "total", "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct"),
    # hub page: 49.9B params (the card's 49B)
    ("nvidia__Llama-3_3-Nemotron-Super-49B-v1", 49.9, "total",
     "https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1"),
    # model card: 253B parameters
    ("nvidia__Llama-3_1-Nemotron-Ultra-253B-v1", 253, "total",
     "https://huggingface.co/nvidia/Llama-3_1-Nemotron-Ultra-253B-v1"),
    # Falcon-H1 technical report, Table 1, "Params (B)": 0.5B 0.52, 3B 3.15, 7B 7.59 (checked
    # against a public transcription of the table; 1.5B 1.55, 1.5B-deep 1.55, 34B 33.6)
    ("tiiuae__Falcon-H1-0.5B-Base", 0.52, "total", "https://arxiv.org/abs/2507.22448"),
    ("tiiuae__Falcon-H1-3B-Base.trimmed", 3.15, "total", "https://arxiv.org/abs/2507.22448"),
    ("tiiuae__Falcon-H1-7B-Base.trimmed", 7.59, "total", "https://arxiv.org/abs/2507.22448"),
    # the names and cards: 120B total, 12B active (A12B); 550B total, 55B active (A55B)
    ("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120, "total",
     "https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"),
    ("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 550, "total",
     "https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"),
    # Qwen3-VL's language models have Qwen3-30B-A3B's and Qwen3-8B's dimensions; their cards:
    # "Number of Parameters: 30.5B in total and 3.3B activated", "Number of Parameters: 8.2B"
    # (the VL cards' totals add the vision encoder, which decode does not read)
    ("Qwen__Qwen3-VL-30B-A3B-Instruct", 30.5, "total", "https://huggingface.co/Qwen/Qwen3-30B-A3B"),
    ("Qwen__Qwen3-VL-8B-Instruct", 8.2, "total", "https://huggingface.co/Qwen/Qwen3-8B"),
    # model card: Number of Parameters (without embeddings): 30.95B (embedding and LM head left out)
    ("LGAI-EXAONE__EXAONE-4.0-32B", 30.95, "layers", "https://huggingface.co/LGAI-EXAONE/EXAONE-4.0-32B"),
    # model card: 142B total parameters, 14B activated
    ("rednote-hilab__dots.llm1.inst.trimmed", 142, "total", "https://huggingface.co/rednote-hilab/dots.llm1.inst"),
    # model card: 36B parameters
    ("ByteDance-Seed__Seed-OSS-36B-Instruct.trimmed", 36, "total",
     "https://huggingface.co/ByteDance-Seed/Seed-OSS-36B-Instruct"),
    # hub page: 3.08B params (the card's "3B")
    ("HuggingFaceTB__SmolLM3-3B.trimmed", 3.08, "total", "https://huggingface.co/HuggingFaceTB/SmolLM3-3B"),
    # the language model of Mistral Small 3.1 / 3.2 has Mistral Small 3's dimensions; hub page of
    # Mistral-Small-24B-Instruct-2501 (text only): 23.6B params (the 3.x cards' "24B" adds Pixtral)
    ("mistralai__Mistral-Small-3.2-24B-Instruct-2506", 23.6, "total",
     "https://huggingface.co/mistralai/Mistral-Small-24B-Instruct-2501"),
    # model card table: Parameters 1,170,340,608
    ("LiquidAI__LFM2-1.2B.trimmed", 1.170340608, "total", "https://huggingface.co/LiquidAI/LFM2-1.2B"),
    # model card: 309B total parameters, 15B active (its 3 MTP layers are not in this config)
    ("XiaomiMiMo__MiMo-V2-Flash", 309, "total", "https://huggingface.co/XiaomiMiMo/MiMo-V2-Flash"),
    # model card table: DeepSeek-V4-Flash 284B total, 13B active; -Pro 1.6T total, 49B active
    ("deepseek-ai__DeepSeek-V4-Flash", 284, "total", "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash"),
    ("deepseek-ai__DeepSeek-V4-Pro", 1600, "with_mtp", "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash"),
    # GLM-4.5V's language model is GLM-4.5-Air's; its card: 106 billion total parameters,
    # 12 billion active (the vision encoder is not counted here)
    ("zai-org__GLM-4.5V", 106, "total", "https://huggingface.co/zai-org/GLM-4.5-Air"),
    # model card: "~428B parameters and ~23B activated parameters"
    ("MiniMaxAI__MiniMax-M3", 428, "total", "https://huggingface.co/MiniMaxAI/MiniMax-M3"),
    # Mistral's announcement: 39B active parameters out of 141B
    ("mistralai__Mixtral-8x22B-v0.1", 141, "total", "https://mistral.ai/news/mixtral-8x22b"),
    # model card: 480B total parameters, 35B activated
    ("Qwen__Qwen3-Coder-480B-A35B-Instruct", 480, "total", "https://huggingface.co/Qwen/Qwen3-Coder-480B-A35B-Instruct"),
    # the name's 397B total (17B active); our language model without its MTP layer: 396.3 B
    ("Qwen__Qwen3.5-397B-A17B", 397, "total", "https://huggingface.co/Qwen/Qwen3.5-397B-A17B"),
    # model card: "Number of Parameters: 0.6B; Number of Paramaters (Non-Embedding): 0.44B" (tied)
    ("Qwen__Qwen3-0.6B", 0.44, "non_embedding", "https://huggingface.co/Qwen/Qwen3-0.6B"),
    # Qwen2 announcement, model table: Qwen2-57B-A14B 57.41B parameters, 56.32B without the
    # embedding table and LM head
    ("Qwen__Qwen2-57B-A14B", 57.41, "total", "https://qwenlm.github.io/blog/qwen2/"),
    ("Qwen__Qwen2-57B-A14B", 56.32, "non_embedding_or_head", "https://qwenlm.github.io/blog/qwen2/"),
    # model card: "Phi-3-Mini-4K-Instruct is a 3.8B parameters, lightweight, state-of-the-art open model"
    ("microsoft__Phi-3-mini-4k-instruct", 3.8, "total", "https://huggingface.co/microsoft/Phi-3-mini-4k-instruct"),
    # model card: ERNIE-4.5-0.3B, 0.36B parameters
    ("baidu__ERNIE-4.5-0.3B-PT", 0.36, "total", "https://huggingface.co/baidu/ERNIE-4.5-0.3B-PT"),
    # Ling report, abstract: "Ling-Lite, with 16.8 billion parameters and 2.75 billion activated
    # parameters, and Ling-Plus, boasting 290 billion parameters and 28.8 billion activated
    # parameters"; Ling-Coder-lite is Ling-Lite continued on code (its model card: 16.8B, 2.75B)
    ("inclusionAI__Ling-Coder-lite", 16.8, "total", "https://arxiv.org/abs/2503.05139"),
    ("inclusionAI__Ling-plus-base", 290, "total", "https://arxiv.org/abs/2503.05139"),
    ("inclusionAI__Ling-Coder-lite", 2.75, "active", "https://arxiv.org/abs/2503.05139"),
    ("inclusionAI__Ling-plus-base", 28.8, "active", "https://arxiv.org/abs/2503.05139"),
]


@pytest.mark.parametrize("name,published,what,url", PUBLISHED, ids=[f"{p[0]}-{p[2]}" for p in PUBLISHED])
def test_params_within_one_percent_of_published(name, published, what, url):
    a = load_arch(str(CONFIGS / f"{name}.json"))
    ours = {"total": a.params_total, "active": a.params_active, "with_mtp": a.params_total + a.params_mtp,
            "checkpoint": a.params_total + a.params_mtp + 2 * a.embedding.params,
            "non_embedding": a.params_total - a.embedding.params,
            "non_embedding_or_head": a.params_total - 2 * a.embedding.params,
            "layers": a.params_layers_total}[what] / 1e9
    assert abs(ours - published) <= 0.01 * published, f"{name}: {ours:.3f} B vs {published} B ({url})"


@pytest.mark.parametrize("name,non_embedding", [("google__gemma-2b", 1_981_884_416), ("google__gemma-7b", 7_751_248_896)])
def test_gemma_non_embedding_counts_match_the_paper_to_the_parameter(name, non_embedding):
    # Gemma report (https://arxiv.org/abs/2403.08295), table of parameter counts: non-embedding
    # parameters 1,981,884,416 (2B) and 7,751,248,896 (7B); its embedding counts use a padded
    # 256,128-row table, the configs' vocab_size is 256,000
    a = load_arch(str(CONFIGS / f"{name}.json"))
    assert a.params_total - a.embedding.params == non_embedding


def test_qwen2_counts_qkv_biases_but_no_o_bias():
    a = load_arch(str(CONFIGS / "Qwen__Qwen2.5-7B-Instruct.json"))
    names = {t.name: t.shape for t in a.layers[0].tensors()}
    # q 28 heads x 128, k and v 4 heads x 128; o_proj has no bias in Qwen2
    assert names["q_proj.bias"] == (3584,) and names["k_proj.bias"] == (512,) and names["v_proj.bias"] == (512,)
    assert "o_proj.bias" not in names


def test_gemma_sandwich_norms_and_gemma3_defaults():
    g2 = load_arch(str(CONFIGS / "google__gemma-2-9b.json"))
    norms = [t.name for t in g2.layers[0].tensors() if "layernorm" in t.name]
    assert len(norms) == 4  # input, post_attention, pre_feedforward, post_feedforward
    g3 = load_arch(str(CONFIGS / "google__gemma-3-4b-it.json"))
    # text_config gives no vocab_size: Gemma3TextConfig's 262208; head_dim 256, not 2560 / 8 = 320
    assert g3.vocab_size == 262208 and g3.layers[0].mixer.head_dim == 256
    # 34 layers, every 6th global (window pattern 6): layers 5, 11, 17, 23, 29
    assert g3.layer_counts() == {"sliding_attention": 29, "attention": 5}


def test_float32_checkpoint_is_served_in_16_bits():
    a = load_arch(str(CONFIGS / "bigcode__starcoder2-3b.json"))
    assert a.dtype == "bf16" and any("float32" in n for n in a.notes)


def test_cohere_parallel_block_has_one_norm_per_layer():
    a = load_arch(str(CONFIGS / "CohereForAI__aya-23-8B.json"))
    assert [t.name for t in a.layers[0].tensors() if "norm" in t.name] == ["input_layernorm"]
    assert a.tie_word_embeddings  # CohereConfig ties by default; the config does not say


def test_sparse_attention_reads_topk_latents_and_all_index_keys():
    a = load_arch(str(CONFIGS / "deepseek-ai__DeepSeek-V3.2.json"))
    mla = a.layers[0].mixer
    # per cached token: latent (512 + 64) x 2 bytes = 1152, index key 128 fp8 + 4-byte scale = 132
    assert mla.kv_bytes_per_token(1, 2) == 1152 + 132
    # at 32k context one query reads 2048 latents and 32768 index keys
    assert mla.kv_read_bytes(32768, 1, 2) == 2048 * 1152 + 32768 * 132
    # below top-k it reads everything
    assert mla.kv_read_bytes(1000, 1, 2) == 1000 * (1152 + 132)


def test_unsupported_family_keeps_a_clear_message(write_config):
    from decodescope.errors import DecodescopeError
    p = write_config({"model_type": "blt", "architectures": ["BltForCausalLM"], "hidden_size": 8})
    with pytest.raises(DecodescopeError, match="model_type='blt'.*not supported"):
        load_arch(p)


def test_nemotron_nas_block_configs():
    a = load_arch(str(CONFIGS / "nvidia__Llama-3_3-Nemotron-Super-49B-v1.json"))
    first = a.layers[0]
    # n_heads_in_group 8 of 64 heads: 8 KV heads; ffn_mult 2.625 of 8192:
    # int(2 * 2.625 * 8192 / 3) = 14336, a multiple of 256
    assert first.mixer.num_key_value_heads == 8 and first.mlp.intermediate_size == 14336
    # 31 of 80 blocks skip attention (no_op): MLP-only layers
    assert a.layer_counts() == {"attention": 49, "mlp": 31}
    ultra = load_arch(str(CONFIGS / "nvidia__Llama-3_1-Nemotron-Ultra-253B-v1.json"))
    assert len(ultra.layers) == 81 and any("81 of 162 layers are empty" in n for n in ultra.notes)


def test_gemma4_global_layers_share_k_and_v_and_moe_sits_beside_the_mlp():
    a = load_arch(str(CONFIGS / "google__gemma-4-26B-A4B.json"))
    full = next(x for x in a.layers if x.kind == "attention")
    names = {t.name: t.shape for t in full.tensors()}
    # global layers: 2 KV heads of 512, K doubles as V (attention_k_eq_v): no v_proj
    assert names["k_proj"] == (2 * 512, 2816) and "v_proj" not in names
    # the dense MLP (2112) and 128 experts of 704, 8 per token
    assert names["gate_proj"] == (2112, 2816) and full.mlp.num_experts == 128 and full.mlp.num_experts_per_tok == 8
    assert abs(a.params_active / 1e9 - 3.8) <= 0.038  # the card's "3.8B active"
    assert a.layer_counts() == {"sliding_attention": 25, "attention": 5}


def test_jamba_layout_and_mamba_state():
    a = load_arch(str(CONFIGS / "ai21labs__AI21-Jamba-1.5-Mini.json"))
    # attention where i % 8 == 4 (4, 12, 20, 28); MoE where i % 2 == 1
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == [4, 12, 20, 28]
    assert sum(isinstance(x.mlp, MoE) for x in a.layers) == 16
    m = a.layers[0].mixer
    # per request: ssm state 8192 channels x 16 x 4 B + conv window 8192 x 3 x 2 B
    assert m.state_bytes(1) == 8192 * 16 * 4 + 8192 * 3 * 2
    assert abs(a.params_active / 1e9 - 12) <= 0.12  # "12B active"


def test_granite_hybrid_every_layer_has_experts_and_a_shared_mlp():
    a = load_arch(str(CONFIGS / "ibm-granite__granite-4.0-h-small.trimmed.json"))
    m = a.layers[0].mixer
    # GraniteMoeHybridConfig defaults: 128 heads, head "auto" = 2 * 4096 / 128 = 64, 1 group
    assert (m.mamba_num_heads, m.mamba_head_dim, m.n_groups, m.ssm_state_size) == (128, 64, 1, 128)
    assert all(isinstance(x.mlp, MoE) and x.mlp.shared_expert_intermediate_size == 1536 for x in a.layers)


def test_ling_2_sizes_its_shared_expert_apart(write_config):
    # Ling 2.0's fields (Ling-mini-2.0's dimensions as NeMo's BailingMoeV2Config documents
    # them): one dense layer first, then 256 experts of 512, 8 per token, one shared expert
    # of moe_shared_expert_intermediate_size, sigmoid routing with an expert bias, q/k norms
    cfg = {"model_type": "bailing_moe", "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 20,
           "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 157184,
           "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512, "num_shared_experts": 1,
           "moe_shared_expert_intermediate_size": 512, "first_k_dense_replace": 1, "use_qk_norm": True,
           "moe_router_enable_expert_bias": True, "use_qkv_bias": False, "tie_word_embeddings": False}
    a = load_arch(write_config(cfg))
    assert not isinstance(a.layers[0].mlp, MoE) and a.layers[0].mlp.intermediate_size == 5120
    moe = a.layers[1].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size) == (256, 8, 512)
    assert moe.router_bias
    # per MoE layer: 256 x 3 x 2048 x 512 experts + 3 x 2048 x 512 shared + 256 x 2048 router
    # + 256 bias + a 2048 norm
    assert sum(t.params for t in moe.tensors()) == 256 * 3 * 2048 * 512 + 3 * 2048 * 512 + 256 * 2048 + 256 + 2048


def test_olmo3_sliding_layers_and_full_width_qk_norms():
    # tiny-random/olmo-3: hidden 8, 8 heads and 4 KV heads of 32, MLP 32, vocab 100278, untied;
    # layer_types: a sliding-window layer (4096) then a full one. No published count of a real
    # OLMo 3 config was found, so this one is counted by hand: per layer 2 norms of 8, q 256 x 8,
    # k and v 128 x 8, o 8 x 256, q/k norms over all heads (256 + 128), MLP 3 x 32 x 8 = 7,312;
    # 2 layers, embedding and head 100,278 x 8 each, final norm 8
    a = load_arch(str(CONFIGS / "tiny-random__olmo-3.json"))
    assert [x.mixer.sliding_window for x in a.layers] == [4096, None]
    assert a.params_total == 2 * 7312 + 2 * 100_278 * 8 + 8


def test_a_multimodal_config_says_its_encoder_is_not_counted():
    # Qwen3-VL-8B's config holds a vision_config beside text_config; Qwen3-8B's has none
    assert any(n.startswith("the vision encoder of this multimodal config: not counted")
               for n in load_arch(str(CONFIGS / "Qwen__Qwen3-VL-8B-Instruct.json")).notes)
    assert not any("encoder" in n for n in load_arch("qwen3-8b").notes)
