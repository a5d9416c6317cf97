"""Matching a quantization_config's module lists against the model's tensors, as the engines
match them, and the integer fields and bit widths the quantization methods share."""

import re

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import _matches, module_names


def experts_at(arch: Arch) -> str:
    # Gemma 4 keeps its routed experts beside the dense MLP (model.layers.N.experts, .router, .mlp:
    # nvidia/Gemma-4-26B-A4B-NVFP4 ignores "layers.N.mlp*" and "layers.N.router*" but not the experts)
    return "experts.0" if arch.model_type.startswith("gemma4") else "mlp.experts.0"


def patterns(q: dict, key: str, arch: Arch, mark: str = "") -> tuple[str, ...]:
    """An exclusion list; `mark` names the engine's way of matching it (see _matches)."""
    v = q.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise DecodescopeError(f"{arch.source}: quantization_config {key} is not a list of module names",
                               "fix the config, or pass the format with --weights")
    return by_layer(tuple(mark + _MULTIMODAL.sub("model.", x) for x in v), arch)


# multimodal checkpoints name their decoder "model.language_model.layers.N" or
# "language_model.model.layers.N"; engines map those names onto the text model's (vLLM's
# hf_to_vllm_mapper, applied to exclusion lists too), as module_names spells them
_MULTIMODAL = re.compile(r"^(?:model\.language_model|language_model\.model|language_model)\.(?=layers\.)")
_LAYER_N = re.compile(r"layers\.(\d+)(?=\.|\*|$)")


def by_layer(patterns: tuple[str, ...], arch: Arch) -> tuple[str, ...]:
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
    held, out, seen, at = {}, {}, {}, experts_at(arch)
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


def int_field(q: dict, key: str, default, lo: int, hi: int, arch: Arch) -> int:
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
