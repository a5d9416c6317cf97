"""`decodescope probe`: the GPUs of this machine (or of saved `nvidia-smi` / `lspci`
text) — name, memory, driver, PCIe generation and width now vs at most, NUMA and CPU
affinity, clocks, power — and the link between each pair of GPUs as `nvidia-smi topo -m`
names it, mapped onto the `--link` ids of `decodescope model`. NVML first (nvidia-ml-py),
then nvidia-smi and lspci text."""

import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.hardware import probe_parse

QUERY = ("index,name,memory.total,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,"
         "pcie.link.width.current,pcie.link.width.max,clocks.sm,clocks.max.sm,power.draw,power.limit")
# nvidia-smi topo -m legend -> `decodescope model --link` id (gpus.toml [interconnect.*] descriptions)
TOPO_LINKS = {"PIX": "pcie-switch", "PXB": "pcie-switch", "PHB": "pcie", "NODE": "pcie", "SYS": "pcie-sys",
              "SOC": "pcie-sys"}  # SOC: what drivers before 2017 printed for SYS
# nvmlGpuTopologyLevel_t (nvml.h) -> the `nvidia-smi topo -m` legend; INTERNAL: two GPUs on one board
NVML_TOPO = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
NVSWITCH_MIN_GPUS = 4
SYS_PCI = Path("/sys/bus/pci/devices")  # NVLink between every pair of 4+ GPUs: an NVSwitch board (bridges join pairs)


@dataclass(frozen=True)
class Pcie:
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    under_load: str = ""  # after --load: "idle downshift" (recovers) | "degraded link" (does not) | "full"

    @property
    def downgraded(self) -> bool | None:
        if None in (self.gen_current, self.gen_max) and None in (self.width_current, self.width_max):
            return None
        return bool((self.gen_current or 0) < (self.gen_max or 0) or (self.width_current or 0) < (self.width_max or 0))

    def to_dict(self) -> dict:
        return {**asdict(self), "downgraded": self.downgraded}


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str | None = None
    memory_bytes: int | None = None
    driver: str | None = None
    bus_id: str | None = None
    pcie: Pcie = Pcie()
    numa_node: int | None = None
    cpu_affinity: str | None = None  # CPU list as the kernel prints it, "0-15,32-47"
    clocks_mhz: dict | None = None  # SM clock {current, max}
    power_w: dict | None = None  # {current, max}

    def to_dict(self) -> dict:
        return {**asdict(self), "pcie": self.pcie.to_dict()}


@dataclass(frozen=True)
class Link:
    a: int
    b: int
    kind: str  # as `nvidia-smi topo -m` prints it: NV12, PIX, PXB, PHB, NODE, SYS
    link: str  # the `decodescope model --link` id


@dataclass(frozen=True)
class Probe:
    gpus: tuple[GpuInfo, ...]
    links: tuple[Link, ...]
    cpu: str | None  # this machine's; None for saved outputs (they do not say)
    host_memory_bytes: int | None
    sources: tuple[str, ...]  # "nvml", "nvidia-smi", "lspci", or "FILE (kinds)"
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"gpus": [g.to_dict() for g in self.gpus], "links": [asdict(x) for x in self.links],
                "cpu": self.cpu, "host_memory_bytes": self.host_memory_bytes, "sources": list(self.sources),
                "notes": list(self.notes)}


def link_id(kind: str, all_nv: bool, gpus: int) -> str:
    if kind.startswith("NV"):
        return "nvswitch" if all_nv and gpus >= NVSWITCH_MIN_GPUS else "nvlink"
    return TOPO_LINKS.get(kind, "pcie")


def build(gpus: dict, pairs: list, sources: tuple, notes: tuple = (), here: bool = True) -> Probe:
    """A Probe from parser fields by GPU index and (a, b, kind) pairs; `here`: of this machine."""
    all_nv = bool(pairs) and all(k.startswith("NV") for _, _, k in pairs)
    infos = tuple(GpuInfo(**{**f, "pcie": Pcie(**f.get("pcie", {}))}) for _, f in sorted(gpus.items()))
    links = tuple(Link(a, b, k, link_id(k, all_nv, len(infos))) for a, b, k in pairs)
    if not here:
        return Probe(infos, links, None, None, sources, notes)
    return Probe(infos, links, cpu_name(), host_memory_bytes(), sources, notes)


