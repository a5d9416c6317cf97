"""Mixers of the newer hybrid families, built from the blocks of decodescope.arch.blocks:
Falcon-H1's attention + Mamba2 side by side."""

from dataclasses import dataclass

from decodescope.arch.blocks import Attention, Mamba2, Tensor


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
