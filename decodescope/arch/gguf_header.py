"""A GGUF file's header: its metadata and each tensor's name, ggml type and size. The
weights after it are never read, so a truncated file works.

Read by hand, as measured by benchmarks/gguf_header_speed.py on a 2-core machine: a header
with a 151,936-token vocabulary and as many merges takes 0.027 s here and 7.9 s in the gguf
package's GGUFReader (it builds an array per field and item). Layout:
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

import mmap
import re
import stat
import struct
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from decodescope.errors import DecodescopeError

# ggml type id -> (name, weights per block, bytes per block), as gguf-py's GGML_QUANT_SIZES
# (https://github.com/ggml-org/llama.cpp/blob/master/gguf-py/gguf/constants.py)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18),
}
# GGUF value types: 0-7 and 10-12 fixed-size scalars (struct formats), 8 a string, 9 an array
_SCALAR_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_SCALAR = {t: struct.calcsize("<" + f) for t, f in _SCALAR_FMT.items()}  # bytes
MAX_COUNT = 1 << 24  # tensors, fields or array items: far above any real file, far below a hang


class Array(NamedTuple):
    """An array field of the header, skipped: its length only."""
    length: int


class TensorInfo(NamedTuple):
    name: str
    ggml_type: str  # GGML_TYPES name
    dims: int
    weights: int
    bytes: int


class _Header:
    """A cursor over a memory-mapped GGUF header (little-endian)."""

    def __init__(self, buf, source: str):
        self.buf, self.pos, self.source = buf, 0, source

    def take(self, fmt: str):
        try:
            out = struct.unpack_from("<" + fmt, self.buf, self.pos)
        except struct.error:
            raise DecodescopeError(f"{self.source}: the GGUF header ends early", "pass a complete .gguf file") from None
        self.pos += struct.calcsize("<" + fmt)
        return out[0] if len(out) == 1 else out

    def count(self, what: str) -> int:
        n = self.take("Q")
        if n > MAX_COUNT:
            raise DecodescopeError(f"{self.source}: {n} {what} in the GGUF header", "the file is not a valid GGUF")
        return n

    def string(self) -> str:
        n = self.count("bytes of a string")
        s = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return s.decode("utf-8", "replace")

    def value(self, vtype: int):
        if vtype in _SCALAR_FMT:
            return self.take(_SCALAR_FMT[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:  # skipped, its length kept (a vocabulary is an array of 150k strings)
            item, n = self.take("I"), self.count("array items")
            if item in _SCALAR:
                self.pos += n * _SCALAR[item]
            elif item == 8:  # strings: a u64 length each; a tight loop, as a vocabulary holds 150k
                pos, length = self.pos, struct.Struct("<Q").unpack_from
                try:
                    for _ in range(n):
                        pos += 8 + length(self.buf, pos)[0]
                except struct.error:
                    raise DecodescopeError(f"{self.source}: the GGUF header ends early",
                                           "pass a complete .gguf file") from None
                self.pos = pos
            else:
                for _ in range(n):
                    self.value(item)
            return Array(n)
        raise DecodescopeError(f"{self.source}: GGUF value type {vtype} unknown", "the file is not a valid GGUF")


def read_gguf(path: str) -> tuple[dict, list[TensorInfo]]:
    """(metadata: scalars, and Array for arrays; each tensor's TensorInfo) of one GGUF file."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse(_Header(buf, path))
    except (OSError, ValueError) as e:  # ValueError: mmap of an empty file
        raise DecodescopeError(f"cannot read {path}: {e}", "pass a .gguf file") from None


def _parse(h: _Header):
    if bytes(h.buf[:4]) != b"GGUF":
        raise DecodescopeError(f"{h.source} is not a GGUF file (no GGUF magic)", "pass a .gguf file")
    h.pos = 4
    version = h.take("I")
    if version not in (2, 3):
        raise DecodescopeError(f"{h.source}: GGUF version {version}", "decodescope reads GGUF versions 2 and 3")
    n_tensors, n_kv = h.count("tensors"), h.count("metadata fields")
    meta = {}
    for _ in range(n_kv):
        key = h.string()
        meta[key] = h.value(h.take("I"))
    tensors = []
    for _ in range(n_tensors):
        name, dims = h.string(), h.take("I")
        if dims > 8:
            raise DecodescopeError(f"{h.source}: tensor {name} has {dims} dimensions", "the file is not a valid GGUF")
        shape = [h.take("Q") for _ in range(dims)]
        gtype, _ = h.take("I"), h.take("Q")
        if gtype not in GGML_TYPES:
            raise DecodescopeError(f"{h.source}: tensor {name} has ggml type {gtype}, unknown to decodescope",
                                   "pass --weights bpw:X (the file's average bits per weight)")
        tname, block, size = GGML_TYPES[gtype]
        n = 1
        for x in shape:
            n *= x
        tensors.append(TensorInfo(name, tname, dims, n, n // block * size))
    return meta, tensors


def _files(path: str) -> list[str]:
    """A split GGUF (NAME-00001-of-00003.gguf) is read from all its parts."""
    m = re.fullmatch(r"(.*)-\d{5}-of-(\d{5})\.gguf", Path(path).name)
    if not m:
        return [path]
    parts = [str(Path(path).with_name(f"{m[1]}-{i:05d}-of-{m[2]}.gguf")) for i in range(1, int(m[2]) + 1)]
    missing = [p for p in parts if not Path(p).is_file()]
    if missing:
        raise DecodescopeError(f"{path} is part of a split GGUF; {Path(missing[0]).name} is missing",
                               "keep every part in one folder")
    return parts


def read_gguf_files(path: str) -> tuple[dict, tuple[TensorInfo, ...]]:
    """read_gguf over every part of a split file (a GGUF as MODEL is asked for its layout,
    then for its weights' types: read once while the file is unchanged)."""
    try:
        st = Path(path).stat()
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "pass a .gguf file") from None
    if not stat.S_ISREG(st.st_mode):  # a pipe would block the read forever
        raise DecodescopeError(f"{path} is not a regular file", "pass a .gguf file")
    return _read_files(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _read_files(path: str, mtime_ns: int, size: int) -> tuple[dict, tuple[TensorInfo, ...]]:
    meta, tensors = {}, []
    for p in _files(path):
        m, t = read_gguf(p)
        meta.update(m)
        tensors += t
    return meta, tuple(tensors)
