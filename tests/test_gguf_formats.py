"""GGUF file type MXFP4_MOE (the gpt-oss GGUF files): llama.cpp's quantizer stores the
3-D expert tensors as MXFP4 and every other quantizable tensor, output.weight included,
as Q8_0 (llama_tensor_get_type_impl in src/llama-quant.cpp, "MoE tensors -> MXFP4, other
tensors -> Q8_0", https://github.com/ggml-org/llama.cpp/blob/
007dbbf3fd17eefe9b47fee45f48f7ba5e62b714/src/llama-quant.cpp). `--weights mxfp4` is the
Hugging Face checkpoint's layout instead: experts MXFP4, the rest 16-bit.

gpt-oss-20b (config.json): hidden 2880, 64 query heads and 8 KV heads of 64, 24 layers,
vocabulary 201088, 32 experts of intermediate 2880.
  attention per layer: q 4096 x 2880 + k 512 x 2880 + v 512 x 2880 + o 2880 x 4096
                       = 9216 x 2880 = 26,542,080; x 24 layers = 637,009,920 weights
  LM head: 201088 x 2880 = 579,133,440 weights
Q8_0 = 34 bytes per 32 weights = 8.5 bits; MXFP4 = 17 bytes per 32 = 4.25 bits.

Independent check of the layout (by hand, not asserted): the file size the DGX Spark
benchmark prints for gpt-oss-20b MXFP4_MOE is 11.27 GiB
(https://github.com/ggml-org/llama.cpp/blob/4c7e9893c4ca8eec35d032726d14b74fae76cff8/benches/dgx-spark.md).
  experts 24 x 32 x (5760 x 2880 + 2880 x 2880) = 19,110,297,600 x 4.25 / 8 = 10,152,345,600 B
  attention 637,009,920 x 8.5 / 8 = 676,823,040 B; output and token_embd Q8_0: 2 x 615,329,280 B
  sum 12,059,827,200 B = 11.23 GiB + biases, norms, routers (~0.03 GiB): 11.26 GiB, where
  16-bit non-expert tensors would give 12.8 GiB."""

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, parse_format, predict
from decodescope.validate.rows import load_cases

ATTN = 637_009_920
HEAD = 579_133_440


def _weight_bytes(weights: str, engine: str) -> float:
    arch = load_arch("gpt-oss-20b")
    p = predict(arch, make_deployment(arch, "rtx-3090", weights=weights, engine=engine, context=64))
    return next(c.bytes for c in p.ceiling.breakdown if c.component == "weights")


def test_tensor_formats_follow_the_quantizer():
    arch = load_arch("gpt-oss-20b")
    f = parse_format("mxfp4_moe", arch)
    bits = {t.name: f.tensor_bits(t) for t in arch.layers[0].tensors()}
    assert bits["experts.gate_up_proj"] == bits["experts.down_proj"] == 4.25
    assert bits["q_proj"] == bits["k_proj"] == bits["v_proj"] == bits["o_proj"] == 8.5
    assert bits["router"] == bits["q_proj.bias"] == bits["input_layernorm"] == 16.0  # not quantized
    assert f.head_bits == 8.5


def test_decode_reads_the_non_expert_tensors_at_q8_0():
    """Generic engine: mxfp4 reads attention and LM head at 16 bits, mxfp4_moe at 8.5;
    the routed experts are the same 4.25 bits in both:
    (637,009,920 + 579,133,440) x (16 - 8.5) / 8 = 1,216,143,360 x 0.9375 = 1,140,134,400 B."""
    diff = _weight_bytes("mxfp4", "generic") - _weight_bytes("mxfp4_moe", "generic")
    assert diff == pytest.approx((ATTN + HEAD) * 7.5 / 8, rel=1e-9)
    assert diff == pytest.approx(1_140_134_400, rel=1e-9)


def test_llamacpp_head_is_q8_0_not_the_expert_format():
    """llama.cpp's profile quantizes the LM head with the weights, so under mxfp4 the head
    was read at 4.25 bits; MXFP4_MOE stores it as Q8_0:
    attention 637,009,920 x 7.5 / 8 = 597,196,800 B fewer,
    head 579,133,440 x (8.5 - 4.25) / 8 = 307,664,640 B more: 289,532,160 B fewer in all."""
    diff = _weight_bytes("mxfp4", "llamacpp") - _weight_bytes("mxfp4_moe", "llamacpp")
    assert diff == pytest.approx(ATTN * 7.5 / 8 - HEAD * 4.25 / 8, rel=1e-9)
    assert diff == pytest.approx(289_532_160, rel=1e-9)


def test_dense_model_is_all_q8_0():
    """No 3-D tensors, so the quantizer gives every matrix Q8_0."""
    arch = load_arch("llama-3.1-8b")
    f = parse_format("mxfp4_moe", arch)
    assert {f.tensor_bits(t) for t in arch.layers[0].tensors() if t.linear} == {8.5}


def test_rows_whose_file_is_mxfp4_moe_use_it():
    cases, _ = load_cases()
    moe = {c.id for c in cases if c.deployment.weights.name == "mxfp4_moe"}
    assert {"DGXB-01", "DGXB-14", "SHT-03", "SHT-18", "LP21024-03"} <= moe
    assert all(c.deployment.engine.id == "llamacpp" for c in cases if c.id in moe)


def test_unknown_format_names_the_new_one():
    with pytest.raises(DecodescopeError) as e:
        parse_format("mxfp4-moe")
    assert "mxfp4_moe" in e.value.fix
