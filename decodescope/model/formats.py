"""Weight formats: the true bits per weight each tensor is stored in, scales included,
and which tensors a format leaves in 16 bits."""

import fnmatch
import re
from dataclasses import dataclass
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
    """A checkpoint's weight format: bits per weight and which tensors it converts."""
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
    experts_at: str = "mlp.experts.0"  # the checkpoint's routed-expert module (Gemma 4: "experts.0", beside mlp)

    def __post_init__(self):  # the tensor_format cache hashes the format per tensor per estimate
        object.__setattr__(self, "_names", frozenset(p[1:] for p in self.ignore if p.startswith("=")))
        object.__setattr__(self, "_hash", hash((self.name, self.bits, self.head_bits, self.compute, self.scope,
                                                self.per_tensor, self.ignore, self.mtp_bits, self.kernel,
                                                self.source, self.experts_at)))

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
        names = module_names(t, self.experts_at)
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


def module_names(t: Tensor, experts_at: str = "mlp.experts.0") -> tuple[str, ...]:
    """Checkpoint-style module names of `t` (layer 0), for matching a quantization config's
    targets and exclusion lists: "model.layers.0.self_attn.q_proj", "...mlp.experts.0.gate_proj"."""
    leaf = t.name.split(".")[-1]
    leaves = ("gate_proj", "up_proj") if leaf == "gate_up_proj" else (leaf,)
    blocks = ()
    if t.name.startswith("experts."):
        block = experts_at
    elif t.name.startswith("shared_expert."):  # DeepSeek / GLM / Kimi spell it plural, Qwen singular
        block, blocks = "mlp.shared_experts", ("mlp.shared_expert",)
    elif t.name.startswith("indexer."):
        block = "self_attn.indexer"
    elif leaf in _ATTN:
        block = "self_attn"
    elif _is_mlp(t):
        block = "mlp"
    else:  # Gated DeltaNet / Mamba projections
        block = "linear_attn"
    return tuple(f"model.layers.0.{b}.{x}" for b in (block, *blocks) for x in leaves) + leaves + (t.name,)


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
    if pattern.startswith("sub:"):  # AWQ: any substring (vLLM / SGLang awq.py is_layer_skipped_awq)
        return pattern[4:] in name
    if pattern.startswith("part:"):  # bitsandbytes: one dotted component or a leading path
        p = pattern[5:]  # (vLLM bitsandbytes.py is_layer_skipped_bnb)
        return p in name.split(".") or name == p or name.startswith(p + ".")
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
