"""`decodescope probe` on this machine (no NVIDIA GPU, no NVML, no lspci) and on saved
files, through the real command line."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from decodescope.hardware import probe

ROOT = Path(__file__).parents[2]
PROBE = ROOT / "tests" / "data" / "probe"


def run(*args, user=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "decodescope", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, user=user)


needs_no_gpu = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")


@needs_no_gpu
def test_no_gpu_says_so_reports_the_host_and_exits_3():
    r = run("probe")
    assert r.returncode == 3, r.stderr
    assert "no NVIDIA GPU found on this machine" in r.stdout
    assert "host:" in r.stdout and "GB memory" in r.stdout
    j = run("probe", "--json")
    d = json.loads(j.stdout)
    assert j.returncode == 3 and d["gpus"] == [] and d["links"] == []
    assert d["host_memory_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    # NVML: nvidia-ml-py is an optional extra; without it (or without a driver) the note says what was tried
    assert any("NVML" in n and "nvidia-smi" in n for n in d["notes"])


def test_from_files_json_has_the_issue_fields():
    r = run("probe", "--from", str(PROBE / "topo-2x3090-sys.txt"), "--from", str(PROBE / "lspci-3090-x8-slot.txt"),
            "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    g = d["gpus"][0]
    assert set(g) >= {"index", "name", "memory_bytes", "pcie", "numa_node", "cpu_affinity"}
    assert set(g["pcie"]) >= {"gen_current", "gen_max", "width_current", "width_max", "downgraded"}
    assert g["pcie"]["downgraded"] is True  # lspci: Gen1 x8 of Gen4 x16
    assert d["links"] == [{"a": 0, "b": 1, "kind": "SYS", "link": "pcie-sys"}]


def test_from_files_text_names_the_link_and_the_downgrade():
    r = run("probe", "--from", str(PROBE / "topo-2x3090-sys.txt"), "--from", str(PROBE / "lspci-3090-x8-slot.txt"))
    assert r.returncode == 0
    assert "PCIe Gen1 of Gen4 x8 of x16" in r.stdout
    assert "SYS   -> --link pcie-sys" in r.stdout
    assert "decodescope probe --load" in r.stdout


def test_bad_file_is_one_error_no_traceback(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello\n")
    r = run("probe", "--from", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no nvidia-smi or lspci output recognised" in r.stderr and "fix:" in r.stderr


def test_load_with_from_is_a_usage_error():
    r = run("probe", "--load", "--from", str(PROBE / "topo-2x5090-phb.txt"))
    assert r.returncode == 2 and "--load runs on this machine" in r.stderr


@pytest.mark.skipif(shutil.which("lspci") is not None, reason="lspci is installed here")
def test_lspci_missing_is_a_note():
    notes = []
    probe._lspci_fallback({0: {"index": 0}}, notes)
    assert notes == ["lspci not found (apt install pciutils): PCIe link state not read from it"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run the check as another user")
def test_permission_denied_on_sys_is_a_note_not_a_crash():
    # a /sys-like tree the unprivileged user 'nobody' may not read
    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)
        dev = base / "0000:01:00.0"
        dev.mkdir()
        (dev / "numa_node").write_text("1\n")
        dev.chmod(0o000)
        numa, notes = _as_nobody(base)
        assert numa is None
        assert notes == [f"permission denied reading {dev}: NUMA node and CPU affinity of GPU 0 unknown"]
    finally:
        (base / "0000:01:00.0").chmod(0o755)
        shutil.rmtree(base)


def _as_nobody(base: Path):
    """probe._sys_affinity run in a forked child that dropped to user 'nobody' (65534)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges, read, report through the pipe, exit without cleanup
        try:
            os.setuid(65534)
            probe.SYS_PCI = base
            notes, g = [], {0: {"index": 0, "bus_id": "00000000:01:00.0"}}
            probe._sys_affinity(g, notes)
            os.write(w, json.dumps([g[0].get("numa_node"), notes]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return json.loads(out)


def test_nvml_missing_is_none_not_a_crash():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (the [gpu] extra) is not installed")
    from decodescope.hardware.nvml import driver_version, nvml
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no NVIDIA driver library here: probe falls back
        assert nvml() is None and driver_version() is None
        return
    pytest.skip("NVML starts on this machine")


def test_nvml_cpu_masks_read_as_the_kernels_cpu_list():
    # nvmlDeviceGetCpuAffinity: 64 CPUs per word, lowest first. 0xFFFF = CPUs 0-15; in the second
    # word 0xFFFF << 0 again = CPUs 64-79, bit 20 = CPU 84
    assert probe.cpu_list([0xFFFF]) == "0-15"
    assert probe.cpu_list([0xFFFF0000FFFF]) == "0-15,32-47"
    assert probe.cpu_list([0, 0xFFFF | 1 << 20]) == "64-79,84"
    assert probe.cpu_list([0b101]) == "0,2"


def test_nvml_topology_levels_map_onto_the_topo_legend():
    # nvml.h nvmlGpuTopologyLevel_t, as nvidia-ml-py names them, against `nvidia-smi topo -m`'s legend:
    # PIX one PCIe switch, PXB several, PHB the host bridge, NODE one NUMA node, SYS across sockets
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (the [gpu] extra) not installed")
    assert probe.NVML_TOPO == {pynvml.NVML_TOPOLOGY_INTERNAL: "PIX", pynvml.NVML_TOPOLOGY_SINGLE: "PIX",
                               pynvml.NVML_TOPOLOGY_MULTIPLE: "PXB", pynvml.NVML_TOPOLOGY_HOSTBRIDGE: "PHB",
                               pynvml.NVML_TOPOLOGY_NODE: "NODE", pynvml.NVML_TOPOLOGY_SYSTEM: "SYS"}
