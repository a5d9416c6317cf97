"""Older remote-code decoders (decodescope/arch/remote_classic.py and registry SAME_AS): InternLM v1
(internlm), TeleChat / TeleChat2 (telechat) and BAAI Aquila2 (aquila, SAME_AS llama), each from a
real hub config.json (tests/data/configs/SOURCES.md). transformers 5.24 has none of these classes;
each count is derived by hand, tensor by tensor, as vLLM builds the model (llama.py for
AquilaForCausalLM and InternLMForCausalLM, telechat2.py for TeleChat), and where the decoder is
Llama's, checked against transformers' LlamaForCausalLM of the same shapes on the meta device.

InternLM-20B (h 5120, 60 layers, 40 heads of 128, MHA, intermediate 13824, vocab 103168, bias false,
  untied): q/k/v/o 4 x 5120^2 = 104,857,600; gate/up/down 3 x 5120 x 13824 = 212,336,640; two
  RMSNorms 10,240 -> 317,204,480 x 60 = 19,032,268,800; embedding and head 2 x 103168 x 5120 =
  1,056,440,320; final norm 5,120 -> 20,088,714,240 (the card: 20B; LlamaForCausalLM of these
  shapes on the meta device: 20,088,714,240).
InternLM-7B's shapes (h 4096, 32 layers, 32 heads, intermediate 11008, vocab 103168, bias true):
  4 x 4096^2 + 4 x 4096 (q/k/v/o biases) = 67,125,248; 3 x 4096 x 11008 = 135,266,304; norms 8,192
  -> 202,399,744 x 32 = 6,476,791,808; + 2 x 103168 x 4096 = 845,152,256 + 4,096 = 7,321,948,160
  (the card: 7B; LlamaForCausalLM with attention_bias true: 7,321,948,160).
TeleChat-7B (telechat v1: h 4096, 30 layers, 32 heads of 128, MHA, ffn 12288, vocab 160256, no
  tie_word_embeddings -> tied): query 4096^2 = 16,777,216; key_value 2 x 4096^2 = 33,554,432; dense
  4096^2 + 4,096 = 16,781,312; gate/up/down 3 x 4096 x 12288 = 150,994,944 + down bias 4,096; two
  RMSNorms 8,192 -> 218,120,192 x 30 = 6,543,605,760; embedding (the head tied) 160256 x 4096 =
  656,408,576; ln_f 4,096 -> 7,200,018,432 = the checkpoint's pytorch_model.bin.index.json
  total_size 14,400,036,864 bytes / 2 (fp16), which lists no lm_head (the card: 7B).
TeleChat2-115B (h 8192, 96 layers, 64 heads of 128, 8 K/V heads, ffn 40960, vocab 131072, untied):
  query 8192^2 = 67,108,864; key_value 2 x 1024 x 8192 = 16,777,216; dense 8192^2 + 8,192 =
  67,117,056; MLP 3 x 8192 x 40960 = 1,006,632,960 + 8,192; norms 16,384 -> 1,157,660,672 x 96 =
  111,135,424,512; embedding and lm_head 2 x 131072 x 8192 = 2,147,483,648; ln_f 8,192 ->
  113,282,916,352 = the checkpoint's model.safetensors.index.json total_size 453,131,665,408 bytes
  / 4 (fp32). The model's name says 115B (1.5 % above); the published tensors hold 113.28B.
Aquila2-7B (Llama: h 4096, 32 layers, 32 heads, MHA, intermediate 11008, vocab 100008, untied):
  4 x 4096^2 + 3 x 4096 x 11008 + 8,192 = 202,383,360 x 32 = 6,476,267,520; + 2 x 100008 x 4096 =
  819,265,536 + 4,096 = 7,295,537,152 (the card: 7B; LlamaForCausalLM: 7,295,537,152)."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"
INTERNLM = CONFIGS / "internlm__internlm-20b.json"
TELECHAT = CONFIGS / "Tele-AI__telechat-7B.json"

# fixture -> the hand count above (total = active: dense)
COUNTS = {
    "internlm__internlm-20b.json": 20_088_714_240,
    "Tele-AI__telechat-7B.json": 7_200_018_432,
    "Tele-AI__TeleChat2-115B.json": 113_282_916_352,
    "BAAI__Aquila2-7B.json": 7_295_537_152,
}
# bf16 K + V bytes per token, all layers: layers x 2 x kv_heads x head_dim x 2 bytes
KV_PER_TOKEN = {
    "internlm__internlm-20b.json": 60 * 2 * 40 * 128 * 2,  # 1,228,800
    "Tele-AI__telechat-7B.json": 30 * 2 * 32 * 128 * 2,  # 491,520
    "Tele-AI__TeleChat2-115B.json": 96 * 2 * 8 * 128 * 2,  # 393,216
    "BAAI__Aquila2-7B.json": 32 * 2 * 32 * 128 * 2,  # 524,288
}


def _kv_per_token(arch) -> float:
    return sum(x.mixer.kv_bytes_per_token(x.mixer.num_key_value_heads, 2) for x in arch.layers)


@pytest.mark.parametrize("name", COUNTS)
def test_counts_match_hand_derivation(name):
    arch = load_arch(str(CONFIGS / name))
    assert (arch.params_total, arch.params_active) == (COUNTS[name], COUNTS[name])
    assert _kv_per_token(arch) == KV_PER_TOKEN[name]


def test_request_cache_by_hand():
    """TeleChat2-115B at context 1000: a request holds 1001 tokens (the one being decoded too) of
    8 K/V heads x 128 x 2 (K and V) x 2 bytes = 4,096 bytes per layer, 96 layers, on one GPU."""
    a = load_arch(str(CONFIGS / "Tele-AI__TeleChat2-115B.json"))
    d = make_deployment(a, "h100-sxm", context=1000)
    assert per_request_cache(a, d, a.layers)[0] == 96 * 1001 * 4096


def test_internlm_bias_defaults_true(write_config):
    """InternLMConfig's bias defaults to true: without the field q, k, v and o_proj each gain a
    bias, 60 layers x 4 x 5120 = 1,228,800 more parameters; the MLP stays bias-free."""
    cfg = {k: v for k, v in json.loads(INTERNLM.read_text()).items() if k != "bias"}
    a = load_arch(write_config(cfg))
    assert a.params_total == COUNTS["internlm__internlm-20b.json"] + 60 * 4 * 5120
    names = {t.name for t in a.layers[0].tensors()}
    assert {"q_proj.bias", "k_proj.bias", "v_proj.bias", "o_proj.bias"} <= names
    assert not names & {"gate_proj.bias", "up_proj.bias", "down_proj.bias"}


def test_internlm_7b_shapes_with_bias(config_variant):
    path = config_variant(INTERNLM, bias=True, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                          num_key_value_heads=32, intermediate_size=11008)
    assert load_arch(path).params_total == 7_321_948_160


def test_internlm_bias_must_be_a_boolean(config_variant):
    with pytest.raises(DecodescopeError, match="'bias'"):
        load_arch(config_variant(INTERNLM, bias="false"))


def test_telechat_biases_and_layout():
    """telechat2.py: no bias on q/k/v (the checkpoint's query and key_value) nor on gate/up; a
    bias on o_proj (dense) and on down_proj; TeleChat v1 attends with all 32 heads as K/V heads."""
    a = load_arch(str(TELECHAT))
    biased = sorted(t.name for t in a.layers[0].tensors() if t.name.endswith(".bias"))
    assert biased == ["down_proj.bias", "o_proj.bias"]
    attn = a.layers[0].mixer
    assert (attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim) == (32, 32, 128)
    assert a.tie_word_embeddings and len(a.layers) == 30


def test_telechat_untied_and_embedding_norm(config_variant):
    """tie_word_embeddings false adds an lm_head of 160256 x 4096 = 656,408,576; embed_layernorm
    adds one RMSNorm weight of 4096 on the embedding."""
    untied = load_arch(config_variant(TELECHAT, tie_word_embeddings=False))
    assert untied.params_total == COUNTS["Tele-AI__telechat-7B.json"] + 160256 * 4096
    normed = load_arch(config_variant(TELECHAT, embed_layernorm=True))
    assert normed.params_total == COUNTS["Tele-AI__telechat-7B.json"] + 4096


def test_telechat_bad_fields_are_one_clear_error(config_variant):
    with pytest.raises(DecodescopeError, match="embed_layernorm"):
        load_arch(config_variant(TELECHAT, embed_layernorm="yes"))
    with pytest.raises(DecodescopeError, match="n_head|num_attention_heads"):
        load_arch(config_variant(TELECHAT, n_head=0))
    with pytest.raises(DecodescopeError, match="multiple"):
        load_arch(config_variant(TELECHAT, n_head=31))


def test_aquila_is_built_as_llama():
    a = load_arch(str(CONFIGS / "BAAI__Aquila2-7B.json"))
    assert any(n.startswith("model_type aquila: built as llama") for n in a.notes)
    attn = a.layers[0].mixer
    assert (attn.num_key_value_heads, attn.attention_bias, attn.o_bias) == (32, False, False)
