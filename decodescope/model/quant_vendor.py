"""Vendor toolkits' quantization configs: NVIDIA ModelOpt (quant_algo, or MIXED_PRECISION per
layer), AMD Quark and torchao: which tensors each converts, to how many bits, with what math."""

import re
from collections import Counter

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import BF16, NAMES, TensorFormat, WeightFormat
from decodescope.model.quant_patterns import int_bits, patterns


# ModelOpt's quant_algo (TensorRT-LLM's QuantAlgo, tensorrt_llm/quantization/mode.py, which
# hf_quant_config.json writes) -> the weights' format: bits a weight (scales included), kernel family
# and the dtype its matmul runs in. FP8 scales are per tensor, per channel or per 128x128 block: under
# 0.01 bit. NVFP4: e2m1 + an e4m3 scale per 16; MX formats: one e8m0 scale per 32 (OCP MX v1.0)
_ALGO = {**dict.fromkeys(("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_BLOCK_SCALES"), TensorFormat(8.0, "fp8", "fp8")),
         **dict.fromkeys(("NVFP4", "NVFP4_AWQ"), TensorFormat(4.5, "nvfp4", "fp4")),
         "MXFP8": TensorFormat(8.25, "mxfp8", "fp8"),
         "W4A16_NVFP4": TensorFormat(4.5, "nvfp4", "bf16"), "W4A8_NVFP4_FP8": TensorFormat(4.5, "nvfp4", "fp8"),
         "W4A16_MXFP4": TensorFormat(4.25, "mxfp4", "bf16"),
         **dict.fromkeys(("W4A8_MXFP4_FP8", "W4A8_MXFP4_MXFP8"), TensorFormat(4.25, "mxfp4", "fp8")),
         # SmoothQuant INT8 x INT8 and weight-only per-channel integers (one scale per output row)
         "W8A8_SQ_PER_CHANNEL": TensorFormat(8.0, "int8", "int8"), "W8A16": TensorFormat(8.0, "int8", "bf16"),
         "W4A16": TensorFormat(4.0, "int4", "bf16")}
# integer formats with a 16-bit scale per group_size weights (ModelOpt's AWQ block: 128), a zero
# point per group with has_zero_point -> (weight bits, matmul dtype)
_GROUPED = {"W4A16_AWQ": (4, "bf16"), "W4A8_AWQ": (4, "fp8"), "W4A16_GPTQ": (4, "bf16"), "W8A16_GPTQ": (8, "bf16")}


def _algo_format(algo, group=128, zero_points=False) -> TensorFormat | None:
    """One quant_algo (with its group_size and has_zero_point) as a tensor format; None: unknown."""
    if algo in _GROUPED and isinstance(group, int) and not isinstance(group, bool) and 1 <= group <= 1 << 16:
        bits, compute = _GROUPED[algo]
        return TensorFormat(int_bits(bits, group, zero_points is True), f"int{bits}", compute)
    return _ALGO.get(algo) if isinstance(algo, str) else None


_SCALAR = (str, int, float, bool, type(None))


def _spec(spec) -> tuple:
    """(quant_algo, group_size, has_zero_point) of one layer spec, hashable (a list reads as None)."""
    if not isinstance(spec, dict):
        return None, None, None
    vals = spec.get("quant_algo"), spec.get("group_size", 128), spec.get("has_zero_point", False)
    return tuple(v if isinstance(v, _SCALAR) else None for v in vals)


