"""Load shapes against the real scripted server: closed loop at a concurrency, sweeps,
seeded Poisson arrivals."""

import random

import pytest

from decodescope.errors import DecodescopeError
from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server

SLOW = "tokens=8,interval_ms=10,run=load"  # ~80 ms per request


def most_in_flight(requests) -> int:
    edges = sorted([(r.start_s, 1) for r in requests] + [(r.end_s, -1) for r in requests], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, d in edges:
        now += d
        peak = max(peak, now)
    return peak


def test_closed_loop_keeps_exactly_c_requests_in_flight(scripted_server, measure):
    m = measure(
        scripted_server.url, *f"--model {SLOW} --suite code --requests 9 --concurrency 3 --warmup 0 --json".split()
    )
    run = read_run(m.run_file)
    assert len(run.requests) == 9 and all(r.ok for r in run.requests)
    assert most_in_flight(run.requests) == 3


def test_a_concurrency_sweep_reports_each_level_per_suite(scripted_server, measure):
    m = measure(
        scripted_server.url, *f"--model {SLOW} --suite code --suite prose --requests 2 --concurrency 1,2 --json".split()
    )
    levels = [(g["name"], g["concurrency"], g["requests_ok"]) for g in m.json()["suites"]]
    assert levels == [("code", 1, 2), ("prose", 1, 2), ("code", 2, 2), ("prose", 2, 2)]
    warm = [r for r in read_run(m.run_file).requests if r.warmup]
    assert len(warm) == 1 and warm[0].suite == "code", "one warm-up request, before everything"


def test_poisson_arrivals_follow_the_seeded_schedule(scripted_server, measure):
    m = measure(
        scripted_server.url, *f"--model {SLOW} --suite code --requests 6 --rate 25 --seed 7 --warmup 0 --json".split()
    )
    (g,) = m.json()["suites"]
    assert (g["rate"], g["concurrency"], g["requests_ok"]) == (25, None, 6)
    starts = sorted(r.start_s for r in read_run(m.run_file).requests)
    rng = random.Random(7)
    gaps = [rng.expovariate(25) for _ in range(5)]
    measured = [b - a for a, b in zip(starts, starts[1:])]
    assert measured == pytest.approx(gaps, abs=0.015), "arrivals are on an absolute, seeded schedule"


def test_concurrency_and_rate_together_is_an_error(scripted_server, measure):
    m = measure(scripted_server.url, "--model", SLOW, "--concurrency", "2", "--rate", "3")
    assert isinstance(m.exception, DecodescopeError) and "pass one of them" in m.exception.fix


@pytest.mark.parametrize("bad", ["0", "a,b", "2,-1"])
def test_bad_load_levels_are_usage_errors(scripted_server, measure, bad):
    m = measure(scripted_server.url, "--model", SLOW, "--concurrency", bad)
    assert m.exit_code == 2
