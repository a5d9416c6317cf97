"""/metrics pages in the real Prometheus text format (vLLM and SGLang pages made by
prometheus_client's own registry, as those servers make them; llama.cpp's written the
way its server's emit() writes it) and rates from counter deltas, hand-computed."""

import json

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from decodescope.errors import DecodescopeError
from decodescope.serverstats.metrics import MetricsSample, derive, parse_metrics


def observe(registry, name, labels, values):
    h = Histogram(name, "latency", list(labels), registry=registry)
    for v in values:
        h.labels(**labels).observe(v)


def vllm_page(gen_by_engine, accepted, drafts, draft_tokens, per_pos, ttft, itl, e2e, running=3):
    r = CollectorRegistry()
    Gauge("python_gc_objects_uncollectable", "noise from the process collector", registry=r).set(1)
    gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", ["model_name", "engine"], registry=r)
    for engine, n in gen_by_engine.items():
        gen.labels("qwen", engine).inc(n)
    for name, n in (
        ("vllm:spec_decode_num_accepted_tokens", accepted),
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", draft_tokens),
    ):
        Counter(name, "spec decode", ["model_name", "engine"], registry=r).labels("qwen", "0").inc(n)
    pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "per position", ["model_name", "engine", "position"], registry=r)
    for i, n in enumerate(per_pos):
        pos.labels("qwen", "0", str(i)).inc(n)
    Gauge("vllm:num_requests_running", "running", ["model_name", "engine"], registry=r).labels("qwen", "0").set(running)
    labels = {"model_name": "qwen", "engine": "0"}
    observe(r, "vllm:time_to_first_token_seconds", labels, ttft)
    observe(r, "vllm:inter_token_latency_seconds", labels, itl)
    observe(r, "vllm:e2e_request_latency_seconds", labels, e2e)
    return generate_latest(r).decode()


def sglang_page(decode_tokens, gauge_by_rank, accept_len, accept_rate, gen_total, ttft, itl):
    r = CollectorRegistry()
    common = ["model_name", "engine_type", "tp_rank", "pp_rank"]
    if decode_tokens is not None:  # newer builds only
        c = Counter("sglang:realtime_tokens", "tokens per forward", ["model_name", "mode"], registry=r)
        c.labels("qwen", "decode").inc(decode_tokens)
        c.labels("qwen", "prefill_compute").inc(9999)
    g = Gauge("sglang:gen_throughput", "The generation throughput (token/s).", common, registry=r)
    a = Gauge("sglang:spec_accept_length", "accept length", common, registry=r)
    ar = Gauge("sglang:spec_accept_rate", "accept rate", common, registry=r)
    run = Gauge("sglang:num_running_reqs", "running", common, registry=r)
    for rank, value in gauge_by_rank.items():
        g.labels("qwen", "unified", rank, "0").set(value)
        a.labels("qwen", "unified", rank, "0").set(accept_len)
        ar.labels("qwen", "unified", rank, "0").set(accept_rate)
        run.labels("qwen", "unified", rank, "0").set(1)
    Counter("sglang:generation_tokens", "at request finish", ["model_name"], registry=r).labels("qwen").inc(gen_total)
    observe(r, "sglang:time_to_first_token_seconds", {"model_name": "qwen"}, ttft)
    observe(r, "sglang:inter_token_latency_seconds", {"model_name": "qwen"}, itl)
    return generate_latest(r).decode()


def llamacpp_page(predicted, predicted_s, drafts, draft_tokens, accepted):
    """The server's own rendering: '# HELP llamacpp:<name> <help>', '# TYPE ...', value."""
    metrics = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", "counter", 4000),
        ("prompt_seconds_total", "Total time spent processing prompts", "counter", 2.5),
        ("tokens_predicted_total", "Number of generation tokens processed", "counter", predicted),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", "counter", predicted_s),
        ("n_decode_total", "Total number of llama_decode() calls", "counter", 700),
        ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", "counter", draft_tokens),
        ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", "counter", accepted),
        ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", "counter", drafts),
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", "gauge", 1234.5),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", "gauge", 999.0),
        ("requests_processing", "Number of requests processing", "gauge", 1),
        ("requests_deferred", "Number of requests deferred", "gauge", 0),
    ]
    out = []
    for name, help_, kind, value in metrics:
        out += [f"# HELP llamacpp:{name} {help_}", f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value}"]
    return "\n".join(out) + "\n"


def test_vllm_rates_come_from_counter_and_histogram_deltas():
    a = parse_metrics(
        vllm_page({"0": 1000, "1": 500}, 600, 300, 900, [250, 200, 150], [0.1, 0.2], [0.02] * 10, [1.0]), 100.0
    )
    b = parse_metrics(
        vllm_page({"0": 1400, "1": 700}, 780, 360, 1140, [300, 250, 180], [0.1, 0.2, 0.5], [0.02] * 10 + [0.03] * 5, [1.0, 2.0, 4.0]),
        110.0,
    )
    assert a.engine == "vllm"
    d = derive(a, b)
    assert d["engine"] == "vllm" and d["interval_s"] == 10.0
    assert d["gen_tok_s"] == pytest.approx(600 / 10)  # both engines' tokens
    assert d["accept_len"] == pytest.approx(1 + 180 / 60)
    assert d["accept_rate"] == pytest.approx(180 / 240)
    assert d["ttft_ms_mean"] == pytest.approx(500.0)
    assert d["itl_ms_mean"] == pytest.approx(30.0)
    assert d["e2e_ms_mean"] == pytest.approx(3000.0)
    assert d["running_reqs"] == 3
    assert "vllm:spec_decode_num_drafts_total" in d["sources"]["accept_len"]
    json.dumps(d)


