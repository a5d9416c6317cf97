"""Mixers of the newer hybrid families, built from the blocks of decodescope.arch.blocks:
Falcon-H1's attention + Mamba2 side by side, LFM2's gated short convolution."""

from dataclasses import dataclass

from decodescope.arch.blocks import Attention, GatedDeltaNet, Mamba2, Tensor


@dataclass(frozen=True)
class ParallelHybrid:
    """Falcon-H1's mixer: attention and a Mamba2 mixer side by side off one input norm, their
    outputs summed. A token keeps both a KV cache (attention) and a recurrent state (Mamba2)."""
    attention: Attention
    mamba: Mamba2

    @property
    def parts(self) -> tuple[Attention, Mamba2]:
        return self.attention, self.mamba

    @property
    def kernels(self) -> int:
        return self.attention.kernels + self.mamba.kernels - 1  # one shared input norm

    @property
    def hidden_size(self) -> int:
        return self.attention.hidden_size

    # the head counts tensor parallelism must divide (decodescope.model.deployment)
    @property
    def num_attention_heads(self) -> int:
        return self.attention.num_attention_heads

    @property
    def num_key_value_heads(self) -> int:
        return self.attention.num_key_value_heads

    @property
    def mamba_num_heads(self) -> int:
        return self.mamba.mamba_num_heads

    def tensors(self) -> list[Tensor]:
        # the attention's input_layernorm is the one norm both read; the Mamba2's own is dropped
        return self.attention.tensors() + [t for t in self.mamba.tensors() if t.name != "norm"]


@dataclass(frozen=True)
class ShortConv:
    """LFM2's gated short convolution: in_proj to 3 x hidden (gates B, C and the value),
    a depthwise causal conv of conv_L_cache taps over B * value, C times the result, out_proj.
    A request keeps the last conv_L_cache - 1 inputs of each channel: its recurrent state."""
    hidden_size: int
    conv_kernel: int  # conv_L_cache
    bias: bool = False
    state_dtype_bytes: int = 2  # the conv window is kept in the activation dtype (bf16)
    kernels = 6  # norm, in_proj GEMM, gate + conv + gate, out GEMM, residual, (cache update)

    def tensors(self) -> list[Tensor]:
        h, b = self.hidden_size, self.bias
        ts = [Tensor("input_layernorm", (h,), "rep", linear=False), Tensor("in_proj", (3 * h, h), "col"),
              Tensor("conv", (h, self.conv_kernel), "col", linear=False), Tensor("out_proj", (h, h), "row")]
        if b:
            ts += [Tensor("in_proj.bias", (3 * h,), "col", linear=False), Tensor("conv.bias", (h,), "col", linear=False),
                   Tensor("out_proj.bias", (h,), "rep", linear=False)]
        return ts

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's conv window on one GPU (channels split by TP)."""
        return self.hidden_size * (self.conv_kernel - 1) * self.state_dtype_bytes / tp


# the mixers that keep a fixed-size recurrent state per request instead of a KV cache
RECURRENT = (GatedDeltaNet, Mamba2, ShortConv)
