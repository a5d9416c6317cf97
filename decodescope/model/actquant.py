"""Activation quantization in front of FP8 linear layers. An FP8 GEMM (W8A8) multiplies FP8
activations, so each input it takes is quantized first (an amax over the row, a scale, a cast).
An engine either does that inside the kernel that produced the input (the norm before the
projections, the gated activation before the down projection) or runs it as a kernel of its own,
which at decode costs what any kernel costs beyond its bytes (one token's activations: kilobytes),
the profile's kernel floor. Which producers an engine leaves unfused is engines.toml data
(serving.<engine> fp8_quant_after, with the source lines that show it)."""

from functools import lru_cache
from typing import TYPE_CHECKING

from decodescope.arch import Layer, MLA, MoE
from decodescope.model.engines import QuantAfter
from decodescope.model.formats import WeightFormat

if TYPE_CHECKING:  # deployment imports ops, which imports this module
    from decodescope.model.deployment import Deployment

NORM, MIXER, ACTIVATION, MOE = QuantAfter.NORM, QuantAfter.MIXER, QuantAfter.ACTIVATION, QuantAfter.MOE


def producers(part, mlp: bool) -> tuple[QuantAfter, ...]:
    """What produces each input of a block's linear layers (the layer's MLP side if `mlp`,
    else its mixer), one entry per input quantized."""
    if isinstance(part, MoE):
        # the routed experts' two GEMMs take their inputs quantized inside the MoE op; a
        # shared expert is an MLP of its own on the layer's normed input
        return (MOE, MOE) + ((NORM, ACTIVATION) if part.shared_expert_intermediate_size else ())
    if mlp:
        return NORM, ACTIVATION  # gate/up after the norm, down after the activation
    extra = (NORM,) if isinstance(part, MLA) and part.q_lora_rank else ()  # q_b after q_a's norm
    # a mixer: its input projection(s) after the norm, its output projection after the mixer
    # (one per side of a parallel hybrid: Falcon-H1's attention and Mamba2)
    return (NORM, *extra) + (MIXER,) * len(getattr(part, "parts", (part,)))


@lru_cache(maxsize=1024)
def fp8_inputs(layer: Layer, fmt: WeightFormat, mtp: bool = False) -> tuple[QuantAfter, ...]:
    """The producers of the layer's inputs to FP8 linear layers (parts whose linear weights
    the format multiplies in FP8), one entry per input."""
    out: tuple[QuantAfter, ...] = ()
    for part, mlp in ((layer.mixer, False), (layer.mlp, True)):
        if part is not None and any(t.linear and fmt.tensor_format(t, mtp).compute == "fp8" for t in part.tensors()):
            out += producers(part, mlp)
    return out


def quant_kernels(layer: Layer, fmt: WeightFormat, d: "Deployment", mtp: bool = False) -> int:
    """Kernels of their own that quantize the layer's FP8 GEMM inputs under `fmt`: those produced
    by what the deployment's build does not fuse the quantization into (Deployment.quant_after).
    None on a GPU without FP8 math, whose engines read FP8 weights with a weight-only kernel on
    16-bit activations."""
    if not d.quant_after or not d.gpu.flops.get("fp8"):
        return 0
    return sum(p in d.quant_after for p in fp8_inputs(layer, fmt, mtp))


def quant_kernels_per_pass(layers: tuple[Layer, ...], d: "Deployment") -> int:
    """Kernels a pass of the target's decoder `layers` spends quantizing FP8 inputs."""
    return sum(quant_kernels(layer, d.weights, d) for layer in layers)


def quant_note(layers: tuple[Layer, ...], d: "Deployment") -> tuple[str, ...]:
    """One line saying how many kernels a pass spends quantizing FP8 inputs, if any."""
    n = quant_kernels_per_pass(layers, d)
    if not n:
        return ()
    after = ", ".join(q.value for q in d.quant_after)
    floor_us = d.profile.kernel_floor_us
    return (f"{n} kernels a pass quantize FP8 layers' inputs ({d.engine.id} runs it as a kernel of its own "
            f"after: {after}): {n} x {floor_us:g} us = {n * floor_us / 1e3:.2f} ms in the kernels row",)
