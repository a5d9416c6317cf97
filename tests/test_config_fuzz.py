"""Property: whatever value a config field holds, `decodescope model` either answers with
finite, non-negative bytes and times or raises one DecodescopeError, each in under a second."""

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
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


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(CONFIGS), edits=st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1, max_size=3))
def test_any_field_value_gives_an_answer_or_one_clear_error(base, edits):
    data = {**base, **edits}
    try:
        arch = build_arch(RawConfig(data, "fuzz", "fuzz"))
        p = predict(arch, make_deployment(arch, "h100", batch=4, context=4096))
    except DecodescopeError as e:
        assert str(e)
        return
    _check_numbers(p.to_dict())
