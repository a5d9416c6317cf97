"""`decodescope model` end to end, as a user runs it (a real subprocess)."""

import json
import re
import subprocess
import sys

import pytest

REF = ["qwen3.6-27b", "--gpu", "rtx-a6000", "--tp", "2", "--spec", "mtp:3", "--accept", "3.08",
       "--context", "500", "--link", "pcie-sys", "--engine", "sglang"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "decodescope", *args], capture_output=True, text=True,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def ref_json():
    r = run("model", *REF, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_has_the_documented_fields(ref_json):
    for key in ("params_total", "params_active", "params_read_per_token", "weight_bytes_per_gpu",
                "tokens_per_round", "ceiling", "expected", "breakdown", "bound", "levers", "memory"):
        assert key in ref_json, key
    for est in ("ceiling", "expected"):
        assert {"round_ms", "tok_s", "tok_s_total"} <= set(ref_json[est])
    comps = [c["component"] for c in ref_json["breakdown"]]
    assert {"weights", "kv_cache", "state", "allreduce", "draft", "host"} <= set(comps)
    assert all({"component", "ms", "bytes", "flops"} <= set(c) for c in ref_json["breakdown"])


def test_terminal_shows_the_same_numbers_as_json(ref_json):
    r = run("model", *REF)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for est in ("ceiling", "expected"):
        assert f"{ref_json[est]['round_ms']:.2f}" in out
        assert f"{ref_json[est]['tok_s']:.1f}" in out
    for c in ref_json["breakdown"]:
        assert re.search(rf"{c['component']}\s.*{c['ms']:.2f}", out), c["component"]


@pytest.mark.parametrize("args, message", [
    (["qwen3-8b", "--gpu", "h1OO"], "closest"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--tp", "3"], "does not divide"),
    (["llama-3.1-405b", "--gpu", "a10"], "does not fit"),
    (["no-such-model", "--gpu", "h100-sxm"], "no config found"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--spec", "eagle:3"], "needs --accept"),
])
def test_bad_input_exits_2_with_a_message(args, message):
    r = run("model", *args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_list_presets():
    r = run("model", "--list")
    assert r.returncode == 0 and "qwen3.6-27b" in r.stdout


def test_model_path_imports_no_heavy_module():
    probe = ("import sys; from decodescope.cli.main import main\n"
             f"sys.argv = ['decodescope', 'model', *{REF!r}]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print([m for m in ('torch', 'matplotlib', 'transformers', 'numpy', 'aiohttp') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"
