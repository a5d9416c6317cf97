"""Follow a growing log file, like `tail -F`: from its end at open, across rotation
(the path names a new file) and truncation (copytruncate)."""

import os
from pathlib import Path

from decodescope.errors import DecodescopeError


class LogTail:
    def __init__(self, path: str | Path, from_start: bool = False):
        self.path = Path(path)
        try:
            self._f = self.path.open("rb")
        except OSError as e:
            raise DecodescopeError(
                f"cannot read the server log {self.path}: {e}", "pass the log file the server writes"
            ) from e
        if not from_start:
            self._f.seek(0, os.SEEK_END)  # only what the server writes from now on
        self._ino = os.fstat(self._f.fileno()).st_ino
        self._partial = b""  # a line the server has not finished writing

    def poll(self) -> list[str]:
        """Complete lines written since the last poll."""
        lines = self._read()  # the rest of the current file first, even if it was just rotated
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return lines  # rotated away; the new file is not there yet
        if st.st_ino != self._ino:
            self._reopen()
            lines += self._read()
        elif st.st_size < self._f.tell():
            self._f.seek(0)  # truncated in place
            self._partial = b""
            lines += self._read()
        return lines

    def close(self) -> None:
        self._f.close()

    def _reopen(self) -> None:
        self._f.close()
        self._f = self.path.open("rb")
        self._ino = os.fstat(self._f.fileno()).st_ino
        self._partial = b""

    def _read(self) -> list[str]:
        data = self._f.read()
        if not data:
            return []
        *whole, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace").rstrip("\r") for line in whole]
