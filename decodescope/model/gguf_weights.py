"""A GGUF file's weight format, tensor by tensor, from its header alone.

llama.cpp's quantizers and dynamic quants (e.g. Unsloth's UD files) store each tensor in its
own type: a MoE file's average bits per weight hides attention and shared experts kept at 8
bits beside 4-bit experts, and only those are read for every token. The header lists every
tensor's type and shape; the weights after it are never read, so a truncated file works.

Read by hand: the gguf package's GGUFReader parsed a header with a 152k-token vocabulary in
8.4 s on a 2-core machine (it builds an array per field); this walk over the same header
takes 0.017 s. Layout: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

import mmap
import re
import struct
from collections import defaultdict
from pathlib import Path

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.model.formats import TensorFormat, WeightFormat

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
# the ggml type -> the engines.toml format_efficiency key of its kernels (others: the 16-bit rate)
KERNELS = {"Q4_K": "q4_k_m", "Q5_K": "q5_k_m", "Q6_K": "q6_k", "Q8_0": "q8_0", "MXFP4": "mxfp4"}
# GGUF value types: 0-7 and 10-12 fixed-size scalars, 8 a string, 9 an array
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
MAX_COUNT = 1 << 24  # tensors, fields or array items: far above any real file, far below a hang


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
        if vtype in _SCALAR:
            fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[vtype]
            return self.take(fmt)
        if vtype == 8:
            return self.string()
        if vtype == 9:  # skipped: only scalars are read (a vocabulary is an array of 150k strings)
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
            return None
        raise DecodescopeError(f"{self.source}: GGUF value type {vtype} unknown", "the file is not a valid GGUF")


def read_gguf(path: str) -> tuple[dict, list[tuple[str, str, int, int]]]:
    """(scalar metadata, [(tensor name, ggml type, weights, bytes)]) of one GGUF file."""
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
        tensors.append((name, tname, n, n // block * size))
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


def gguf_format(path: str, arch: Arch) -> WeightFormat:
    """The weight format of a GGUF file for `arch`: routed experts, the other linear weights
    and the LM head each at their own bits (bytes / weights in the file), with the kernel
    of the ggml type that holds most of their bytes."""
    meta, tensors = {}, []
    for p in _files(path):
        m, t = read_gguf(p)
        meta.update((k, v) for k, v in m.items() if v is not None)
        tensors += t
    _check_layers(meta, arch, path)
    groups = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # group -> ggml type -> [weights, bytes]
    for name, tname, n, nbytes in tensors:
        if tname in ("F32", "F64", "I8", "I16", "I32", "I64") or _block(name) >= len(arch.layers):
            continue  # norms, biases, recurrent constants; next-token (MTP) layers
        group = ("experts" if "_exps." in name else "head" if name == "output.weight"
                 else "embedding" if name == "token_embd.weight" else "other")
        groups[group][tname][0] += n
        groups[group][tname][1] += nbytes
    if bool(groups["experts"]) != arch.is_moe:
        raise DecodescopeError(f"{path} {'has' if groups['experts'] else 'has no'} routed experts, the config "
                               f"{'has none' if groups['experts'] else 'has'}", "pass the GGUF of this model")
    fmt = {g: _format(groups[g]) for g in ("experts", "other", "head", "embedding") if groups[g]}
    if "other" not in fmt:
        raise DecodescopeError(f"{path} holds no quantized layer weights", "pass the GGUF of this model")
    head = fmt.get("head") or fmt.get("embedding") or fmt["other"]  # no output.weight: tied to the embedding
    rules = ((r"re:.*\.mlp\.experts\.", fmt["experts"]),) if "experts" in fmt else ()
    summary = ", ".join(f"{g} {_describe(groups[g])}" for g in ("experts", "other", "head") if groups[g])
    return WeightFormat(f"gguf {Path(path).name}", fmt["other"].bits, head.bits, "fp16", kernel=fmt["other"].kernel,
                        per_tensor=rules + (("re:.*", fmt["other"]),), source=f"GGUF header of {Path(path).name}: {summary}")


def _block(name: str) -> int:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m[1]) if m else -1


def _format(types: dict) -> TensorFormat:
    n, nbytes = sum(v[0] for v in types.values()), sum(v[1] for v in types.values())
    main = max(types, key=lambda t: types[t][1])  # the type holding most of the bytes
    return TensorFormat(8 * nbytes / n, KERNELS.get(main, "bf16"), "fp16")


def _describe(types: dict) -> str:
    n, nbytes = sum(v[0] for v in types.values()), sum(v[1] for v in types.values())
    mix = "+".join(sorted(types, key=lambda t: -types[t][1]))
    return f"{mix} {8 * nbytes / n:.2f} bpw"


def _check_layers(meta: dict, arch: Arch, path: str) -> None:
    """The file's block count against the config's layers (plus its next-token layers)."""
    name = meta.get("general.architecture")
    blocks = meta.get(f"{name}.block_count")
    extra = meta.get(f"{name}.nextn_predict_layers") or 0
    if isinstance(blocks, int) and blocks not in (len(arch.layers), len(arch.layers) + extra):
        raise DecodescopeError(f"{path} has {blocks} blocks ({name}), {arch.name} {len(arch.layers)} layers",
                               "pass the GGUF of this model")
