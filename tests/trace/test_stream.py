"""The streamed reading (trace/stream.py) against the one-pass reading (find_steps over the whole
RawTrace, an independent path: every event held, one sort, one sweep per step) on real traces,
cut into many byte ranges so that steps, graph replays and kernel/launch pairs straddle the cuts."""

import gzip
import subprocess
import sys

import pytest
from tracefiles import EAGER, GRAPH, ROOT, load, public, write

from decodescope.trace.reader import read_trace
from decodescope.trace.steps import find_steps
from decodescope.trace.stream import Bits, read_rank


def _plain(path, tmp_path):
    out = tmp_path / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def _same(streamed, one_pass) -> None:
    """Equal to the last bit: the figures printed come from these."""
    assert streamed.steps.source == one_pass.source
    assert [s.to_dict() for s in streamed.steps.steps] == [s.to_dict() for s in one_pass.steps]
    assert [s.unknown_ms for s in streamed.steps.steps] == [s.unknown_ms for s in one_pass.steps]
    assert streamed.steps.outside_ms == one_pass.outside_ms


@pytest.mark.parametrize("piece_kb", [97, 256, 1024])
@pytest.mark.parametrize("path", [EAGER, GRAPH], ids=["eager", "graph"])
def test_many_cuts_read_like_one_pass(tmp_path, monkeypatch, path, piece_kb):
    """The 11 MB eager trace in 256 KB ranges is cut 44 times: inside its 5 steps (965 GPU
    events each) and between kernels and their launch calls; the graph trace's ~970-kernel
    replays wait for their cudaGraphLaunch across cuts."""
    plain = _plain(path, tmp_path)
    want = find_steps(read_trace(str(plain)))
    monkeypatch.setattr("decodescope.trace.ranges.PARALLEL_BYTES", 1)
    monkeypatch.setattr("decodescope.trace.ranges.PIECE_BYTES", piece_kb << 10)
    got = read_rank(str(plain), workers=3)
    assert got.read_whole == ""  # streamed, not read whole
    assert len(got.steps.steps) == 5 and got.gpu_events == len(read_trace(str(plain)).gpu)
    _same(got, want)


@pytest.mark.parametrize("name", ["ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                  "nccl_parser_config_nccl_data.json.gz"])
def test_public_traces_in_pieces(tmp_path, monkeypatch, name):
    """Training traces from other machines: the NCCL one runs kernels on two streams, written
    out of order of start (the reordering holds them back)."""
    plain = _plain(public(name), tmp_path)
    monkeypatch.setattr("decodescope.trace.ranges.PARALLEL_BYTES", 1)
    monkeypatch.setattr("decodescope.trace.ranges.PIECE_BYTES", 1 << 20)
    got = read_rank(str(plain), workers=2)
    assert got.read_whole == ""
    _same(got, find_steps(read_trace(str(plain))))


def test_gzip_streams_block_by_block():
    got = read_rank(str(EAGER))
    assert got.read_whole == ""
    _same(got, find_steps(read_trace(str(EAGER))))


def test_annotations_after_the_gpu_events_read_whole(tmp_path):
    """A writer that puts step ranges after the kernels: the windows are not all known when the
    kernels come, so the file is read whole, with the same result."""
    doc = load(EAGER)
    ev = doc["traceEvents"]
    late = [e for e in ev if e.get("cat") == "user_annotation"][3:]  # the last 2 of the 5 decode_step ranges
    doc["traceEvents"] = [e for e in ev if not any(e is x for x in late)] + late
    path = write(doc, tmp_path / "late.json")
    got = read_rank(str(path))
    assert got.read_whole == "an annotation after the first GPU event"
    _same(got, find_steps(read_trace(str(path))))


def test_launch_before_its_kernels_reads_whole(tmp_path):
    """Launch calls written before their kernels (Kineto writes them after): a kernel whose
    launch has gone by cannot be placed without keeping every launch, so the file is read whole."""
    doc = load(EAGER)
    ev = doc["traceEvents"]
    doc["traceEvents"] = [e for e in ev if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")] + \
        [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    path = write(doc, tmp_path / "launch_first.json")
    got = read_rank(str(path))
    assert got.read_whole == "a kernel written after its launch call"
    _same(got, find_steps(read_trace(str(path))))


def test_bits_hold_ids_below_the_first():
    b = Bits()
    b.cover(1000, 1100)
    b.bits[(1050 - b.base) >> 3] |= 1 << ((1050 - b.base) & 7)
    b.cover(5, 2000)  # moves bit 0 down to 0 and grows
    assert b.base == 0 and 1050 in b and 1049 not in b and 5 not in b and 10**9 not in b


BUILD = """import sys; sys.path.insert(0, sys.argv[1] + "/benchmarks")
from pathlib import Path
from trace_speed import build
build(Path(sys.argv[2]), int(sys.argv[3]))"""
RSS = """import resource, sys
from decodescope.trace.summary import analyse
analyse([sys.argv[1]])
print(max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))"""


def test_memory_does_not_grow_with_the_file(tmp_path):
    """Peak RSS (KB, of the largest process) on 20 and 80 MB copies of the eager trace's steps
    (the first read in 4 MB blocks, the second in 16 MB byte ranges on the cores): holding every
    event grew by ~0.14 MB per MB of trace (85 MB at 300 MB, 205 MB at 905 MB)."""
    peak = []
    for mb in (20, 80):
        path = tmp_path / f"t{mb}.json"
        subprocess.run([sys.executable, "-c", BUILD, str(ROOT), str(path), str(mb)], check=True)
        assert read_rank(str(path), workers=2).read_whole == ""  # streamed: in 4 MB blocks, in 16 MB ranges
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
        r = subprocess.run([sys.executable, "-c", RSS, str(path)],
                           capture_output=True, text=True, env=env, cwd=ROOT, check=True)
        peak.append(int(r.stdout))
        path.unlink()
    assert peak[1] < peak[0] * 1.05, peak  # the one-pass reading: +10 % here