def modelopt_format(q: dict, arch: Arch) -> WeightFormat:
    algo = q.get("quant_algo")
    ignore = patterns(q, "ignore", arch) + patterns(q, "exclude_modules", arch)
    # MTP layers: "mtp*" (Qwen) or the layer after the last decoder layer (DeepSeek's layer 61)
    mtp_out = any(p.startswith(("mtp", f"model.layers.{len(arch.layers)}")) for p in ignore)
    if f := _algo_format(*_spec(q)):
        return WeightFormat(f"{f.kernel} (config)", f.bits, 16.0, f.compute, kernel=f.kernel, ignore=ignore,
                            mtp_bits=16.0 if mtp_out else None, source=f"modelopt {algo}, exclusion list applied")
    layers = q.get("quantized_layers")
    if algo != "MIXED_PRECISION" or not isinstance(layers, dict) or not layers:
        raise DecodescopeError(f"{arch.source}: modelopt quant_algo={str(algo)[:40]!r} is not understood",
                               "pass the format with --weights")
    specs = [_spec(spec) for spec in layers.values()]
    fmts = {s: _algo_format(*s) for s in set(specs)}
    if bad := next((m for m, s in zip(layers, specs) if fmts[s] is None), None):
        raise DecodescopeError(f"{arch.source}: quant_algo of {bad} is not understood",
                               "pass the format with --weights")
    head = fmts[_spec(layers["lm_head"])] if "lm_head" in layers else BF16
    # MiniMax-M3 lists 21,888 modules: one regex pass over all names and a C-level count, not a
    # Python loop per name (~40 ms)
    keys = _NUMBERS.sub(".0.", "\n".join(layers)).split("\n")
    votes = {}
    for (key, spec), n in Counter(zip(keys, specs)).items():
        if key != "lm_head":
            votes.setdefault(key, {})[fmts[spec]] = n
    # one entry per module of a layer (not per layer: MiniMax-M3 lists 21,888), the format
    # most layers give it; the most specific (longest) name is tried first
    per = {_layer_key(k): max(fs, key=fs.get) for k, fs in votes.items()}
    top = max(per.values(), key=lambda f: f.bits)
    return WeightFormat("mixed (config)", top.bits, head.bits, top.compute, kernel=top.kernel,
                        per_tensor=tuple(sorted(per.items(), key=lambda kv: (-len(kv[0]), kv[0]))),
                        mtp_bits=16.0 if mtp_out else None,
                        source="modelopt MIXED_PRECISION quantized_layers: FP8 = 8, MXFP8 = 8.25, NVFP4 = 4.5 bits, "
                               "INT4 AWQ = 4 + 16 / group_size")


_NUMBERS = re.compile(r"\.\d+\.")
_EXPERT_W = {"1": "gate_proj", "2": "down_proj", "3": "up_proj"}  # Mixtral-style w1/w2/w3


def _layer_key(module: str) -> str:
    """A quantized_layers module name as the pattern of the tensor in every layer:
    "language_model.model.layers.3.block_sparse_moe.experts.7.w1" ->
    "model.layers.0.mlp.experts.0.gate_proj" (module_names' spelling)."""
    m = re.match(r"^.*?layers\.\d+\.(\w+)\.(.*)$", module)
    if not m:
        return module
    block, rest = m.groups()
    rest = re.sub(r"^experts\.\d+\.w([123])$", lambda e: f"experts.0.{_EXPERT_W[e[1]]}", rest)
    rest = re.sub(r"^shared_expert\.", "shared_experts.", rest)
    block = "mlp" if block == "block_sparse_moe" else block
    # other blocks (Nemotron-H's mixer) are matched by the module's own name
    return f"model.layers.0.{block}.{rest}" if block in ("self_attn", "linear_attn", "mlp") else rest


# AMD Quark element dtypes -> (bits, kernel family, dtype its matmul runs in when activations match)
_QUARK = {"fp8_e4m3": (8, "fp8"), "fp8_e5m2": (8, "fp8"), "fp4": (4, "mxfp4"), "fp6_e3m2": (6, "mxfp6"),
          "fp6_e2m3": (6, "mxfp6"), "int8": (8, "int8"), "uint8": (8, "int8"), "int4": (4, "int4"), "uint4": (4, "int4")}


