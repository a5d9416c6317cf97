"""arch: what a model reads and computes per token, from its config.json."""

from decodescope.arch.arch import Arch, MTPModule, active_params
from decodescope.arch.blocks import (MLA, Attention, DenseMLP, GatedDeltaNet, Layer, Mamba1, Mamba2, MoE, PooledKV,
                                     StateMixer, Tensor)
from decodescope.arch.registry import build_arch
from decodescope.arch.config import RawConfig, load_config, presets


def load_arch(model: str) -> Arch:
    """The Arch of `model`: a config.json path, a model folder, a preset name or a hub id."""
    return build_arch(load_config(model))


_MIXERS = ("ParallelHybrid", "ShortConv", "CompressedMQA", "KimiDeltaAttention", "BlockSparseAttention")


def __getattr__(name: str):
    # the newer families' mixers: their module is imported only when one is asked for (see StateMixer)
    if name in _MIXERS:
        from decodescope.arch import mixers
        return getattr(mixers, name)
    raise AttributeError(f"module 'decodescope.arch' has no attribute {name!r}")


__all__ = ["Arch", "MTPModule", "Attention", "MLA", "GatedDeltaNet", "Mamba1", "Mamba2", "DenseMLP", "MoE",
           *_MIXERS, "StateMixer", "PooledKV", "Layer", "Tensor", "RawConfig", "load_arch", "load_config", "build_arch", "presets",
           "active_params"]
