"""A checkpoint's own weight format, read from its quantization_config: which tensors each
quantizer converts, to how many bits (scales included), matched the way the engines match."""

import re
from collections import Counter
from dataclasses import replace

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import BF16, NAMES, TensorFormat, WeightFormat, _matches, module_names, parse_format
from decodescope.model.gguf_weights import gguf_format


def config_format(arch: Arch) -> WeightFormat:
    """The weight format the checkpoint itself is stored in (its quantization_config)."""
    f = _read(arch)
    return replace(f, experts_at=_experts_at(arch)) if _experts_at(arch) != f.experts_at else f


def _experts_at(arch: Arch) -> str:
    # Gemma 4 keeps its routed experts beside the dense MLP (model.layers.N.experts, .router, .mlp:
    # nvidia/Gemma-4-26B-A4B-NVFP4 ignores "layers.N.mlp*" and "layers.N.router*" but not the experts)
    return "experts.0" if arch.model_type.startswith("gemma4") else "mlp.experts.0"


def _read(arch: Arch) -> WeightFormat:
    q = arch.quantization
    if not q:
        return parse_format(arch.dtype, arch)
    method = str(q.get("quant_method", "")).lower()
    if method in ("fp8", "mxfp4", "mxfp8"):
        # transformers writes modules_to_not_convert, vLLM's Fp8Config reads ignored_layers
        ignore = _patterns(q, "modules_to_not_convert", arch) + _patterns(q, "ignored_layers", arch)
        f = replace(parse_format(method, arch), ignore=ignore)
        return _fp4_experts(f, q) if q.get("expert_dtype") == "fp4" else f
    if method in ("gptq", "awq", "auto-round", "gptq_marlin", "awq_marlin"):
        return _intn(q, method, arch)
    if method == "bitsandbytes":
        return _bitsandbytes(q, arch)
    if method == "bitnet":
        return _bitnet(q, arch)
    if method in ("exl2", "exl3"):
        return _exllama(q, method, arch)
    if method == "compressed-tensors":
        return _compressed_tensors(q, arch)
    if method == "modelopt":
        return _modelopt(q, arch)
    if method == "fbgemm_fp8":  # Meta's FP8 (Llama 3.1 405B): e4m3 + one fp32 scale per row, FP8 math
        return replace(parse_format("fp8", arch), name="fbgemm_fp8 (config)", kernel="fp8",
                       ignore=_patterns(q, "modules_to_not_convert", arch), source="fbgemm_fp8: e4m3 + scale per row")
    if method == "gguf":  # a GGUF file read as the model (arch/gguf_config.py): its own tensor types
        return gguf_format(q["file"], arch)
    if method == "quark":
        return _quark(q, arch)
    if method == "torchao":
        return _torchao(q, arch)
    if not method and isinstance(q.get("bits"), int) and isinstance(q.get("group_size"), int):
        return _mlx(q, arch)
    raise DecodescopeError(f"{arch.source}: quantization_config quant_method={method!r} is not understood",
                           f"pass the format with --weights ({' '.join(NAMES)})")


def _mlx(q: dict, arch: Arch) -> WeightFormat:
    """mlx-lm's affine quantization ({"group_size": 64, "bits": 4}, no quant_method): each
    group of group_size weights keeps a 16-bit scale and a 16-bit bias (mlx.core.quantize)."""
    bits, group = q["bits"], q["group_size"]
    if not 1 <= bits <= 8 or not 1 <= group <= 1 << 16:
        raise DecodescopeError(f"{arch.source}: MLX quantization of {bits} bits per group of {group}",
                               "bits 1 to 8, a positive group size")
    bpw = bits + 32 / group
    return replace(parse_format(f"bpw:{bpw:g}", arch), name=f"mlx int{bits}-g{group} (config)",
                   source=f"MLX affine: {bits}-bit weights + 16-bit scale and bias per {group} = {bpw:g} bpw")


