"""Find and read a model's config.json: a file, a model folder, a bundled preset, or a
hub id (from the local Hugging Face cache, else downloaded when online)."""

import json
import os
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from decodescope.errors import DecodescopeError

PRESET_DIR = Path(__file__).parent / "presets"


@dataclass(frozen=True)
class RawConfig:
    data: dict  # the config.json as parsed
    source: str  # where it came from (path or "preset:NAME")
    name: str  # short model name for display


@cache
def presets() -> dict[str, dict]:
    """Preset name -> {file, aliases, note} from presets/presets.toml."""
    with open(PRESET_DIR / "presets.toml", "rb") as f:
        return tomllib.load(f)["preset"]


def _preset_index() -> dict[str, str]:
    index = {}
    for name, p in presets().items():
        for key in (name, *p.get("aliases", [])):
            index[_norm(key)] = name
    return index


def _norm(s: str) -> str:
    return s.strip().lower().replace("_", "-").replace(" ", "-")


def _read_json(path: Path) -> dict:
    try:
        # Python's json accepts Infinity/NaN, which Nemotron-H configs contain
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DecodescopeError(f"{path} is not valid JSON: {e}", "pass the model's config.json") from e


def load_config(model: str) -> RawConfig:
    """Read the config for `model`: path to config.json, model folder, preset or hub id."""
    p = Path(model).expanduser()
    if p.is_file():
        return RawConfig(_read_json(p), str(p), p.parent.name if p.name == "config.json" else p.stem)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise DecodescopeError(f"{p} has no config.json", "point at the model folder that holds config.json")
        return RawConfig(_read_json(p / "config.json"), str(p / "config.json"), p.name)
    name = _preset_index().get(_norm(model))
    if name:
        return RawConfig(_read_json(PRESET_DIR / presets()[name]["file"]), f"preset:{name}", name)
    if "/" in model and not model.startswith((".", "/")):
        return _from_hub(model)
    import difflib
    close = difflib.get_close_matches(_norm(model), sorted(presets()), n=5, cutoff=0.4)
    raise DecodescopeError(
        f"no config found for '{model}': not a file, a folder, a preset or a hub id (org/name)",
        (f"did you mean: {', '.join(close)}? " if close else "")
        + "see `decodescope model --list` for presets, or pass a path to config.json")


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def _from_hub(repo_id: str) -> RawConfig:
    name = repo_id.split("/")[-1]
    snaps = _hub_cache() / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    cached = sorted(snaps.glob("*/config.json"), key=lambda q: q.stat().st_mtime) if snaps.is_dir() else []
    if cached:
        return RawConfig(_read_json(cached[-1]), str(cached[-1]), name)
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DecodescopeError(f"{repo_id} is not in the local hub cache ({_hub_cache()}) and HF_HUB_OFFLINE=1",
                               "download it once, or pass a path to its config.json")
    import urllib.error  # here, not at the top: urllib.request costs `decodescope model` ~15 % of its time
    import urllib.request
    url = f"{os.environ.get('HF_ENDPOINT', 'https://huggingface.co')}/{repo_id}/resolve/main/config.json"
    req = urllib.request.Request(url)
    if os.environ.get("HF_TOKEN"):
        req.add_header("Authorization", f"Bearer {os.environ['HF_TOKEN']}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return RawConfig(json.loads(r.read()), url, name)
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as e:
        raise DecodescopeError(f"could not fetch {url}: {e}",
                               "check the id and the network (gated models need HF_TOKEN), "
                               "or pass a path to config.json") from e
