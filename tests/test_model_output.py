"""What `decodescope model` reports: the footer and the table describe the same pass, and
the levers are changes the engine can make that gain, each listed once."""

import pytest

from decodescope.arch import load_arch
from decodescope.model import make_deployment, predict


def _p(model, gpu, levers=False, **kw):
    arch = load_arch(model)
    return predict(arch, make_deployment(arch, gpu, **kw), with_levers=levers)


def _row(p, component):
    return next(c for c in p.expected.breakdown if c.component == component)


def test_footer_weights_are_the_table_row_at_the_batch():
    """Qwen3-235B-A22B at batch 256: 256 tokens touch most of the 128 experts of each
    layer, so a pass reads far more than the batch-1 figure; footer = table row."""
    big = _p("qwen3-235b-a22b", "h200", tp=8, weights="fp8", batch=256)
    one = _p("qwen3-235b-a22b", "h200", tp=8, weights="fp8", batch=1)
    assert big.weight_bytes_per_gpu == _row(big, "weights").bytes
    assert big.weight_bytes_per_gpu > 3 * one.weight_bytes_per_gpu


def test_under_pp_the_gb_column_is_per_gpu():
    """Llama-3.1-70B int8 over PP 2 at batch 1: each GPU reads its own 40 layers, half of
    the 80 layers + head a single GPU would read (head on the last stage only:
    the mean of the two stages); the time still adds both stages."""
    one = _p("llama-3.1-70b", "a100-sxm-80gb", weights="int8")
    two = _p("llama-3.1-70b", "a100-sxm-80gb", weights="int8", pp=2)
    assert _row(two, "weights").bytes == pytest.approx(_row(one, "weights").bytes / 2, rel=1e-9)
    assert two.ceiling.ms("weights") == pytest.approx(one.ceiling.ms("weights"), rel=1e-9)


def test_levers_only_gain_and_gpus_with_one_result_are_listed_once():
    p = _p("llama-3.1-8b", "rtx-4090", levers=True)
    assert p.levers and all(x.gain > 0 for x in p.levers)
    gpus = [x for x in p.levers if x.lever.startswith("gpu ")]
    assert len({(round(x.tok_s, 1), round(x.ceiling_tok_s, 1)) for x in gpus}) == len(gpus)
    # GB200 and B300: both 8 TB/s HBM3e and the same dense tensor rates -> one lever (MI355X's
    # 8 TB/s gives the same batch-1 result and joins it)
    assert any({"gb200", "b300"} <= set(x.lever.removeprefix("gpu ").split(" = ")) for x in gpus)


def test_llamacpp_levers_are_llamacpp_changes():
    """llama.cpp splits layers, not tensors (--split-mode layer) and serves GGUF types:
    no TP, no int4-g128 / fp8 / nvfp4 weights."""
    p = _p("llama-3.1-8b", "rtx-3090", levers=True, weights="q8_0", engine="llamacpp")
    names = [x.lever for x in p.levers]
    assert not [n for n in names if n.startswith("tp ") or n in ("weights int4-g128", "weights fp8",
                                                                   "weights nvfp4")]
    assert {"weights q6_k", "weights q5_k_m", "weights q4_k_m"} <= set(names)


def test_another_engine_is_a_lever_when_host_time_bounds_the_round():
    """Qwen3-1.7B on an H100 with eager transformers: 5 ms of host time per pass against
    ~3.4 GB of weights (1.0 ms at 3.35 TB/s): host-bound; engines with CUDA graphs gain."""
    p = _p("qwen3-1.7b", "h100-sxm", levers=True, engine="transformers")
    assert p.expected.bound == "host"
    engines = {x.lever for x in p.levers if x.lever.startswith("engine ")}
    assert {"engine vllm", "engine sglang", "engine trtllm"} <= engines
    assert "engine llamacpp" not in engines  # it does not serve bf16 safetensors checkpoints as such
    assert min(x.gain for x in p.levers if x.lever in engines) > 1.0  # more than twice as fast