def _fp4_experts(f: WeightFormat, q: dict) -> WeightFormat:
    """DeepSeek-V4 (expert_dtype fp4): routed experts FP4, every other linear block FP8.
    DeepSeek's own checkpoint stores e2m1 with one ue8m0 scale per 32 (MXFP4, 4.25 bits; its
    inference/model.py, vLLM's Mxfp4 MoE method); NVIDIA's moe_quant_algo NVFP4 re-quantization
    stores e2m1 with an e4m3 scale per 16 (4.5 bits)."""
    nv = q.get("moe_quant_algo") == "NVFP4"
    experts = TensorFormat(4.5, "nvfp4", "fp4") if nv else TensorFormat(4.25, "mxfp4", "fp4")
    return replace(f, name=f"fp8 + {experts.kernel} experts (config)", kernel="fp8",
                   per_tensor=((r"re:.*\.mlp\.experts\.", experts), ("re:.*", f.base)),
                   source=f"{f.source}; routed experts {'NVFP4' if nv else 'MXFP4'} (expert_dtype fp4)")


def _patterns(q: dict, key: str, arch: Arch, mark: str = "") -> tuple[str, ...]:
    """An exclusion list; `mark` names the engine's way of matching it (see _matches)."""
    v = q.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise DecodescopeError(f"{arch.source}: quantization_config {key} is not a list of module names",
                               "fix the config, or pass the format with --weights")
    return _by_layer(tuple(mark + _MULTIMODAL.sub("model.", x) for x in v), arch)


# multimodal checkpoints name their decoder "model.language_model.layers.N" or
# "language_model.model.layers.N"; engines map those names onto the text model's (vLLM's
# hf_to_vllm_mapper, applied to exclusion lists too), as module_names spells them
_MULTIMODAL = re.compile(r"^(?:model\.language_model|language_model\.model|language_model)\.(?=layers\.)")
_LAYER_N = re.compile(r"layers\.(\d+)(?=\.|\*|$)")


def _by_layer(patterns: tuple[str, ...], arch: Arch) -> tuple[str, ...]:
    """Exclusion patterns that name one layer ("model.layers.0*", "model.layers.5.self_attn*")
    apply to that layer only, as engines match them against each module's full name (vLLM's
    is_layer_skipped, fnmatch per prefix); the format is one per tensor name, so a tensor stays
    16-bit ("=NAME") when most layers holding it exclude it. nvidia/GLM-5.1-NVFP4 excludes whole
    layers 0-2 (its dense MLPs) and self_attn / shared_experts in every other layer."""
    regex = tuple(p for p in patterns if p.startswith("re:") and "layers" in p)  # e.g. GPTQ's dynamic "-:"
    plain = tuple(p for p in patterns if p not in regex and (p.startswith("re:") or not _LAYER_N.search(p)))
    named = {}
    for p in patterns:
        if p not in plain and p not in regex:
            named.setdefault(int(_LAYER_N.search(p)[1]), []).append(_LAYER_N.sub("layers.0", p))
    if not named and not regex:
        return patterns
    held, out, seen, at = {}, {}, {}, _experts_at(arch)
    for i, layer in enumerate(arch.layers):
        pats = tuple(sorted(set(named.get(i, ()))))  # one key per pattern set, however the config orders it
        for t in layer.tensors():
            if t.linear:
                held[t.name] = held.get(t.name, 0) + 1
                if (t, pats) not in seen:  # most layers repeat one pattern set: match it once
                    seen[t, pats] = any(_matches(n, p) for n in module_names(t, at) for p in pats)
                hit = seen[t, pats] or bool(regex) and any(
                    _matches(n.replace("layers.0.", f"layers.{i}."), p) for n in module_names(t, at)
                    if n.startswith("model.layers.") for p in regex)
                out[t.name] = out.get(t.name, 0) + hit
    # layers past the decoder (DeepSeek's MTP layer 61) stay named: they mark the MTP layers out
    past = tuple(p for p in patterns if p not in plain + regex and int(_LAYER_N.search(p)[1]) >= len(arch.layers))
    return plain + past + tuple(f"={n}" for n, c in out.items() if 2 * c > held[n])


def _int_field(q: dict, key: str, default, lo: int, hi: int, arch: Arch) -> int:
    v = q.get(key, default)
    # group_size -1: one scale per output channel; no other field takes -1 (bits -1 gave negative bytes)
    if isinstance(v, bool) or not isinstance(v, int) or not (lo <= v <= hi or v == -1 and key == "group_size"):
        raise DecodescopeError(f"{arch.source}: quantization_config {key}={v!r} is not an integer from {lo} to {hi}",
                               "fix the config, or pass the format with --weights")
    return v


