"""The command line's cache of dataclass methods: a warm run compiles none and its classes
behave as compiled ones; a changed class, a damaged cache or an unwritable folder just
compile. Each case runs in its own interpreter, as the command line does (the cache is
installed for the whole process)."""

import marshal
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a frozen dataclass, and how it behaves: printed as one line to compare between runs
CLASS = """
from dataclasses import FrozenInstanceError, dataclass
@dataclass(frozen=True)
class Point:
    x: int
    y: float = 0.5{extra}
p = Point(1)
try:
    p.x = 2
    frozen = False
except FrozenInstanceError:
    frozen = True
print(repr(p), p == Point(1), p == Point(2), hash(p) == hash(Point(1)), frozen)
"""
PROBE = """
import decodescope.cli.codecache as codecache
cache = codecache.install()
compiled = []
def counting_compile(*args, **kwargs):
    compiled.append(args[0])
    return compile(*args, **kwargs)
codecache.compile = counting_compile  # the module's name for the builtin
{body}
cache.save()
print(len(compiled))
"""


def _run(tmp_path: Path, extra: str = "") -> tuple[str, int]:
    """(the class's behaviour line, how many methods were compiled) in a fresh interpreter."""
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    code = PROBE.format(body=CLASS.format(extra=extra))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    line, count = r.stdout.strip().splitlines()
    return line, int(count)


def _entry(tmp_path: Path) -> Path:
    return tmp_path / "decodescope" / f"dataclass-code-{sys.hexversion:x}.marshal"


def test_a_warm_run_compiles_no_method_and_the_class_behaves_the_same(tmp_path):
    cold = _run(tmp_path)
    # a frozen dataclass with eq: __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__
    # on Python 3.11 and 3.12 (one source each); 3.13 writes them in one source
    assert cold == ("Point(x=1, y=0.5) True False True True", 6 if sys.version_info < (3, 13) else 1)
    assert _run(tmp_path) == (cold[0], 0)
    assert len(marshal.loads(_entry(tmp_path).read_bytes())) == cold[1]


def test_a_changed_class_compiles_again_and_is_kept_beside_the_old(tmp_path):
    first = _run(tmp_path)[1]
    line, compiled = _run(tmp_path, extra="\n    z: str = 'new'")
    assert line == "Point(x=1, y=0.5, z='new') True False True True"
    assert compiled >= 1  # at least __init__ differs
    assert len(marshal.loads(_entry(tmp_path).read_bytes())) == first + compiled


def test_a_damaged_cache_is_compiled_and_rewritten(tmp_path):
    _entry(tmp_path).parent.mkdir(parents=True)
    _entry(tmp_path).write_bytes(b"not marshal data")
    cold = _run(tmp_path)
    assert cold[1] > 0
    assert _run(tmp_path) == (cold[0], 0)


def test_a_cache_holding_other_objects_is_compiled(tmp_path):
    """A marshal file that loads but holds no code objects (written by something else)."""
    cold = _run(tmp_path)
    _entry(tmp_path).write_bytes(marshal.dumps(dict.fromkeys(marshal.loads(_entry(tmp_path).read_bytes()), 1)))
    assert _run(tmp_path) == cold


def test_a_full_cache_keeps_only_what_the_run_used(tmp_path):
    """Past MAX_ENTRIES (600) methods, e.g. after upgrades, the stale ones go."""
    _entry(tmp_path).parent.mkdir(parents=True)
    stale = {f"x = {i}": compile(f"x = {i}", "<string>", "exec") for i in range(600)}
    _entry(tmp_path).write_bytes(marshal.dumps(stale))
    line, compiled = _run(tmp_path)
    assert len(marshal.loads(_entry(tmp_path).read_bytes())) == compiled  # this run's methods only
    assert _run(tmp_path) == (line, 0)


def test_an_unwritable_folder_compiles_every_run(tmp_path):
    (tmp_path / "decodescope").write_text("a file where the folder should be")
    cold = _run(tmp_path)
    assert cold[1] > 0
    assert _run(tmp_path) == cold


def test_the_command_line_prints_the_same_from_a_warm_cache(tmp_path):
    """`python -m decodescope model`: a cold run (every method compiled) and a warm one."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "decodescope", "model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--json"]
    runs = [subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].startswith("{")
    assert _entry(tmp_path).exists()
