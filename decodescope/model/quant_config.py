"""A checkpoint's own weight format, read from its quantization_config: which tensors each
quantizer converts, to how many bits (scales included), matched the way the engines match."""

from dataclasses import replace

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import NAMES, TensorFormat, WeightFormat, parse_format
from decodescope.model.gguf_weights import gguf_format
from decodescope.model.quant_patterns import by_layer, experts_at, int_bits, int_field, patterns
from decodescope.model.quant_vendor import modelopt_format, quark_format, torchao_format


def config_format(arch: Arch) -> WeightFormat:
    """The weight format the checkpoint itself is stored in (its quantization_config)."""
    f = _read(arch)
    return replace(f, experts_at=experts_at(arch)) if experts_at(arch) != f.experts_at else f


def _read(arch: Arch) -> WeightFormat:
    q = arch.quantization
    if not q:
        return parse_format(arch.dtype, arch)
    method = str(q.get("quant_method", "")).lower()
    if method in ("fp8", "mxfp4", "mxfp8"):
        # transformers writes modules_to_not_convert, vLLM's Fp8Config reads ignored_layers
        ignore = patterns(q, "modules_to_not_convert", arch) + patterns(q, "ignored_layers", arch)
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
        return modelopt_format(q, arch)
    if method == "fbgemm_fp8":  # Meta's FP8 (Llama 3.1 405B): e4m3 + one fp32 scale per row, FP8 math
        return replace(parse_format("fp8", arch), name="fbgemm_fp8 (config)", kernel="fp8",
                       ignore=patterns(q, "modules_to_not_convert", arch), source="fbgemm_fp8: e4m3 + scale per row")
    if method == "gguf":  # a GGUF file read as the model (arch/gguf_config.py): its own tensor types
        return gguf_format(q["file"], arch)
    if method == "quark":
        return quark_format(q, arch)
    if method == "torchao":
        return torchao_format(q, arch)
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


def _intn(q: dict, method: str, arch: Arch) -> WeightFormat:
    bits = int_field(q, "bits", 4, 2, 8, arch)
    group = int_field(q, "group_size", 128, 1, 1 << 16, arch)
    # AWQ always stores zero points; GPTQ only when asymmetric (sym: false)
    zeros = "awq" in method or q.get("zero_point") is True or q.get("sym") is False
    b = int_bits(bits, group, zeros)
    kernel = "int8" if bits == 8 else "int4"  # Marlin / Machete weight-only kernels, bf16 math
    return WeightFormat(f"int{bits}-g{group}{'-zp' if zeros else ''} (config)", b, 16.0, "bf16", kernel=kernel,
                        ignore=patterns(q, "modules_to_not_convert", arch, "sub:" if "awq" in method else "")
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
    return by_layer(tuple("re:" + k[2:] for k in dyn if k.startswith("-:")), arch)


def _bitsandbytes(q: dict, arch: Arch) -> WeightFormat:
    ignore = patterns(q, "llm_int8_skip_modules", arch, "part:")
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
    ignore = patterns(q, "modules_to_not_convert", arch)
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
    bits = int_field(w, "num_bits", 8, 2, 16, arch)
    kind, act_bits = w.get("type", "int"), a.get("num_bits")
    # MX formats (group_size 32, e8m0 scales: "mxfp4-pack-quantized") add 8/32 bit, NVFP4 (e4m3
    # per 16) 8/16 bit, FP8 per-channel / 128x128-block scales < 0.01 bit; W4A4 / W8A8 run FP4 / FP8 math
    mx = w.get("group_size") == 32
    if kind == "float" and bits == 4:
        return TensorFormat(4.25 if mx else 4.5, "mxfp4" if mx else "nvfp4", "fp4" if act_bits == 4 else "bf16")
    if kind == "float" and bits == 8:
        return TensorFormat(8.25 if mx else 8.0, "mxfp8" if mx else "fp8", "fp8" if act_bits == 8 else "bf16")
    group = int_field(w, "group_size", -1, 1, 1 << 16, arch) if w.get("strategy") == "group" else -1
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
                        per_tensor=tuple(per), ignore=patterns(q, "ignore", arch), kernel=top.kernel,
                        source="compressed-tensors config_groups / targets / ignore")
