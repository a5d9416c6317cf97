"""Remote-code hub models (decodescope/arch/remote_decoders.py and registry SAME_AS): openbmb
MiniCPM (minicpm), rednote dots.ocr (dots_ocr) and Phi-3.5-vision (phi3_v), each from a real hub
config.json. transformers cannot build these model_types, so each count is derived by hand from
vLLM's model file and checked against transformers 5.24's meta-device count of the class vLLM's
file shows to be the same decoder (LlamaForCausalLM / MixtralForCausalLM for MiniCPM's
MiniCPMMLP / MiniCPMMoE, Qwen2ForCausalLM for dots.ocr, Phi3ForCausalLM for Phi-3.5-vision),
and against the published count.

MiniCPM-2B-sft-bf16 (h 2304, 40 layers, 36 heads of 64, MHA, intermediate 5760, vocab 122753, tied):
  a layer: q/k/v/o 4 x 2304^2 = 21,233,664; gate/up/down 3 x 2304 x 5760 = 39,813,120; two norms 4,608
  -> 61,051,392 x 40 = 2,442,055,680 ("2.4B non-embedding parameters", the model card);
  + embedding 122753 x 2304 = 282,822,912 (the head tied to it) + final norm 2,304 = 2,724,880,896.
MiniCPM-MoE-8x2B (the same shapes, num_experts 8, top 2): a layer's MLP becomes 8 experts x 39,813,120
  = 318,504,960 and a router 8 x 2304 = 18,432 -> 339,761,664 per layer x 40 = 13,590,466,560
  (13.6B without the embedding) + 282,822,912 + 2,304 = 13,873,291,776; a token runs 2 experts:
  (21,233,664 + 2 x 39,813,120 + 18,432 + 4,608) x 40 + 282,822,912 + 2,304 = 4,318,142,976.
dots.ocr (Qwen2: h 1536, 28 layers, 12 heads of 128, 2 KV heads, q/k/v biased, intermediate 8960,
  vocab 151936, untied): q 1536^2 + 1536, k and v 256 x 1536 + 256 each, o 1536^2 -> 5,507,072;
  MLP 3 x 1536 x 8960 = 41,287,680; norms 3,072 -> 46,797,824 x 28 = 1,310,339,072; embedding and
  head 2 x 151936 x 1536 = 466,747,392; final norm 1,536 -> 1,777,088,000 (the card: a 1.7B LLM).
Phi-3.5-vision (Phi-3-mini: h 3072, 32 layers, 32 heads of 96, MHA, intermediate 8192, vocab 32064,
  untied): 4 x 3072^2 + 3 x 3072 x 8192 + 6,144 = 113,252,352 x 32 = 3,624,075,264; embedding and
  head 2 x 32064 x 3072 = 197,001,216; final norm 3,072 -> 3,821,079,552 (the card's 4.2B adds
  the CLIP ViT-L/14 image encoder, not counted)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.arch.config import RawConfig
from decodescope.arch.registry import build_arch
from decodescope.errors import DecodescopeError

CONFIGS = Path(__file__).parent / "data" / "configs"

# fixture -> (hand count above = transformers 5.24 on the meta device for the same decoder, active)
COUNTS = {
    "openbmb__MiniCPM-2B-sft-bf16.json": (2_724_880_896, 2_724_880_896),
    "openbmb__MiniCPM-MoE-8x2B.json": (13_873_291_776, 4_318_142_976),
    "rednote-hilab__dots.ocr.json": (1_777_088_000, 1_777_088_000),
    "microsoft__Phi-3.5-vision-instruct.json": (3_821_079_552, 3_821_079_552),
}
# bf16 K + V bytes per token, all layers: layers x 2 x kv_heads x head_dim x 2 bytes
KV_PER_TOKEN = {
    "openbmb__MiniCPM-2B-sft-bf16.json": 40 * 2 * 36 * 64 * 2,  # 368,640
    "openbmb__MiniCPM-MoE-8x2B.json": 40 * 2 * 36 * 64 * 2,
    "rednote-hilab__dots.ocr.json": 28 * 2 * 2 * 128 * 2,  # 28,672
    "microsoft__Phi-3.5-vision-instruct.json": 32 * 2 * 32 * 96 * 2,  # 393,216
}
# MiniCPM4's InfLLM v2 settings as its model card (openbmb/MiniCPM4-8B) publishes them
SPARSE = {"kernel_size": 32, "kernel_stride": 16, "init_blocks": 1, "block_size": 64, "window_size": 2048,
          "topk": 64, "use_nope": False, "dense_len": 8192}


def _arch(data: dict):
    return build_arch(RawConfig(data, "test", "test"))


def _kv_per_token(arch) -> float:
    return sum(x.mixer.kv_bytes_per_token(x.mixer.num_key_value_heads, 2) for x in arch.layers)


@pytest.mark.parametrize("name", COUNTS)
def test_counts_match_hand_derivation(name):
    arch = load_arch(str(CONFIGS / name))
    assert (arch.params_total, arch.params_active) == COUNTS[name]
    assert _kv_per_token(arch) == KV_PER_TOKEN[name]


def test_minicpm_layout_and_tied_head():
    """MiniCPMConfig ties the head by default: a config without tie_word_embeddings is tied; the
    muP scalars add no weights (the count equals plain Llama's on the same shapes)."""
    data = json.loads((CONFIGS / "openbmb__MiniCPM-2B-sft-bf16.json").read_text())
    del data["tie_word_embeddings"]
    arch = _arch(data)
    assert arch.tie_word_embeddings and arch.params_total == 2_724_880_896
    attn = arch.layers[0].mixer
    assert (attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim, attn.attention_bias) == (36, 36, 64, False)
    moe = load_arch(str(CONFIGS / "openbmb__MiniCPM-MoE-8x2B.json")).layers[0].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.moe_intermediate_size, moe.shared_expert_intermediate_size,
            moe.router_bias) == (8, 2, 5760, 0, False)


