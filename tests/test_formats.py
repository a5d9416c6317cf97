"""Weight formats: true bits per weight, and which tensors stay 16-bit."""

import pytest

from decodescope.arch import Tensor, load_arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import parse_format
from decodescope.model.quant_config import config_format

LINEAR = Tensor("q_proj", (4096, 4096), "col")
HEAD = Tensor("lm_head", (1000, 4096), "vocab")
NORM = Tensor("input_layernorm", (4096,), "rep", linear=False)
EXPERT = Tensor("experts.down_proj", (4096, 1024), "row", experts=8)


@pytest.mark.parametrize("spec, linear, head", [
    ("bf16", 16, 16), ("fp16", 16, 16), ("fp8", 8, 16), ("int8", 8, 16),
    ("int4-g128", 4.125, 16), ("int4-g32", 4.5, 16), ("int4-g64", 4.25, 16),  # + one fp16 scale per group
    ("nvfp4", 4.5, 16),  # e4m3 scale per 16
    ("mxfp4", 4.25, 16),  # e8m0 scale per 32
    ("q4_k_m", 4.85, 6.5625), ("q5_k_m", 5.69, 6.5625), ("q6_k", 6.5625, 6.5625), ("q8_0", 8.5, 8.5),
    ("bpw:4.0", 4.0, 4.0), ("BPW:3.5", 3.5, 3.5),
])
def test_bits_per_weight_include_scales(spec, linear, head):
    f = parse_format(spec)
    assert f.tensor_bits(LINEAR) == pytest.approx(linear)
    assert f.tensor_bits(HEAD) == pytest.approx(head)
    assert f.tensor_bits(NORM) == 16  # norms, biases, convs stay in the checkpoint dtype


def test_mxfp4_on_moe_converts_only_experts():
    f = parse_format("mxfp4", load_arch("gpt-oss-20b"))
    assert f.tensor_bits(EXPERT) == 4.25
    assert f.tensor_bits(LINEAR) == 16  # attention stays bf16 (modules_to_not_convert)


@pytest.mark.parametrize("preset, name, expected", [
    ("deepseek-v3", "fp8", {"q_a_proj": 8, "lm_head": 16}),
    ("gpt-oss-120b", "mxfp4", {"experts.gate_up_proj": 4.25, "q_proj": 16}),
    ("llama-3.1-8b", "bf16", {"q_proj": 16}),
    ("llama-2-7b", "fp16", {"q_proj": 16}),
    # modelopt MIXED_PRECISION: attention and GDN projections FP8, MLP and head NVFP4,
    # in_proj_a/b not listed (16), MTP ignored (16)
    ("qwen3.6-27b-nvfp4", "mixed (config)", {"in_proj_qkv": 8, "q_proj": 8, "gate_proj": 4.5, "up_proj": 4.5,
                                             "down_proj": 4.5, "in_proj_a": 16, "lm_head": 4.5}),
])
def test_config_format_follows_quantization_config(preset, name, expected):
    arch = load_arch(preset)
    f = config_format(arch)
    assert f.name == name
    tensors = {t.name: t for layer in arch.layers for t in layer.tensors()} | {"lm_head": arch.lm_head}
    for tname, bits in expected.items():
        t = tensors.get(tname) or next(t for n, t in tensors.items() if n.endswith(tname))
        assert f.tensor_bits(t) == bits, tname


def test_mixed_checkpoint_keeps_ignored_mtp_in_16_bit():
    arch = load_arch("qwen3.6-27b-nvfp4")
    f = config_format(arch)
    mlp = next(t for t in arch.mtp[0].tensors() if t.name == "gate_proj")
    assert f.tensor_bits(mlp, mtp=True) == 16


@pytest.mark.parametrize("spec", ["int3", "q4", "bpw:", "int4-g"])
def test_unknown_format_lists_the_known_ones(spec):
    with pytest.raises(DecodescopeError, match="int4-gN"):
        parse_format(spec)


# ---- quantization configs read per tensor -------------------------------------------

def _arch_with(write_config, quant=None, dtype="bfloat16"):
    cfg = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
           "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
           "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "torch_dtype": dtype}
    if quant:
        cfg["quantization_config"] = quant
    return load_arch(write_config(cfg))


@pytest.mark.parametrize("quant, bits", [
    # GPTQ: b-bit weights + fp16 scale per group (+ a b-bit zero point per group when asymmetric)
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}, 4 + 16 / 128),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": False}, 4 + (16 + 4) / 128),  # 4.15625
    ({"quant_method": "gptq", "bits": 3, "group_size": 128, "sym": False}, 3 + (16 + 3) / 128),  # 3.1484375
    ({"quant_method": "gptq", "bits": 8, "group_size": 32, "sym": True}, 8 + 16 / 32),  # 8.5
    ({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True}, 4.0),  # per-channel scale
    # AWQ always stores zero points: 4 + (16 + 4) / 128
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 4.15625),
    # bitsandbytes nf4: absmax per 64; double quant stores it as int8 + fp32 per 256 absmax
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, 4 + 8 / 64 + 32 / (64 * 256)),  # 4.126953125
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, 4 + 32 / 64),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, 8.0),
])
def test_integer_quantization_configs_true_bits(write_config, quant, bits):
    f = config_format(_arch_with(write_config, quant))
    assert f.tensor_bits(LINEAR) == pytest.approx(bits)
    assert f.tensor_bits(EXPERT) == pytest.approx(bits)
    assert f.tensor_bits(HEAD) == 16
    assert f.tensor_format(LINEAR).compute == "bf16"  # weight-only: the matmul runs in bf16