@pytest.mark.parametrize(
    "decode_tokens, gauges, expect_gen, source_has",
    [
        ((5000, 5555), {"0": 55.59}, 55.5, "realtime_tokens_total"),  # newer build: the counter
        ((None, None), {"0": 55.59}, 55.59, "gen_throughput"),  # older build: the gauge
        ((None, None), {"0": 55.59, "1": 55.59}, 55.59, "gen_throughput"),  # all schedulers report: rank 0 only
    ],
    ids=["counter", "gauge", "gauge-all-ranks"],
)
def test_sglang_generation_rate_prefers_the_decode_counter_then_the_gauge(decode_tokens, gauges, expect_gen, source_has):
    a = parse_metrics(sglang_page(decode_tokens[0], gauges, 3.70, 0.90, 2000, [0.2], [0.05] * 4), 50.0)
    b = parse_metrics(sglang_page(decode_tokens[1], gauges, 3.08, 0.69, 2500, [0.2, 0.4], [0.05] * 4 + [0.02] * 6), 60.0)
    d = derive(a, b)
    assert d["engine"] == "sglang"
    assert d["gen_tok_s"] == pytest.approx(expect_gen)
    assert source_has in d["sources"]["gen_tok_s"]
    assert d["accept_len"] == pytest.approx(3.08)  # the gauge covers the last log window
    assert d["accept_rate"] == pytest.approx(0.69)
    assert d["ttft_ms_mean"] == pytest.approx(400.0)
    assert d["itl_ms_mean"] == pytest.approx(20.0)


def test_sglang_without_speculation_has_no_accept_len():
    a = parse_metrics(sglang_page(None, {"0": 40.0}, 0.0, 0.0, 0, [], []), 0.0)
    b = parse_metrics(sglang_page(None, {"0": 40.0}, 0.0, 0.0, 0, [], []), 5.0)
    d = derive(a, b)
    assert d["accept_len"] is None and d["accept_rate"] is None
    assert d["ttft_ms_mean"] is None  # no request finished in between


def test_llamacpp_rates_and_acceptance_from_counters_never_the_resetting_gauges():
    a = parse_metrics(llamacpp_page(1000, 10.0, 100, 300, 200), 0.0)
    b = parse_metrics(llamacpp_page(1500, 15.0, 150, 450, 290), 10.0)
    assert a.engine == "llamacpp"
    d = derive(a, b)
    assert d["gen_tok_s"] == pytest.approx(50.0)  # wall clock
    assert d["decode_tok_s_per_slot"] == pytest.approx(100.0)  # per second of generation time
    assert d["accept_len"] == pytest.approx(1 + 90 / 50)
    assert d["accept_rate"] == pytest.approx(90 / 150)
    assert d["running_reqs"] == 1
    assert all("tokens_seconds" not in s for s in d["sources"].values())


def test_a_counter_that_went_down_was_reset():
    a = parse_metrics(vllm_page({"0": 1000}, 0, 0, 0, [], [], [], []), 0.0)
    b = parse_metrics(vllm_page({"0": 200}, 0, 0, 0, [], [], [], []), 10.0)
    assert derive(a, b)["gen_tok_s"] == pytest.approx(20.0)
    assert derive(a, b)["accept_len"] is None  # no drafts in the interval


def test_a_malformed_line_loses_only_that_line():
    page = vllm_page({"0": 1000}, 0, 0, 0, [], [], [], [])
    bad = page.replace("# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{engine="0" oops\n# TYPE vllm:num_requests_running gauge')
    s = parse_metrics(bad, 1.0)
    assert s.total("vllm:generation_tokens_total") == 1000
    assert s.engine == "vllm"


def test_a_page_without_engine_metrics_derives_nothing():
    a = parse_metrics("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 5\n", 0.0)
    b = parse_metrics("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 6\n", 1.0)
    assert a.engine is None and a.series == ()
    d = derive(a, b)
    assert d["gen_tok_s"] is None and d["accept_len"] is None


def test_samples_out_of_order_are_an_error():
    a = parse_metrics(llamacpp_page(1, 1, 1, 1, 1), 10.0)
    with pytest.raises(DecodescopeError):
        derive(a, a)


def test_a_sample_survives_a_json_round_trip():
    s = parse_metrics(vllm_page({"0": 7}, 1, 1, 1, [1], [0.1], [0.01], [1.0]), 3.0)
    assert MetricsSample.from_dict(json.loads(json.dumps(s.to_dict()))) == s