def test_minicpm4_sparse_config_is_noted_not_counted():
    """InfLLM v2 adds no weights (MiniCPM4-8B's card: its sparse_config switches it on in the
    same checkpoint); the note names it, the count and the KV cache stay dense."""
    data = json.loads((CONFIGS / "openbmb__MiniCPM-2B-sft-bf16.json").read_text())
    arch = _arch({**data, "sparse_config": SPARSE})
    assert arch.params_total == 2_724_880_896 and _kv_per_token(arch) == KV_PER_TOKEN["openbmb__MiniCPM-2B-sft-bf16.json"]
    assert any("InfLLM v2" in n and "topk 64" in n and "dense_len 8192" in n for n in arch.notes)
    with pytest.raises(DecodescopeError, match="sparse_config"):
        _arch({**data, "sparse_config": [1, 2]})


@pytest.mark.parametrize("name, built_as", [("rednote-hilab__dots.ocr.json", "qwen2"),
                                            ("microsoft__Phi-3.5-vision-instruct.json", "phi3")])
def test_same_as_wrappers(name, built_as):
    arch = load_arch(str(CONFIGS / name))
    assert arch.model_type == built_as and not arch.tie_word_embeddings
    assert any(f"built as {built_as}" in n for n in arch.notes)


def test_phi35_vision_names_its_clip_encoder_not_counted():
    # Phi-3-vision's config names its CLIP ViT-L image encoder under img_processor, not vision_config
    notes = load_arch(str(CONFIGS / "microsoft__Phi-3.5-vision-instruct.json")).notes
    assert any(n.startswith("the img_processor encoder") and "not counted" in n for n in notes)


