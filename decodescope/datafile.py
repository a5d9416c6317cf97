"""The bundled TOML data files, parsed once per content. Parsing gpus.toml and its
siblings cost a fifth of a `decodescope model` run, so the parsed tables are kept in the
user's cache folder in marshal form, under a name that carries the file's checksum: an
edited file gets a new entry. The TOML stays the one source; when the cache folder cannot
be read or written the file is simply parsed."""

import marshal
import os
import sys
import zlib

# os.path, not pathlib: importing pathlib (with urllib.parse) costs ~3 % of a `decodescope model` run


def cache_dir() -> str | None:
    """$XDG_CACHE_HOME/decodescope, else ~/.cache/decodescope; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home.startswith("~"):  # no HOME and no passwd entry
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "decodescope")


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def load_toml(path: str | os.PathLike) -> dict:
    """The parsed TOML file at `path`, from the cache when its content was parsed before."""
    raw = _read(path)
    folder = cache_dir()
    # marshal's format can change between Python versions: the version is part of the name
    stem = os.path.splitext(os.path.basename(path))[0]
    name = f"{stem}-{zlib.crc32(raw):08x}-{len(raw)}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"
    entry = os.path.join(folder, name) if folder else None
    if entry:
        try:
            data = marshal.loads(_read(entry))
            if isinstance(data, dict):
                return data
        except (OSError, EOFError, ValueError, TypeError):  # absent, unreadable or damaged: parse again
            pass
    import tomllib  # only on a cache miss

    data = tomllib.loads(raw.decode())
    if entry:
        store(entry, data)
    return data


def store(entry: str, data: dict) -> None:
    """Write atomically (a parallel run reads either nothing or a whole entry); a folder
    that cannot be written, or a table marshal cannot hold (TOML dates), is skipped."""
    tmp = f"{entry}.{os.getpid()}.tmp"
    try:
        blob = marshal.dumps(data)
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, entry)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:  # never written, or gone
            pass
