"""Builders of the newer hybrid and latent-MoE families: Falcon-H1 (attention and Mamba2
in parallel in every layer)."""

from decodescope.arch.blocks import DenseMLP, Layer, Mamba2
from decodescope.arch.build import STATE_DTYPE_BYTES, attention, state_dtype
from decodescope.arch.fields import Fields
from decodescope.arch.mixers import ParallelHybrid
from decodescope.errors import DecodescopeError


def _falcon_mamba(f: Fields) -> Mamba2:
    """Falcon-H1's Mamba2 mixer. transformers' FalconH1Config: d_ssm = mamba_d_ssm, else
    mamba_expand x hidden; mamba_d_head "auto" = d_ssm / mamba_n_heads. in_proj carries
    mamba_proj_bias, out_proj projectors_bias; the gated RMSNorm exists only with mamba_rms_norm."""
    h, heads = f.need("hidden_size"), f.need("mamba_n_heads", "Falcon-H1's Mamba2 mixer")
    d_head = f.data.get("mamba_d_head")
    if d_head in (None, "auto"):
        d_ssm = f.get("mamba_d_ssm") or f.get("mamba_expand", default=2) * h
        d_head = d_ssm // heads
        if d_head < 1 or d_head * heads != d_ssm:
            raise DecodescopeError(f"{f.source}: mamba_d_ssm {d_ssm} is not a multiple of mamba_n_heads {heads}",
                                   "set mamba_d_head, or a mamba_d_ssm that mamba_n_heads divides")
    else:
        d_head = f.get("mamba_d_head")
    bias = bool(f.get("mamba_proj_bias", default=False)) or bool(f.get("projectors_bias", default=False))
    return Mamba2(h, heads, d_head, f.get("mamba_n_groups", default=1), f.get("mamba_d_state", default=256),
                  f.get("mamba_d_conv", default=4), bool(f.get("mamba_conv_bias", default=True)), bias,
                  STATE_DTYPE_BYTES[state_dtype(f)], gated_norm=bool(f.get("mamba_rms_norm", default=False)))


def build_falcon_h1(f: Fields):
    """Falcon-H1: every layer runs attention and a Mamba2 mixer side by side off one RMSNorm
    (their outputs summed), then a SwiGLU MLP behind its own norm (pre_ff_layernorm). The
    muP multipliers of its config scale activations, not shapes."""
    h = f.need("hidden_size")
    mixer = ParallelHybrid(attention(f), _falcon_mamba(f))
    mlp = DenseMLP(h, f.need("intermediate_size"), bias=bool(f.get("mlp_bias", default=False)))
    return [Layer("hybrid", mixer, mlp)] * f.need("num_hidden_layers"), [], ()
