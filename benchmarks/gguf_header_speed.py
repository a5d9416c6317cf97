"""How fast a GGUF header is read: decodescope's walk against ggml-org's gguf.GGUFReader.

Writes the header of a Qwen3-30B-A3B-shaped GGUF (48 layers of tensors, a 151,936-token
vocabulary and as many merges: what a real file carries) with the gguf package, then the
weights as zeros for GGUFReader, which maps them too, and times both readers on it.
Needs `pip install gguf` (in the test extras).

    python benchmarks/gguf_header_speed.py [--runs N]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import gguf
import numpy as np

from decodescope.arch.gguf_header import read_gguf

VOCAB = 151_936


def write(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(48)
    w.add_token_list([f"tok{i}" for i in range(VOCAB)])
    w.add_token_types([1] * VOCAB)
    w.add_token_merges([f"a{i} b{i}" for i in range(VOCAB)])
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_0]
    for i in range(48):  # small tensors: the header's entries matter, not the weights' bytes
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((64, 64 // block * size), np.uint8),
                     raw_shape=(64, 64 // block * size), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "header.gguf"
        write(f)
        ours = timed(lambda: read_gguf(str(f)), a.runs)
        theirs = timed(lambda: gguf.GGUFReader(str(f)), a.runs)
    print(f"GGUF header with {VOCAB} tokens and merges, 48 tensors: decodescope read_gguf {ours:.3f} s, "
          f"gguf.GGUFReader {theirs:.2f} s (median of {a.runs})")


if __name__ == "__main__":
    main()
