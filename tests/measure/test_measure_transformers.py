"""`decodescope measure` over HTTP against a real `transformers serve`, serving a tiny
random-weight Llama and a BPE tokenizer built by the test (conftest.py; no download)."""

import pytest
from conftest import assert_summary_reproduced

from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server

SHORT = ("--max-tokens", "12", "--requests", "2")


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_every_bundled_suite_streams_and_is_timed(transformers_server, measure, api):
    m = measure(transformers_server.url, "--api", api, *SHORT, "--json")
    assert m.exit_code == 0, m.stderr
    out = m.json()
    assert [g["name"] for g in out["suites"]] == ["repetitive", "code", "prose"]
    for g in out["suites"]:
        assert (g["requests_ok"], g["requests_failed"]) == (2, 0), g["errors"]
        assert 0 < g["ttft_ms"]["p50"] < 5000
        assert g["decode_tok_s"]["mean"] > 0 and g["itl_ms"]["n"] > 0
        assert g["token_count_source"] == ["usage"], "transformers serve reports usage on its last chunk"
    run = read_run(m.run_file)
    assert run.header["model"] == transformers_server.model, "the model defaults to GET /v1/models"
    assert len(run.requests) == 7 and run.requests[0].warmup
    for r in run.requests:
        assert 0 < r.output_tokens <= 12 and r.finish_reason in ("length", "stop")
        assert r.latency_ms - r.ttft_ms == pytest.approx(sum(r.itl_ms), abs=1e-6)
    assert_summary_reproduced(m.run_file)


def test_a_local_tokenizer_splits_tokens_per_chunk(transformers_server, tiny_model_dir, measure):
    tokenizer = ("--tokenizer", str(tiny_model_dir))
    m = measure(transformers_server.url, "--suite", "code", *SHORT, "--concurrency", "2", *tokenizer, "--json")
    assert m.json()["suites"][0]["requests_ok"] == 2
    for r in read_run(m.run_file).requests:
        assert r.chunk_tokens is not None and len(r.chunk_tokens) == len(r.itl_ms) + 1
        assert sum(r.chunk_tokens) > 0
