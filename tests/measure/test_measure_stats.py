"""Summary statistics of a run: percentiles, warm-up exclusion, and which server samples
count as steady state for a suite."""

from dataclasses import dataclass, replace

import pytest

from decodescope.measure.client import RequestResult
from decodescope.measure.spread import EXACT_MAX, Spread
from decodescope.measure.stats import distribution, summarize
from decodescope.measure.watch import sample


@dataclass
class TC:
    name: str
    values: list
    want: dict


DISTRIBUTIONS = [
    TC("linear interpolation between ranks", [1, 2, 3, 4, 5], {"mean": 3, "p50": 3, "p90": 4.6, "p99": 4.96}),
    TC("one value is every percentile", [7.5], {"mean": 7.5, "p50": 7.5, "p90": 7.5, "p99": 7.5}),
    TC("None and NaN are not values", [None, float("nan"), 2, 4], {"n": 2, "mean": 3, "p50": 3}),
    TC("nothing gives None, not zero", [], {"n": 0, "mean": None, "p50": None, "p99": None}),
]


@pytest.mark.parametrize("tc", DISTRIBUTIONS, ids=lambda tc: tc.name)
def test_distribution(tc):
    d = distribution(tc.values)
    assert {k: d[k] for k in tc.want} == pytest.approx(tc.want)


def request(start_s, end_s, ok=True, warmup=False, suite="code", **kw) -> RequestResult:
    base = dict(
        suite=suite,
        prompt_index=0,
        warmup=warmup,
        concurrency=1,
        rate=None,
        ok=ok,
        error_kind=None if ok else "http",
        error=None if ok else "HTTP 500",
        http_status=200 if ok else 500,
        start_s=start_s,
        end_s=end_s,
        ttft_ms=10.0 if ok else None,
        itl_ms=(5.0, 5.0) if ok else (),
        latency_ms=20.0 if ok else None,
        output_tokens=3 if ok else 0,
        token_count_source="usage",
        chunk_tokens=None,
        decode_tok_s=200.0 if ok else None,
        output_chars=3,
        finish_reason="length",
        response_id=None,
    )
    return RequestResult(**(base | kw))


def test_warmup_requests_are_recorded_but_not_counted():
    s = summarize([request(0, 1, warmup=True, ttft_ms=9999.0), request(1, 2), request(2, 3, ok=False)], [])
    (g,) = s["suites"]
    assert (g["requests_ok"], g["requests_failed"], s["warmup_requests"]) == (1, 1, 1)
    assert g["ttft_ms"]["max"] == 10.0, "the warm-up's TTFT must not reach the statistics"
    assert g["errors"] == {"http": 1}


@dataclass
class Window:
    name: str
    time_s: float
    window_s: float | None
    counts: bool
    warmup: bool = False


# the suite ran from 10 s to 20 s
WINDOWS = [
    Window("inside the suite's window", 15, 2, True),
    Window("straddles the suite's start (idle or warm-up before it)", 11, 2, False),
    Window("ends after the suite", 20.5, 1, False),
    Window("first line of its kind: window unknown", 15, None, False),
    Window("marked warm-up by the log parser", 15, 2, False, warmup=True),
]


@pytest.mark.parametrize("w", WINDOWS, ids=lambda w: w.name)
def test_a_server_sample_counts_only_if_its_window_lies_inside_the_suite(w):
    samples = [sample("server_log", w.time_s, w.window_s, 3.5, 50.0, w.warmup, {})]
    g = summarize([request(10, 12), request(12, 20)], samples)["suites"][0]
    assert ("accept_len" in g) == w.counts


def test_the_log_is_preferred_to_metrics_and_idle_windows_say_nothing_about_speed():
    samples = [
        sample("server_log", 15, 2, 3.0, 0.0, False, {}),  # idle window: gen 0
        sample("server_log", 17, 2, 3.2, 55.0, False, {}),
        sample("metrics", 18, 1, 2.0, 40.0, False, {}),
    ]
    s = summarize([request(10, 20)], samples)
    assert s["accept_len"]["mean"] == pytest.approx(3.1) and s["accept_len"]["source"] == "server_log"
    assert s["server_gen_tok_s"]["n"] == 1 and s["server_gen_tok_s"]["mean"] == 55.0


def test_groups_follow_suite_and_load_level_in_run_order():
    rs = [request(0, 1, suite="a"), request(1, 2, suite="b"), replace(request(2, 3, suite="a"), concurrency=4)]
    s = summarize(rs, [])
    assert [(g["name"], g["concurrency"]) for g in s["suites"]] == [("a", 1), ("b", 1), ("a", 4)]


@dataclass
class PerRequest:
    name: str
    written_s: float  # the poll before the one that read the line
    time_s: float  # the poll that read it
    eval_s: float  # the request's decode, from the line
    group: str | None  # the suite it counts for


