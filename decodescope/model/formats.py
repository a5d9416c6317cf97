"""Weight formats: the true bits per weight each tensor is stored in, scales included,
and which tensors a format leaves in 16 bits."""

import re
from dataclasses import dataclass, replace

from decodescope.arch import Arch, Tensor
from decodescope.errors import DecodescopeError


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: float  # bits per weight of a converted linear weight, group scales included
    head_bits: float  # the LM head's bits (most formats keep it 16-bit)
    compute: str  # dtype whose tensor FLOP/s run the matmul: weight-only formats compute in bf16
    experts_only: bool = False  # only routed experts are converted (MXFP4 as gpt-oss ships it)
    per_tensor: tuple[tuple[str, float], ...] = ()  # mixed-precision checkpoints: module -> bits
    mtp_bits: float | None = None  # bits of MTP layers when the checkpoint leaves them out
    source: str = ""

    def tensor_bits(self, t: Tensor, mtp: bool = False) -> float:
        """Bits per weight of tensor `t` of a decoder (or MTP, if `mtp`) layer."""
        if not t.linear:
            return 16.0  # norms, biases, routers, convs, A_log: kept in the checkpoint dtype
        if mtp and self.mtp_bits is not None:
            return self.mtp_bits
        if t.name == "lm_head":
            return self.head_bits
        if self.per_tensor:
            return next((b for key, b in self.per_tensor if _matches(t.name, key)), 16.0)
        if self.experts_only and t.experts == 1:
            return 16.0
        return self.bits

    def to_dict(self) -> dict:
        return {"name": self.name, "bits": self.bits, "head_bits": self.head_bits,
                "compute": self.compute, "source": self.source}


def _matches(name: str, key: str) -> bool:
    # fused tensors: our gate_up_proj holds the checkpoint's gate_proj and up_proj
    fused = name.replace("gate_up_proj", "gate_proj")
    return name == key or fused == key or name.startswith(key + ".")


_LLAMA_CPP = "llama.cpp k-quants (ggml-quants.h block layouts; PR #1684)"
# name -> (bits, head_bits, compute, source)
FORMATS = {
    "bf16": (16.0, 16.0, "bf16", "2 bytes per weight"),
    "fp16": (16.0, 16.0, "fp16", "2 bytes per weight"),
    "fp32": (32.0, 32.0, "bf16", "4 bytes per weight"),
    # per-channel / 128x128-block fp32 scales add < 0.01 bit; serving engines keep lm_head bf16
    "fp8": (8.0, 16.0, "fp8", "e4m3 weights + per-channel or 128x128 block scales"),
    "int8": (8.0, 16.0, "bf16", "int8 weight-only (W8A16) + per-channel scales"),
    # e4m3 scale per 16 weights (0.5 bit) + one fp32 per tensor
    "nvfp4": (4.5, 16.0, "fp4", "NVFP4: e2m1 + e4m3 scale per 16 (NVIDIA Blackwell docs)"),
    # e8m0 scale per 32 weights (0.25 bit)
    "mxfp4": (4.25, 16.0, "fp4", "OCP MX spec: e2m1 + e8m0 scale per 32"),
    "q4_k_m": (4.85, 6.5625, "fp16", f"mix of Q4_K (4.5 bpw) and Q6_K, output.weight Q6_K; {_LLAMA_CPP}"),
    "q5_k_m": (5.69, 6.5625, "fp16", f"mix of Q5_K (5.5 bpw) and Q6_K, output.weight Q6_K; {_LLAMA_CPP}"),
    "q6_k": (6.5625, 6.5625, "fp16", f"Q6_K: 210 bytes per 256 weights; {_LLAMA_CPP}"),
    "q8_0": (8.5, 8.5, "fp16", f"Q8_0: 32 int8 + one fp16 scale per 32; {_LLAMA_CPP}"),
}
NAMES = (*FORMATS, "int4-gN", "bpw:X")


def parse_format(spec: str, arch: Arch | None = None) -> WeightFormat:
    """`bf16 fp16 fp8 int8 int4-gN nvfp4 mxfp4 q4_k_m q5_k_m q6_k q8_0 bpw:X`."""
    s = spec.strip().lower()
    if s in FORMATS:
        bits, head, compute, source = FORMATS[s]
        # MXFP4 checkpoints (gpt-oss) convert only the routed experts
        return WeightFormat(s, bits, head, compute, experts_only=s == "mxfp4" and bool(arch and arch.is_moe),
                            source=source)
    if m := re.fullmatch(r"int4-g(\d+)", s):
        g = int(m[1])  # one 16-bit scale per group of g weights
        return WeightFormat(s, 4 + 16 / g, 16.0, "bf16", source=f"4-bit weights + fp16 scale per {g}")
    if m := re.fullmatch(r"bpw:(\d+(?:\.\d+)?)", s):
        b = float(m[1])  # e.g. EXL2's average bits per weight: applies to every weight read
        return WeightFormat(s, b, b, "bf16", source="user-given average bits per weight")
    raise DecodescopeError(f"unknown weight format '{spec}'", f"use one of: {' '.join(NAMES)}")


def config_format(arch: Arch) -> WeightFormat:
    """The weight format the checkpoint itself is stored in (its quantization_config)."""
    q = arch.quantization
    if not q:
        return parse_format(arch.dtype, arch)
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return parse_format("fp8", arch)
    if method == "mxfp4":
        return parse_format("mxfp4", arch)
    if method in ("gptq", "awq", "auto-round") and q.get("bits") == 4:
        return parse_format(f"int4-g{q.get('group_size', 128)}", arch)
    if method == "modelopt":
        return _modelopt(q, arch)
    raise DecodescopeError(f"{arch.source}: quantization_config quant_method={method!r} is not understood",
                           f"pass the format with --weights ({' '.join(NAMES)})")


_ALGO_BITS = {"FP8": 8.0, "NVFP4": 4.5, "W4A16_NVFP4": 4.5, "W4A8_NVFP4_FP8": 4.5}


def _modelopt(q: dict, arch: Arch) -> WeightFormat:
    algo = q.get("quant_algo")
    if algo in _ALGO_BITS:
        base = parse_format("fp8" if algo == "FP8" else "nvfp4", arch)
        return replace(base, name=f"{base.name} (config)")
    if algo != "MIXED_PRECISION" or not q.get("quantized_layers"):
        raise DecodescopeError(f"{arch.source}: modelopt quant_algo={algo!r} is not understood",
                               "pass the format with --weights")
    per, head = {}, 16.0
    for module, spec in q["quantized_layers"].items():
        bits = _ALGO_BITS.get(spec.get("quant_algo"))
        if bits is None:
            raise DecodescopeError(f"{arch.source}: quant_algo {spec.get('quant_algo')!r} of {module} unknown",
                                   "pass the format with --weights")
        if module == "lm_head":
            head = bits
            continue
        # "model.language_model.layers.3.self_attn.q_proj" -> "q_proj"; "...mlp.experts" -> "experts"
        key = re.sub(r"^.*?layers\.\d+\.(self_attn|linear_attn|mlp|mixer)\.", "", module)
        per[key] = bits
    ignored_mtp = any(p.startswith("mtp") for p in q.get("ignore", []))
    return WeightFormat("mixed (config)", max(per.values()), head, "bf16",
                        per_tensor=tuple(sorted(per.items())), mtp_bits=16.0 if ignored_mtp else None,
                        source="modelopt MIXED_PRECISION quantized_layers: FP8 = 8, NVFP4 = 4.5 bits")
