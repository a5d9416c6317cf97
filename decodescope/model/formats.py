"""Weight formats: the true bits per weight each tensor is stored in, scales included,
and which tensors a format leaves in 16 bits."""

import fnmatch
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from decodescope.arch import MLA, Arch, Tensor
from decodescope.errors import DecodescopeError


class TensorFormat(NamedTuple):
    """How one weight tensor is stored and multiplied."""
    bits: float  # bits per weight, scales and zero points included
    kernel: str  # the format whose kernels read it (engines.toml format_efficiency; "int4" = intN-gN)
    compute: str  # dtype whose tensor FLOP/s run its matmul


BF16 = TensorFormat(16.0, "bf16", "bf16")


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: float  # bits per weight of a converted linear weight, group scales included
    head_bits: float  # the LM head's bits (most formats keep it 16-bit)
    compute: str  # dtype whose tensor FLOP/s run the matmul: weight-only formats compute in bf16
    scope: str = "all"  # which linear tensors are converted: all | mlp (MLP and experts) | experts
    # mixed-precision / config-derived checkpoints: (module pattern, TensorFormat); first match wins
    per_tensor: tuple[tuple[str, TensorFormat], ...] = ()
    ignore: tuple[str, ...] = ()  # module patterns left in 16 bits (a checkpoint's exclusion list)
    mtp_bits: float | None = None  # bits of MTP layers when the checkpoint leaves them out
    kernel: str = ""  # engines.toml format_efficiency key of its kernels (default: name)
    source: str = ""

    def __post_init__(self):  # the tensor_format cache hashes the format per tensor per estimate
        object.__setattr__(self, "_names", frozenset(p[1:] for p in self.ignore if p.startswith("=")))
        object.__setattr__(self, "_hash", hash((self.name, self.bits, self.head_bits, self.compute, self.scope,
                                                self.per_tensor, self.ignore, self.mtp_bits, self.kernel,
                                                self.source)))

    def __hash__(self) -> int:  # equal formats have equal fields, hence equal hashes
        return self._hash

    @property
    def base(self) -> TensorFormat:
        return TensorFormat(self.bits, self.kernel or self.name, self.compute)

    # pure in (format, tensor, mtp), asked for every tensor of every estimate; a bounded
    # cache of small values, so lru_cache's hold on `self` costs nothing
    @lru_cache(maxsize=4096)  # noqa: B019
    def tensor_format(self, t: Tensor, mtp: bool = False) -> TensorFormat:
        """Bits, kernel and compute dtype of tensor `t` of a decoder (or MTP, if `mtp`) layer."""
        if not t.linear or (mtp and self.mtp_bits == 16.0):
            return BF16  # norms, biases, routers, convs, A_log: kept in the checkpoint dtype
        if t.name == "lm_head":
            return self.base._replace(bits=self.head_bits) if self.head_bits != 16 else BF16
        names = module_names(t)
        if t.name in self._names or any(_matches(n, pat) for n in names for pat in self.ignore):
            return BF16
        if self.per_tensor:
            return next((f for pat, f in self.per_tensor if any(_matches(n, pat) for n in names)), BF16)
        if self.scope == "experts" and t.experts == 1 or self.scope == "mlp" and not _is_mlp(t):
            return BF16
        return self.base if self.bits != 16 else BF16  # fp32 (--weights fp32) keeps its 32 bits

    def tensor_bits(self, t: Tensor, mtp: bool = False) -> float:
        return self.tensor_format(t, mtp).bits

    @property
    def kernels(self) -> set[str]:
        """Every kernel family this format's tensors use."""
        return {self.kernel or self.name} | {f.kernel for _, f in self.per_tensor}

    def to_dict(self) -> dict:
        return {"name": self.name, "bits": self.bits, "head_bits": self.head_bits,
                "compute": self.compute, "source": self.source}


_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",
         "index_q_proj", "index_k_proj",  # MiniMax-M3 keeps its sparse-attention indexer in self_attn
         # Kimi Delta Attention's gates live in self_attn too (vLLM kimi_linear.py: prefix "...self_attn"),
         # as does Step's head-wise g_proj
         "f_proj", "g_proj", "f_a_proj", "f_b_proj", "g_a_proj", "g_b_proj", "b_proj")


def _is_mlp(t: Tensor) -> bool:
    return t.name.split(".")[-1] in ("gate_proj", "up_proj", "down_proj", "gate_up_proj")


def module_names(t: Tensor) -> tuple[str, ...]:
    """Checkpoint-style module names of `t` (layer 0), for matching a quantization config's
    targets and exclusion lists: "model.layers.0.self_attn.q_proj", "...mlp.experts.0.gate_proj"."""
    leaf = t.name.split(".")[-1]
    leaves = ("gate_proj", "up_proj") if leaf == "gate_up_proj" else (leaf,)
    if t.name.startswith("experts."):
        block = "mlp.experts.0"
    elif t.name.startswith("shared_expert."):
        block = "mlp.shared_experts"
    elif t.name.startswith("indexer."):
        block = "self_attn.indexer"
    elif leaf in _ATTN:
        block = "self_attn"
    elif _is_mlp(t):
        block = "mlp"
    else:  # Gated DeltaNet / Mamba projections
        block = "linear_attn"
    return tuple(f"model.layers.0.{block}.{x}" for x in leaves) + leaves + (t.name,)


