"""The reconciliation on the reference case: expectations worked out by hand."""

import json

import pytest
from click.testing import CliRunner

from decodescope.arch import build_arch, load_config
from decodescope.cli.main import cli
from decodescope.errors import DecodescopeError
from decodescope.explain import Observations, Point, Term, fit_round, reconcile
from decodescope.explain.gap import EAGER_KERNEL_US
from decodescope.explain.inputs import from_points
from decodescope.model import make_deployment, predict

REF_POINTS = "3.08:55.59,3.33:60,3.77:68,3.98:72"
REF_FLAGS = ["--gpu", "rtx-a6000", "--tp", "2", "--link", "pcie-sys", "--spec", "mtp:3", "--accept", "3.08",
             "--context", "500", "--engine", "sglang"]


def ref_deployment():
    arch = build_arch(load_config("qwen3.6-27b"))
    d = make_deployment(arch, "rtx-a6000", tp=2, link="pcie-sys", spec="mtp:3", accept=3.08, context=500,
                        engine="sglang")
    return arch, d, predict(arch, d, with_levers=True)


def invoke(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, (r.output, r.exception)
    return r


def test_fit_through_the_origin_by_hand():
    # sum a^2 = 3.08^2 + 3.33^2 + 3.77^2 + 3.98^2 = 9.4864 + 11.0889 + 14.2129 + 15.8404 = 50.6286
    # sum a*t = 171.2172 + 199.8 + 256.36 + 286.56 = 913.9372
    # R = 50.6286 / 913.9372 s = 55.3962 ms (the reference case's "~55.4 ms per round")
    f = fit_round(from_points(REF_POINTS).points)
    assert f.round_ms == pytest.approx(1000 * 50.6286 / 913.9372, rel=1e-9)
    assert f.round_ms == pytest.approx(55.4, rel=0.01)
    # own rounds: 3.98/72 = 55.278 ms (fastest), 3.33/60 = 55.500 ms (slowest)
    assert (f.min_ms, f.max_ms) == pytest.approx((1000 * 3.98 / 72, 1000 * 3.33 / 60))
    assert f.spread == pytest.approx((55.5 - 55.2778) / f.round_ms, rel=1e-3) and f.shared
    # 70 tok/s at 55.396 ms per round: 70 * 0.055396 = 3.878 tokens per round
    assert f.accept_for(70) == pytest.approx(3.88, abs=0.005)


def test_points_that_do_not_share_one_round_are_flagged_with_how_much():
    # rounds 3/60 = 50 ms and 3/50 = 60 ms; fit R = (9 + 9) / (180 + 150) = 54.545 ms; span 10 ms = 18.3 %
    f = fit_round(from_points("3:60,3:50").points)
    assert f.round_ms == pytest.approx(1000 * 18 / 330)
    assert f.spread == pytest.approx(10 / (1000 * 18 / 330)) and not f.shared
    arch, d, p = ref_deployment()
    out = invoke("explain", "qwen3.6-27b", *REF_FLAGS, "--points", "3:60,3:50", "--markdown").stdout
    assert "do not share one round time" in out and "18.3 %" in out


def test_gap_terms_sum_to_measured_minus_ceiling_and_modelled_ones_to_expected_minus_ceiling():
    arch, d, p = ref_deployment()
    e = reconcile(arch, d, p, from_points(REF_POINTS), target=70)
    assert sum(t.ms for t in e.gap) == pytest.approx(e.fit.round_ms - p.ceiling.round_ms, abs=1e-9)
    modelled = [t for t in e.gap if t.term in (Term.BANDWIDTH, Term.KERNEL_FLOORS, Term.ALLREDUCE, Term.HOST)]
    assert sum(t.ms for t in modelled) == pytest.approx(p.expected.round_ms - p.ceiling.round_ms, abs=1e-9)
    assert e.efficiency == p.ceiling.round_ms / e.fit.round_ms
    # the host term is the profile's own: one pass plus 3 MTP draft steps, whatever their fitted values
    host = next(t for t in e.gap if t.term == Term.HOST)
    assert host.ms == pytest.approx(d.engine.host_ms_per_pass + 3 * d.engine.host_ms_per_draft_step)
    # across CPU sockets there is no P2P: the allreduce term names NCCL
    assert "NCCL" in next(t for t in e.gap if t.term == Term.ALLREDUCE).note


def test_unexplained_is_never_padded_a_model_that_over_predicts_says_so():
    arch, d, p = ref_deployment()
    fast = reconcile(arch, d, p, Observations((Point(3.08, 1000 * 3.08 / 45.0, ("test",)),)))
    # measured 45 ms: 45 - ceiling - (expected - ceiling) = 45 - expected < 0
    assert fast.unexplained.ms == pytest.approx(45.0 - p.expected.round_ms)
    assert fast.unexplained.ms < 0 and "over-predicts" in fast.unexplained.note
    slow = reconcile(arch, d, p, Observations((Point(3.08, 1000 * 3.08 / 80.0, ("test",)),)))
    assert slow.unexplained.ms == pytest.approx(80.0 - p.expected.round_ms) and slow.unexplained.ms > 0


def test_ceiling_and_expected_are_those_of_decodescope_model_for_the_same_flags():
    model = json.loads(invoke("model", "qwen3.6-27b", *REF_FLAGS, "--json").stdout)
    ex = json.loads(invoke("explain", "qwen3.6-27b", *REF_FLAGS, "--points", REF_POINTS, "--target", "70",
                           "--json").stdout)
    assert ex["ceiling_round_ms"] == model["ceiling"]["round_ms"]
    assert ex["expected_round_ms"] == model["expected"]["round_ms"]
    assert [x["lever"] for x in ex["levers"]] == [x["lever"] for x in model["levers"]]
    assert [x["model_tok_s"] for x in ex["levers"]] == [x["tok_s"] for x in model["levers"]]
    assert ex["efficiency"] == ex["ceiling_round_ms"] / ex["measured_round_ms"]
    assert sum(t["ms"] for t in ex["gap"]) == pytest.approx(ex["measured_round_ms"] - ex["ceiling_round_ms"], abs=1e-9)
    assert [t["term"] for t in ex["gap"]][-1] == "unexplained"
    assert ex["accept_len_needed"] == pytest.approx(3.88, abs=0.005)
    assert {"min_ms", "max_ms", "relative"} <= set(ex["spread"])


def test_levers_project_the_models_gain_onto_the_measured_speed():
    arch, d, p = ref_deployment()
    e = reconcile(arch, d, p, from_points(REF_POINTS), target=70)
    today = 1000 * 3.08 / e.fit.round_ms  # 55.6 tok/s at accept 3.08 and the measured round
    for x, m in zip(e.levers, p.levers):
        assert x.projected_tok_s == pytest.approx(today * m.tok_s / p.expected.tok_s)
        assert x.reaches_target == (x.projected_tok_s >= 70) and x.assumption
    assert set(e.target.levers) == {x.lever for x in e.levers if x.projected_tok_s >= 70}
    assert e.target.reachable_by_accept  # 3.88 <= 3 draft steps + 1


def test_cuda_graphs_off_in_the_log_adds_the_eager_launch_cost(tmp_path):
    log = tmp_path / "off.log"
    line = ("[2026-05-12 00:05:{s:02d} TP0] Decode batch, #running-req: 1, #full token: {n}, full token usage: 0.00, "
            "mamba num: 3, mamba usage: 0.06, accept len: 3.08, accept rate: 0.69, cuda graph: {g}, "
            "gen throughput (token/s): 55.59, #queue-req: 0\n")
    log.write_text("".join(line.format(s=35 + 2 * i, n=115 + 123 * i, g=g) for i, g in enumerate(
        ["True", "False", "True", "False", "False"])))
    from decodescope.explain.inputs import from_log
    obs = from_log(str(log))
    arch, d, p = ref_deployment()
    e = reconcile(arch, d, p, obs)
    kernels = next(t for t in e.gap if t.term == Term.KERNEL_FLOORS).ms
    off = next(t for t in e.gap if t.term == Term.CUDA_GRAPHS_OFF)
    steady = obs.log.decode_windows  # the first window of a series may be warm-up; its flag is not counted
    # kernels_ms / the profile's floor = kernels per round; each launch costs 6.7 - 1.1 = 5.6 us more eagerly
    launches = kernels / d.engine.kernel_floor_us
    assert off.ms == pytest.approx(obs.log.cuda_graph_off_windows / steady * launches * (EAGER_KERNEL_US - 1.1))
    assert obs.log.cuda_graph_off_windows == 3 and off.source.value == "log"
    assert sum(t.ms for t in e.gap) == pytest.approx(e.fit.round_ms - p.ceiling.round_ms, abs=1e-9)


def test_prefill_inside_the_decode_windows_is_a_term(tmp_path):
    dec = ("[2026-05-12 00:05:{s:02d} TP0] Decode batch, #running-req: 1, #full token: 200, full token usage: 0.00, "
           "accept len: 3.08, accept rate: 0.69, cuda graph: True, gen throughput (token/s): 55.59, #queue-req: 0\n")
    pre = ("[2026-05-12 00:05:{s:02d} TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
           "token usage: 0.00, #running-req: 1, #queue-req: 0\n")
    log = tmp_path / "prefill.log"
    log.write_text(dec.format(s=30) + dec.format(s=32) + pre.format(s=33) + dec.format(s=34) + dec.format(s=36))
    from decodescope.explain.inputs import from_log
    obs = from_log(str(log))
    assert (obs.log.prefill_batches, obs.log.prefill_tokens) == (1, 512)
    arch, d, p = ref_deployment()
    e = reconcile(arch, d, p, obs)
    pf = next(t for t in e.gap if t.term == Term.PREFILL)
    # one weight read (expected weights row) + 2 x 26.9e9 / 2 GPUs x 512 tokens at 154.8e12 x 0.70 FLOP/s,
    # over 40 rounds per logged window x the steady windows
    compute_ms = 1e3 * 2 * arch.params_active / 2 * 512 / (d.gpu.peak_flops("bf16") * 0.70)
    assert pf.ms == pytest.approx((p.expected.ms("weights") + compute_ms) / (40 * obs.log.decode_windows))


@pytest.mark.parametrize("bad", ["3.08", "3.08:", "0.5:40", "3:-1", "a:b", "3:nan"])
def test_bad_points_are_one_clear_error(bad):
    with pytest.raises(DecodescopeError, match="ACCEPT_LEN:TOK_S"):
        from_points(bad)
