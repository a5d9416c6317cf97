"""Opening a log for reading: a plain file, a .gz, standard input, a FIFO or a process
substitution (`<(cat x)`), each read exactly once.

The gzip test peeks at the first bytes in the stream's own buffer, so nothing is
consumed and nothing is reopened: a pipe cannot be read twice. Lines end at a line
feed only (as in the parallel scan); bytes that are not UTF-8 become U+FFFD; a line
longer than MAX_LINE characters is cut there and the rest of it skipped, so an endless
line (a /dev/zero) costs MAX_LINE of memory, not all of it."""

import gzip
import io
import os
import stat
import sys
import zlib
from contextlib import contextmanager

from decodescope.errors import DecodescopeError

MAX_LINE = 1 << 20  # characters; the longest real statistics line is under 1000
GZIP_MAGIC = b"\x1f\x8b"
READ_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError)  # a truncated or corrupt input


def is_plain_file(path: str) -> bool:
    """A regular, uncompressed file: it can be cut into byte ranges and read again."""
    if path == "-":
        return False
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DecodescopeError(f"no such log file: {path}", "check the path; use - to read standard input") from None
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "check its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise DecodescopeError(f"{path} is a directory, not a log file", "give the log file itself")
    if not stat.S_ISREG(st.st_mode):
        return False
    with _raw(path) as f:
        return f.read(2) != GZIP_MAGIC


@contextmanager
def open_lines(path: str):
    """The lines of a log at `path` ("-": standard input), gzip or plain, read once."""
    own = path != "-"
    raw = _raw(path) if own else _stdin()
    try:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == GZIP_MAGIC else raw
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")
        try:
            yield capped(text)
        finally:
            text.detach()  # standard input stays open; our own file is closed below
    finally:
        if own:
            raw.close()


def capped(f, limit: int = MAX_LINE):
    """Lines of a text stream, each at most `limit` characters."""
    readline = f.readline
    while True:
        line = readline(limit)
        if not line:
            return
        if len(line) == limit and line[-1] != "\n":
            rest = line
            while rest and rest[-1] != "\n":  # skip the rest of an endless line
                rest = readline(limit)
            line += "\n"  # it ended here, for whoever copies the lines on
        yield line


def capped_bytes(f, budget: int, limit: int = MAX_LINE):
    """Lines (decoded) of a binary file from its position until `budget` bytes are read."""
    readline = f.readline
    while budget > 0:
        line = readline(limit)
        if not line:
            return
        budget -= len(line)
        if len(line) == limit and line[-1:] != b"\n":
            rest = line
            while rest and rest[-1:] != b"\n":
                rest = readline(limit)
                budget -= len(rest)
        yield line.decode("utf-8", "replace")


def _raw(path: str):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DecodescopeError(f"no such log file: {path}", "check the path; use - to read standard input") from None
    except IsADirectoryError:
        raise DecodescopeError(f"{path} is a directory, not a log file", "give the log file itself") from None
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "check its permissions") from None


def _stdin():
    try:
        buf = sys.stdin.buffer
        os.fstat(buf.fileno())
    except (AttributeError, OSError, ValueError):
        raise DecodescopeError(
            "standard input is closed", "pipe the log in (cat server.log | decodescope log -) or give its path"
        ) from None
    return buf


# bytes read at a time by line_blocks (a line of MAX_LINE or more is read apart). Not larger:
# with 2 MiB blocks glibc's malloc, whose mmap threshold follows the largest freed block, kept
# growing the heap (a worker's peak RSS 175 MB on a 300 MB log against 19 MB at 256 KiB, the
# same CPU time)
BLOCK = 1 << 18


def line_blocks(f, budget: int, size: int = BLOCK, raw: bool = False):
    """capped_bytes in blocks, for a loop that costs less per line: (text, ended) pairs,
    text.split("\n") the lines, decoded and without their line feed (`raw`: the bytes, not
    decoded); `ended` False: the last line had none (the end of the file, or a line cut at
    MAX_LINE). One decode per block gives the same text as one per line: a block ends at a
    line feed, and a line feed is never part of a multi-byte character. A block with a line
    of MAX_LINE bytes or more hands the rest of the range to capped_bytes, line by line."""
    while budget > 0:
        start = f.tell()
        data = f.read(min(size, budget))
        if not data:
            return
        end = len(data)
        if end == size and end < budget:  # more follows: stop at the last line feed
            end = data.rfind(b"\n") + 1
            if end == 0:  # a line longer than a block
                f.seek(start)
                yield from _line_by_line(f, budget, raw)
                return
            f.seek(start + end)
            data = data[:end]
        if len(data) >= MAX_LINE and _too_long(data):
            f.seek(start)
            yield from _line_by_line(f, budget, raw)
            return
        budget -= end
        if data[-1:] == b"\n":
            yield _text(data[:-1], raw), True
        else:
            cut = data.rfind(b"\n")
            if cut >= 0:
                yield _text(data[:cut], raw), True
            yield _text(data[cut + 1 :], raw), False


def _text(data: bytes, raw: bool):
    return data if raw else data.decode("utf-8", "replace")


def _too_long(data: bytes) -> bool:
    return max(map(len, data.split(b"\n"))) >= MAX_LINE


def _line_by_line(f, budget: int, raw: bool):
    for line in capped_bytes(f, budget):  # decoded: re-encoded, it decodes to the same text
        text = line.encode() if raw else line
        if line.endswith("\n"):
            yield text[:-1], True
        else:
            yield text, False
