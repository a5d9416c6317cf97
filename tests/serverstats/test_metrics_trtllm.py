"""trtllm-serve's /metrics: a JSON list of the IterationStats since the previous call, not
a Prometheus page. Real pages: `[]` before any request (vllm-project/aibrix#2004) and an
object of TensorRT-LLM#6364 (tests/data/logs/trtllm_metrics_json_trt_backend.log); served
over HTTP on 127.0.0.1 to the watch that `measure --metrics-url` runs. Figures by hand."""

import asyncio
import itertools
import json

import pytest
from aiohttp import web
from test_log_real import LOGS

from decodescope.measure.watch import ServerWatch
from decodescope.serverstats.metrics import MetricsSample, derive, parse_metrics

OBJ = json.loads((LOGS / "trtllm_metrics_json_trt_backend.log").read_text().strip().rstrip(","))


def page(*objs) -> str:
    return json.dumps(list(objs))


def test_a_page_of_iterations_is_the_intervals_tokens():
    # one generation iteration of 1 request at 1 token (specDecodingStats null, avg 1.0),
    # 13.021209 ms; scraped 2 s after an empty page: 1 token / 2 s = 0.5 tok/s
    prev, cur = parse_metrics("[]", 100.0), parse_metrics(page(OBJ), 102.0)
    assert (prev.engine, prev.series, cur.engine) == ("trtllm", (), "trtllm")
    d = derive(prev, cur)
    assert (d["gen_tok_s"], d["accept_len"], d["running_reqs"]) == (0.5, 1.0, 1.0)
    assert d["decode_round_ms"] == 13.021209 and "decode_round_ms" in d["sources"]
    assert MetricsSample.from_dict(json.loads(json.dumps(cur.to_dict()))) == cur


def test_speculative_and_context_iterations_on_one_page():
    # the real object three ways (fields as py_executor.py _update_iter_stats fills them):
    # iter 60 as logged; iter 61 with 4 generation requests that accepted 3 draft tokens
    # (4 + 3 = 7 tokens); iter 62 a mixed iteration, 1 context + 2 generation requests, no
    # drafts (2 tokens, not a decode round). Scraped 0.5 s apart:
    # (1 + 7 + 2) / 0.5 s = 20 tok/s; accept 10 tokens / 7 requests = 1.4286;
    # decode rounds: iters 60 and 61, 13.021209 ms each
    spec = {"numDraftTokens": 6, "numAcceptedTokens": 3, "numRequestsWithDraftTokens": 2,
            "acceptanceLength": 2.5, "iterLatencyMS": 1.2, "draftOverhead": 0.09}
    b = {**OBJ["inflightBatchingStats"], "numGenRequests": 4, "numScheduledRequests": 4}
    c = {**OBJ["inflightBatchingStats"], "numContextRequests": 1, "numGenRequests": 2, "numScheduledRequests": 3}
    objs = [OBJ, {**OBJ, "iter": 61, "inflightBatchingStats": b, "specDecodingStats": spec,
                  "numActiveRequests": 4},
            {**OBJ, "iter": 62, "inflightBatchingStats": c, "numActiveRequests": 3}]
    d = derive(parse_metrics("[]", 10.0), parse_metrics(page(*objs), 10.5))
    assert d["gen_tok_s"] == pytest.approx(20.0) and d["accept_len"] == pytest.approx(10 / 7)
    assert d["running_reqs"] == 3.0 and d["decode_round_ms"] == pytest.approx(13.021209)


def test_a_page_that_is_not_json_derives_nothing():
    d = derive(parse_metrics("[", 1.0), parse_metrics('[{"iter": 1}, "x"]', 2.0))
    assert d["engine"] == "trtllm" and (d["gen_tok_s"], d["accept_len"], d["running_reqs"]) == (None, None, None)


def test_the_watch_scrapes_trtllm_serve_over_http():
    pages = iter(["[]", page(OBJ)])  # as trtllm-serve drains its queue: later calls get []

    async def metrics(_request):
        return web.Response(text=next(pages, "[]"), content_type="application/json")

    async def run() -> list:
        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        clock = itertools.count(0.0, 2.0)  # each scrape 2 s after the previous one
        samples = []
        watch = ServerWatch(None, f"http://127.0.0.1:{port}/metrics", 0.05, lambda: next(clock), samples.append)
        await watch.start()
        for _ in range(100):
            if samples:
                break
            await asyncio.sleep(0.02)
        await watch.stop()
        await runner.cleanup()
        return samples

    samples = asyncio.run(run())
    first = samples[0]
    # the second page, 2 s after the first: 1 token / 2 s
    assert (first["type"], first["window_s"], first["gen_tok_s"], first["accept_len"]) == ("metrics", 2.0, 0.5, 1.0)
    assert first["data"]["decode_round_ms"] == 13.021209


def prometheus_page(generated, drafted, accepted, tpot, acceptance_length=2.4, running=5):
    """trtllm-serve's /prometheus/metrics as tensorrt_llm/metrics/collector.py registers it
    (prefix trtllm_, labels model_name and engine_type), made by prometheus_client."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    r, labels = CollectorRegistry(), {"model_name": "qwen", "engine_type": "trtllm"}
    for name, n in (("trtllm_generation_tokens_total", generated), ("trtllm_spec_decode_num_draft_tokens_total", drafted),
                    ("trtllm_spec_decode_num_accepted_tokens_total", accepted)):
        Counter(name, "counter", list(labels), registry=r).labels(**labels).inc(n)
    Gauge("trtllm_spec_decode_acceptance_length", "gauge", list(labels), registry=r).labels(**labels).set(acceptance_length)
    Gauge("trtllm_num_requests_running", "gauge", list(labels), registry=r).labels(**labels).set(running)
    h = Histogram("trtllm_time_per_output_token_seconds", "tpot", list(labels), registry=r)
    for v in tpot:
        h.labels(**labels).observe(v)
    return generate_latest(r).decode()


def test_the_prometheus_page_of_trtllm_serve():
    # 10 s apart: (1600 - 1000) tokens / 10 s = 60 tok/s; accepted (420 - 210) / drafted (600 - 300)
    # = 0.7; time per output token: new observations 0.01 + 0.03 + 0.02 s over 3 = 20 ms
    prev = parse_metrics(prometheus_page(1000, 300, 210, [0.02, 0.02]), 0.0)
    cur = parse_metrics(prometheus_page(1600, 600, 420, [0.02, 0.02, 0.01, 0.03, 0.02]), 10.0)
    assert cur.engine == "trtllm"
    d = derive(prev, cur)
    assert d["gen_tok_s"] == pytest.approx(60.0) and d["accept_rate"] == pytest.approx(0.7)
    assert (d["accept_len"], d["running_reqs"]) == (2.4, 5.0) and d["itl_ms_mean"] == pytest.approx(20.0)
    assert "steps at request completion" in d["sources"]["gen_tok_s"]
