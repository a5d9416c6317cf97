"""Property: whatever value a config field holds, `decodescope model` either answers with
finite, non-negative bytes and times or raises one DecodescopeError, each in under a second."""

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from decodescope.arch.config import RawConfig
from decodescope.arch.registry import build_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, predict

CONFIGS = [json.loads(p.read_text()) for p in sorted((Path(__file__).parent / "data" / "configs").glob("*.json"))]
FIELDS = sorted({k for c in CONFIGS for k in c} | {"hybrid_override_pattern", "layer_types", "mtp_num_hidden_layers",
                                                    "num_nextn_predict_layers", "sliding_window", "head_dim"})
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, -1, 2, 7, 10**9, 2**31]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(-3, 3), max_size=5), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))


def _check_numbers(obj, key=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_numbers(v, k)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_numbers(v, key)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and any(
            w in key for w in ("bytes", "time", "_s", "tok", "params")):
        assert math.isfinite(obj) and obj >= 0, f"{key} = {obj}"


def _answer_or_one_error(data: dict) -> None:
    try:
        arch = build_arch(RawConfig(data, "fuzz", "fuzz"))
        p = predict(arch, make_deployment(arch, "h100", batch=4, context=4096))
    except DecodescopeError as e:
        assert str(e)
        return
    _check_numbers(p.to_dict())


OPT_125M = json.loads((Path(__file__).parent / "data" / "configs" / "facebook__opt-125m.json").read_text())


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(CONFIGS), edits=st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1, max_size=3))
# tracebacks and a negative count a longer run found in OPT's fields before they were range-checked
@example(base=OPT_125M, edits={"ffn_dim": -3633.0})
@example(base=OPT_125M, edits={"ffn_dim": ""})
@example(base=OPT_125M, edits={"max_position_embeddings": ""})
def test_any_field_value_gives_an_answer_or_one_clear_error(base, edits):
    data = {**base, **edits}
    _answer_or_one_error(data)


# the keys multimodal wrappers nest their language model under (decodescope/arch/build.py)
NESTED = ("text_config", "llm_config", "language_config")
WRAPPERS = [c for c in CONFIGS if any(isinstance(c.get(k), dict) for k in NESTED)]


def _inner(c: dict) -> dict:
    return next(c[k] for k in NESTED if isinstance(c.get(k), dict))


INNER_FIELDS = sorted({k for c in WRAPPERS for k in _inner(c)})


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(WRAPPERS), edits=st.dictionaries(st.sampled_from(INNER_FIELDS), VALUES, min_size=1, max_size=3))
# a traceback a longer run found: Step3p7's text_config with num_key_value_heads null (read as MHA since)
@example(base=next(c for c in WRAPPERS if c.get("model_type") == "step3p7"), edits={"num_key_value_heads": None})
# and Gemma 4's num_global_key_value_heads, not range-checked before (0: ZeroDivisionError)
@example(base=next(c for c in WRAPPERS if c.get("architectures") == ["Gemma4ForConditionalGeneration"]),
         edits={"num_global_key_value_heads": 0})
@example(base=next(c for c in WRAPPERS if c.get("architectures") == ["Gemma4ForConditionalGeneration"]),
         edits={"global_head_dim": -1280})
@example(base=next(c for c in WRAPPERS if c.get("model_type") == "step3_vl"), edits={"share_q_dim": -24344})
def test_any_field_of_a_nested_language_model_gives_an_answer_or_one_clear_error(base, edits):
    data = json.loads(json.dumps(base))
    _inner(data).update(edits)
    _answer_or_one_error(data)


# the keys the quantization readers look at (model/quant_config.py), each given any value
QUANT_KEYS = ["quant_method", "quant_algo", "bits", "group_size", "zero_point", "sym", "config_groups", "ignore",
              "exclude_modules", "modules_to_not_convert", "quantized_layers", "quant_type", "weight_block_size",
              "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "global_quant_config", "kv_cache_scheme"]
METHODS = st.sampled_from(["modelopt", "compressed-tensors", "gptq", "awq", "bitsandbytes", "fp8", "mxfp4",
                           "quark", "torchao", "fbgemm_fp8", "mxfp8"])


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(CONFIGS), method=METHODS,
       edits=st.dictionaries(st.sampled_from(QUANT_KEYS), VALUES | st.lists(VALUES, max_size=3), max_size=4))
@example(base=CONFIGS[0], method="modelopt", edits={"quant_algo": ["FP8"]})
@example(base=CONFIGS[0], method="torchao", edits={"quant_type": {"default": {"_type": ["x"]}}})
@example(base=CONFIGS[0], method="modelopt", edits={"quant_algo": "MIXED_PRECISION",
                                                    "quantized_layers": {"a": {"quant_algo": ["FP8"]}}})
def test_any_quantization_config_gives_an_answer_or_one_clear_error(base, method, edits):
    # found so: a modelopt quant_algo or a torchao _type that is a list raised TypeError (unhashable)
    data = {**base, "quantization_config": {"quant_method": method, **edits}}
    _answer_or_one_error(data)