@pytest.mark.parametrize("version, family", [("2.5", "llama"), ("2.6", "qwen2"), ("4.0", "llama"), ("4.5", "qwen3")])
def test_minicpmv_reads_the_language_model_its_version_names(write_config, version, family):
    """vLLM's minicpmv.py dispatches on `version`: 2.5 LlamaModel, 2.6 Qwen2Model, 4.0 LlamaForCausalLM,
    4.5 Qwen3ForCausalLM (MiniCPM-V 2.6 is SigLIP-400M + Qwen2-7B). A config written for this test,
    flat as MiniCPM-V's are: 2 layers, hidden 256, 4 heads of 64, 2 KV heads, MLP 512, vocab 1,000,
    untied. A layer: q, o 2 x 65,536 + k, v 2 x 32,768 + MLP 3 x 131,072 + norms 512 = 590,336;
    Qwen2 adds q/k/v biases 256 + 128 + 128 = 512, Qwen3 per-head q/k norms 2 x 64 = 128;
    + embedding and head 2 x 256,000 + final norm 256."""
    cfg = {"model_type": "minicpmv", "architectures": ["MiniCPMV"], "version": version, "hidden_size": 256,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
           "vocab_size": 1000, "tie_word_embeddings": False, "query_num": 64,
           "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}}
    a = load_arch(write_config(cfg))
    extra = {"llama": 0, "qwen2": 512, "qwen3": 128}[family]
    assert a.params_total == 2 * (590_336 + extra) + 512_000 + 256
    assert any(f"read as {family}" in n for n in a.notes) and any("vision encoder" in n for n in a.notes)


def test_minicpmv_without_a_version_is_2_0_or_2_5_as_vllm_guesses(write_config):
    # no version: MiniCPM-V 2's shape (hidden 2304, 64 queries) is 2.0 (MiniCPM-2B), anything else 2.5 (Llama 3)
    base = {"model_type": "minicpmv", "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512,
            "vocab_size": 1000, "query_num": 64}
    assert any("2.0" in n for n in load_arch(write_config({**base, "hidden_size": 2304})).notes)
    assert any("2.5" in n for n in load_arch(write_config({**base, "hidden_size": 256})).notes)
    with pytest.raises(DecodescopeError, match="version"):
        load_arch(write_config({**base, "hidden_size": 256, "version": "3.1"}))


STEP3 = CONFIGS / "vllm__Step3VLConfig-defaults.json"


def test_step3_factorized_attention_and_its_counts():
    """StepFun Step3 (vLLM's step3_text.py on its Step3TextConfig defaults: hidden 7168, 61 layers,
    64 heads of 256, one K/V head, share_q_dim 2048, vocab 128,815 untied; layers 4-59 MoE of 48
    experts of 5,120, top 3, + a shared expert of 5,120; the other 5 dense of 18,432). Attention a
    layer: q_proj 2048 x 7168 = 14,680,064, k, v 2 x 256 x 7168 = 3,670,016, inter_norm 2,048, wq
    16,384 x 2048 = 33,554,432, o 7168 x 16,384 = 117,440,512: 169,347,072; norms 2 x 7,168. Dense
    MLP 3 x 7168 x 18432 = 396,361,728; MoE 48 x 3 x 7168 x 5120 + 3 x 7168 x 5120 + 48 x 7168
    = 5,394,399,232. 61 x 169,361,408 + 5 x 396,361,728 + 56 x 5,394,399,232 + 2 x 128,815 x 7168
    + 7168 = 316,294,538,240 (the card's 321B total less the vision encoder); active, 3 of 48
    experts: 38,841,328,640 (the card's "38B activated")."""
    a = load_arch(str(STEP3))
    assert a.params_total == 316_294_538_240 and a.params_active == 38_841_328_640
    assert [type(x.mlp).__name__ for x in a.layers[3:5]] == ["DenseMLP", "MoE"] and a.layers[60].mlp.__class__.__name__ == "DenseMLP"
    # one K/V head of 256: 2 x 256 x 2 B a token a layer, whole on every GPU whatever the TP
    attn = a.layers[0].mixer
    assert attn.kv_bytes_per_token(1, 2) == 1024 and attn.num_key_value_heads == 1
    shards = {t.name: t.shard for t in attn.tensors()}
    assert (shards["q_proj"], shards["k_proj"], shards["wq"], shards["o_proj"]) == ("rep", "rep", "col", "row")


def test_step3_reads_the_hubs_comma_separated_moe_layers(config_variant):
    # the hub's config writes moe_layers_enum as one string, "4,5,...,59"
    same = config_variant(STEP3, text_config={"moe_layers_enum": ",".join(map(str, range(4, 60)))})
    assert load_arch(same).params_total == 316_294_538_240
    with pytest.raises(DecodescopeError, match="moe_layers_enum"):
        load_arch(config_variant(STEP3, text_config={"moe_layers_enum": "4,five"}))


def test_deepseek_moe_v1_is_mha_over_deepseeks_experts(write_config):
    """DeepSeekMoE 16B (model_type deepseek, remote code; vLLM's deepseek.py: LlamaAttention-style
    MHA and DeepseekMoE): the routing fields its config pins (hidden 2048, 64 routed experts of
    1408, 6 a token, 2 shared, softmax, first_k_dense_replace 1) with its 28 layers of 16 heads,
    dense MLP 10944, vocab 102400 untied. A layer: attention 4 x 2048^2 = 16,777,216 + norms 4,096;
    layer 0 MLP 3 x 2048 x 10944 = 67,239,936; a MoE layer 64 x 3 x 2048 x 1408 + 2 x 3 x 2048 x 1408
    + router 64 x 2048 = 571,080,704. 28 x 16,781,312 + 67,239,936 + 27 x 571,080,704 + 2 x 102,400
    x 2048 + 2048 = 16,375,728,128 (the card's 16.4B); 6 + 2 experts a token: 2,828,650,496 (2.8B)."""
    cfg = {"architectures": ["DeepseekForCausalLM"], "model_type": "deepseek", "hidden_size": 2048,
           "intermediate_size": 10944, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
           "vocab_size": 102400, "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2,
           "moe_intermediate_size": 1408, "first_k_dense_replace": 1, "moe_layer_freq": 1,
           "scoring_func": "softmax", "norm_topk_prob": False, "tie_word_embeddings": False}
    a = load_arch(write_config(cfg))
    assert (a.params_total, a.params_active) == (16_375_728_128, 2_828_650_496)
    assert a.layers[1].mixer.num_key_value_heads == 16 and type(a.layers[1].mixer).__name__ == "Attention"


def test_qwen_v1_is_qwen2s_tensors_with_half_width_mlp_fields():
    """Qwen-7B (model_type qwen; modeling_qwen.py QWenBlock): hidden 4096, 32 layers of 32 heads of
    kv_channels 128, vocab 151936 untied. A layer: c_attn 3 x 4096 x 4096 + its bias 3 x 4096 =
    50,343,936; c_proj 16,777,216; w1, w2 2 x 11,008 x 4096 (intermediate_size 22016 / 2) =
    90,177,536; mlp.c_proj 45,088,768; ln_1, ln_2 8,192: 202,395,648. 32 layers 6,476,660,736
    + wte and lm_head 2 x 622,329,856 + ln_f 4,096 = 7,721,324,544 (the hub lists Qwen-7B at 7.72B)."""
    a = load_arch(str(CONFIGS / "Qwen__Qwen-7B.json"))
    assert a.params_total == 7_721_324_544
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert shapes["q_proj.bias"] == (4096,) and "o_proj.bias" not in shapes
