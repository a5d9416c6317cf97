"""`decodescope model` under arbitrary flags (hypothesis): every input ends in a result
or in one clear error, never a traceback or a hang, and no result holds a negative or
non-finite byte count, time or rate."""

import json
import math
import time

import click
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodescope.cli.model_cmd import model
from decodescope.errors import DecodescopeError
from decodescope.hardware import all_gpus

MODELS = ["qwen3-8b", "qwen3.6-27b", "gpt-oss-20b", "qwen3-30b-a3b", "nemotron-h-56b", "deepseek-v3"]
JUNK = st.text(alphabet="abcdefgkmnpqrstuvwx0123456789-_:.", max_size=12)
HUGE = st.sampled_from([-1, 0, 3, 7, 100, 65536, 1 << 31, 10 ** 18])
# a plausible deployment, then (most of the time) one flag swapped for a hostile value
VALID = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "--gpu": st.sampled_from([g.id for g in all_gpus()]),
    "--tp": st.sampled_from([1, 1, 2, 4, 8]), "--pp": st.sampled_from([1, 1, 2, 4]),
    "--ep": st.sampled_from([1, 1, 1, 2]),
    "--batch": st.one_of(st.integers(1, 512), st.sampled_from([1, 4096])),
    "--context": st.one_of(st.integers(1, 200_000), st.sampled_from([1, 10 ** 6])),
    "--weights": st.sampled_from([None, "bf16", "fp8", "int8", "nvfp4", "mxfp4", "q4_k_m", "int4-g128", "bpw:2.5"]),
    "--kv": st.sampled_from([None, "bf16", "fp8"]),
    "--spec": st.sampled_from(["none", "none", "mtp:3", "eagle:3", "draft:4", "ngram:4", "ngram:1"]),
    "--accept": st.floats(1.0, 4.0),
    "--engine": st.sampled_from(["generic", "sglang", "vllm", "llamacpp", "gpt-fast", "exllamav2", "transformers"]),
    "--link": st.sampled_from([None, None, "pcie", "pcie-sys", "nvlink", "nvswitch", "network"]),
    "--draft": st.sampled_from([None, "qwen3-1.7b"]),
})
HOSTILE = {
    "--gpu": JUNK, "--tp": HUGE, "--pp": HUGE, "--ep": HUGE, "--batch": HUGE, "--context": HUGE,
    "--weights": st.one_of(st.sampled_from(["int4-g0", "int4-g7", "bpw:0", "bpw:1e9", "bpw:99999999999999999999"]),
                           st.builds(lambda g: f"int4-g{g}", st.integers(0, 10 ** 12)), JUNK),
    "--spec": st.one_of(st.builds(lambda m, k: f"{m}:{k}", st.sampled_from(["mtp", "eagle", "draft", "ngram"]),
                                  st.sampled_from([0, 33, 1000000, 10 ** 9, 9999999999999999])), JUNK),
    "--accept": st.floats(allow_nan=True, allow_infinity=True),
    "--engine": JUNK, "--link": st.sampled_from(["none", "bogus", "nvswitch"]),
    "--draft": st.sampled_from(["llama-3.1-8b", "deepseek-v3"]),
}


@st.composite
def flags(draw):
    f = draw(VALID)
    if f["--spec"] == "none":
        f["--accept"] = None
    swap = draw(st.sampled_from([None, None, *HOSTILE]))
    if swap:
        f[swap] = draw(HOSTILE[swap])
    return f


def _args(flags: dict) -> list[str]:
    args = [flags["model"]]
    for k, v in flags.items():
        if k != "model" and v is not None:
            args += [k, str(v)]
    return args + ["--json"]


def _numbers(x, path=""):
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return
    if isinstance(x, (int, float)):
        yield path, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{path}[{i}]")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flags())
def test_any_flags_give_a_result_or_one_clear_error(flags):
    args = _args(flags)
    t = time.perf_counter()
    r = CliRunner().invoke(model, args, standalone_mode=False)
    took = time.perf_counter() - t
    assert took < 5, f"{took:.1f} s for {args}"  # an answer in well under a second; 5 s on a loaded CI box
    if r.exception is not None:
        assert isinstance(r.exception, (DecodescopeError, click.ClickException)), (args, repr(r.exception))
        assert str(r.exception).strip()
        return
    out = json.loads(r.output)
    for path, v in _numbers(out):
        assert math.isfinite(v), (path, v, args)
        assert v >= 0, (path, v, args)