def _matches(name: str, pattern: str) -> bool:
    """compressed-tensors ("re:REGEX", a module name or suffix), modelopt (glob) and
    per-module-key patterns; layer numbers match any layer ("=NAME" names a tensor, see _by_layer)."""
    if pattern.startswith("="):
        return False
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], name) is not None
        except re.error:
            return False
    pattern = re.sub(r"layers\.\d+\.", "layers.0.", pattern)
    if "*" in pattern:  # a glob names a module or everything under it
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return name == pattern or name.endswith("." + pattern) or name.startswith(pattern + ".")


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
    # e4m3 + e8m0 scale per 32 weights: 8 + 8 / 32 bits (OCP MX spec v1.0, MXFP8 E4M3)
    "mxfp8": (8.25, 16.0, "fp8", "OCP MX spec: e4m3 + e8m0 scale per 32"),
    "q4_k_m": (4.85, 6.5625, "fp16", f"mix of Q4_K (4.5 bpw) and Q6_K, output.weight Q6_K; {_LLAMA_CPP}"),
    "q5_k_m": (5.69, 6.5625, "fp16", f"mix of Q5_K (5.5 bpw) and Q6_K, output.weight Q6_K; {_LLAMA_CPP}"),
    "q6_k": (6.5625, 6.5625, "fp16", f"Q6_K: 210 bytes per 256 weights; {_LLAMA_CPP}"),
    "q8_0": (8.5, 8.5, "fp16", f"Q8_0: 32 int8 + one fp16 scale per 32; {_LLAMA_CPP}"),
}
# GGUF file type MXFP4_MOE (gpt-oss): llama.cpp's quantizer stores every 3-D tensor (the
# merged experts, ne[2] > 1) as MXFP4 and every other quantizable tensor, output.weight
# and token_embd.weight included, as Q8_0 (llama_tensor_get_type_impl, "MoE tensors ->
# MXFP4, other tensors -> Q8_0"; https://github.com/ggml-org/llama.cpp/blob/
# 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714/src/llama-quant.cpp). Routers (ffn_gate_inp),
# norms and biases are not quantized.
_Q8_0 = TensorFormat(8.5, "q8_0", "fp16")
GGUF_FTYPES = {
    "mxfp4_moe": WeightFormat("mxfp4_moe", 8.5, 8.5, "fp16", kernel="q8_0",
                              per_tensor=((r"re:.*\.mlp\.experts\.", TensorFormat(4.25, "mxfp4", "fp4")),
                                          ("re:.*", _Q8_0)),
                              source="GGUF MXFP4_MOE: experts MXFP4 (4.25 bpw), other tensors and "
                                     "output.weight Q8_0 (8.5 bpw); llama.cpp src/llama-quant.cpp"),
}
NAMES = (*FORMATS, *GGUF_FTYPES, "int4-gN", "bpw:X")


def parse_format(spec: str, arch: Arch | None = None) -> WeightFormat:
    """`bf16 fp16 fp8 int8 int4-gN nvfp4 mxfp4 mxfp8 q4_k_m q5_k_m q6_k q8_0 mxfp4_moe bpw:X`."""
    s = spec.strip().lower()
    if s in GGUF_FTYPES:
        return GGUF_FTYPES[s]
    if s in FORMATS:
        bits, head, compute, source = FORMATS[s]
        # MXFP4 checkpoints (gpt-oss) convert only the routed experts
        return WeightFormat(s, bits, head, compute, scope=_scope(s, arch), source=source,
                            mtp_bits=16.0 if s == "nvfp4" and _has_mla(arch) else None)
    if m := re.fullmatch(r"int4-g(\d+)", s):
        g = int(m[1])  # one 16-bit scale per group of g weights
        if not 1 <= g <= 1 << 16:
            raise DecodescopeError(f"group size {g} in '{spec}' is out of range", "use int4-g32, -g64 or -g128")
        return WeightFormat(s, 4 + 16 / g, 16.0, "bf16", kernel="int4", source=f"4-bit weights + fp16 scale per {g}")
    if m := re.fullmatch(r"bpw:(\d+(?:\.\d+)?)", s):
        b = float(m[1])  # e.g. EXL2's average bits per weight: applies to every weight read
        if not 1 <= b <= 16:
            raise DecodescopeError(f"'{spec}': bits per weight must lie from 1 to 16", "e.g. bpw:4.65")
        return WeightFormat(s, b, b, "bf16", source="user-given average bits per weight")
    raise DecodescopeError(f"unknown weight format '{spec}'", f"use one of: {' '.join(NAMES)}")


