"""What decodescope knows about one accelerator and the links between accelerators.

Every number carries its source: a datasheet URL with a quote, or "measured by calibrate".
Units are SI in the names (GB = 1e9 bytes)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GPU:
    """One accelerator's datasheet figures, with their sources."""
    id: str  # stable id, e.g. "h100-sxm"
    name: str  # marketing name, e.g. "NVIDIA H100 SXM5 80GB"
    vendor: str  # "nvidia" | "amd" | "apple" | "intel"
    aliases: tuple[str, ...]  # lower-case alternative names, e.g. ("h100", "h100-sxm5")
    memory_bytes: float  # usable device memory (unified memory for Apple / GB10)
    memory_bw_bytes_s: float  # datasheet peak memory bandwidth
    flops: dict[str, float]  # dense (no 2:4 sparsity) tensor FLOP/s by dtype: bf16, fp16, fp8, int8, fp4
    link: str  # default GPU<->GPU link class, a key of INTERCONNECTS ("nvlink", "pcie", ...)
    link_bw_bytes_s: float  # GPU<->GPU bandwidth per direction on that link (0 when single-device only)
    pcie_gen: int  # host link generation (0 = none, e.g. Apple)
    pcie_lanes: int
    memory_type: str = ""  # "hbm" | "gddr" | "lpddr" (unified): engines' kernels reach different fractions
    p2p: bool = True  # PCIe peer-to-peer between two of these cards (GeForce drivers disable it)
    # peers the GPU has a link of its own to, each at link_bw (a full mesh: AMD's 8-GPU xGMI
    # boards); an allreduce among n GPUs streams over min(n - 1, link_peers) of them at once
    link_peers: int = 1
    sources: dict[str, str] = field(default_factory=dict)  # field name -> "URL: 'quote'" or "measured by calibrate"

    def peak_flops(self, dtype: str) -> float:
        """Dense tensor FLOP/s for `dtype`; falls back to the next wider dtype the part has
        (a GPU without fp8 runs fp8 weights as bf16 math, as Ampere does with W8A16)."""
        for d in _WIDER.get(dtype, (dtype,)):
            if self.flops.get(d):
                return self.flops[d]
        raise KeyError(f"{self.id} has no tensor FLOP/s for {dtype}")


CPU = "cpu"  # the device id of the host CPU (gpus.toml [gpu.cpu]: no datasheet numbers)

# which dtype's math units run a given dtype's work when the part lacks it
_WIDER = {
    "fp4": ("fp4", "fp8", "bf16", "fp16"),
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "bf16", "fp16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
}


@dataclass(frozen=True)
class Interconnect:
    """A link between the GPUs of one group: allreduce latencies and achievable bandwidth fraction."""
    id: str  # "nvlink", "nvswitch", "pcie-switch", "pcie", "pcie-sys", "xgmi", "network", "none"
    description: str
    allreduce_latency_s: float  # alpha: one small allreduce with the engines' custom (P2P, one-shot) kernel
    nccl_latency_s: float  # alpha when that kernel cannot run: no P2P, or more than 2 GPUs on PCIe
    bw_efficiency: float  # achievable fraction of the link's per-direction bandwidth in an allreduce
    source: str
    # NCCL's small allreduce passes 2(n-1) hops on one node (its ring and its intra-node tree
    # alike), each costing nccl_hop_latency_s: n GPUs pay 2(n - m) hops more than the m GPUs
    # nccl_latency_s was measured on
    nccl_hop_latency_s: float = 0.0
    nccl_latency_gpus: int = 2

    def nccl_latency_at(self, gpus: int) -> float:
        """NCCL's small-allreduce latency among `gpus` GPUs (s), never below the measured one's hops' worth."""
        return max(0.0, self.nccl_latency_s + 2 * (gpus - self.nccl_latency_gpus) * self.nccl_hop_latency_s)