def _ct(weights, acts=None, ignore=("lm_head",), targets=("Linear",)):
    group = {"targets": list(targets), "weights": weights}
    if acts:
        group["input_activations"] = acts
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}, "ignore": list(ignore)}


@pytest.mark.parametrize("quant, bits, kernel, compute", [
    # w4a16: int4, one fp16 scale per 128, symmetric
    (_ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}),
     4.125, "int4", "bf16"),
    (_ct({"num_bits": 8, "type": "float", "strategy": "channel"}, {"num_bits": 8, "type": "float"}),
     8.0, "fp8", "fp8"),  # w8a8 fp8: FP8 tensor cores
    (_ct({"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}, {"num_bits": 8, "type": "int"}),
     8.0, "int8", "int8"),  # w8a8 int8
    (_ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
         {"num_bits": 4, "type": "float"}), 4.5, "nvfp4", "fp4"),  # nvfp4 w4a4
])
def test_compressed_tensors_groups(write_config, quant, bits, kernel, compute):
    f = config_format(_arch_with(write_config, quant))
    tf = f.tensor_format(LINEAR)
    assert (tf.bits, tf.kernel, tf.compute) == (pytest.approx(bits), kernel, compute)
    assert f.tensor_bits(HEAD) == 16  # ignore: lm_head


def test_compressed_tensors_ignore_patterns_and_targets(write_config):
    quant = _ct({"num_bits": 4, "type": "float", "group_size": 16}, {"num_bits": 4, "type": "float"},
                ignore=["lm_head", "re:.*self_attn.*", "re:.*mlp.gate$"])
    f = config_format(_arch_with(write_config, quant))
    assert f.tensor_bits(LINEAR) == 16  # q_proj is under self_attn
    assert f.tensor_bits(EXPERT) == 4.5


def test_float8_torch_dtype_is_fp8(write_config):
    f = config_format(_arch_with(write_config, dtype="float8_e4m3fn"))
    assert f.name == "fp8" and f.tensor_bits(LINEAR) == 8


def test_mixed_modelopt_checkpoint_carries_kernel_and_compute_per_tensor():
    a = load_arch("nvidia/Qwen3.6-27B-NVFP4")
    f = config_format(a)
    mlp = next(t for t in a.layers[0].tensors() if t.name == "gate_proj")
    q = next(t for t in a.layers[3].tensors() if t.name == "q_proj")
    # quantized_layers: MLP W4A16_NVFP4 (NVFP4 weights, 16-bit activations: bf16 math),
    # attention FP8 (W8A8: FP8 math)
    assert f.tensor_format(mlp) == (4.5, "nvfp4", "bf16")
    assert f.tensor_format(q) == (8.0, "fp8", "fp8")
    assert f.kernels >= {"nvfp4", "fp8"}


def test_nvfp4_on_deepseek_keeps_mla_and_mtp_16_bit():
    a = load_arch("deepseek-r1")
    f = parse_format("nvfp4", a)
    layer = a.layers[5]
    bits = {t.name: f.tensor_bits(t) for t in layer.tensors()}
    # nvidia/DeepSeek-R1-FP4 quantizes the MLP / experts only; self_attn and layer 61 (MTP) stay 16-bit
    assert bits["q_a_proj"] == 16 and bits["kv_b_proj"] == 16 and bits["o_proj"] == 16
    assert bits["experts.gate_up_proj"] == 4.5 and bits["shared_expert.down_proj"] == 4.5
    assert all(f.tensor_bits(t, mtp=True) == 16 for t in a.mtp[0].tensors())


@pytest.mark.parametrize("spec", ["int4-g0", "bpw:0", "bpw:99"])
def test_degenerate_format_flags(spec):
    with pytest.raises(DecodescopeError):
        parse_format(spec)


def _nvidia_nvfp4(name: str):
    import json
    from dataclasses import replace
    from pathlib import Path
    hf = json.loads((Path(__file__).parent / "data" / "configs" / f"nvidia__{name}_hf_quant_config.json").read_text())
    a = load_arch("deepseek-v3")
    return a, config_format(replace(a, quantization={"quant_method": "modelopt", **hf["quantization"]}))


def test_nvidias_nvfp4_deepseek_exclusion_list_matches_weights_nvfp4():
    # DeepSeek-V3-0324 NVFP4 (modelopt 0.27, as DeepSeek-R1-FP4): every self_attn* and layer 61 excluded
    a, f = _nvidia_nvfp4("DeepSeek-V3-0324-NVFP4")
    flag = parse_format("nvfp4", a)
    for layer in (a.layers[0], a.layers[5]):  # a dense and a MoE layer
        for t in layer.tensors():
            assert f.tensor_bits(t) == flag.tensor_bits(t), t.name
    down = next(t for t in a.layers[5].tensors() if t.name == "experts.down_proj")
    assert f.tensor_format(down) == (4.5, "nvfp4", "fp4")
    assert all(f.tensor_bits(t, mtp=True) == 16 for t in a.mtp[0].tensors())  # "model.layers.61*"


def test_newer_nvfp4_deepseek_quantizes_o_proj_too():
    # DeepSeek-V3.1 NVFP4 excludes the MLA down/up projections by name but not o_proj
    a, f = _nvidia_nvfp4("DeepSeek-V3.1-NVFP4")
    bits = {t.name: f.tensor_bits(t) for t in a.layers[5].tensors()}
    assert bits["q_a_proj"] == bits["kv_b_proj"] == 16 and bits["o_proj"] == 4.5
