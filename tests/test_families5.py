"""Newer decoder families: each real config's parameter count against the exact count of
transformers' own implementation (5.24, built on the meta device: the sum of every
parameter's numel, text model only), and the KV cache of the new attention kinds by hand."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch

CONFIGS = Path(__file__).parent / "data" / "configs"

# file, exact count by transformers 5.24, published figure and where it is published
EXACT = [
    # GLM-4.7-Flash (a "30B-A3B" MoE, https://huggingface.co/zai-org/GLM-4.7-Flash);
    # transformers keeps the 46 routers' correction biases as buffers, which we count (+2,944)
    ("zai-org__GLM-4.7-Flash.trimmed", 29_943_390_976),
    # Laguna XS.2 (no published total found quoted)
    ("poolside__Laguna-XS.2-FP8", 33_442_617_088),
    # Laguna S 2.1 (no published total found quoted)
    ("poolside__Laguna-S-2.1-FP8", 117_561_977_600),
    # EXAONE 3.0 7.8B (the name's "7.8B", https://huggingface.co/LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct)
    ("LGAI-EXAONE__EXAONE-3.0-7.8B-Instruct", 7_818_448_896),
    # InternLM3-8B-Instruct (the name's "8B", https://huggingface.co/internlm/internlm3-8b-instruct)
    ("internlm__internlm3-8b-instruct.trimmed", 8_804_241_408),
    # DBRX Instruct ("132B total parameters of which 36B parameters are active",
    # https://huggingface.co/databricks/dbrx-instruct)
    ("databricks__dbrx-instruct", 131_596_523_520),
    # Tencent Hy3 without its MTP layer; with it our count is 298,786,155,776, the checkpoint's
    # own safetensors total (298,786,140,416 BF16 + 15,360 F32 expert-bias parameters) as quoted
    # from https://huggingface.co/tencent/Hy3/blob/716aa7241bd6d95896be4ebfc761162a9c4d49ef/model.safetensors.index.json
    ("tencent__Hy3.trimmed", 295_033_528_320),
    # LFM2-8B-A1B ("8.3B total parameters, 1.5B active", https://huggingface.co/LiquidAI/LFM2-8B-A1B)
    ("LiquidAI__LFM2-8B-A1B.trimmed", 8_339_929_856),
    # Granite 3.1 3B-A800M (the name's "3B", https://huggingface.co/ibm-granite/granite-3.1-3b-a800m-instruct)
    ("ibm-granite__granite-3.1-3b-a800m-instruct.trimmed", 3_298_793_472),
    # Qwen2.5-VL-7B's language model (Qwen-Image's text encoder), text part only (the vision
    # tower's 676,550,144 left out); Qwen2.5-7B, of the same dimensions: "Number of Parameters:
    # 7.61B" (https://huggingface.co/Qwen/Qwen2.5-7B-Instruct)
    ("Qwen__Qwen-Image.text_encoder", 7_615_616_512),
    # Apertus 8B (the name's "8B", https://huggingface.co/swiss-ai/Apertus-8B-Instruct-2509)
    ("swiss-ai__Apertus-8B-Instruct-2509.trimmed", 8_053_338_176),
    # Trinity Nano Preview (AFMoE; "6B total, 1B active" class, https://huggingface.co/arcee-ai/Trinity-Nano-Preview)
    ("arcee-ai__Trinity-Nano-Preview", 6_120_003_328),
    # MiniMax-M1 ("456 billion total parameters, of which 45.9 billion are activated per token",
    # https://huggingface.co/MiniMaxAI/MiniMax-Text-01, whose architecture M1 keeps)
    ("MiniMaxAI__MiniMax-M1", 456_089_655_296),
    # Hunyuan-MT-7B (the name's "7B", https://huggingface.co/tencent/Hunyuan-MT-7B)
    ("tencent__Hunyuan-MT-7B", 7_504_932_864),
    # Solar Open 100B ("102B" total, 12B active, https://huggingface.co/upstage/Solar-Open-100B);
    # transformers keeps the 48 routers' correction biases as buffers, which we count (+6,144)
    ("upstage__Solar-Open-100B.trimmed", 102_651_793_408),
    # Youtu-LLM 2B (the name's "2B", https://huggingface.co/tencent/Youtu-LLM-2B)
    ("tencent__Youtu-LLM-2B.trimmed", 1_961_560_064),
    # GLM-4-9B-Chat in transformers' layout (hub page: 9.4B params, https://huggingface.co/THUDM/glm-4-9b-chat-hf)
    ("THUDM__glm-4-9b-chat-hf.trimmed", 9_399_951_360),
]


@pytest.mark.parametrize("name,exact", EXACT, ids=[e[0] for e in EXACT])
def test_params_within_one_percent_of_transformers(name, exact):
    a = load_arch(str(CONFIGS / f"{name}.json"))
    assert abs(a.params_total - exact) <= 0.01 * exact, f"{name}: {a.params_total:,} vs {exact:,}"


def _memory(name: str) -> dict:
    """`decodescope model`'s memory figures for one request at its default context (1,024
    tokens + the one decoded), one H100."""
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / f"{name}.json"),
                        "--gpu", "h100-sxm", "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["memory"]


def _kv_cache_bytes(name: str) -> float:
    return _memory(name)["kv_cache_bytes"]


def test_glm47_flash_caches_one_mla_latent_per_layer():
    a = load_arch(str(CONFIGS / "zai-org__GLM-4.7-Flash.trimmed.json"))
    assert [x.kind for x in a.layers] == ["mla"] * 47
    # layer 0 dense (first_k_dense_replace 1), then 64 experts of 1536 + one shared, with a correction bias
    assert a.layers[0].mlp.intermediate_size == 10240 and a.layers[1].mlp.shared_expert_intermediate_size == 1536
    # latent kv_lora_rank 512 + rope key 64 = 576 values x 2 B (bf16) x 47 layers x 1,025 tokens
    assert _kv_cache_bytes("zai-org__GLM-4.7-Flash.trimmed") == 576 * 2 * 47 * 1025


def test_laguna_heads_per_layer_gate_per_head_and_sliding_layers():
    a = load_arch(str(CONFIGS / "poolside__Laguna-XS.2-FP8.json"))
    first, second = a.layers[0], a.layers[1]
    # num_attention_heads_per_layer: 48 in the full layer 0, 64 in the sliding layer 1
    assert first.kind == "attention" and first.mixer.num_attention_heads == 48
    assert second.kind == "sliding_attention" and second.mixer.num_attention_heads == 64
    # gating true: one sigmoid gate per query head, g_proj [heads, hidden]
    assert {t.name: t.shape for t in second.tensors()}["g_proj"] == (64, 2048)
    # 10 full layers: 8 KV heads x 128 x (K, V) x 1 B (FP8 KV, from the checkpoint) x 1,025 tokens;
    # 30 sliding layers hold their 512-token window
    per_token = 8 * 128 * 2 * 1
    assert _kv_cache_bytes("poolside__Laguna-XS.2-FP8") == 10 * 1025 * per_token + 30 * 512 * per_token


def test_dbrx_reads_its_sub_objects_and_activates_4_of_16_experts():
    a = load_arch(str(CONFIGS / "databricks__dbrx-instruct.json"))
    attn, mlp = a.layers[0].mixer, a.layers[0].mlp
    # d_model 6144, n_heads 48 -> head_dim 128; attn_config.kv_n_heads 8
    assert (a.hidden_size, attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim) == (6144, 48, 8, 128)
    assert (mlp.num_experts, mlp.num_experts_per_tok, mlp.moe_intermediate_size) == (16, 4, 10752)
    # the card's 36B active: 4 of 16 experts of 3 x 6144 x 10752 in each of 40 layers
    # (31.7 B) + attention, norms, router, embedding and LM head = 36.47 B
    assert round(a.params_active / 1e9) == 36


def test_exaone3_and_internlm3_read_their_own_field_names():
    exaone = load_arch(str(CONFIGS / "LGAI-EXAONE__EXAONE-3.0-7.8B-Instruct.json"))
    assert len(exaone.layers) == 32  # num_layers
    internlm = load_arch(str(CONFIGS / "internlm__internlm3-8b-instruct.trimmed.json"))
    # qkv_bias false: no biases; 2 KV heads of 128
    names = {t.name for t in internlm.layers[0].tensors()}
    assert "q_proj.bias" not in names and internlm.layers[0].mixer.num_key_value_heads == 2


def test_hy3_mtp_layer_makes_the_checkpoint_total_and_every_layer_keeps_full_gqa():
    a = load_arch(str(CONFIGS / "tencent__Hy3.trimmed.json"))
    # the checkpoint's safetensors: 298,786,140,416 BF16 + 15,360 F32 (80 x 192 expert biases)
    assert a.params_total + a.params_mtp == 298_786_140_416 + 15_360
    # layer 0 dense (first_k_dense_replace 1); then 192 experts + 1 shared of 1536, per-head q/k norms
    assert a.layers[0].mlp.intermediate_size == 13312 and a.layers[1].mlp.shared_expert_intermediate_size == 1536
    assert a.layers[1].mixer.qk_norm
    # no window: 80 layers x 8 KV heads x 128 x (K, V) x 2 B = 327,680 B a token, over 1,025 tokens
    assert _kv_cache_bytes("tencent__Hy3.trimmed") == 80 * 8 * 128 * 2 * 2 * 1025


def test_lfm2_moe_first_two_layers_dense_then_experts():
    a = load_arch(str(CONFIGS / "LiquidAI__LFM2-8B-A1B.trimmed.json"))
    assert [x.kind for x in a.layers[:3]] == ["conv", "conv", "attention"]
    assert a.layers[1].mlp.intermediate_size == 7168 and a.layers[2].mlp.num_experts == 32
    # the card's rounded "1.5B active": 4 of 32 experts of 3 x 2048 x 1792 in 22 layers (0.97 B)
    # + 2 dense MLPs, convolutions, attention and the tied embedding = 1.558 B
    assert abs(a.params_active / 1e9 - 1.5) <= 0.04 * 1.5


def test_granite_moe_routes_8_of_40_experts_in_every_layer():
    a = load_arch(str(CONFIGS / "ibm-granite__granite-3.1-3b-a800m-instruct.trimmed.json"))
    assert {type(x.mlp).__name__ for x in a.layers} == {"MoE"} and a.tie_word_embeddings
    assert (a.layers[0].mlp.num_experts, a.layers[0].mlp.num_experts_per_tok) == (40, 8)
    # the name's "A800M": 8 of 40 experts of 3 x 1536 x 512 in 32 layers (0.60 B) + attention
    # 32 x (2 x 1536 x 1536 + 2 x 1536 x 512) (0.20 B) + the tied embedding 49155 x 1536 (0.08 B)
    assert round(a.params_active / 1e8) == 9


def test_qwen25_vl_language_model_is_qwen2_with_q_k_v_biases():
    a = load_arch(str(CONFIGS / "Qwen__Qwen-Image.text_encoder.json"))
    # text_config's model_type qwen2_5_vl_text; Qwen2's biases on q, k, v but not on o_proj
    names = {t.name for t in a.layers[0].tensors()}
    assert a.model_type == "qwen2_5_vl_text" and {"q_proj.bias", "v_proj.bias"} <= names
    assert "o_proj.bias" not in names
    # float32 checkpoint: served in 16 bits
    assert a.dtype == "bf16"


def test_apertus_mlp_has_no_gate_and_q_k_are_normed_per_head():
    a = load_arch(str(CONFIGS / "swiss-ai__Apertus-8B-Instruct-2509.trimmed.json"))
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    # xIELU MLP: up 21504 x 4096 and down, no gate; per-head q/k norms of 128
    assert shapes["up_proj"] == (21504, 4096) and "gate_proj" not in shapes
    assert shapes["q_norm"] == (128,)


def test_afmoe_every_fourth_layer_global_gated_attention_and_four_norms():
    a = load_arch(str(CONFIGS / "arcee-ai__Trinity-Nano-Preview.json"))
    assert [x.kind for x in a.layers[:4]] == ["sliding_attention"] * 3 + ["attention"]
    # the output gate is as wide as q_proj: 8 heads x 128 (counted with q_proj, 2 x 1024 rows)
    assert {t.name: t.shape for t in a.layers[0].tensors()}["q_proj"] == (2048, 1024)
    # layers 0-1 dense (num_dense_layers 2), then 128 experts of 256 + 1 shared of 256
    assert a.layers[1].mlp.intermediate_size == 3072 and a.layers[2].mlp.shared_expert_intermediate_size == 256
    # "1B active": 1.02 B
    assert round(a.params_active / 1e9) == 1
    # every layer holds all 1,025 tokens (the 2,048-token window is not reached):
    # 56 layers x 2 KV heads x 128 x (K, V) x 2 B
    assert _kv_cache_bytes("arcee-ai__Trinity-Nano-Preview") == 56 * 2 * 128 * 2 * 2 * 1025


def test_minimax_m1_lightning_layers_keep_a_state_and_every_eighth_layer_a_kv_cache():
    a = load_arch(str(CONFIGS / "MiniMaxAI__MiniMax-M1.json"))
    kinds = [x.kind for x in a.layers]
    assert kinds[:8] == ["linear_attention"] * 7 + ["attention"] and kinds.count("attention") == 10
    # "45.9 billion activated" leaves out the embedding table and the LM head (2 x 200064 x 6144)
    assert round((a.params_active - 2 * 200064 * 6144) / 1e8) == 459
    mem = _memory("MiniMaxAI__MiniMax-M1")
    # 10 softmax layers: 8 KV heads x 128 x (K, V) x 2 B x 1,025 tokens
    assert mem["kv_cache_bytes"] == 10 * 8 * 128 * 2 * 2 * 1025
    # 70 lightning layers: a float32 state of 64 heads x 128 x 128
    assert mem["state_bytes"] == 70 * 64 * 128 * 128 * 4


def test_hunyuan_dense_normalises_q_and_k_per_head_and_ties_embeddings():
    a = load_arch(str(CONFIGS / "tencent__Hunyuan-MT-7B.json"))
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert shapes["q_norm"] == (128,) and shapes["k_proj"] == (1024, 4096) and a.tie_word_embeddings


def test_solar_open_every_layer_routes_8_of_128_experts_plus_a_shared_one():
    a = load_arch(str(CONFIGS / "upstage__Solar-Open-100B.trimmed.json"))
    mlp = a.layers[0].mlp  # first_k_dense_replace 0: no dense layer
    assert (mlp.num_experts, mlp.num_experts_per_tok, mlp.shared_expert_intermediate_size) == (128, 8, 1280)
    assert mlp.router_bias
    # the card's "12B active": 12.05 B
    assert round(a.params_active / 1e9) == 12


def test_youtu_is_dense_mla_with_a_latent_cache():
    a = load_arch(str(CONFIGS / "tencent__Youtu-LLM-2B.trimmed.json"))
    assert {x.kind for x in a.layers} == {"mla"} and a.layers[0].mlp.intermediate_size == 6144
    # latent kv_lora_rank 512 + rope key 64 = 576 values x 2 B x 32 layers x 1,025 tokens
    assert _kv_cache_bytes("tencent__Youtu-LLM-2B.trimmed") == 576 * 2 * 32 * 1025


def test_glm_hf_layout_counts_as_the_chatglm_original():
    hf = load_arch(str(CONFIGS / "THUDM__glm-4-9b-chat-hf.trimmed.json"))
    original = load_arch(str(CONFIGS / "THUDM__glm-4-9b-chat.json"))
    assert hf.params_total == original.params_total
    names = {t.name for t in hf.layers[0].tensors()}
    assert "q_proj.bias" in names and "o_proj.bias" not in names


@pytest.mark.parametrize("name,edit,field", [
    ("poolside__Laguna-XS.2-FP8", {"num_attention_heads_per_layer": [48, 64]}, "num_attention_heads_per_layer"),
    ("poolside__Laguna-XS.2-FP8", {"num_attention_heads_per_layer": [0] * 40}, "num_attention_heads"),
    ("MiniMaxAI__MiniMax-M1", {"attn_type_list": [0, 1]}, "attn_type_list"),
    ("LiquidAI__LFM2-8B-A1B.trimmed", {"num_dense_layers": "two"}, "num_dense_layers"),
    ("databricks__dbrx-instruct", {"ffn_config": [1]}, "ffn_config"),
    ("arcee-ai__Trinity-Nano-Preview", {"global_attn_every_n_layers": 0}, "global_attn_every_n_layers"),
])
def test_broken_new_family_fields_end_in_one_clear_error(config_variant, name, edit, field):
    from decodescope.errors import DecodescopeError
    path = config_variant(CONFIGS / f"{name}.json", **edit)
    with pytest.raises(DecodescopeError, match=field):
        load_arch(path)


def test_a_modelopt_quant_config_passed_as_the_model_config_says_so():
    # nvidia/DeepSeek-V3.1-NVFP4's hf_quant_config.json: "producer" modelopt, "quantization" NVFP4, no model_type
    from decodescope.errors import DecodescopeError
    with pytest.raises(DecodescopeError, match="hf_quant_config.json, not the model's config.json"):
        load_arch(str(CONFIGS / "nvidia__DeepSeek-V3.1-NVFP4_hf_quant_config.json"))


@pytest.mark.parametrize("value", [["float32"], {"dtype": "float32"}, 4])
def test_a_state_dtype_that_is_not_a_name_is_one_clear_error(write_config, value):
    # found by the config fuzz test: a list made `value in dict` raise TypeError (unhashable)
    from decodescope.errors import DecodescopeError
    data = json.loads((CONFIGS / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json").read_text())
    data["mamba_ssm_cache_dtype"] = data["mamba_ssm_dtype"] = value
    path = write_config(data)
    with pytest.raises(DecodescopeError, match="mamba_ssm_dtype"):
        load_arch(path)
