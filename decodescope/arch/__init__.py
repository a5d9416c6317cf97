"""arch: what a model reads and computes per token, from its config.json."""

from decodescope.arch.arch import Arch, MTPModule, active_params
from decodescope.arch.blocks import MLA, Attention, DenseMLP, GatedDeltaNet, Layer, Mamba1, Mamba2, MoE, Tensor
from decodescope.arch.mixers import RECURRENT, CompressedMQA, KimiDeltaAttention, ParallelHybrid, ShortConv
from decodescope.arch.registry import build_arch
from decodescope.arch.config import RawConfig, load_config, presets


def load_arch(model: str) -> Arch:
    """The Arch of `model`: a config.json path, a model folder, a preset name or a hub id."""
    return build_arch(load_config(model))


__all__ = ["Arch", "MTPModule", "Attention", "MLA", "GatedDeltaNet", "Mamba1", "Mamba2", "DenseMLP", "MoE",
           "ParallelHybrid", "ShortConv", "CompressedMQA", "KimiDeltaAttention", "RECURRENT", "Layer", "Tensor", "RawConfig", "load_arch", "load_config", "build_arch", "presets",
           "active_params"]
