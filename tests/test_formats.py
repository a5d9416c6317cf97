"""Weight formats: true bits per weight, and which tensors stay 16-bit."""

import pytest

from decodescope.arch import Tensor, load_arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import config_format, parse_format

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