def _has_mla(arch: Arch | None) -> bool:
    return bool(arch) and any(isinstance(x.mixer, MLA) for x in arch.layers)


def _scope(name: str, arch: Arch | None) -> str:
    # MXFP4 checkpoints (gpt-oss) convert only the routed experts; NVIDIA's NVFP4 DeepSeek
    # checkpoints keep MLA and the MTP layer in 16 bits (exclude_modules "model.layers.N.self_attn*"
    # and "model.layers.61*" in nvidia/DeepSeek-V3-0324-NVFP4's hf_quant_config.json)
    if name == "mxfp4" and arch and arch.is_moe:
        return "experts"
    return "mlp" if name == "nvfp4" and _has_mla(arch) else "all"


def config_format(arch: Arch) -> WeightFormat:
    """The weight format the checkpoint itself is stored in (its quantization_config)."""
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
    if method == "compressed-tensors":
        return _compressed_tensors(q, arch)
    if method == "modelopt":
        return _modelopt(q, arch)
    raise DecodescopeError(f"{arch.source}: quantization_config quant_method={method!r} is not understood",
                           f"pass the format with --weights ({' '.join(NAMES)})")


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


def _patterns(q: dict, key: str, arch: Arch) -> tuple[str, ...]:
    v = q.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise DecodescopeError(f"{arch.source}: quantization_config {key} is not a list of module names",
                               "fix the config, or pass the format with --weights")
    return _by_layer(tuple(v), arch)


_LAYER_N = re.compile(r"layers\.(\d+)(?=\.|\*|$)")


def _by_layer(patterns: tuple[str, ...], arch: Arch) -> tuple[str, ...]:
    """Exclusion patterns that name one layer ("model.layers.0*", "model.layers.5.self_attn*")
    apply to that layer only, as engines match them against each module's full name (vLLM's
    is_layer_skipped, fnmatch per prefix); the format is one per tensor name, so a tensor stays
    16-bit ("=NAME") when most layers holding it exclude it. nvidia/GLM-5.1-NVFP4 excludes whole
    layers 0-2 (its dense MLPs) and self_attn / shared_experts in every other layer."""
    plain = tuple(p for p in patterns if p.startswith("re:") or not _LAYER_N.search(p))
    named = {}
    for p in patterns:
        if p not in plain:
            named.setdefault(int(_LAYER_N.search(p)[1]), []).append(_LAYER_N.sub("layers.0", p))
    if not named:
        return patterns
    held, out, seen = {}, {}, {}
    for i, layer in enumerate(arch.layers):
        pats = tuple(named.get(i, ()))
        for t in layer.tensors():
            if t.linear:
                held[t.name] = held.get(t.name, 0) + 1
                if (t, pats) not in seen:  # most layers repeat one pattern set: match it once
                    seen[t, pats] = any(_matches(n, p) for n in module_names(t) for p in pats)
                out[t.name] = out.get(t.name, 0) + seen[t, pats]
    # layers past the decoder (DeepSeek's MTP layer 61) stay named: they mark the MTP layers out
    past = tuple(p for p in patterns if p not in plain and int(_LAYER_N.search(p)[1]) >= len(arch.layers))
    return plain + past + tuple(f"={n}" for n, c in out.items() if 2 * c > held[n])


def _int_field(q: dict, key: str, default, lo: int, hi: int, arch: Arch) -> int:
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not (lo <= v <= hi or v == -1):
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
                        ignore=_patterns(q, "modules_to_not_convert", arch),
                        source=f"{method}: {bits}-bit + fp16 scale{' + zero point' if zeros else ''} per {group}")


def _bitsandbytes(q: dict, arch: Arch) -> WeightFormat:
    ignore = _patterns(q, "llm_int8_skip_modules", arch)
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
    per = []
    for spec in groups.values():
        f = _ct_group(spec if isinstance(spec, dict) else {}, arch)
        targets = spec.get("targets") or ["Linear"]
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
    if algo in _ALGO:
        f = _ALGO[algo]
        return WeightFormat(f"{f.kernel} (config)", f.bits, 16.0, f.compute, kernel=f.kernel, ignore=ignore,
                            mtp_bits=16.0 if mtp_out else None, source=f"modelopt {algo}, exclusion list applied")
    layers = q.get("quantized_layers")
    if algo != "MIXED_PRECISION" or not isinstance(layers, dict) or not layers:
        raise DecodescopeError(f"{arch.source}: modelopt quant_algo={algo!r} is not understood",
                               "pass the format with --weights")
    votes, head = {}, BF16
    for module, spec in layers.items():
        f = _ALGO.get(spec.get("quant_algo") if isinstance(spec, dict) else None)
        if f is None:
            raise DecodescopeError(f"{arch.source}: quant_algo of {module} is not understood",
                                   "pass the format with --weights")
        if module == "lm_head":
            head = f
            continue
        fs = votes.setdefault(_NUMBERS.sub(".0.", module), {})  # cheap: 21,888 entries in MiniMax-M3
        fs[f] = fs.get(f, 0) + 1
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
