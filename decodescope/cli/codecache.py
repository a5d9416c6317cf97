"""The methods `dataclasses` writes for each class, compiled once and kept between runs.
For every dataclass Python 3.11 generates the source of __init__, __repr__, __eq__,
__hash__, __setattr__ and __delattr__ and compiles it at import: for the 23 frozen
dataclasses `decodescope model` imports that was a quarter of its instructions. Here the
compiled code is kept in the user's cache folder (decodescope.datafile.cache_dir), looked up
by the generated source itself, so a changed class (another decodescope version) just misses
and compiles; code objects are kept per Python version (marshal's format is per version).
A folder that cannot be read or written means compiling, as without the cache."""

import dataclasses
import marshal
import os
import sys
from types import CodeType

from decodescope.datafile import cache_dir, store

# decodescope's 88 dataclasses write at most 528 methods (6 each); past 600 (an older version's
# methods beside them) a run keeps only those it used: loading costs ~11 instructions a byte (~1.4 kB each)
MAX_ENTRIES = 600


class CodeCache:
    def __init__(self, path: str | None):
        self.path, self.codes, self.used, self.misses = path, {}, {}, 0
        try:
            with open(path, "rb") as f:
                codes = marshal.loads(f.read())  # marshal.load(f) reads in small pieces: 10x slower
            if isinstance(codes, dict):
                self.codes = codes
        except (OSError, TypeError, EOFError, ValueError):  # no folder, no entry yet, or damaged
            pass

    def exec(self, source: str, globals: dict, locals: dict) -> None:
        """builtins.exec for the source strings dataclasses generates."""
        code = self.codes.get(source)
        if type(code) is not CodeType:  # not kept yet (or a damaged entry)
            code = self.codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            self.misses += 1
        self.used[source] = code
        exec(code, globals, locals)

    def save(self) -> None:
        if self.path and self.misses:
            store(self.path, self.codes if len(self.codes) <= MAX_ENTRIES else self.used)


def install() -> CodeCache:
    """Route dataclasses' compiling through a CodeCache: its functions call `exec` by its
    global name (Python 3.11 to 3.13), which this module attribute now shadows."""
    folder = cache_dir()
    cache = CodeCache(folder and os.path.join(folder, f"dataclass-code-{sys.hexversion:x}.marshal"))
    dataclasses.exec = cache.exec
    return cache
