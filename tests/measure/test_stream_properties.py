"""Property tests (hypothesis) of the two parsers that read what others wrote: the SSE
stream of a completion (stream.py) and the run file (runfile.py). Whatever the bytes and
wherever the socket splits them: no exception, the same result for every split, and
cost linear in the input."""

import json
import math
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodescope.measure.client import RequestResult
from decodescope.measure.runfile import RunWriter, read_run
from decodescope.measure.stream import MAX_EVENT_BYTES, StreamAccumulator

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def stream_of(texts: list[str], keepalive_every: int, crlf: bool) -> bytes:
    out = [event({"choices": [{"delta": {"role": "assistant"}}]})]
    for i, t in enumerate(texts, 1):
        out.append(event({"id": "r", "choices": [{"delta": {"content": t}, "finish_reason": None}]}))
        if keepalive_every and i % keepalive_every == 0:
            out.append(b": keep-alive\n\n")
    out.append(event({"choices": [{"delta": {}, "finish_reason": "length"}], "usage": {"completion_tokens": len(texts)}}))
    out.append(b"data: [DONE]\n\n")
    raw = b"".join(out)
    return raw.replace(b"\n", b"\r\n") if crlf else raw


def feed_split(raw: bytes, cuts: list[int], max_tokens=None) -> StreamAccumulator:
    acc = StreamAccumulator("chat", 0, max_tokens)
    edges = sorted({0, len(raw), *(c % (len(raw) + 1) for c in cuts)})
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        acc.feed(raw[a:b], i + 1)
    acc.finish()
    return acc


@FAST
@given(st.lists(text, min_size=1, max_size=20), st.integers(0, 3), st.booleans(), st.lists(st.integers(0, 10**6)))
def test_any_split_of_a_stream_gives_the_same_texts(texts, keepalive_every, crlf, cuts):
    raw = stream_of(texts, keepalive_every, crlf)
    acc = feed_split(raw, cuts)
    assert acc.error is None, acc.error
    assert acc.texts == texts and acc.usage_tokens == len(texts) and acc.finish_reason == "length" and acc.done
    assert acc.token_times_ns == sorted(acc.token_times_ns)


@FAST
@given(st.binary(max_size=2000), st.lists(st.integers(0, 10**6), max_size=20))
def test_arbitrary_bytes_never_raise(raw, cuts):
    acc = feed_split(raw, cuts, max_tokens=8)
    assert acc.error_kind is not None or acc.texts  # a stream without text fails, with a reason
    assert acc.error is None or isinstance(acc.error, str)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
hostile_chunk = st.fixed_dictionaries(
    {"choices": st.lists(st.fixed_dictionaries({"delta": st.dictionaries(st.sampled_from(["content", "reasoning"]),
                                                                         json_values)}), max_size=2)},
    optional={"usage": st.dictionaries(st.just("completion_tokens"), json_values), "error": json_values},
)


@FAST
@given(st.lists(hostile_chunk, max_size=8), st.lists(st.integers(0, 10**5), max_size=8))
def test_hostile_chunks_fail_the_request_with_a_reason_never_an_exception(chunks, cuts):
    acc = feed_split(b"".join(event(c) for c in chunks), cuts, max_tokens=16)
    assert all(isinstance(t, str) for t in acc.texts)
    assert acc.usage_tokens is None or (type(acc.usage_tokens) is int and acc.usage_tokens >= 0)
    counts = [u for u in acc.chunk_usage if u is not None]
    assert counts == sorted(counts), "cumulative usage never falls"


def test_one_big_event_costs_time_linear_in_its_size():
    """A 4 MB event in 1 KB reads: 4,000 feeds. Re-joining the buffer on every read (as
    before) copies ~8 GB in all; appending copies 4 MB."""
    content = "x" * (4_000_000 - 100)
    raw = event({"choices": [{"delta": {"content": content}, "finish_reason": "stop"}]})
    acc = StreamAccumulator("chat", 0)
    t0 = time.perf_counter()
    for i in range(0, len(raw), 1000):
        acc.feed(raw[i : i + 1000], i)
    acc.finish()
    took = time.perf_counter() - t0
    assert acc.error is None and acc.texts == [content]
    assert took < 1.0, f"{took:.2f} s"


def test_an_event_over_the_cap_fails_the_request_and_stops_buffering():
    acc = StreamAccumulator("chat", 0)
    piece = b"x" * 65536
    acc.feed(b"data: ", 0)
    for i in range(1, 800):  # 50 MB offered
        acc.feed(piece, i)
    assert acc.error_kind == "oversized"
    assert len(acc._buf) <= MAX_EVENT_BYTES + len(piece)


def valid_results():
    finite = st.floats(0, 1e6, allow_nan=False)
    return st.builds(
        RequestResult,
        suite=st.sampled_from(["code", "prose"]),
        prompt_index=st.integers(0, 50),
        warmup=st.booleans(),
        concurrency=st.none() | st.integers(1, 64),
        rate=st.none() | st.floats(0.01, 100),
        ok=st.just(False),
        error_kind=st.sampled_from(["http", "timeout", "overlong"]),
        error=st.text(max_size=50),
        http_status=st.none() | st.integers(100, 599),
        start_s=finite,
        end_s=finite,
        ttft_ms=st.none() | finite,
        itl_ms=st.lists(finite, max_size=10).map(tuple),
        latency_ms=st.none() | finite,
        output_tokens=st.integers(0, 10**6),
        token_count_source=st.sampled_from(["usage", "chunks", "tokenizer"]),
        chunk_tokens=st.none() | st.lists(st.integers(0, 8), max_size=10).map(tuple),
        decode_tok_s=st.none() | st.floats(0.01, 1e4),
        output_chars=st.integers(0, 10**6),
        finish_reason=st.none() | st.sampled_from(["stop", "length"]),
        response_id=st.none() | st.text(max_size=20),
        resent=st.booleans(),
    )


@FAST
@given(st.lists(valid_results(), max_size=6))
def test_what_the_writer_writes_the_reader_takes_back_whole(tmp_path_factory, results):
    path = tmp_path_factory.mktemp("rt") / "run.jsonl"
    w = RunWriter(path, {"url": "http://x", "model": "m"})
    for r in results:
        w.request(r)
    w.close()
    run = read_run(path)
    assert run.skipped == 0, run.problems
    assert list(run.requests) == results


@FAST
@given(st.lists(json_values | st.binary(max_size=40), max_size=12))
def test_any_lines_after_a_header_are_read_or_counted_never_fatal(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("any") / "run.jsonl"
    head = json.dumps({"type": "header", "schema": 1}).encode()
    body = [x.replace(b"\n", b" ") if isinstance(x, bytes) else json.dumps(x).encode() for x in lines]
    path.write_bytes(b"\n".join([head, *body]) + b"\n")
    run = read_run(path)
    nonblank = sum(1 for b in body if b.strip())
    assert len(run.requests) + len(run.samples) + run.skipped <= nonblank
    for s in run.samples:
        assert s["accept_len"] is None or (math.isfinite(s["accept_len"]) and s["accept_len"] >= 1)
