"""The timing rules of the streaming client, pinned with a scripted clock.

Each case feeds scripted socket reads (bytes, arrival time in ns) to the same
StreamAccumulator the client uses and builds the same RequestResult. The identity
latency - ttft == sum(itl) must hold exactly: TTFT at the first text chunk, one gap per
later text chunk, and only text chunks move the end time (the finish / usage chunk that
follows the last token does not). No socket, no server: the end-to-end path is covered by
test_measure_faults.py against a real one.
"""

import json
from dataclasses import dataclass, field

import pytest

from decodescope.measure.client import Job, build_result
from decodescope.measure.stream import StreamAccumulator
from decodescope.measure.suites import Prompt
from decodescope.measure.tokens import count_tokens

MS = 1_000_000  # ns


def ev(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chat(text=None, finish=None, kind="content", **extra) -> bytes:
    delta = {kind: text} if text is not None else {}
    return ev({"id": "r1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})


def comp(text="", finish=None) -> bytes:
    return ev({"id": "r1", "choices": [{"index": 0, "text": text, "finish_reason": finish}]})


ROLE = ev({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
USAGE = ev({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
DONE = ev(b"[DONE]")


def ticks(*parts: bytes) -> list[tuple[bytes, int]]:
    # one socket read per part, 10 ms apart, starting 10 ms after the request was sent
    return [(p, (i + 1) * 10 * MS) for i, p in enumerate(parts)]


@dataclass
class TC:
    name: str
    reads: list
    api: str = "chat"
    ok: bool = True
    error_kind: str | None = None
    ttft_ms: float | None = None
    itl_ms: list = field(default_factory=list)
    tokens: int | None = None


# fmt: off
CASES = [
    TC("role chunk is not a token; finish and usage chunks do not move the end",
       ticks(ROLE, chat("a"), chat("b"), chat("c"), chat(finish="length"), USAGE, DONE),
       ttft_ms=20, itl_ms=[10, 10], tokens=3),
    TC("events that arrive in one read share its time",
       [(ROLE + chat("a"), 10 * MS), (chat("b") + chat("c"), 25 * MS), (chat(finish="stop") + DONE, 30 * MS)],
       ttft_ms=10, itl_ms=[15, 0], tokens=3),
    TC("an event split across reads is timed when its last byte arrives",
       [(chat("a")[:7], 10 * MS), (chat("a")[7:], 12 * MS),
        (chat("b")[:-1], 20 * MS), (chat("b")[-1:] + DONE, 31 * MS)],
       ttft_ms=12, itl_ms=[19], tokens=2),
    TC("SSE comments (keep-alives) are skipped",
       ticks(b": ping\n\n", chat("a"), b": ping\n\n", chat("b"), DONE),
       ttft_ms=20, itl_ms=[20], tokens=2),
    TC("CRLF line endings are SSE too",
       ticks(chat("a").replace(b"\n", b"\r\n"), chat("b").replace(b"\n", b"\r\n"), DONE),
       ttft_ms=10, itl_ms=[10], tokens=2),
    TC("reasoning deltas are tokens",
       ticks(chat("think", kind="reasoning_content"), chat("more", kind="reasoning"), chat("answer"), DONE),
       ttft_ms=10, itl_ms=[10, 10], tokens=3),
    TC("completions text chunks; the empty final text is not a token",
       ticks(comp("a"), comp("b"), comp("", finish="length")), api="completions",
       ttft_ms=10, itl_ms=[10], tokens=2),
    TC("a last event without its blank line still counts at EOF",
       [(chat("a"), 10 * MS), (chat("b", finish="stop")[:-2], 20 * MS)],
       ttft_ms=10, itl_ms=[10], tokens=2),
    TC("a stream without a text chunk fails", ticks(ROLE, chat(finish="stop"), DONE),
       ok=False, error_kind="no_tokens", tokens=0),
    TC("a stream that ends before finish_reason or [DONE] was dropped", ticks(chat("a"), chat("b")),
       ok=False, error_kind="dropped", ttft_ms=10, itl_ms=[10], tokens=2),
    TC("a malformed chunk fails the request and stops the parse",
       ticks(chat("a"), ev(b'{"choices": [{"delta": {"content": "x'), chat("b"), DONE),
       ok=False, error_kind="malformed", ttft_ms=10, tokens=1),
    TC("an error event in the stream fails the request", ticks(chat("a"), ev({"error": {"message": "oom"}})),
       ok=False, error_kind="server_error", ttft_ms=10, tokens=1),
]
# fmt: on


def replay(tc: TC):
    acc = StreamAccumulator(tc.api, t_start_ns=0)
    for data, t in tc.reads:
        acc.feed(data, t)
    acc.finish()
    tokens = count_tokens(acc.texts, acc.usage_tokens, acc.chunk_usage)
    return build_result(Job("suite", 0, Prompt("p")), acc, tokens, 200, 0, tc.reads[-1][1])


@pytest.mark.parametrize("tc", CASES, ids=lambda tc: tc.name)
def test_stream_timing_rules(tc):
    r = replay(tc)
    assert (r.ok, r.error_kind) == (tc.ok, tc.error_kind), f"wrong verdict: {r.error}"
    assert r.ttft_ms == tc.ttft_ms, "TTFT must be taken at the first text chunk's read"
    assert list(r.itl_ms) == pytest.approx(tc.itl_ms), "one gap per later text chunk, at read time"
    assert r.output_tokens == tc.tokens
    if r.ttft_ms is not None:
        assert r.latency_ms - r.ttft_ms == pytest.approx(sum(r.itl_ms), abs=1e-9), (
            "latency - ttft must equal sum(itl): a stray chunk moved the end time"
        )


def test_usage_from_server_beats_chunk_count():
    r = replay(CASES[0])
    assert (r.output_tokens, r.token_count_source) == (3, "usage")
    r = replay(CASES[1])  # no usage chunk: one token per text chunk, and said so
    assert (r.output_tokens, r.token_count_source) == (3, "chunks")


def test_decode_rate_is_tokens_after_the_first_over_first_to_last():
    r = replay(TC("", ticks(chat("a"), chat("b"), chat("c"), chat("d"), DONE)))
    assert r.decode_tok_s == pytest.approx(3 / 0.030), "(4 tokens - 1) / 30 ms"


def test_chunks_of_a_late_first_read_are_not_decode():
    """A client that wakes late finds several chunks in its first read: the server made them
    before the clock starts. Chunks every 10 ms, the client's first read at 40 ms holds 4,
    then one read each at 50, 60, 70 ms: 3 tokens in the 30 ms after the first read = 100 tok/s,
    the server's own rate; counting the 3 early chunks as decode would read 6 / 30 ms = 200."""
    first = chat("a") + chat("b") + chat("c") + chat("d")
    r = replay(TC("", [(first, 40 * MS), (chat("e"), 50 * MS), (chat("f"), 60 * MS),
                       (chat("g") + DONE, 70 * MS)]))
    assert r.decode_tok_s == pytest.approx(3 / 0.030)
    # all tokens in one read: no decode window at all
    assert replay(TC("", [(chat("a") + chat("b") + DONE, 10 * MS)])).decode_tok_s is None


def test_response_id_and_finish_reason_are_kept():
    r = replay(CASES[0])
    assert (r.response_id, r.finish_reason) == ("r1", "length")
