"""llama.cpp's row split (--split-mode row): each weight matrix split by rows over the
GPUs, the main GPU holding the KV cache and gathering every matmul's output."""

import json
import os
import subprocess
import sys

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import get_engine, make_deployment, predict
from decodescope.validate.rows import load_cases

A100_PCIE_LINK = 31.5e9  # B/s per direction, gpus.toml a100-pcie-80gb (PCIe 4.0 x16)
FLOOR = 6.67e-6  # s, engines.toml llamacpp kernel_floor_us
PCIE_LATENCY = 20e-6  # s, gpus.toml interconnect.pcie nccl_latency_us


def _row(n, **kw):
    arch = load_arch(kw.pop("model", "llama-2-7b"))
    flags = {"weights": "fp16", "kv": "fp16", "engine": "llamacpp", **kw}
    d = make_deployment(arch, "a100-pcie-80gb", tp=n, link="pcie", context=136, split_rows=True, **flags)
    return predict(arch, d)


def _ms(est, component):
    return next((c.ms for c in est.breakdown if c.component == component), 0.0)


def test_exchange_bytes_by_hand():
    """Llama-2-7B, fp16 weights, 2 GPUs, batch 1. Per split matmul the f32 input goes to the
    other GPU ((n-1) x in x 4 B) and its half of the f32 output comes back ((n-1)/n x out x 4 B):
    q, k, v, o (4096 -> 4096): 16,384 + 8,192 = 24,576 B each, 98,304 B;
    gate, up (4096 -> 11008): 16,384 + 22,016 = 38,400 B each, 76,800 B;
    down (11008 -> 4096): 44,032 + 8,192 = 52,224 B;
    227,328 B per layer x 32 = 7,274,496 B, plus the vocab-split head's logits gather
    (32,000 x 2 B / 2 = 32,000 B): 7,306,496 B / 31.5e9 B/s = 0.23195 ms at the ceiling
    (no latency there)."""
    p = _row(2)
    assert _ms(p.ceiling, "allreduce") == pytest.approx(7_306_496 / A100_PCIE_LINK * 1e3, rel=1e-9)
    assert _ms(p.ceiling, "allreduce") == pytest.approx(0.23195, rel=1e-4)


def test_latencies_and_launches_by_hand():
    """Expected: two exchanges per split matmul, 7 matmuls x 32 layers x 2 = 448 latencies,
    plus the logits gather's one: 449 x alpha; launches: per layer 12 on the main GPU
    (attention block 8, MLP 4) plus 3 per other GPU per matmul (copy in, matmul, copy out):
    n = 2: (12 + 7 x 3) x 32 + 4 (norm, head, sample) = 1,060; n = 4: (12 + 7 x 9) x 32 + 4 = 2,404."""
    two, four = _row(2), _row(4)
    alpha = PCIE_LATENCY * get_engine("llamacpp").allreduce_latency_scale  # the profile's fitted scale
    assert _ms(two.expected, "kernels") == pytest.approx(1060 * FLOOR * 1e3, rel=1e-9)
    assert _ms(four.expected, "kernels") == pytest.approx(2404 * FLOOR * 1e3, rel=1e-9)
    wire_ms = _ms(two.ceiling, "allreduce") / 0.7  # the link's bw_efficiency (gpus.toml pcie)
    assert _ms(two.expected, "allreduce") == pytest.approx(449 * alpha * 1e3 + wire_ms, rel=1e-9)


def test_main_gpu_reads_the_whole_kv_cache():
    """Attention stays on the main GPU: the KV bytes of one GPU, not 1/n of them."""
    arch = load_arch("llama-2-7b")
    one = predict(arch, make_deployment(arch, "a100-pcie-80gb", weights="fp16", kv="fp16", context=136,
                                        engine="llamacpp"))
    row = _row(4)
    kv = [next(c.bytes for c in p.expected.breakdown if c.component == "kv_cache") for p in (one, row)]
    assert kv[0] == kv[1]
    weights = [next(c.bytes for c in p.expected.breakdown if c.component == "weights") for p in (one, row)]
    assert weights[1] == pytest.approx(weights[0] / 4, rel=0.01)  # the rows split 4 ways (head, norms whole)


@pytest.mark.parametrize("kw, words", [({"engine": "vllm"}, "llama.cpp's"),
                                       ({"model": "qwen3-30b-a3b", "weights": "bf16"}, "expert tensors")])
def test_row_split_is_refused_where_llamacpp_has_none(kw, words):
    with pytest.raises(DecodescopeError, match=words):
        _row(2, **kw)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "decodescope", "model", "llama-2-7b", "--gpu", "a100-pcie-80gb",
                           "--engine", "llamacpp", "--split-mode", "row", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})


def test_cli_flag():
    r = _cli("--tp", "2", "--link", "pcie", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["deployment"]["split_rows"] is True
    bad = _cli()  # one GPU: nothing to split
    assert bad.returncode == 2 and "--tp" in bad.stderr and "Traceback" not in bad.stderr


def test_the_2023_multi_gpu_rows_are_row_split_and_nothing_else_is():
    """mlc-ai/llm-perf-bench ran llama.cpp 9476b01 (October 2023), before the layer split
    existed: its multi-GPU llama.cpp rows are row splits; every other row is not."""
    cases, _ = load_cases()
    marked = {c.id for c in cases if c.deployment.split_rows}
    assert marked == {c.id for c in cases if c.source == "LPB" and c.engine == "llamacpp" and c.deployment.tp > 1}
    assert len(marked) == 17