def _quark_spec(spec, arch: Arch) -> TensorFormat:
    """One Quark layer config {weight, input_tensors} -> its tensors' format. A list of weight specs
    is a staged recipe (FP8 then INT4); the last stage is what the checkpoint stores."""
    w, a = spec.get("weight"), spec.get("input_tensors") or {}
    w = w[-1] if isinstance(w, list) and w else w
    if not isinstance(w, dict) or w.get("dtype") not in _QUARK or not isinstance(a, dict):
        raise DecodescopeError(f"{arch.source}: Quark weight dtype {w.get('dtype') if isinstance(w, dict) else w!r} "
                               "is not understood", f"pass the format with --weights ({' '.join(NAMES)})")
    bits, kernel = _QUARK[w["dtype"]]
    group = w.get("group_size") if w.get("qscheme") == "per_group" else -1
    if kernel.startswith("mx") or kernel == "fp8" and group == 32:  # OCP MX: one e8m0 scale per 32
        bits, kernel = bits + 8 / 32, "mxfp8" if kernel == "fp8" else kernel
    elif kernel in ("int4", "int8"):  # fp16 scale per group (+ a zero point when unsigned / asymmetric)
        bits = int_bits(bits, group or -1, w["dtype"].startswith("u") or w.get("symmetric") is False)
    act = _QUARK.get(a.get("dtype"), (16, ""))[1]  # FP8 x FP8, MXFP4 x MXFP4, INT8 x INT8 run low-precision math
    compute = {("fp8", "fp8"): "fp8", ("mxfp8", "fp8"): "fp8", ("mxfp4", "mxfp4"): "fp4",
               ("int8", "int8"): "int8"}.get((kernel, act), "bf16")
    return TensorFormat(float(bits), kernel, compute)


def quark_format(q: dict, arch: Arch) -> WeightFormat:
    """AMD Quark: global_quant_config for every linear layer, layer_quant_config by module-name
    glob (vLLM quark.py _find_matched_config: fnmatch), exclude by name or "re:" (should_ignore_layer)."""
    glob, layers = q.get("global_quant_config") or {}, q.get("layer_quant_config") or {}
    if not isinstance(glob, dict) or not isinstance(layers, dict):
        raise DecodescopeError(f"{arch.source}: Quark global_quant_config / layer_quant_config is malformed",
                               "pass the format with --weights")
    per = [(pat, _quark_spec(spec, arch)) for pat, spec in layers.items() if isinstance(spec, dict)]
    base = _quark_spec(glob, arch) if glob.get("weight") else BF16
    per += [("re:.*", base)]
    return WeightFormat(f"quark {base.kernel} (config)", base.bits, 16.0, base.compute, kernel=base.kernel,
                        per_tensor=tuple(per), ignore=patterns(q, "exclude", arch),
                        source="AMD Quark global / layer_quant_config / exclude")


# torchao config classes (config.json "quant_type": {"default": {"_type": ..., "_data": ...}}) ->
# (bits of the weights, kernel family, matmul dtype); int4 adds a bf16 scale and zero point per group
_TORCHAO = {"Int4WeightOnlyConfig": (4, "int4", "bf16"), "Int8WeightOnlyConfig": (8, "int8", "bf16"),
            "Int8DynamicActivationInt8WeightConfig": (8, "int8", "int8"), "Float8WeightOnlyConfig": (8, "fp8", "bf16"),
            "Float8DynamicActivationFloat8WeightConfig": (8, "fp8", "fp8")}


def torchao_format(q: dict, arch: Arch) -> WeightFormat:
    """torchao (https://docs.pytorch.org/ao/stable/torchao_vllm_integration.html): one config for
    every linear layer; per-module configs (ModuleFqnToConfig) are not modelled."""
    qt = q.get("quant_type")
    spec = qt.get("default") if isinstance(qt, dict) and set(qt) == {"default"} else None
    kind = spec.get("_type") if isinstance(spec, dict) else None
    if not isinstance(kind, str) or kind not in _TORCHAO:
        raise DecodescopeError(f"{arch.source}: torchao quant_type {kind or qt!r} is not modelled",
                               f"pass the format with --weights ({' '.join(NAMES)})")
    bits, kernel, compute = _TORCHAO[kind]
    data = spec.get("_data") if isinstance(spec.get("_data"), dict) else {}
    group = data.get("group_size") or 128 if bits == 4 else -1
    b = bits + 32 / group if bits == 4 else float(bits)  # tinygemm: bf16 scale + bf16 zero per group
    return WeightFormat(f"torchao {kind} (config)", b, 16.0, compute, kernel=kernel,
                        ignore=patterns(q, "modules_to_not_convert", arch), source=f"torchao {kind}")
