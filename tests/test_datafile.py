"""The parsed-TOML cache: the TOML file stays the source, the cache only saves parsing."""

import marshal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from decodescope.datafile import load_toml

GPUS = Path(__file__).parents[1] / "decodescope" / "hardware" / "gpus.toml"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "decodescope"


def _copy(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "data.toml"
    p.write_text(text)
    return p


def test_first_load_parses_and_stores_the_second_reads_the_entry(tmp_path, cache):
    src = _copy(tmp_path, GPUS.read_text())
    assert load_toml(src) == tomllib.loads(GPUS.read_text())
    (entry,) = cache.iterdir()
    # plant a different table under the entry's name: a cache hit returns it unparsed
    entry.write_bytes(marshal.dumps({"from": "cache"}))
    assert load_toml(src) == {"from": "cache"}


def test_an_edited_file_is_parsed_again(tmp_path, cache):
    src = _copy(tmp_path, "[gpu.a]\nmemory_gb = 24\n")
    assert load_toml(src) == {"gpu": {"a": {"memory_gb": 24}}}
    src.write_text("[gpu.a]\nmemory_gb = 48\n")  # same length, new content
    assert load_toml(src) == {"gpu": {"a": {"memory_gb": 48}}}
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_entry_is_parsed_again_and_replaced(tmp_path, cache):
    src = _copy(tmp_path, 'name = "x"\n')
    load_toml(src)
    (entry,) = cache.iterdir()
    entry.write_bytes(b"\xff\x00 not marshal")
    assert load_toml(src) == {"name": "x"}
    assert marshal.loads(entry.read_bytes()) == {"name": "x"}


def test_an_unwritable_cache_folder_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert load_toml(_copy(tmp_path, "n = 1\n")) == {"n": 1}


def test_tables_marshal_cannot_hold_are_not_stored(tmp_path, cache):
    src = _copy(tmp_path, "day = 2026-11-30\n")  # a TOML date: a datetime.date
    assert str(load_toml(src)["day"]) == "2026-11-30"
    assert not cache.exists() or not list(cache.iterdir())


def test_a_warm_model_run_parses_no_toml(tmp_path):
    """Second `decodescope model` run with the same cache folder: gpus, engines and
    presets come from the cache, so tomllib is never imported."""
    probe = ("import sys; from decodescope.cli.main import main\n"
             "sys.argv = ['decodescope', 'model', 'qwen3.6-27b', '--gpu', 'rtx-a6000', '--tp', '2']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('tomllib' in sys.modules)")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[1])}
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env) for _ in range(2)]
    assert [r.stdout.strip().splitlines()[-1] for r in runs] == ["True", "False"], runs[1].stderr
    assert runs[0].stdout.splitlines()[:-1] == runs[1].stdout.splitlines()[:-1]  # the same table
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "decodescope").iterdir()) == ["engines", "gpus", "presets"]
