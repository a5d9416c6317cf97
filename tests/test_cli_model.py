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
    (["no-such-model", "--gpu", "h100-sxm"], "no config found"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--spec", "eagle:3"], "needs --accept"),
    # flags out of range or impossible: one line each, never a traceback
    (["qwen3-8b", "--gpu", "h100-sxm", "--weights", "int4-g0"], "out of range"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--weights", "bpw:0"], "out of range"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--tp", "2", "--link", "none"], "joins no GPUs"),
    (["llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "16"], "NVSwitch domain joins 8"),
    # an MI300X board links each of its 8 GPUs to the 7 others (gpus.toml link_peers): 16 is two boards
    (["llama-3.1-70b", "--gpu", "mi300x", "--tp", "16"], "xgmi mesh joins 8"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--tp", "2", "--ep", "2"], "is dense"),
    (["llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "4", "--spec", "draft:3", "--accept", "2",
      "--draft", "qwen3-1.7b"], "vocabulary"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--spec", "eagle:1000000", "--accept", "2"], "out of range"),
    (["qwen3-8b", "--gpu", "h100-sxm", "--spec", "ngram:1000000000", "--accept", "2"], "out of range"),
    (["qwen3.6-27b", "--gpu", "h100-sxm", "--spec", "mtp:9999999999999999", "--accept", "2"], "out of range"),
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
             "print([m for m in ('torch', 'matplotlib', 'transformers', 'numpy', 'aiohttp', 'rich', 'urllib.request')"
             " if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("args, short_of, warning", [
    # 405B bf16: 2 x 405.9e9 params = 811.7 GB on a 24 GB card; int4 over 16 cards is
    # 4.125/16 x 405.9e9 / 8 = 13.1 GB each
    (["llama-3.1-405b", "--gpu", "a10"], "weights", "the weights alone need 811.7 GB per GPU; would fit: "
                                                    "--weights int4-g128 --tp 16"),
    # 8B at 2M tokens: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token,
    # x 2,000,001 = 262.1 GB for one request beside 16.1 GB of weights
    (["llama-3.1-8b", "--gpu", "rtx-4090", "--context", "2000000"], "kv",
     "one request's KV cache and state at context 2000000 need 262.1 GB"),
])
def test_a_deployment_that_does_not_fit_is_an_answer(args, short_of, warning):
    r = run("model", *args)
    assert r.returncode == 0, r.stderr
    assert "warning: does not fit:" in r.stdout
    assert all(part in " ".join(r.stdout.split()) for part in warning.split("; ")), r.stdout
    j = json.loads(run("model", *args, "--json").stdout)
    assert j["memory"]["fits"] is False and j["memory"]["short_of"] == short_of and j["memory"]["would_fit"]


def test_context_beyond_the_trained_length_is_flagged():
    r = run("model", "llama-2-7b", "--gpu", "h100-sxm", "--context", "8192")
    assert "beyond the model's max_position_embeddings 4096" in " ".join(r.stdout.split())


def test_an_eagle3_head_config_predicts_over_its_draft_vocabulary():
    """The EAGLE-3 head of Llama-3.1-8B (config in tests/data, as published): one decoder
    layer and an LM head of draft_vocab_size 32000 x 4096. Per draft step at batch 1 the
    head reads 32000 x 4096 x 2 B = 0.262 GB, not 128256 x 4096 x 2 = 1.05 GB."""
    from pathlib import Path
    cfg = Path(__file__).parent / "data" / "eagle3-llama3.1-8b" / "config.json"
    r = run("model", "llama-3.1-8b", "--gpu", "h100-sxm", "--spec", "eagle:1", "--accept", "1.5",
            "--draft", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    draft = next(c for c in json.loads(r.stdout)["breakdown"] if c["component"] == "draft")
    # layer: q 4096x4096, k/v 2 x 1024x4096, o 4096x4096, MLP 3 x 14336x4096, 2 norms;
    # + the head and final norm; KV of 1025 tokens x 8 x 128 x 2 x 2 B; embedding not read
    layer = (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096) * 2
    head = 32000 * 4096 * 2 + 4096 * 2
    kv = 1025 * 8 * 128 * 2 * 2
    assert draft["bytes"] == pytest.approx(layer + head + kv, rel=1e-6)
