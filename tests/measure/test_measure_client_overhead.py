"""benchmarks/client_overhead.py runs end to end (tiny sizes: a smoke test, not the figures)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.server


@pytest.mark.parametrize("steps", [[], ["--lockstep"]], ids=["independent", "lockstep"])
def test_the_benchmark_matches_every_measured_gap_to_the_servers_send_times(steps):
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks/client_overhead.py"),
        "--streams",
        "3",
        "--tokens",
        "6",
        "--interval-ms",
        "5",
        "--json",
        *steps,
    ]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout)
    assert out["tokens"] == 18 and out["itl_error_vs_server_send_ms"]["n"] == 15, "5 gaps per stream, all matched"
    assert out["itl_error_vs_server_send_ms"]["abs_p50_ms"] < 5
    assert out["client_cpu_us_per_token"] > 0
