"""The bundled TOML data files, parsed once per content. Parsing gpus.toml and its
siblings cost a fifth of a `decodescope model` run, so the parsed tables are kept in the
user's cache folder in marshal form, under a name that carries the file's checksum: an
edited file gets a new entry. The TOML stays the one source; when the cache folder cannot
be read or written the file is simply parsed."""

import marshal
import os
import sys
import zlib
from pathlib import Path


def cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/decodescope, else ~/.cache/decodescope; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return Path(base or Path.home() / ".cache") / "decodescope"
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def load_toml(path: Path) -> dict:
    """The parsed TOML file at `path`, from the cache when its content was parsed before."""
    raw = path.read_bytes()
    folder = cache_dir()
    # marshal's format can change between Python versions: the version is part of the name
    name = f"{path.stem}-{zlib.crc32(raw):08x}-{len(raw)}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"
    entry = folder / name if folder else None
    if entry:
        try:
            data = marshal.loads(entry.read_bytes())
            if isinstance(data, dict):
                return data
        except (OSError, EOFError, ValueError, TypeError):  # absent, unreadable or damaged: parse again
            pass
    import tomllib  # only on a cache miss

    data = tomllib.loads(raw.decode())
    if entry:
        _store(entry, data)
    return data


def _store(entry: Path, data: dict) -> None:
    """Write atomically (a parallel run reads either nothing or a whole entry); a folder
    that cannot be written, or a table marshal cannot hold (TOML dates), is skipped."""
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    try:
        blob = marshal.dumps(data)
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(blob)
        os.replace(tmp, entry)
    except (OSError, ValueError):
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