def int_bits(bits: int, group: int, zero_points: bool) -> float:
    """True bits per weight of an integer group format: the weights, one fp16 scale per group
    and, if asymmetric, one `bits`-wide zero point per group (GPTQ/AWQ pack them as qzeros).
    group -1: one scale per output channel, under 0.01 bit."""
    return float(bits) if group == -1 else bits + (16 + (bits if zero_points else 0)) / group


def _intn(q: dict, method: str, arch: Arch) -> WeightFormat:
    bits = _int_field(q, "bits", 4, 2, 8, arch)
    group = _int_field(q, "group_size", 128, 1, 1 << 16, arch)
    # AWQ always stores zero points; GPTQ only when asymmetric (sym: false)
    zeros = "awq" in method or q.get("zero_point") is True or q.get("sym") is False
    b = int_bits(bits, group, zeros)
    kernel = "int8" if bits == 8 else "int4"  # Marlin / Machete weight-only kernels, bf16 math
    return WeightFormat(f"int{bits}-g{group}{'-zp' if zeros else ''} (config)", b, 16.0, "bf16", kernel=kernel,
                        ignore=_patterns(q, "modules_to_not_convert", arch, "sub:" if "awq" in method else "")
                        + _gptq_skipped(q, arch),
                        source=f"{method}: {bits}-bit + fp16 scale{' + zero point' if zeros else ''} per {group}")


def _gptq_skipped(q: dict, arch: Arch) -> tuple[str, ...]:
    """GPTQModel's per-module "dynamic" rules: "-:REGEX" leaves the modules it matches (re.match on
    the full name) unquantized; "+:REGEX" with other bits or group size is not modelled."""
    dyn = q.get("dynamic") or {}
    if not isinstance(dyn, dict) or any(not k.startswith("-:") and isinstance(v, dict) and
                                        ({"bits", "group_size"} & set(v)) for k, v in dyn.items()):
        raise DecodescopeError(f"{arch.source}: GPTQ dynamic rules that change bits per module are not modelled",
                               "pass the format with --weights (e.g. bpw:X with the checkpoint's average)")
    return _by_layer(tuple("re:" + k[2:] for k in dyn if k.startswith("-:")), arch)


def _bitsandbytes(q: dict, arch: Arch) -> WeightFormat:
    ignore = _patterns(q, "llm_int8_skip_modules", arch, "part:")
    if q.get("load_in_4bit"):
        # bitsandbytes 4-bit: one absmax per 64 weights, fp32 (0.5 bit) or, double-quantised,
        # int8 with one fp32 scale per 256 absmax (8/64 + 32/16384 bit)
        scale = 8 / 64 + 32 / (64 * 256) if q.get("bnb_4bit_use_double_quant") else 32 / 64
        kind = q.get("bnb_4bit_quant_type", "fp4")
        return WeightFormat(f"bnb-{kind} (config)", 4 + scale, 16.0, "bf16", kernel="int4", ignore=ignore,
                            source="bitsandbytes 4-bit: absmax per 64 (double quant: int8 absmax)")
    if q.get("load_in_8bit"):  # LLM.int8(): int8 rows + one fp32 scale per row
        return WeightFormat("bnb-int8 (config)", 8.0, 16.0, "bf16", kernel="int8", ignore=ignore,
                            source="bitsandbytes LLM.int8(): int8 + per-row scale")
    raise DecodescopeError(f"{arch.source}: bitsandbytes config loads neither 4-bit nor 8-bit",
                           "pass the format with --weights")