# suite "a" ran from 10 s to 20 s, suite "b" from 20 s to 30 s; the log is polled every 0.1 s
PER_REQUEST = [
    PerRequest("written and read inside a", 14.9, 15.0, 2.0, "a"),
    PerRequest("read just after a ended: its last request", 19.95, 20.05, 5.0, "a"),
    PerRequest("decode began before a (warm-up's request)", 10.9, 11.0, 2.0, None),
    PerRequest("longer than the poll, read across the boundary", 19.95, 20.05, 0.5, "a"),
    PerRequest("shorter than the poll, across the boundary: a or b", 19.95, 20.05, 0.02, None),
    PerRequest("inside b", 25.0, 25.1, 3.0, "b"),
    PerRequest("shorter than the poll, right after the warm-up (5 s to 10 s)", 9.95, 10.05, 0.02, None),
]


@pytest.mark.parametrize("tc", PER_REQUEST, ids=lambda tc: tc.name)
def test_a_per_request_line_counts_for_the_one_suite_its_request_ran_in(tc):
    samples = [sample("server_log", tc.time_s, tc.eval_s, 2.5, 80.0, False, {}, per_request=True, written_s=tc.written_s)]
    rs = [request(5, 10, warmup=True), request(10, 20, suite="a"), request(20, 30, suite="b")]
    s = summarize(rs, samples)
    counted = [g["name"] for g in s["suites"] if "server_decode_tok_s" in g]
    assert counted == ([tc.group] if tc.group else [])
    assert all("server_gen_tok_s" not in g for g in s["suites"]), "one request's rate is not the server's total"


def test_throughputs_tpot_and_goodput_as_vllm_bench_serve_counts_them():
    # two requests in a 2 s window, 10 + 30 tokens; TPOT = (latency - TTFT) / (tokens - 1):
    # (100 - 10) / 9 = 10 ms and (300 - 10) / 29 = 10 ms; TTFTs 10 and 50 ms
    a = request(0, 1, output_tokens=10, ttft_ms=10.0, latency_ms=100.0)
    b = request(1, 2, output_tokens=30, ttft_ms=50.0, latency_ms=340.0)
    (g,) = summarize([a, b], [], slo={"ttft_ms": 20.0, "tpot_ms": 12.0})["suites"]
    assert (g["request_throughput"], g["output_throughput"]) == pytest.approx((2 / 2, 40 / 2))
    assert g["tpot_ms"]["mean"] == pytest.approx(10.0)
    assert g["goodput"] == pytest.approx(1 / 2), "only the first meets TTFT <= 20 ms"


@pytest.mark.parametrize(
    "chunk_tokens, want",
    [
        ((3, 3, 3, 4, 2), {"client_accept_len": 3.0, "client_round_ms": 5.0}),  # after the first: 3, 3, 4, 2
        ((4, 1, 1, 4, 1), {}),  # mostly one token: text held back, not rounds
        ((1, 1, 1, 1, 1), {}),
    ],
)
def test_the_clients_round_estimate_appears_when_chunks_are_rounds(chunk_tokens, want):
    r = request(0, 1, itl_ms=(5.0,) * 4, chunk_tokens=chunk_tokens, output_tokens=sum(chunk_tokens))
    (g,) = summarize([r], [])["suites"]
    assert {k: g[k] for k in ("client_accept_len", "client_round_ms") if k in g} == pytest.approx(want)
    assert g["tokens_per_chunk"]["mean"] == pytest.approx(sum(chunk_tokens) / 5)


def test_past_exact_max_percentiles_come_from_1_us_bins():
    # 0.0003, 1.0003, ..., 20000.0003 µs... in ms: i/1000 + 0.0003 for i in 0..20000, 20,001 values
    # (past EXACT_MAX). Sorted rank i holds i/1000 + 0.0003; its 1 µs bin's centre is i/1000.
    # p50: pos 20000 * 0.5 = 10000 -> bin 10.000 (true 10.0003: off by 0.3 µs, under half a bin);
    # p90: pos 18000 -> 18.0; p99: pos 19800 -> 19.8. min, max: exact (0.0003, 20.0003).
    # mean: exact, 10.0 + 0.0003 = 10.0003 (the mean of 0..20 in 1 µs steps is 10).
    values = [i / 1000 + 0.0003 for i in range(20_001)]
    assert len(values) > EXACT_MAX
    s = Spread()
    for chunk in (values[:5000], values[5000:], []):  # fed in pieces, as requests come
        s.extend(reversed(chunk))
    want = {"n": 20_001, "mean": 10.0003, "p50": 10.0, "p90": 18.0, "p99": 19.8, "min": 0.0003, "max": 20.0003}
    assert s.result() == pytest.approx(want, abs=1e-9)


def test_past_exact_max_counts_stay_exact_and_memory_follows_the_bins():
    # 30,000 chunk sizes, 10,000 each of 1, 2 and 3 tokens: sorted ranks 0-9999 are 1,
    # 10000-19999 are 2, 20000-29999 are 3. p50: pos 29999 * 0.5 = 14999.5 -> 2 and 2 -> 2;
    # p90: pos 26999.1 -> 3; p99 -> 3; mean (10000 * 6) / 30000 = 2.
    s = Spread()
    for _ in range(10_000):
        s.extend([1, 2, 3])
    assert s.result() == {"n": 30_000, "mean": 2.0, "p50": 2.0, "p90": 3.0, "p99": 3.0, "min": 1, "max": 3}
    assert len(s._bins) == 3, "three distinct values: three bins, not 30,000 values"
