"""Accelerators and the links between them: datasheet numbers with their sources."""

from decodescope.hardware.db import all_gpus, all_interconnects, get_gpu, get_interconnect
from decodescope.hardware.spec import GPU, Interconnect

__all__ = ["GPU", "Interconnect", "all_gpus", "all_interconnects", "get_gpu", "get_interconnect"]
