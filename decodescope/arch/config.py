"""Find and read a model's config.json: a file, a model folder, a bundled preset, or a
hub id (from the local Hugging Face cache, else downloaded when online)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from decodescope.datafile import load_toml
from decodescope.errors import DecodescopeError

if TYPE_CHECKING:  # pathlib is imported only for a file, a folder or the hub cache: a preset never pays for it
    from pathlib import Path

PRESET_DIR = os.path.join(os.path.dirname(__file__), "presets")


@dataclass(frozen=True)
class RawConfig:
    """A model's config.json as read, with where it came from."""
    data: dict  # the config.json as parsed
    source: str  # where it came from (path or "preset:NAME")
    name: str  # short model name for display


@cache
def presets() -> dict[str, dict]:
    """Preset name -> {file, aliases, note} from presets/presets.toml."""
    return load_toml(os.path.join(PRESET_DIR, "presets.toml"))["preset"]


def _preset_index() -> dict[str, str]:
    index = {}
    for name, p in presets().items():
        for key in (name, *p.get("aliases", [])):
            index[_norm(key)] = name
    return index


def _norm(s: str) -> str:
    return s.strip().lower().replace("_", "-").replace(" ", "-")


MAX_CONFIG_BYTES = 16 << 20  # the largest released config.json is under 1 MB
# a hub id: org/name, letters, digits, '-', '_', '.' (huggingface_hub's repo-id rule)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def _parse(text: str | bytes, where: str) -> dict:
    try:
        # Python's json accepts Infinity/NaN, which Nemotron-H configs contain
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, 4300+ digit numbers, deep nesting
        raise DecodescopeError(f"{where} is not a readable JSON config: {str(e)[:120] or type(e).__name__}",
                               "pass the model's config.json") from None
    if not isinstance(data, dict):
        raise DecodescopeError(f"{where}: the config is a JSON {type(data).__name__}, not an object",
                               "pass the model's config.json, a JSON object of its fields")
    return data


def _read_json(path: str | Path) -> dict:
    try:
        if os.stat(path).st_size > MAX_CONFIG_BYTES:
            raise DecodescopeError(f"{path} is {os.stat(path).st_size >> 20} MB, too large for a config.json",
                                   "pass the model's config.json")
        with open(path, "rb") as f:
            return _parse(f.read(), str(path))
    except OSError as e:
        raise DecodescopeError(f"cannot read {path}: {e.strerror or e}", "check the path and its permissions") from None


def _as_path(model: str) -> Path | None:
    """`model` as an existing file or folder, else None."""
    try:
        p = os.path.expanduser(model)
        if not (os.path.isfile(p) or os.path.isdir(p)):  # False for a NUL byte or a name too long
            return None
        from pathlib import Path

        return Path(model).expanduser()
    except (OSError, RuntimeError, ValueError):  # no home directory for '~'
        return None


def load_config(model: str) -> RawConfig:
    """Read the config for `model`: path to config.json, model folder, preset or hub id."""
    if not isinstance(model, str) or not model.strip() or len(model) > 4096:
        raise DecodescopeError("the model name is empty or longer than 4096 characters",
                               "pass a path to config.json, a preset or a hub id (org/name)")
    p = _as_path(model)
    if p and p.is_file() and p.name.lower().endswith(".gguf"):
        from decodescope.arch.gguf_config import gguf_config  # imported for a GGUF only

        data, name = gguf_config(str(p))
        return RawConfig(data, str(p), name)
    if p and p.is_file():
        return RawConfig(_read_json(p), str(p), p.parent.name if p.name == "config.json" else p.stem)
    if p:
        if not (p / "config.json").is_file():
            raise DecodescopeError(f"{p} has no config.json", "point at the model folder that holds config.json")
        return RawConfig(_read_json(p / "config.json"), str(p / "config.json"), p.name)
    name = _preset_index().get(_norm(model))
    if name:
        return RawConfig(_read_json(os.path.join(PRESET_DIR, presets()[name]["file"])), f"preset:{name}", name)
    if HUB_ID.fullmatch(model) and not model.endswith(".json"):
        return _from_hub(model)
    if "/" in model or "\\" in model or model.endswith(".json"):
        raise DecodescopeError(f"no readable file or folder at '{model[:200]}'",
                               "check the path (it is not looked up on the hub: hub ids look like org/name)")
    import difflib
    close = difflib.get_close_matches(_norm(model), sorted(presets()), n=5, cutoff=0.4)
    raise DecodescopeError(
        f"no config found for '{model}': not a file, a folder, a preset or a hub id (org/name)",
        (f"did you mean: {', '.join(close)}? " if close else "")
        + "see `decodescope model --list` for presets, or pass a path to config.json")


def _hub_cache() -> Path | None:
    """The local Hugging Face hub cache, None when there is no home directory to hold it."""
    from pathlib import Path

    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    try:
        return Path.home() / ".cache" / "huggingface" / "hub"
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def offline_model(name: str) -> str | None:
    """A model name as a server logged it, as load_config takes it without the network: an
    existing file or folder, a preset (the name or its last path part), or a hub id whose
    config.json is in the local hub cache (also read from a cache path `models--org--name/…`);
    None when it is none of these."""
    if _as_path(name):
        return name
    parts = [q for q in re.split(r"[\\/]", name) if q]
    hub = next((q[len("models--"):].replace("--", "/", 1) for q in parts if q.startswith("models--")), name)
    for candidate in (name, *parts[-1:], hub):
        if _norm(candidate) in _preset_index():
            return candidate
    return hub if HUB_ID.fullmatch(hub) and _cached_hub(hub) else None


def _cached_hub(repo_id: str) -> Path | None:
    """The newest config.json of repo_id in the local hub cache, or None."""
    cache = _hub_cache()
    snaps = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" if cache else None
    try:
        cached = sorted(snaps.glob("*/config.json"), key=lambda q: q.stat().st_mtime) if snaps and snaps.is_dir() else []
    except OSError:
        cached = []
    return cached[-1] if cached else None


def _from_hub(repo_id: str) -> RawConfig:
    name, cached = repo_id.split("/")[-1], _cached_hub(repo_id)
    if cached:
        return RawConfig(_read_json(cached), str(cached), name)
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DecodescopeError(f"{repo_id} is not in the local hub cache ({_hub_cache()}) and HF_HUB_OFFLINE=1",
                               "download it once, or pass a path to its config.json")
    import urllib.error  # only a hub download needs it (60 ms to import)
    import urllib.request
    url = f"{os.environ.get('HF_ENDPOINT', 'https://huggingface.co')}/{repo_id}/resolve/main/config.json"
    req = urllib.request.Request(url)
    if os.environ.get("HF_TOKEN"):
        req.add_header("Authorization", f"Bearer {os.environ['HF_TOKEN']}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return RawConfig(_parse(r.read(MAX_CONFIG_BYTES), url), url, name)
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise DecodescopeError(f"could not fetch {url}: {e}",
                               "check the id and the network (gated models need HF_TOKEN), "
                               "or pass a path to config.json") from e