def from_files(paths: list[str]) -> Probe:
    """Read saved outputs; each file may hold several kinds (detected)."""
    gpus, pairs, sources = {}, [], []
    for p in paths:
        try:
            text = Path(p).read_text(errors="replace")
        except OSError as e:
            raise DecodescopeError(f"cannot read {p}: {e.strerror}", "give the path of a saved nvidia-smi or lspci output") from None
        g, links, kinds = probe_parse.parse(text, p)
        probe_parse.merge(gpus, g)
        pairs = pairs or links
        sources.append(f"{p} ({', '.join(kinds)})")
    return build(gpus, pairs, tuple(sources), here=False)


def live(load: bool = False) -> Probe:
    """This machine: NVML, else nvidia-smi text; lspci for links nvidia-smi does not show.
    Without an NVIDIA GPU: an empty list and notes saying what was tried."""
    from decodescope.hardware.nvml import nvml
    notes = []
    n = nvml()
    if n is not None:
        gpus, sources = _nvml(n), ("nvml",)
        pairs = _smi_topo(notes) if shutil.which("nvidia-smi") else _nvml_topo(n, notes)
    elif shutil.which("nvidia-smi"):
        notes.append("NVML not available (pip install 'decodescope[gpu]' for nvidia-ml-py): read nvidia-smi text")
        gpus = probe_parse.parse_query_csv(_run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"]))
        gpus, pairs, sources = gpus, _smi_topo(notes), ("nvidia-smi",)
    else:
        notes.append("no NVIDIA GPU found: NVML (nvidia-ml-py) could not start and nvidia-smi is not on PATH")
        return build({}, [], ("nvml", "nvidia-smi"), tuple(notes))
    _sys_affinity(gpus, notes)
    if any(g.get("pcie", {}).get("gen_current") is None for g in gpus.values()):
        _lspci_fallback(gpus, notes)
    p = build(gpus, pairs, sources, tuple(notes))
    return under_load(p) if load else p


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise DecodescopeError(f"`{' '.join(cmd)}` failed: {e}", "check the NVIDIA driver (nvidia-smi must run)") from None


def _smi_topo(notes: list) -> list:
    if not shutil.which("nvidia-smi"):
        notes.append("nvidia-smi not on PATH: links between GPUs unknown")
        return []
    try:
        return probe_parse.parse_topo(_run(["nvidia-smi", "topo", "-m"]))[1]
    except DecodescopeError as e:  # some virtual machines' drivers do not report a topology
        notes.append(f"links between GPUs unknown: {e.what}")
        return []


def _lspci_fallback(gpus: dict, notes: list) -> None:
    if not shutil.which("lspci"):
        notes.append("lspci not found (apt install pciutils): PCIe link state not read from it")
        return
    try:
        probe_parse.merge(gpus, probe_parse.parse_lspci(_run(["lspci", "-vv"])))
    except DecodescopeError as e:
        notes.append(f"PCIe link state not read from lspci: {e.what}")


def _sys_affinity(gpus: dict, notes: list) -> None:
    """NUMA node and local CPUs of each GPU from /sys (where NVML or the topology did not say)."""
    for g in gpus.values():
        bus = (g.get("bus_id") or "").lower()
        m = re.search(r"([0-9a-f]{4,8}):([0-9a-f]{2}:[0-9a-f]{2}\.\d)$", bus)
        if not m:
            continue
        d = SYS_PCI / f"{m[1][-4:]}:{m[2]}"
        try:
            numa = int((d / "numa_node").read_text())
            g.setdefault("numa_node", numa if numa >= 0 else None)
            g.setdefault("cpu_affinity", (d / "local_cpulist").read_text().strip())
        except PermissionError:
            notes.append(f"permission denied reading {d}: NUMA node and CPU affinity of GPU {g['index']} unknown")
        except (OSError, ValueError):
            pass


def _nvml(n) -> dict:
    """Fields by index from NVML (each call guarded: older drivers lack some)."""
    gpus = {}
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)

        def q(fn, *a, h=h):
            try:
                v = getattr(n, fn)(h, *a)
                return v.decode() if isinstance(v, bytes) else v
            except n.NVMLError:
                return None
        bus = q("nvmlDeviceGetPciInfo")
        sm_now, sm_max = q("nvmlDeviceGetClockInfo", n.NVML_CLOCK_SM), q("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_SM)
        pw, limit = q("nvmlDeviceGetPowerUsage"), q("nvmlDeviceGetEnforcedPowerLimit")  # mW
        mem = q("nvmlDeviceGetMemoryInfo")
        bus_id = bus.busId if bus else None
        gpus[i] = {"index": i, "name": q("nvmlDeviceGetName"), "memory_bytes": mem.total if mem else None,
                   "driver": n.nvmlSystemGetDriverVersion(),
                   "bus_id": bus_id.decode() if isinstance(bus_id, bytes) else bus_id,
                   "pcie": {"gen_current": q("nvmlDeviceGetCurrPcieLinkGeneration"),
                            "gen_max": q("nvmlDeviceGetMaxPcieLinkGeneration"),
                            "width_current": q("nvmlDeviceGetCurrPcieLinkWidth"),
                            "width_max": q("nvmlDeviceGetMaxPcieLinkWidth")},
                   "clocks_mhz": {"current": sm_now, "max": sm_max},
                   "power_w": {"current": pw / 1e3 if pw is not None else None,
                               "max": limit / 1e3 if limit is not None else None}}
        numa, cpus = q("nvmlDeviceGetNumaNodeId"), q("nvmlDeviceGetCpuAffinity", -(-(os.cpu_count() or 1) // 64))
        if numa is not None and numa >= 0:
            gpus[i]["numa_node"] = numa
        if cpus is not None and any(cpus):
            gpus[i]["cpu_affinity"] = cpu_list(list(cpus))
    if isinstance(gpus.get(0, {}).get("driver"), bytes):
        for g in gpus.values():
            g["driver"] = g["driver"].decode()
    return gpus


def _nvml_topo(n, notes: list) -> list:
    """(a, b, kind) from NVML's common PCIe ancestor of each pair (without nvidia-smi)."""
    notes.append("nvidia-smi not on PATH: links between GPUs from NVML's PCIe topology (NVLink not read)")
    hs = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
    pairs = []
    for a in range(len(hs)):
        for b in range(a + 1, len(hs)):
            try:
                pairs.append((a, b, NVML_TOPO.get(n.nvmlDeviceGetTopologyCommonAncestor(hs[a], hs[b]), "SYS")))
            except n.NVMLError:
                pass
    return pairs


def cpu_list(masks: list[int]) -> str:
    """The kernel's CPU-list text ("0-15,32-47") of bitmasks of 64 CPUs each, lowest CPUs first
    (nvmlDeviceGetCpuAffinity's cpuSet)."""
    cpus = [64 * w + bit for w, m in enumerate(masks) for bit in range(64) if m >> bit & 1]
    runs = []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def under_load(p: Probe, seconds: float = 2.0, start_timeout: float = 120.0) -> Probe:
    """Run matmuls on every GPU (torch) and read the links again while they run: a link
    back at its maximum was an idle downshift, one still below it is degraded. The links
    are read `seconds` after every GPU has finished its first matmul (CUDA start-up can
    take longer than the load itself)."""
    import threading
    import time

    from decodescope.hardware.timing import import_torch
    torch = import_torch()
    if not torch.cuda.is_available():
        return replace(p, notes=p.notes + ("--load: PyTorch sees no CUDA GPU; links read at idle only",))
    n = torch.cuda.device_count()
    stop, ready, failed = threading.Event(), threading.Barrier(n + 1), []

    def burn(i):
        try:
            a = torch.randn(4096, 4096, device=f"cuda:{i}", dtype=torch.float16)
            a @ a
            torch.cuda.synchronize(i)
            ready.wait()
            while not stop.is_set():
                a @ a
            torch.cuda.synchronize(i)
        except (RuntimeError, threading.BrokenBarrierError) as e:
            failed.append(f"GPU {i}: {type(e).__name__} {str(e)[:120]}")
            ready.abort()

    threads = [threading.Thread(target=burn, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        ready.wait(timeout=start_timeout)
        time.sleep(seconds)
        again = {g.index: g for g in live(load=False).gpus}
    except threading.BrokenBarrierError:
        why = "; ".join(failed) or f"the GPUs did not finish a first matmul within {start_timeout:g} s"
        return replace(p, notes=p.notes + (f"--load: no load ran ({why}); links read at idle only",))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    return replace(p, gpus=tuple(replace(g, pcie=_verdict(g.pcie, again.get(g.index))) for g in p.gpus),
                   sources=p.sources + ("load",))


def _verdict(idle: Pcie, loaded: GpuInfo | None) -> Pcie:
    if loaded is None:
        return idle
    now = loaded.pcie
    if now.downgraded:
        word = "degraded link"
    else:
        word = "idle downshift" if idle.downgraded else "full"
    return replace(now, under_load=word)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} CPUs)"


def host_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