def _exllama(q: dict, method: str, arch: Arch) -> WeightFormat:
    """ExLlamaV2's EXL2 / ExLlamaV3's EXL3 (the quantization_config their converters write:
    {"quant_method": "exl2", "bits": 4.25, "head_bits": 6, ...}): `bits` is the average bits per
    weight of the converted linear layers, scales included (EXL2 mixes 2- to 8-bit groups to reach
    it, EXL3's trellis codes that many bits a weight), `head_bits` the LM head's (16 where absent);
    the embedding stays 16-bit. Both run fp16 math."""
    bits, head = q.get("bits"), q.get("head_bits", 16)
    for key, v in (("bits", bits), ("head_bits", head)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 1 <= v <= 16:
            raise DecodescopeError(f"{arch.source}: quantization_config {key}={v!r} is not a bit width from 1 to 16",
                                   "fix the config, or pass the format with --weights")
    return WeightFormat(f"{method} {bits:g} bpw (config)", float(bits), float(head), "fp16", kernel=method,
                        source=f"{method.upper()}: {bits:g} bits per weight on average, LM head {head:g} bits")


def _bitnet(q: dict, arch: Arch) -> WeightFormat:
    """BitNet b1.58 (transformers' integrations/bitnet.py): "offline" checkpoints pack four
    ternary weights in a byte (2 bits a weight) with one scale per tensor, unpacked to 16 bits
    for the matmul; "online" ones store 16-bit masters and ternarize them on every forward, so
    a pass reads 16 bits a weight. lm_head stays 16-bit (modules_to_not_convert)."""
    mode = q.get("quantization_mode", "offline")
    if mode not in ("offline", "online"):
        raise DecodescopeError(f"{arch.source}: bitnet quantization_mode {str(mode)[:20]!r} is neither offline nor online",
                               "fix quantization_mode")
    ignore = _patterns(q, "modules_to_not_convert", arch)
    if mode == "online":
        return replace(parse_format(arch.dtype, arch), name="bitnet online (config)", ignore=ignore,
                       source="BitNet online: 16-bit master weights, ternarized in every forward")
    return WeightFormat("bitnet (config)", 2.0, 16.0, "bf16", kernel="ternary", ignore=ignore,
                        source="BitNet offline: ternary weights packed 4 to a byte + one scale per tensor")


def _ct_group(spec: dict, arch: Arch) -> TensorFormat:
    """compressed-tensors config group -> the format of the tensors it targets."""
    w, a = spec.get("weights") or {}, spec.get("input_activations") or {}
    if not isinstance(w, dict) or not isinstance(a, dict):
        raise DecodescopeError(f"{arch.source}: a compressed-tensors config group is malformed",
                               "pass the format with --weights")
    bits = _int_field(w, "num_bits", 8, 2, 16, arch)
    kind, act_bits = w.get("type", "int"), a.get("num_bits")
    # MX formats (group_size 32, e8m0 scales: "mxfp4-pack-quantized") add 8/32 bit, NVFP4 (e4m3
    # per 16) 8/16 bit, FP8 per-channel / 128x128-block scales < 0.01 bit; W4A4 / W8A8 run FP4 / FP8 math
    mx = w.get("group_size") == 32
    if kind == "float" and bits == 4:
        return TensorFormat(4.25 if mx else 4.5, "mxfp4" if mx else "nvfp4", "fp4" if act_bits == 4 else "bf16")
    if kind == "float" and bits == 8:
        return TensorFormat(8.25 if mx else 8.0, "mxfp8" if mx else "fp8", "fp8" if act_bits == 8 else "bf16")
    group = _int_field(w, "group_size", -1, 1, 1 << 16, arch) if w.get("strategy") == "group" else -1
    b = int_bits(bits, group if group else -1, w.get("symmetric") is False)
    return TensorFormat(b, "int8" if bits == 8 else "int4", "int8" if bits == 8 and act_bits == 8 else "bf16")


def _compressed_tensors(q: dict, arch: Arch) -> WeightFormat:
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise DecodescopeError(f"{arch.source}: compressed-tensors config without config_groups",
                               "pass the format with --weights")
    sparse = q.get("sparsity_config") or {}
    if isinstance(sparse, dict) and sparse.get("format") not in (None, "dense"):
        # 2:4 sparse storage (sparse-24-bitmask) keeps half the values plus a mask: not modelled
        raise DecodescopeError(f"{arch.source}: compressed-tensors sparsity_config format "
                               f"{sparse.get('format')!r} (structured sparse weights) is not modelled",
                               "pass the average bits per weight the engine reads with --weights bpw:X")
    per = []
    for name, spec in groups.items():
        targets = (spec.get("targets") or ["Linear"]) if isinstance(spec, dict) else None
        if not isinstance(targets, list):
            raise DecodescopeError(f"{arch.source}: compressed-tensors config group {name!r} is not an object "
                                   "with a list of targets", "pass the format with --weights")
        f = _ct_group(spec, arch)
        # "Linear" targets every linear layer; other targets are module names or re: patterns
        per += [(".*" if t == "Linear" else t, f) for t in targets if isinstance(t, str)]
    per = [("re:.*" if p == ".*" else p, f) for p, f in per]
    top = per[0][1]
    head = top.bits if any(p == "lm_head" for p, _ in per) else 16.0
    return WeightFormat(f"compressed-tensors {top.kernel} (config)", top.bits, head, top.compute,
                        per_tensor=tuple(per), ignore=_patterns(q, "ignore", arch), kernel=top.kernel,
                        source="compressed-tensors config_groups / targets / ignore")


_ALGO = {"FP8": TensorFormat(8.0, "fp8", "fp8"), "NVFP4": TensorFormat(4.5, "nvfp4", "fp4"),
         "MXFP8": TensorFormat(8.25, "mxfp8", "fp8"),
         "W4A16_NVFP4": TensorFormat(4.5, "nvfp4", "bf16"), "W4A8_NVFP4_FP8": TensorFormat(4.5, "nvfp4", "fp8")}


def _modelopt(q: dict, arch: Arch) -> WeightFormat:
    algo = q.get("quant_algo")
    ignore = _patterns(q, "ignore", arch) + _patterns(q, "exclude_modules", arch)
    # MTP layers: "mtp*" (Qwen) or the layer after the last decoder layer (DeepSeek's layer 61)
    mtp_out = any(p.startswith(("mtp", f"model.layers.{len(arch.layers)}")) for p in ignore)
    if isinstance(algo, str) and algo in _ALGO:
        f = _ALGO[algo]
        return WeightFormat(f"{f.kernel} (config)", f.bits, 16.0, f.compute, kernel=f.kernel, ignore=ignore,
                            mtp_bits=16.0 if mtp_out else None, source=f"modelopt {algo}, exclusion list applied")
    layers = q.get("quantized_layers")
    if algo != "MIXED_PRECISION" or not isinstance(layers, dict) or not layers:
        raise DecodescopeError(f"{arch.source}: modelopt quant_algo={algo!r} is not understood",
                               "pass the format with --weights")
    algos = [spec.get("quant_algo") if isinstance(spec, dict) else None for spec in layers.values()]
    if bad := next((m for m, a in zip(layers, algos) if not isinstance(a, str) or a not in _ALGO), None):
        raise DecodescopeError(f"{arch.source}: quant_algo of {bad} is not understood",
                               "pass the format with --weights")
    head = _ALGO[layers["lm_head"]["quant_algo"]] if "lm_head" in layers else BF16
    # MiniMax-M3 lists 21,888 modules: one regex pass over all names and a C-level count, not a
    # Python loop per name (~40 ms)
    keys = _NUMBERS.sub(".0.", "\n".join(layers)).split("\n")
    votes = {}
    for (key, algo), n in Counter(zip(keys, algos)).items():
        if key != "lm_head":
            votes.setdefault(key, {})[_ALGO[algo]] = n
    # one entry per module of a layer (not per layer: MiniMax-M3 lists 21,888), the format
    # most layers give it; the most specific (longest) name is tried first
    per = {_layer_key(k): max(fs, key=fs.get) for k, fs in votes.items()}
    top = max(per.values(), key=lambda f: f.bits)
    return WeightFormat("mixed (config)", top.bits, head.bits, top.compute, kernel=top.kernel,
                        per_tensor=tuple(sorted(per.items(), key=lambda kv: (-len(kv[0]), kv[0]))),
                        mtp_bits=16.0 if mtp_out else None,
                        source="modelopt MIXED_PRECISION quantized_layers: FP8 = 8, MXFP8 = 8.25, NVFP4 = 4.5 bits")


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


def _quark(q: dict, arch: Arch) -> WeightFormat:
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
                        per_tensor=tuple(per), ignore=_patterns(q, "exclude", arch),
                        source="AMD Quark global / layer_quant_config / exclude")


# torchao config classes (config.json "quant_type": {"default": {"_type": ..., "_data": ...}}) ->
# (bits of the weights, kernel family, matmul dtype); int4 adds a bf16 scale and zero point per group
_TORCHAO = {"Int4WeightOnlyConfig": (4, "int4", "bf16"), "Int8WeightOnlyConfig": (8, "int8", "bf16"),
            "Int8DynamicActivationInt8WeightConfig": (8, "int8", "int8"), "Float8WeightOnlyConfig": (8, "fp8", "bf16"),
            "Float8DynamicActivationFloat8WeightConfig": (8, "fp8", "fp8")}


def _torchao(q: dict, arch: Arch) -> WeightFormat:
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
                        ignore=_patterns(q, "modules_to_not_convert", arch), source=f"torchao {kind}")
