"""Real quantized checkpoints' config.json (tests/data/configs, sources in SOURCES.md): the
weight bytes `decodescope model` holds match the bytes derived by hand from the config."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.model.quant_config import config_format

CONFIGS = Path(__file__).parent / "data" / "configs"


def weights_bytes(name: str) -> float:
    """memory.weights_bytes of `decodescope model CONFIG --gpu b200 --json` (TP 1: every weight)."""
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / name), "--gpu", "b200", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memory"]["weights_bytes"]


def test_minimax_m3_nvfp4_mxfp8_attention_and_nvfp4_experts():
    # nvidia/MiniMax-M3-NVFP4, modelopt MIXED_PRECISION: quantized_layers names every routed expert
    # (block_sparse_moe.experts.N.w1/w2/w3) NVFP4 and attention, the indexer, the shared experts and
    # the 3 dense MLPs MXFP8; exclude_modules keeps lm_head, embeddings and routers in bf16.
    # MXFP8 = e4m3 + one e8m0 scale per 32 (OCP MX spec v1.0): 8 + 8/32 = 8.25 bits = 1.03125 bytes;
    # NVFP4 = e2m1 + one e4m3 scale per 16: 4 + 8/16 = 4.5 bits = 0.5625 bytes.
    attn = 60 * (8192 * 6144 + 512 * 6144 * 2 + 6144 * 8192)  # q, k, v, o: 6,417,285,120
    indexer = 57 * (512 + 128) * 6144  # index_q_proj, index_k_proj in the 57 MoE layers: 224,133,120
    dense = 3 * 3 * 12288 * 6144  # gate, up, down of layers 0-2: 679,477,248
    shared = 57 * 3 * 3072 * 6144  # one shared expert per MoE layer: 3,227,516,928
    experts = 57 * 128 * 3 * 3072 * 6144  # 413,122,166,784
    bf16 = 57 * 128 * 6144 + 2 * 200064 * 6144  # routers, embedding, lm_head: 2,503,213,056
    norms = 60 * (2 * 6144 + 128 + 128) + 57 * (128 + 128 + 128) + 6144  # 780,672 (q/k/index norms, router bias)
    expected = (attn + indexer + dense + shared) * 1.03125 + experts * 0.5625 + (bf16 + norms) * 2
    assert expected == 248_267_256_576
    assert weights_bytes("nvidia__MiniMax-M3-NVFP4.json") == expected


def test_minimax_m3_nvfp4_kernel_and_compute_per_tensor():
    a = load_arch(str(CONFIGS / "nvidia__MiniMax-M3-NVFP4.json"))
    f = config_format(a)
    t = {x.name: x for x in a.layers[5].tensors()}
    assert f.tensor_format(t["q_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["index_k_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["shared_expert.gate_up_proj"]) == (8.25, "mxfp8", "fp8")
    assert f.tensor_format(t["experts.down_proj"]) == (4.5, "nvfp4", "fp4")  # NVFP4 = W4A4
    assert f.tensor_format(a.lm_head).bits == 16
    assert len(f.per_tensor) == 15  # one pattern per module, not 21,888 (a per-tensor lookup stays cheap)


@pytest.mark.parametrize("spec, bits", [("mxfp8", 8.25)])
def test_mxfp8_flag(spec, bits):
    from decodescope.model.formats import parse_format
    f = parse_format(spec)
    assert f.bits == bits and f.compute == "fp8"


def weights_bytes_as(name: str, weights: str) -> float:
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / name), "--gpu", "b200", "--json",
                        "--weights", weights], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memory"]["weights_bytes"]


# DeepSeek-V4-Flash routed experts: 43 layers (the MTP layer is held only with --spec mtp), 256 experts
# of gate_up 4096 x 4096 + down 4096 x 2048 = 25,165,824 weights: 43 * 256 * 25,165,824 = 277,025,390,592
V4_FLASH_EXPERTS = 43 * 256 * (4096 * 4096 + 4096 * 2048)


@pytest.mark.parametrize("name, expert_bits", [
    # deepseek-ai/DeepSeek-V4-Flash: quant_method fp8 (128x128 blocks) + expert_dtype fp4 beside it:
    # e2m1 + one ue8m0 scale per 32 = 4.25 bits (DeepSeek's inference/model.py float4_e2m1fn_x2 experts)
    ("deepseek-ai__DeepSeek-V4-Flash.json", 4.25),
    # nvidia/DeepSeek-V4-Flash-NVFP4: the same, moe_quant_algo NVFP4: e2m1 + e4m3 scale per 16 = 4.5 bits
    ("nvidia__DeepSeek-V4-Flash-NVFP4.json", 4.5),
])
def test_deepseek_v4_fp4_experts_beside_fp8(name, expert_bits):
    # the rest of the model is the same FP8 as --weights fp8; only the experts shrink from 8 bits:
    # 277,025,390,592 * (8 - 4.25) / 8 = 129,855,651,840 bytes (MXFP4), * 3.5 / 8 = 121,198,608,384 (NVFP4)
    saved = V4_FLASH_EXPERTS * (8 - expert_bits) / 8
    assert saved in (129_855_651_840, 121_198_608_384)
    assert weights_bytes_as(name, "fp8") - weights_bytes(name) == saved
    a = load_arch(str(CONFIGS / name))
    f = config_format(a)
    t = {x.name: x for x in a.layers[5].tensors()}
    assert f.tensor_format(t["experts.down_proj"]) == (expert_bits, "nvfp4" if expert_bits == 4.5 else "mxfp4", "fp4")
    assert f.tensor_format(t["shared_expert.down_proj"]) == (8, "fp8", "fp8")
    assert f.tensor_format(t["wq_a"]) == (8, "fp8", "fp8")


def test_glm51_nvfp4_whole_layer_exclusions_stay_in_their_layers():
    # nvidia/GLM-5.1-NVFP4 ignore: "model.layers.0*", "model.layers.1.*", "model.layers.2.*" (the three
    # dense layers, whole) and "model.layers.N.self_attn*", "model.layers.N.mlp.shared_experts*" for
    # N = 3..77: only the routed experts are NVFP4 (4.5 bits = 0.5625 bytes), all else bf16.
    # (Matched without their layer, "model.layers.0*" would leave every tensor bf16: 1,488 GB.)
    experts = 75 * 256 * (4096 * 6144 + 6144 * 2048)  # 724,775,731,200
    attn = 78 * (2048 * 6144 + 16384 * 2048 + 576 * 6144 + 28672 * 512 + 6144 * 16384  # MLA
                 + 4096 * 2048 + 128 * 6144)  # indexer wq_b, wk: 13,587,185,664
    dense = 3 * 3 * 12288 * 6144  # 679,477,248
    shared = 75 * (4096 * 6144 + 6144 * 2048)  # 2,831,155,200
    routers = 75 * 256 * 6144  # 117,964,800
    embed_head = 2 * 154880 * 6144  # 1,903,165,440
    # input/q_a/kv_a/indexer.k/post norms, indexer.weights_proj (32 x 6144), router bias, final norm
    small = 78 * (6144 + 2048 + 512 + 256 + 32 * 6144 + 6144) + 75 * 256 + 6144  # 16,538,880
    expected = experts * 0.5625 + (attn + dense + shared + routers + embed_head + small) * 2
    assert expected == 445_957_323_264
    assert weights_bytes("nvidia__GLM-5.1-NVFP4.json") == expected


def test_kimi_k3_mxfp4_pack_quantized_experts_and_bf16_kda():
    # moonshotai/Kimi-K3, compressed-tensors "mxfp4-pack-quantized": float 4-bit weights, group_size 32,
    # uint8 (e8m0) scales = MXFP4, 4 + 8/32 = 4.25 bits (not NVFP4's 4.5); no input_activations: bf16 math.
    # ignore re:.*self_attn.* (MLA and the Kimi Delta Attention projections and gates, all in self_attn),
    # shared experts, the dense MLP and lm_head: only the 92 MoE layers' routed experts and latent
    # projections are MXFP4. Against --weights bf16 they save 16 - 4.25 = 11.75 bits per weight:
    experts = 92 * 896 * (6144 * 3584 + 3584 * 3072)  # 2,722,740,830,208
    latent = 92 * (3584 * 7168 + 7168 * 3584)  # fc1/fc2_latent_proj: 4,726,980,608
    saved = (experts + latent) * 11.75 / 8
    assert saved == 4_005_968_347_136
    assert weights_bytes_as("moonshotai__Kimi-K3.json", "bf16") - weights_bytes("moonshotai__Kimi-K3.json") == saved
    a = load_arch(str(CONFIGS / "moonshotai__Kimi-K3.json"))
    f = config_format(a)
    t = {x.name: x for x in a.layers[1].tensors()}  # a KDA layer
    assert f.tensor_format(t["experts.down_proj"]) == (4.25, "mxfp4", "bf16")
    assert f.tensor_bits(t["f_proj"]) == f.tensor_bits(t["q_proj"]) == 16


def _dense_arch(write_config, quant):
    cfg = {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 4,
           "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
           "torch_dtype": "bfloat16", "quantization_config": quant}
    return load_arch(write_config(cfg))


def _bits(write_config, quant):
    a = _dense_arch(write_config, quant)
    f = config_format(a)
    return {t.name: f.tensor_bits(t) for t in a.layers[0].tensors() if t.linear}


def test_awq_modules_to_not_convert_match_as_substrings(write_config):
    # vLLM / SGLang awq.py is_layer_skipped_awq: any(module_name in prefix): "mlp.gate" (meant for MoE
    # routers) also leaves "model.layers.N.mlp.gate_proj" unquantized; AWQ 4-bit g128 = 4 + (16 + 4)/128
    bits = _bits(write_config, {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                "version": "gemm", "modules_to_not_convert": ["mlp.gate"]})
    assert bits["gate_proj"] == 16 and bits["up_proj"] == bits["down_proj"] == bits["q_proj"] == 4.15625


def test_bitsandbytes_skip_modules_match_components_and_leading_paths(write_config):
    # vLLM bitsandbytes.py is_layer_skipped_bnb: an entry equal to one dotted component ("self_attn")
    # or a leading path ("model.layers.0.mlp", Unsloth's dynamic 4-bit form); not a substring ("mlp.gate")
    nf4 = 4 + 32 / 64  # absmax fp32 per 64
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
         "llm_int8_skip_modules": ["lm_head", "self_attn", "mlp.gate"]}
    bits = _bits(write_config, q)
    assert bits["q_proj"] == bits["o_proj"] == 16 and bits["gate_proj"] == bits["down_proj"] == nf4


def test_bitsandbytes_skipping_one_layer_leaves_the_others_quantized(write_config):
    # "model.layers.0.mlp" names layer 0 of 4: the format (one per tensor name) follows the other 3
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True, "llm_int8_skip_modules": ["model.layers.0.mlp"]}
    assert _bits(write_config, q)["down_proj"] == 4.5
    q["llm_int8_skip_modules"] = ["model.layers.0.mlp", "model.layers.1.mlp", "model.layers.2.mlp"]
    assert _bits(write_config, q)["down_proj"] == 16  # 3 of 4 layers keep their MLP in bf16


def test_gptq_dynamic_negative_rules_skip_modules(write_config):
    # GPTQModel "dynamic": "-:REGEX" keeps matching modules unquantized (vLLM gptq_utils
    # get_dynamic_override: re.match on the full module name); GPTQ 4-bit g128 sym = 4 + 16/128
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True,
         "dynamic": {r"-:.*\.self_attn\..*": {}, r"-:model\.layers\.[0-2]\.mlp\..*": {}}}
    bits = _bits(write_config, q)
    assert bits["q_proj"] == 16 and bits["down_proj"] == 16  # the MLP of 3 of 4 layers is skipped
    q["dynamic"] = {r"-:model\.layers\.0\.mlp\..*": {}}
    assert _bits(write_config, q)["down_proj"] == 4.125


def test_gptq_dynamic_bit_overrides_are_one_clear_error(write_config):
    from decodescope.errors import DecodescopeError
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "dynamic": {r"+:.*down_proj": {"bits": 8}}}
    with pytest.raises(DecodescopeError, match="dynamic"):
        _bits(write_config, q)


def test_fbgemm_fp8_keeps_its_modules_to_not_convert_in_bf16(write_config):
    # Meta-Llama-3.1-405B-Instruct-FP8 style: fbgemm_fp8, e4m3 weights + one fp32 scale per row
    # (32 / 1024 bits here, modelled as 8), attention and layer 0's MLP named in modules_to_not_convert
    q = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
         "modules_to_not_convert": [f"model.layers.{i}.self_attn.{x}_proj" for i in range(4) for x in "qkvo"]
         + ["model.layers.0.mlp.down_proj", "lm_head"]}
    a = _dense_arch(write_config, q)
    f = config_format(a)
    t = {x.name: x for x in a.layers[2].tensors()}
    assert f.tensor_bits(t["q_proj"]) == 16 and f.tensor_format(t["down_proj"]) == (8, "fp8", "fp8")


_MX = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0", "is_dynamic": False}


@pytest.mark.parametrize("weight, acts, fmt", [
    # MXFP4 W4A4 (amd/*-MXFP4): e2m1 + e8m0 per 32 = 4.25 bits, FP4 math
    (_MX, dict(_MX, is_dynamic=True), (4.25, "mxfp4", "fp4")),
    # FP8 per-channel weights, FP8 per-tensor dynamic activations: 8 bits, FP8 math
    ({"dtype": "fp8_e4m3", "qscheme": "per_channel"}, {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}, (8, "fp8", "fp8")),
    # INT4 per-group 128 unsigned (AWQ-like): 4 + (16 + 4) / 128 = 4.15625, weight-only
    ({"dtype": "uint4", "qscheme": "per_group", "group_size": 128}, None, (4.15625, "int4", "bf16")),
    # staged recipe [FP8 per tensor, INT4 per channel]: the checkpoint stores INT4 per channel = 4 bits
    ([{"dtype": "fp8_e4m3", "qscheme": "per_tensor"}, {"dtype": "int4", "qscheme": "per_channel"}],
     {"dtype": "fp8_e4m3"}, (4, "int4", "bf16")),
])
def test_quark_weight_specs(write_config, weight, acts, fmt):
    q = {"quant_method": "quark", "global_quant_config": {"weight": weight, "input_tensors": acts},
         "layer_quant_config": {}, "exclude": ["lm_head", "re:.*self_attn.*"]}
    a = _dense_arch(write_config, q)
    f = config_format(a)
    t = {x.name: x for x in a.layers[0].tensors()}
    assert f.tensor_format(t["down_proj"]) == fmt
    assert f.tensor_bits(t["q_proj"]) == 16 and f.tensor_bits(a.lm_head) == 16


def test_quark_layer_config_by_glob_and_unknown_dtype(write_config):
    from decodescope.errors import DecodescopeError
    q = {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp8_e4m3"}},
         "layer_quant_config": {"*mlp.down_proj": {"weight": _MX}}, "exclude": []}
    a = _dense_arch(write_config, q)
    f = config_format(a)
    t = {x.name: x for x in a.layers[0].tensors()}
    assert f.tensor_bits(t["down_proj"]) == 4.25 and f.tensor_bits(t["up_proj"]) == 8
    q["global_quant_config"]["weight"] = {"dtype": "fp3"}
    with pytest.raises(DecodescopeError, match="Quark weight dtype 'fp3'"):
        config_format(_dense_arch(write_config, q))


def test_older_modelopt_export_without_quant_method():
    # Qwen3-32B-FP8-Static-PerTensor (ModelOpt 0.31): quant_algo FP8, ignore [lm_head], no quant_method,
    # kv_cache_scheme "FP8" as a string. Per layer q 8192x5120, k and v 1024x5120, o 5120x8192,
    # gate/up/down 3 x 25600x5120 = 487,587,840 weights at 1 byte, x 64 layers = 31,205,621,760;
    # embedding + lm_head 2 x 151936 x 5120 bf16 = 3,111,649,280 bytes; norms (2 x 5120 + 2 x 128) x 64 + 5120
    # = 676,864 x 2 bytes
    expected = 64 * (8192 * 5120 + 2 * 1024 * 5120 + 5120 * 8192 + 3 * 25600 * 5120) \
        + 2 * 151936 * 5120 * 2 + ((2 * 5120 + 2 * 128) * 64 + 5120) * 2
    assert expected == 34_318_624_768
    assert weights_bytes("Qwen__Qwen3-32B-FP8-Static-PerTensor.json") == expected
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / "Qwen__Qwen3-32B-FP8-Static-PerTensor.json"),
                        "--gpu", "h100-sxm"], capture_output=True, text=True)
    assert "weights fp8 (config), KV fp8" in r.stdout  # the FP8 KV cache the checkpoint was calibrated for


def test_kimi_k25_int4_pack_quantized_routed_experts():
    # moonshotai/Kimi-K2.5, compressed-tensors pack-quantized: int4, symmetric, one fp16 scale per 32
    # = 4 + 16/32 = 4.5 bits; ignore self_attn, shared experts, the dense MLP and lm_head (bf16).
    # Routed experts: 60 MoE layers x 384 experts x (4096 x 7168 + 7168 x 2048) = 1,014,686,023,680,
    # each 16 - 4.5 = 11.5 bits smaller than in bf16
    saved = 60 * 384 * (4096 * 7168 + 7168 * 2048) * 11.5 / 8
    assert saved == 1_458_611_159_040
    assert weights_bytes_as("moonshotai__Kimi-K2.5.json", "bf16") - weights_bytes("moonshotai__Kimi-K2.5.json") == saved


def test_structured_sparse_compressed_tensors_is_one_clear_error(write_config):
    from decodescope.errors import DecodescopeError
    q = {"quant_method": "compressed-tensors", "format": "int-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int"},
                                       "input_activations": {"num_bits": 8, "type": "int"}}},
         "sparsity_config": {"format": "sparse-24-bitmask", "sparsity_structure": "2:4", "targets": ["Linear"]}}
    with pytest.raises(DecodescopeError, match="sparse-24-bitmask"):
        _bits(write_config, q)
    q["sparsity_config"] = {}
    assert _bits(write_config, q)["down_proj"] == 8


@pytest.mark.parametrize("group", [0, None, "Linear", {"targets": "Linear", "weights": {"num_bits": 4}}])
def test_a_compressed_tensors_group_of_the_wrong_shape_is_one_clear_error(write_config, group):
    # a group must be an object whose targets are a list (found by the fuzz test: {"": 0})
    from decodescope.errors import DecodescopeError
    q = {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}
    with pytest.raises(DecodescopeError, match="not an object with a list of targets"):
        _bits(write_config, q)


def test_qwen3_30b_a3b_fp8_block_scales():
    # Qwen/Qwen3-30B-A3B-FP8: quant_method fp8, weight_block_size [128, 128] (one fp32 scale per
    # 128 x 128 block: 32/16384 = 0.002 bit, not counted), modules_to_not_convert: lm_head and per
    # layer the norms and the router (model.layers.N.mlp.gate), all 16-bit anyway. FP8 linears:
    # 48 x (q 4096x2048 + k, v 512x2048 + o 2048x4096 + 128 experts x 3 x 768x2048) = 29,896,998,912 bytes;
    # bf16: routers 48 x 128 x 2048, embedding + lm_head 2 x 151936 x 2048, norms 48 x (2 x 2048 + 2 x 128)
    # + 2048 = 635,123,712 weights x 2 bytes
    fp8 = 48 * (4096 * 2048 + 2 * 512 * 2048 + 2048 * 4096 + 128 * 3 * 768 * 2048)
    bf16 = 48 * 128 * 2048 + 2 * 151936 * 2048 + 48 * (2 * 2048 + 2 * 128) + 2048
    assert fp8 + 2 * bf16 == 31_167_246_336
    assert weights_bytes("Qwen__Qwen3-30B-A3B-FP8.json") == fp8 + 2 * bf16


def test_minimax_m3_mxfp8_checkpoint(write_config):
    # MiniMaxAI/MiniMax-M3-MXFP8's block as a public MiniMax-M3 loader's documentation quotes it (the
    # code index does not name its repository): quant_method mxfp8, weight_block_size [1, 32], vLLM's
    # ignored_layers. Every linear of the real MiniMax-M3 config is MXFP8, 8 + 8/32 = 8.25 bits:
    # the 423,670,579,200 linear weights of the NVFP4 test above at 1.03125 bytes; routers, embedding,
    # lm_head (2,503,213,056) and norms (780,672) in bf16
    cfg = json.loads((CONFIGS / "MiniMaxAI__MiniMax-M3.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp8", "activation_scheme": "dynamic",
                                  "weight_block_size": [1, 32],
                                  "ignored_layers": ["lm_head", "model.embed_tokens", "model.layers.3.block_sparse_moe.gate"]}
    path = write_config(cfg)
    linear = 6_417_285_120 + 224_133_120 + 679_477_248 + 3_227_516_928 + 413_122_166_784
    expected = linear * 1.03125 + (2_503_213_056 + 780_672) * 2
    assert expected == 441_918_272_256
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", path, "--gpu", "b200",
                        "--json"], capture_output=True, text=True)
    assert json.loads(r.stdout)["memory"]["weights_bytes"] == expected


@pytest.mark.parametrize("spec, fmt", [
    # the example of torchao's vLLM integration guide: int4 weight-only, group 128; tinygemm stores a
    # bf16 scale and a bf16 zero point per group: 4 + 32/128 = 4.25 bits, bf16 math
    ({"_type": "Int4WeightOnlyConfig", "_data": {"group_size": 128, "use_hqq": True}}, (4.25, "int4", "bf16")),
    ({"_type": "Float8DynamicActivationFloat8WeightConfig", "_data": {}}, (8, "fp8", "fp8")),
    ({"_type": "Int8WeightOnlyConfig", "_data": {}}, (8, "int8", "bf16")),
])
def test_torchao_configs(write_config, spec, fmt):
    a = _dense_arch(write_config, {"quant_method": "torchao", "quant_type": {"default": spec}})
    f = config_format(a)
    assert f.tensor_format(next(t for t in a.layers[0].tensors() if t.name == "down_proj")) == fmt


def test_unmodelled_methods_are_one_clear_error(write_config):
    from decodescope.errors import DecodescopeError
    for q in ({"quant_method": "hqq", "nbits": 4, "group_size": 64},
              {"quant_method": "torchao", "quant_type": {"default": {"_type": "Int4WeightOnlyConfig"},
                                                         "model.layers.0.mlp.down_proj": {"_type": "Int8WeightOnlyConfig"}}}):
        with pytest.raises(DecodescopeError, match="--weights"):
            config_format(_dense_arch(write_config, q))


def test_gemma4_nvfp4_quantizes_the_experts_beside_the_mlp():
    # nvidia/Gemma-4-26B-A4B-NVFP4 ignores, per layer, "model.language_model.layers.N.mlp*", ".router*" and
    # ".self_attn*". Gemma 4 keeps its routed experts beside the dense MLP (layers.N.experts), so only they
    # are NVFP4 (4.5 bits): 30 layers x 128 experts x 3 x 704 x 2816 = 22,837,985,280 weights,
    # 16 - 4.5 = 11.5 bits smaller than in bf16. (Read as mlp.experts they were bf16 too: 50.5 GB.)
    saved = 30 * 128 * 3 * 704 * 2816 * 11.5 / 8
    assert saved == 32_829_603_840
    name = "nvidia__Gemma-4-26B-A4B-NVFP4.json"
    assert weights_bytes_as(name, "bf16") - weights_bytes(name) == saved


def test_multimodal_prefixes_and_singular_shared_expert_in_exclusions():
    # nvidia/Qwen3.5-122B-A10B-NVFP4 ignores, per layer, "model.language_model.layers.N.linear_attn*"
    # (Gated DeltaNet layers) or ".self_attn*" (every 4th layer) and ".mlp.shared_expert*": engines map the
    # multimodal "model.language_model." prefix onto the text model's names; Qwen spells shared_expert
    # singular. Only the routed experts are NVFP4.
    a = load_arch(str(CONFIGS / "nvidia__Qwen3.5-122B-A10B-NVFP4.json"))
    f = config_format(a)
    gdn = next(layer for layer in a.layers if any(t.name == "in_proj_qkv" for t in layer.tensors()))
    t = {x.name: x for x in gdn.tensors()}
    assert f.tensor_bits(t["in_proj_qkv"]) == f.tensor_bits(t["out_proj"]) == 16
    assert f.tensor_bits(t["shared_expert.gate_up_proj"]) == 16
    assert f.tensor_format(t["experts.down_proj"]) == (4.5, "nvfp4", "fp4")
    full = next(layer for layer in a.layers if any(t.name == "q_proj" for t in layer.tensors()))
    assert f.tensor_bits(next(t for t in full.tensors() if t.name == "q_proj")) == 16


def test_mlx_affine_quantization_counts_a_scale_and_a_bias_per_group():
    # mlx-community/gemma-3-1b-pt-6bit: {"group_size": 64, "bits": 6}, no quant_method: each
    # 64 weights keep a 16-bit scale and a 16-bit bias, 6 + 32 / 64 = 6.5 bits a weight.
    # 999,885,952 params (Gemma 3 1B, keras-hub's preset gives the same count); the norms,
    # 26 layers x (4 x 1152 + 2 x 256) + 1152 = 134,272, stay 16-bit.
    # Read per token: every weight, the tied head included, at 6.5 bits.
    norms = 26 * (4 * 1152 + 2 * 256) + 1152
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(CONFIGS / "mlx-community__gemma-3-1b-pt-6bit.json"),
                        "--gpu", "m3-max", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["params_total"] == 999_885_952
    assert out["weight_bytes_per_gpu"] == pytest.approx((999_885_952 - norms) * 6.5 / 8 + norms * 2)


@pytest.mark.parametrize("quant", [{"quant_method": "gptq", "bits": -1}, {"quant_method": "awq", "bits": -1}])
def test_a_negative_bit_width_is_one_clear_error(write_config, quant):
    # hypothesis found "bits": -1 accepted (as group_size -1 is, one scale per channel): negative bytes
    from decodescope.errors import DecodescopeError
    with pytest.raises(DecodescopeError, match="bits=-1 is not an integer from 2 to 8"):
        _bits(write_config, quant)
    # group_size -1 stays valid: 4 bits and one scale per output channel
    assert set(_bits(write_config, {"quant_method": "gptq", "bits": 4, "group_size": -1}).values()) == {4.0}


