"""Real traces for the trace tests: the H200 decode loops in tests/data/h200 and the public
HolisticTraceAnalysis test traces (https://github.com/facebookresearch/HolisticTraceAnalysis,
tests/data), which this project's CI lays in a shared/traces folder beside the clone."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "h200"
EAGER = H200 / "trace_eager_llama8b_shape.json.gz"
GRAPH = H200 / "trace_graph_llama8b_shape.json.gz"
PUBLIC = ROOT.parent / "shared" / "traces"


def public(name: str) -> Path:
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"public trace {name} not here (needs ../shared/traces)")
    return p


def load(path: Path) -> dict:
    """The whole document with the standard library: the independent reading the tests compare against."""
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        return json.load(f)


def write(doc: dict, path: Path) -> Path:
    """Kineto's layout (one event per indented block) is what json.dumps(indent=2) comes closest to;
    tests that need Kineto's exact layout edit the original bytes instead."""
    with gzip.open(path, "wt") if str(path).endswith(".gz") else open(path, "w") as f:
        json.dump(doc, f)
    return path


def run(*args):
    return subprocess.run([sys.executable, "-m", "decodescope", "trace", *map(str, args)], capture_output=True,
                          text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}, cwd=ROOT)
