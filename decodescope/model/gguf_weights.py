"""A GGUF file's weight format, tensor by tensor (decodescope/arch/gguf_header.py reads it).

llama.cpp's quantizers and dynamic quants (e.g. Unsloth's UD files) store each tensor in its
own type: a MoE file's average bits per weight hides attention and shared experts kept at 8
bits beside 4-bit experts, and only those are read for every token."""

import re
from collections import defaultdict
from pathlib import Path

from decodescope.arch import Arch
from decodescope.arch.gguf_header import read_gguf_files
from decodescope.errors import DecodescopeError
from decodescope.model.formats import TensorFormat, WeightFormat

# the ggml type -> the engines.toml format_efficiency key of its kernels (others: the 16-bit rate)
KERNELS = {"Q4_K": "q4_k_m", "Q5_K": "q5_k_m", "Q6_K": "q6_k", "Q8_0": "q8_0", "MXFP4": "mxfp4"}
# 2-D tensors the model does not read as linear weights: MoE routers, Gated DeltaNet / Mamba convolutions
NOT_LINEAR = ("ffn_gate_inp.", "ssm_conv1d.")


def gguf_format(path: str, arch: Arch) -> WeightFormat:
    """The weight format of a GGUF file for `arch`: routed experts, the other linear weights
    and the LM head each at their own bits (bytes / weights in the file), with the kernel
    of the ggml type that holds most of their bytes."""
    meta, tensors = read_gguf_files(path)
    _check_layers(meta, arch, path)
    groups = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # group -> ggml type -> [weights, bytes]
    for t in tensors:
        if t.dims < 2 or any(k in t.name for k in NOT_LINEAR) or _block(t.name) >= len(arch.layers):
            continue  # norms, biases, routers, convolutions (kept 16-bit by the model); next-token layers
        group = ("experts" if "_exps." in t.name else "head" if t.name == "output.weight"
                 else "embedding" if t.name == "token_embd.weight" else "other")
        groups[group][t.ggml_type][0] += t.weights
        groups[group][t.ggml_type][1] += t.bytes
    if bool(groups["experts"]) != arch.is_moe:
        raise DecodescopeError(f"{path} {'has' if groups['experts'] else 'has no'} routed experts, the config "
                               f"{'has none' if groups['experts'] else 'has'}", "pass the GGUF of this model")
    fmt = {g: _format(groups[g]) for g in ("experts", "other", "head", "embedding") if groups[g]}
    if "other" not in fmt:
        raise DecodescopeError(f"{path} holds no quantized layer weights", "pass the GGUF of this model")
    head = fmt.get("head") or fmt.get("embedding") or fmt["other"]  # no output.weight: tied to the embedding
    rules = ((r"re:.*\.mlp\.experts\.", fmt["experts"]),) if "experts" in fmt else ()
    summary = ", ".join(f"{g} {_describe(groups[g])}" for g in ("experts", "other", "head") if groups[g])
    return WeightFormat(f"gguf {Path(path).name}", fmt["other"].bits, head.bits, "fp16", kernel=fmt["other"].kernel,
                        per_tensor=rules + (("re:.*", fmt["other"]),), source=f"GGUF header of {Path(path).name}: {summary}")


def _block(name: str) -> int:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m[1]) if m else -1


def _format(types: dict) -> TensorFormat:
    n, nbytes = sum(v[0] for v in types.values()), sum(v[1] for v in types.values())
    main = max(types, key=lambda t: types[t][1])  # the type holding most of the bytes
    return TensorFormat(8 * nbytes / n, KERNELS.get(main, "bf16"), "fp16")


def _describe(types: dict) -> str:
    mix = "+".join(sorted(types, key=lambda t: -types[t][1]))
    return f"{mix} {_format(types).bits:.2f} bpw"


def _check_layers(meta: dict, arch: Arch, path: str) -> None:
    """The file's block count against the config's layers (plus its next-token layers)."""
    name = meta.get("general.architecture")
    blocks = meta.get(f"{name}.block_count")
    extra = meta.get(f"{name}.nextn_predict_layers")
    extra = extra if isinstance(extra, int) else 0
    if isinstance(blocks, int) and blocks not in (len(arch.layers), len(arch.layers) + extra):
        raise DecodescopeError(f"{path} has {blocks} blocks ({name}), {arch.name} {len(arch.layers)} layers",
                               "pass the GGUF of this model")
