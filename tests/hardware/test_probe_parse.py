"""probe reads real outputs pasted in public GitHub issues (tests/data/probe/SOURCES.md)
and the H200 capture of this project. Every expectation below was read off the text by
hand; the comments quote the line it comes from."""

from pathlib import Path

import pytest

from decodescope.errors import DecodescopeError
from decodescope.hardware.probe import from_files

DATA = Path(__file__).parents[1] / "data"
PROBE = DATA / "probe"


def read(*names):
    return from_files([str(PROBE / n) for n in names]).to_dict()


def kinds(d):
    return {(x["a"], x["b"]): (x["kind"], x["link"]) for x in d["links"]}


def test_eight_4090s_all_sys_on_two_sockets():
    d = read("topo-8x4090-sys.txt")
    # 8 GPU rows; NIC rows are not GPUs
    assert [g["index"] for g in d["gpus"]] == list(range(8))
    # 'GPU0 ... 0-55,112-167 0' and 'GPU4 ... 56-111,168-223 1'
    assert [g["numa_node"] for g in d["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert d["gpus"][4]["cpu_affinity"] == "56-111,168-223"
    # 8 choose 2 = 28 pairs, every one SYS -> the cross-socket link of `model`
    assert len(d["links"]) == 28
    assert set(kinds(d).values()) == {("SYS", "pcie-sys")}


def test_five_gpus_sys_phb_node():
    k = kinds(read("topo-5x4090-sys-phb-node.txt"))
    # 'GPU0 X SYS SYS SYS SYS': GPU0 sits on the other socket
    assert all(k[(0, j)] == ("SYS", "pcie-sys") for j in range(1, 5))
    # 'GPU1 SYS X PHB NODE NODE' and 'GPU3 SYS NODE NODE X PHB'
    assert k[(1, 2)] == ("PHB", "pcie") and k[(3, 4)] == ("PHB", "pcie")
    assert k[(1, 3)] == ("NODE", "pcie") and k[(2, 4)] == ("NODE", "pcie")
    assert len(k) == 10  # 5 choose 2


def test_two_3090s_across_sockets_with_an_empty_numa_cell():
    d = read("topo-2x3090-sys.txt")
    # 'GPU0  X  SYS  0-7,16-23  <empty>  N/A  <empty>  N/A': no NUMA node printed for GPU0
    assert d["gpus"][0]["numa_node"] is None and d["gpus"][0]["cpu_affinity"] == "0-7,16-23"
    # 'GPU1 SYS X 8-15,24-31 1 N/A'
    assert d["gpus"][1]["numa_node"] == 1
    assert kinds(d) == {(0, 1): ("SYS", "pcie-sys")}


@pytest.mark.parametrize("name, kind, link", [
    ("topo-2x5090-phb.txt", "PHB", "pcie"),  # 'GPU0 X PHB 0-63 0'
    ("topo-2gpu-node-indented.txt", "NODE", "pcie"),  # '    GPU0  X      NODE    0-15    0'
    # 'GPU0 X NV12 PXB PXB SYS ...': two GPUs on NVLink; NICs are not GPUs
    ("topo-2xa100-nv12-nics.txt", "NV12", "nvlink"),
])
def test_two_gpu_topologies(name, kind, link):
    d = read(name)
    assert len(d["gpus"]) == 2 and kinds(d) == {(0, 1): (kind, link)}


def test_dgx_a100_excerpt_is_an_nvswitch_board():
    d = read("topo-dgx-a100-nv12-excerpt.txt")
    # header names GPU0..GPU7; rows GPU0..GPU3 are in the excerpt
    assert len(d["gpus"]) == 8
    assert [g["numa_node"] for g in d["gpus"][:4]] == [3, 3, 1, 1]
    assert d["gpus"][5]["numa_node"] is None  # its row was not pasted
    # pairs known from 4 rows: 7 + 6 + 5 + 4 = 22, all NV12 between 8 GPUs -> NVSwitch
    assert len(d["links"]) == 22
    assert set(kinds(d).values()) == {("NV12", "nvswitch")}


def test_2017_topology_without_numa_column():
    k = kinds(read("topo-8gpu-pix-phb-sys-old.txt"))
    # 'GPU0 X PIX PHB PHB SYS SYS SYS SYS PHB 0-9,20-29' (the 9th column is the mlx4_0 NIC)
    assert k[(0, 1)] == ("PIX", "pcie-switch")
    assert k[(0, 2)] == ("PHB", "pcie")
    assert k[(2, 3)] == ("PIX", "pcie-switch")
    assert k[(3, 7)] == ("SYS", "pcie-sys")


def test_lspci_riser_downgraded_to_gen1():
    g = read("lspci-4090-riser-downgraded.txt")["gpus"]
    # 'LnkCap: ... Speed 16GT/s, Width x16' = Gen4 x16; 'LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok)' = Gen1
    assert g[0]["pcie"] == {"gen_current": 1, "gen_max": 4, "width_current": 16, "width_max": 16,
                            "under_load": "", "downgraded": True}


def test_lspci_gpu_in_an_x8_slot_and_its_bridge_skipped():
    g = read("lspci-3090-x8-slot.txt")["gpus"]
    # the GPU function only ('upstream ...ridge' block skipped): 'Speed 2.5GT/s (downgraded), Width x8 (downgraded)'
    assert len(g) == 1
    assert g[0]["pcie"]["gen_current"] == 1 and g[0]["pcie"]["width_current"] == 8
    assert g[0]["pcie"]["gen_max"] == 4 and g[0]["pcie"]["width_max"] == 16


def test_plain_nvidia_smi_tables():
    g = read("smi-2x5090.txt")["gpus"]
    # '|   0  NVIDIA GeForce RTX 5090  Off |   00000000:01:00.0 Off |' and '29324MiB /  32607MiB', '25W /  575W'
    assert [x["name"] for x in g] == ["NVIDIA GeForce RTX 5090"] * 2
    assert g[0]["memory_bytes"] == 32607 * 2**20 and g[0]["driver"] == "610.57.04"  # 'KMD Version: 610.57.04'
    assert g[1]["power_w"] == {"current": 12.0, "max": 600.0} and g[1]["bus_id"] == "00000000:02:00.0"
    q = read("smi-2xquadro-rtx4000.txt")["gpus"]
    # 'Driver Version: 535.129.03', '1MiB /  8192MiB'
    assert q[0]["name"] == "Quadro RTX 4000" and q[0]["memory_bytes"] == 8192 * 2**20
    assert q[0]["driver"] == "535.129.03"


def test_h200_capture_holds_csv_topology_and_q_together():
    d = from_files([str(DATA / "h200" / "probe.txt")]).to_dict()
    assert "topo" in d["sources"][0] and "smi-q" in d["sources"][0] and "query-csv" in d["sources"][0]
    g = d["gpus"][0]
    # -q: 'Product Name : NVIDIA H200', 'FB Memory Usage / Total : 143771 MiB', PCIe Generation Max 5 Current 5, Link Width 16x
    assert g["name"] == "NVIDIA H200" and g["memory_bytes"] == 143771 * 2**20
    assert g["pcie"]["gen_current"] == g["pcie"]["gen_max"] == 5 and g["pcie"]["width_current"] == 16
    assert g["pcie"]["downgraded"] is False
    # topo: 'GPU0  X  0-15  0  N/A'; CSV: '88.26 W, 700.00 W', '1980 MHz, 1980 MHz'
    assert g["numa_node"] == 0 and g["cpu_affinity"] == "0-15"
    assert g["power_w"] == {"current": 88.26, "max": 700.0} and g["clocks_mhz"] == {"current": 1980.0, "max": 1980.0}
    assert d["links"] == [] and d["cpu"] is None  # saved text says nothing of the host


def test_a_file_with_no_known_output_is_refused(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("GPU looks slow today\n")
    with pytest.raises(DecodescopeError, match="no nvidia-smi or lspci output recognised"):
        from_files([str(f)])


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(DecodescopeError, match="cannot read"):
        from_files([str(tmp_path / "nope.txt")])
