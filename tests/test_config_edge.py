"""Hostile config.json files and model names: each ends in one DecodescopeError with a
fix, fast, and never reaches the network (HF_HUB_OFFLINE=1 is set for every test here)."""

import json
import time
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

BASE = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _error(path: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(DecodescopeError) as e:
        load_arch(path)
    assert time.perf_counter() - t0 < 1.0
    return str(e.value)


@pytest.mark.parametrize("raw,says", [
    (b"null", "JSON NoneType, not an object"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'"llama"', "JSON str, not an object"),
    (b'{"model_type": "llama", \xff}', "not a readable JSON config"),
    (b"[" * 100_000 + b"]" * 100_000, "not a readable JSON config"),  # RecursionError inside json
    (b'{"hidden_size": ' + b"9" * 5000 + b"}", "not a readable JSON config"),  # int longer than 4300 digits
])
def test_unreadable_or_non_object_json(write_config, raw, says):
    assert says in _error(write_config(raw))


@pytest.mark.parametrize("field,value,says", [
    ("hidden_size", "4096", "'hidden_size' is '4096', expected an integer"),
    ("hidden_size", [4096], "expected an integer"),
    ("hidden_size", 0, "expected an integer from 1"),
    ("num_attention_heads", -32, "expected an integer from 1"),
    ("num_key_value_heads", -8, "expected an integer from 1"),
    ("vocab_size", 1e308, "expected an integer"),
    ("num_hidden_layers", 10**9, "to 1024"),
    ("hidden_size", True, "expected an integer"),
    ("torch_dtype", "float64", "torch_dtype 'float64' is not a checkpoint dtype"),
    ("torch_dtype", ["bfloat16"], "is not a checkpoint dtype"),
    ("model_type", ["llama"], "'model_type' is ['llama'], expected a string"),
    ("layer_types", "full_attention", "expected a list of str"),
    ("quantization_config", "fp8", "quantization_config (or its kv_cache_scheme) is not a JSON object"),
])
def test_wrong_types_and_ranges(write_config, field, value, says):
    assert says in _error(write_config({**BASE, field: value}))


def test_absurd_mtp_and_pattern_sizes_are_refused_fast(write_config):
    ds = json.loads(open(Path(__file__).parent / "data" / "configs" / "deepseek-ai__DeepSeek-V3.2.json").read())
    assert "num_nextn_predict_layers" in _error(write_config({**ds, "num_nextn_predict_layers": 10**9}))
    nh = {"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 131072,
          "hybrid_override_pattern": "M*" * 500_000}
    assert "at most 4096 entries" in _error(write_config(nh))
    qn = {**BASE, "model_type": "qwen3_5", "mtp_num_hidden_layers": 10**9, "layer_types": ["full_attention"] * 32}
    assert "mtp_num_hidden_layers" in _error(write_config(qn))


def test_more_experts_per_token_than_experts(write_config):
    cfg = {**BASE, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 9}
    assert "9 experts per token of 8 experts" in _error(write_config(cfg))


@pytest.mark.parametrize("name,says", [
    ("x" * 5000, "longer than 4096"),
    ("a/" * 3000 + "config.json", "longer than 4096"),
    ("./no/such/config.json", "no readable file or folder"),
    ("models/llama/config.json", "no readable file or folder"),
    ("nonesuch.json", "no readable file or folder"),
])
def test_bad_names_never_go_to_the_hub(name, says):
    with pytest.raises(DecodescopeError, match=says):
        load_arch(name)


def test_hub_id_without_home_directory_is_a_clear_error(monkeypatch):
    for var in ("HOME", "HF_HOME", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    import pathlib

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(pathlib.Path, "home", staticmethod(no_home))
    with pytest.raises(DecodescopeError, match="not in the local hub cache"):
        load_arch("some-org/some-model")


def test_unreadable_file(tmp_path):
    p = tmp_path / "config.json"
    p.mkdir()  # a folder named config.json inside a folder: not a file to read
    with pytest.raises(DecodescopeError):
        load_arch(str(tmp_path))
